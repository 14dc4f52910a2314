"""A spare let go is known at its reap, whether it was still running or already dead."""

from __future__ import annotations

import asyncio
import functools
import os
import signal
import socket
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.helpers import wait_for
from venomx.daemon import procfs
from venomx.daemon.panes.reaps import Reaps
from venomx.daemon.panes.sentinels import (
    Channel,
    ForkServer,
    end_before_exec,
    kill_stopped,
    unstopped,
)


def _exited_unreaped() -> int:
    """A real child of this process that has exited and is not reaped yet (a zombie)."""
    pid = os.fork()
    if pid == 0:
        os._exit(0)
    flags = os.WEXITED | os.WNOHANG | os.WNOWAIT
    wait_for(lambda: os.waitid(os.P_PID, pid, flags) is not None, 10, "the child to exit")
    return pid


def _retire(pid: int, greeted: bool = True) -> ForkServer:
    """Retire a spare that said HELLO as ``pid`` (and was not reaped since, if ``greeted``)."""

    async def scenario() -> ForkServer:
        pool = ForkServer(64, 30000)
        if greeted:
            pool.greeted.add(pid)
        ours, theirs = socket.socketpair()
        chan = await Channel.open(ours, 0)
        chan.sentinel_pid = pid
        pool.retire(chan)
        theirs.close()
        return pool

    return asyncio.run(scenario())


def test_a_spare_that_died_before_its_reap_is_still_a_spare_at_the_reap() -> None:
    # It died (killed, say) and the daemon took it from the pool before the reaper ran:
    # its reap must not count as an escaped process's.
    pid = _exited_unreaped()
    pool = _retire(pid)
    os.waitpid(pid, 0)
    assert pool.was_retired(pid)
    assert not pool.was_retired(pid)  # once: the pid may be anyone's after the reap


def test_a_pid_reaped_already_is_not_noted() -> None:
    pid = _exited_unreaped()
    os.waitpid(pid, 0)  # by us: the pane owner forgets it was greeted
    assert not _retire(pid, greeted=False).was_retired(pid)


def test_a_new_spare_not_yet_reparented_to_us_is_noted() -> None:
    # A spare arrives after the pool shrank while its low-priority intermediate has not
    # exited: it is that intermediate's child, not ours yet, but it will be reaped by us
    # (an intermediate reaps nothing), so its number is its own until then.
    leader = subprocess.Popen(["setsid", "sh", "-c", "sleep 60 & echo $!; wait"], stdout=-1)
    grandchild = 0
    try:
        assert leader.stdout is not None
        grandchild = int(leader.stdout.readline())
        assert _retire(grandchild).was_retired(grandchild)
        # one whose HELLO was not seen since its last reap may be anyone's: not noted
        assert not _retire(grandchild, greeted=False).was_retired(grandchild)
    finally:
        leader.kill()
        if grandchild:
            os.kill(grandchild, 9)
        leader.wait()


def test_a_sentinel_stopped_twice_while_a_start_waits_is_ended_with_what_it_started() -> None:
    """``unstopped``: continued the first time it is found stopped; ended, with the process
    group of each child (a leader leads its own), the second time, which fails the wait as
    a closed channel would."""
    sentinel = subprocess.Popen(["sh", "-c", "setsid sleep 60 & echo $!; wait"], stdout=-1)
    assert sentinel.stdout is not None
    leader = int(sentinel.stdout.readline())

    def state(pid: int) -> str:
        try:
            return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            return "gone"

    async def scenario() -> None:
        loop = asyncio.get_running_loop()
        closed: asyncio.Future[None] = loop.create_future()
        pidfd = os.pidfd_open(sentinel.pid)

        def exited() -> None:
            if not closed.done():
                closed.set_exception(ConnectionError("sentinel channel closed"))

        loop.add_reader(pidfd, exited)

        async def until(cond: Callable[[], bool], what: str) -> None:
            deadline = loop.time() + 10
            while not cond():
                assert loop.time() < deadline, what
                await asyncio.sleep(0.01)

        session = os.getsid(sentinel.pid)  # a fork server's, as the daemon knows it

        def end(pid: int) -> None:
            kill_stopped(pid, {session})

        os.kill(sentinel.pid, signal.SIGSTOP)
        await until(lambda: state(sentinel.pid) == "T", "stopped")
        waiting = asyncio.ensure_future(
            unstopped(lambda: [(sentinel.pid, "sentinel of pane p9", end)], closed)
        )
        await until(lambda: state(sentinel.pid) != "T", "continued within STOP_CHECK")
        assert not waiting.done()
        os.kill(sentinel.pid, signal.SIGSTOP)  # and again: it is taken as lost
        with pytest.raises(ConnectionError):
            await asyncio.wait_for(waiting, 10)
        loop.remove_reader(pidfd)
        os.close(pidfd)

    try:
        asyncio.run(scenario())
        sentinel.wait(10)
        assert sentinel.returncode == -signal.SIGKILL
        wait_for(lambda: state(leader) in ("gone", "Z"), 10, "the leader's group ended")
    finally:
        for pid in (sentinel.pid, leader):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        sentinel.wait()


