"""A spare let go is known at its reap, whether it was still running or already dead."""

from __future__ import annotations

import asyncio
import os
import socket

from tests.helpers import wait_for
from venomx.daemon.panes.sentinels import Channel, ForkServer


def _exited_unreaped() -> int:
    """A real child of this process that has exited and is not reaped yet (a zombie)."""
    pid = os.fork()
    if pid == 0:
        os._exit(0)
    flags = os.WEXITED | os.WNOHANG | os.WNOWAIT
    wait_for(lambda: os.waitid(os.P_PID, pid, flags) is not None, 10, "the child to exit")
    return pid


def _retire(pid: int) -> ForkServer:
    async def scenario() -> ForkServer:
        pool = ForkServer(64, 30000)
        ours, theirs = socket.socketpair()
        chan = await Channel.open(ours)
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
    os.waitpid(pid, 0)
    assert not _retire(pid).was_retired(pid)
