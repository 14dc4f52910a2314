"""A reserve taking over, as the daemon sees it: the report it waits for without
holding up the reactor, and what a program may have killed before the report came."""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import subprocess

from venomx.daemon.panes.sentinels import ForkServer
from workers import protocol as P


def _held() -> subprocess.Popen[bytes]:
    """A real child that waits to be ended, as a reserve and its intermediate do."""
    return subprocess.Popen(["sleep", "60"])


async def _promote(
    report: tuple[int, int, int], reaped: dict[int, int], real: bool = True
) -> tuple[ForkServer, int, list[tuple[int, int]]]:
    """Promote through a reserve played by this test: it answers with ``report`` once
    the daemon's side has seen ``reaped`` (pid: wait status) reaped meanwhile (``real``:
    the reported pids are processes of this test's). The pool, stopped since, the pid it
    took for its fork server, and the exits it told the pane owner of."""
    pool = ForkServer(0, 30000, 0)  # no spares: nothing forks
    ours, theirs = socket.socketpair()
    pool.reserve = ours
    exits: list[tuple[int, int]] = []
    pool.exited = lambda pid, status: exits.append((pid, status))
    pool.restart()
    assert pool.promoting is not None and pool.control is None
    loop = asyncio.get_running_loop()
    theirs.setblocking(False)
    await loop.sock_recv(theirs, 1)  # "R", with the new fork server's two sockets
    for pid, status in reaped.items():
        pool.reaped(pid, status)
    await loop.sock_sendall(theirs, P.RESERVE_REPORT.pack(*report))
    while pool.promoting is not None:
        await asyncio.sleep(0)
    served = pool.pid
    if not real:  # the pids are made up: none of them may be signalled
        pool.pid = 0
    pool.stop()
    theirs.close()
    return pool, served, exits


def test_the_reserve_and_its_intermediate_are_ended_once_they_report() -> None:
    reserve, mid, new = _held(), _held(), _held()
    try:
        pool, served, exits = asyncio.run(_promote((reserve.pid, mid.pid, new.pid), {}))
        assert reserve.wait(10) == -signal.SIGKILL and mid.wait(10) == -signal.SIGKILL
        assert {reserve.pid, mid.pid} <= pool.retired  # their reaps are ours
        assert served == new.pid
        assert exits == []
        assert new.wait(10) == -signal.SIGKILL  # the daemon stopped (``_promote``)
    finally:
        for p in (reserve, mid, new):
            p.kill()
            p.wait()


def test_a_new_fork_server_reaped_before_the_report_is_a_death() -> None:
    """A program killed what the reserve made before the report named it, and the
    reaper took it first: it is told as the fork server's death, not lost (the daemon
    would otherwise wait on a fork server that is gone), and pids reaped already are
    neither signalled nor kept as ours."""
    status = signal.SIGKILL  # a wait status: killed by SIGKILL
    gone = {101: 0, 102: 0, 103: status}
    pool, served, exits = asyncio.run(_promote((101, 102, 103), gone, real=False))
    assert exits == [(103, status)]
    assert served == 103
    assert not {101, 102} & pool.retired
    assert 103 not in pool.live_sessions()  # it never made one: 103 may be anyone's


async def _fork_into_a_full_socket(
    requests: int,
) -> tuple[int, list[list[socket.socket]], list[tuple[bytes, int]]]:
    """``requests`` fork requests to a fork server that reads nothing at first (a program
    stopped it), then reads everything: how many waited in the outbox, the channels each
    request made, and what the fork server got (each request's kind and fd count)."""
    pool = ForkServer(0, 30000, 0)
    ours, server = socket.socketpair()
    pool.connect(ours)
    made = [pool.fork(2) for _ in range(requests)]  # never blocks the reactor
    waiting = len(pool.outbox)
    got: list[tuple[bytes, int]] = []
    loop = asyncio.get_running_loop()
    server.setblocking(False)
    while len(got) < requests:
        try:
            msg, fds, _, _ = socket.recv_fds(server, 1, 8)
        except BlockingIOError:
            await asyncio.sleep(0.001)  # the reactor's turn: the outbox is flushed
            continue
        got.append((msg, len(fds)))
        for fd in fds:
            os.close(fd)
    assert not pool.outbox
    loop.call_soon(pool.stop)
    await asyncio.sleep(0)
    server.close()
    return waiting, made, got


def test_fork_requests_wait_for_a_fork_server_that_reads_nothing() -> None:
    """A stopped fork server reads no request: a blocking send would hold the reactor
    once its socket is full, and with it the timer that would end the stop (helper-141:
    the daemon hung for good). Requests wait in order and go once it reads again."""
    waiting, made, got = asyncio.run(_fork_into_a_full_socket(1000))
    assert waiting > 0  # the socket filled
    assert got == [(b"F", 2)] * 1000
    for pair in made:
        for sock in pair:
            sock.close()


async def _dropped() -> list[bytes]:
    pool = ForkServer(0, 30000, 0)
    ours, server = socket.socketpair()
    pool.connect(ours)
    made = [pool.fork(1)[0] for _ in range(1000)]
    assert pool.outbox
    server.close()  # the fork server died
    pool.disconnect()  # as its reap makes the daemon do first
    assert not pool.outbox
    ends = []
    for sock in made[-10:]:  # queued: their sentinel never comes
        sock.settimeout(5)
        ends.append(sock.recv(1))
    for sock in made:
        sock.close()
    return ends


def test_fork_requests_still_waiting_when_the_fork_server_dies_are_dropped() -> None:
    assert asyncio.run(_dropped()) == [b""] * 10


def test_a_fork_server_that_made_no_session_leaves_none_to_wait_out() -> None:
    """Killed before it was told to take over, it never made its own session: its number
    is given up before its reap frees it, so no process that makes a session of that
    number later is taken for a member of ours (helper-142, helper-143)."""
    server = subprocess.Popen(["sleep", "60"])  # in our session, as such a one is
    pool = ForkServer(0, 30000, 0)
    pool.pid = server.pid
    server.kill()
    flags = os.WEXITED | os.WNOHANG | os.WNOWAIT
    while os.waitid(os.P_PID, server.pid, flags) is None:
        pass  # until it is a zombie: what the reaper sees before it reaps
    pool.before_reap(server.pid)
    server.wait()
    pool.pid = 0  # as its reap makes the pane owner do
    assert server.pid not in pool.live_sessions() and not pool.draining


def test_a_reap_forgets_the_number_wherever_it_was_trusted() -> None:
    """Kept past its reap, a number would make its next holder ours (helper-144)."""
    pool = ForkServer(0, 30000, 0)
    pool.greeted.update({5, 6})
    pool.retired.add(5)
    assert pool.reaped(5, 0) and pool.reaped(6, 0) is False  # ended on purpose; not
    assert not pool.greeted and not pool.retired