# Run in a process of its own, which becomes a subreaper as the daemon is: the fork
# server is a session leader that exits, and what it forked is re-parented to us.
_DRAIN = r"""
import os, signal, sys, time
from venomx.daemon.panes.sentinels import ForkServer
from workers import prctl

def when(cond):
    deadline = time.monotonic() + 10
    while not cond():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)

def zombie(pid):
    return os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None

def reap(pid):  # as the daemon's reaper does: told while a zombie, then reaped
    when(lambda: zombie(pid))
    pool.before_reap(pid)
    os.waitpid(pid, 0)
    return pool.reaped(pid, 0)

assert prctl.set_child_subreaper()
pool = ForkServer(64, 30000)
# the "fork server": a session of its own, a member forked in it that forks another,
# and an exit; each prints its pid
r, w = os.pipe()
script = "sh -c 'sleep 600 & echo $!; wait' & echo $!; exit 0"
server = os.posix_spawn("/bin/sh", ["sh", "-c", script], dict(os.environ),
                        setsid=True, file_actions=[(os.POSIX_SPAWN_DUP2, w, 1)])
os.close(w)
with os.fdopen(r) as out:
    member, inner = int(out.readline()), int(out.readline())
pool.pid = server
when(lambda: zombie(server))
when(lambda: not zombie(member))  # re-parented to us, running
reap(server)  # the fork server: its members are looked for before its reap
pool.pid = 0  # as the reap makes the pane owner do
print(server in pool.live_sessions(), sorted(pool.draining[server]) == [member])
print(pool.reaped(12345678, 0))  # not a member: nothing changes
os.kill(member, signal.SIGKILL)
print(reap(member))  # a member: ours; its child, still in the session, is ours now
print(server in pool.live_sessions(), sorted(pool.draining[server]) == [inner])
os.kill(inner, signal.SIGKILL)
print(reap(inner))
print(server in pool.live_sessions(), server in pool.draining)
"""


def test_a_dead_fork_servers_session_is_forgotten_with_its_last_member() -> None:
    # Its number is then free: once the pids wrap, a process given it could make a
    # session of it (setsid) and be taken for a new sentinel of ours by doctor.
    out = subprocess.run([sys.executable, "-c", _DRAIN], capture_output=True, text=True, timeout=30)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == [
        *("True", "True"),
        "False",  # a pid not of the session
        *("True", "True", "True"),
        *("True", "False", "False"),
    ]


def _stopped(pid: int) -> bool:
    return os.waitid(os.P_PID, pid, os.WSTOPPED | os.WNOHANG | os.WNOWAIT) is not None


def test_only_a_stopped_child_of_ours_in_a_fork_servers_session_is_ended_as_new() -> None:
    """What ``forking`` found stopped may be another process by the time a start ends
    it: a program can continue and kill it and have its number given to one of its own
    (helper-144). Ended, and noted as ours, only if it is still so."""
    pool = ForkServer(64, 30000)
    theirs = subprocess.Popen(["sleep", "60"], start_new_session=True)
    ours = subprocess.Popen(["sleep", "60"], start_new_session=True)
    try:
        for proc in (theirs, ours):
            os.kill(proc.pid, signal.SIGSTOP)
            wait_for(functools.partial(_stopped, proc.pid), 10, "stopped")
        pool.pid = ours.pid  # its session is a fork server's; the other one's not
        pool.end_new(theirs.pid)
        pool.end_new(ours.pid)
        assert ours.wait(10) == -signal.SIGKILL and ours.pid in pool.retired
        assert theirs.poll() is None and theirs.pid not in pool.retired
    finally:
        for proc in (theirs, ours):
            proc.kill()
            proc.wait()


def test_a_member_that_left_a_dead_fork_servers_session_is_not_ours() -> None:
    """A leader a program stopped before its ``setsid``, then let go once its sentinel
    and the fork server were dead: counted as a member, it left the session (helper-145).
    Not ours, and a session none of ours is still in is no longer one of ours."""
    left = subprocess.Popen(["sleep", "60"], start_new_session=True)  # a session elsewhere
    try:
        pool = ForkServer(64, 30000)
        pool.draining[12345] = {left.pid}  # as counted while it was still in session 12345
        assert left.pid not in pool.leftover() and 12345 not in pool.live_sessions()
    finally:
        left.kill()
        left.wait()


