"""A reserve taking over, as the daemon sees it: the report it waits for without
holding up the reactor, and what a program may have killed before the report came."""

from __future__ import annotations

import asyncio
import signal
import socket
import subprocess

from venomx.daemon.panes.sentinels import ForkServer
from workers import protocol as P


def _held() -> subprocess.Popen[bytes]:
    """A real child that waits to be ended, as a reserve and its intermediate do."""
    return subprocess.Popen(["sleep", "60"])


async def _promote(
    report: tuple[int, int, int], reaped: dict[int, int]
) -> tuple[ForkServer, list[tuple[int, int]]]:
    """Promote through a reserve played by this test: it answers with ``report`` once
    the daemon's side has seen ``reaped`` (pid: wait status) reaped meanwhile. The pool,
    and the exits it told the pane owner of."""
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
    pool.stop()
    theirs.close()
    return pool, exits


def test_the_reserve_and_its_intermediate_are_ended_once_they_report() -> None:
    reserve, mid = _held(), _held()
    try:
        pool, exits = asyncio.run(_promote((reserve.pid, mid.pid, 4242), {}))
        assert reserve.wait(10) == -signal.SIGKILL and mid.wait(10) == -signal.SIGKILL
        assert {reserve.pid, mid.pid} <= pool.retired  # their reaps are ours
        assert pool.pid == 4242 and 4242 in pool.sessions
        assert exits == []
    finally:
        for p in (reserve, mid):
            p.kill()
            p.wait()


def test_a_new_fork_server_reaped_before_the_report_is_a_death() -> None:
    """A program killed what the reserve made before the report named it, and the
    reaper took it first: it is told as the fork server's death, not lost (the daemon
    would otherwise wait on a fork server that is gone), and pids reaped already are
    neither signalled nor kept as ours."""
    status = signal.SIGKILL  # a wait status: killed by SIGKILL
    gone = {101: 0, 102: 0, 103: status}
    pool, exits = asyncio.run(_promote((101, 102, 103), gone))
    assert exits == [(103, status)]
    assert pool.pid == 103
    assert not {101, 102} & pool.retired