def test_a_greeted_sentinel_under_a_live_intermediate_is_ended_when_stopped() -> None:
    """Not our child while its intermediate lives (a program may stop that one mid-batch),
    but its number is its own until we reap it: a start waiting on it must be able to
    end it, or it waits for ever (helper-145)."""
    script = "sleep 60 & echo $!; wait"
    intermediate = subprocess.Popen(["setsid", "sh", "-c", script], stdout=-1)
    sentinel = 0
    try:
        assert intermediate.stdout is not None
        sentinel = int(intermediate.stdout.readline())
        os.kill(sentinel, signal.SIGSTOP)
        wait_for(lambda: procfs.stopped(sentinel), 10, "stopped")
        session = {intermediate.pid}
        assert kill_stopped(sentinel, session) is None  # not ours as far as we know
        assert kill_stopped(sentinel, session, greeted={sentinel}) == []
        wait_for(lambda: not procfs.stopped(sentinel) and _state(sentinel) in "Z-", 10, "ended")
    finally:
        intermediate.kill()
        intermediate.wait()
        if sentinel:
            try:
                os.kill(sentinel, signal.SIGKILL)
            except ProcessLookupError:
                pass


def _state(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return "-"


def test_a_hello_from_a_number_reaped_since_its_channel_was_made_is_refused() -> None:
    """helper-146: HELLO read, its sentinel killed and reaped before the start acted on
    it, the number given to a program's process: greeting it made that process ours."""

    async def scenario() -> tuple[bool, bool, set[int]]:
        pool = ForkServer(64, 30000)
        born = pool.reaps.count
        ours, theirs = socket.socketpair()
        chan = await Channel.open(ours, born)
        pool.before_reap(4242)  # the sentinel that said HELLO as 4242 is reaped
        pool.reaped(4242, 0)
        refused = not pool.greet(chan, 4242)
        # a number reaped before the channel was made is no hindrance
        other = await Channel.open(socket.socketpair()[0], pool.reaps.count)
        taken = pool.greet(other, 4242)
        chan.close()
        other.close()
        theirs.close()
        return refused, taken, pool.greeted

    refused, taken, greeted = asyncio.run(scenario())
    assert refused and taken and greeted == {4242}


def test_reaps_forgotten_refuse_every_older_channel() -> None:
    reaps = Reaps(keep=2)
    mark = reaps.count
    reaps.note(1)
    assert reaps.since(1, mark) and not reaps.since(2, mark)
    reaps.note(2)
    reaps.note(3)  # 1 is forgotten: anything may have been reaped since ``mark``
    assert reaps.since(2, mark) and reaps.since(99, mark)
    assert not reaps.since(99, reaps.count) and not reaps.since(1, reaps.count)


STOPS_ITS_CHILD = """
import os, signal
pid = os.fork()
if pid == 0:
    os.kill(os.getpid(), signal.SIGSTOP)
    os._exit(0)
print(pid, flush=True)
os.waitpid(pid, 0)
"""


def test_a_leader_stopped_before_its_exec_is_ended_with_its_sentinel() -> None:
    """helper-146: a leader stopped inside ``posix_spawn`` keeps its sentinel in its
    vfork for ever. Here a real sentinel-like parent and its stopped child: ended both,
    and only while the child is still that parent's and the parent is greeted."""
    parent = subprocess.Popen([sys.executable, "-c", STOPS_ITS_CHILD], stdout=-1)
    try:
        assert parent.stdout is not None
        child = int(parent.stdout.readline())
        wait_for(lambda: procfs.stopped(child), 10, "the child stopped")
        assert not end_before_exec(parent.pid, child, greeted=())  # not greeted: nothing
        assert not end_before_exec(os.getpid(), child, greeted={os.getpid()})  # not its child
        assert procfs.stopped(child)
        assert end_before_exec(parent.pid, child, greeted={parent.pid})
        assert parent.wait(10) == -signal.SIGKILL
    finally:
        parent.kill()
        parent.wait()


def test_a_start_gives_up_on_an_answer_held_past_its_bound() -> None:
    """helper-147: a sentinel in a frozen cgroup, or waiting on a leader stopped out of
    sight, is never stopped itself; past the bound the start gives up on it, once."""

    async def scenario() -> list[int]:
        answer: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        calls: list[int] = []

        def give_up() -> None:
            calls.append(1)
            answer.set_exception(ConnectionError("given up"))

        with pytest.raises(ConnectionError):
            await unstopped(lambda: [], answer, give_up, bound=0.1)
        return calls

    assert asyncio.run(scenario()) == [1]
