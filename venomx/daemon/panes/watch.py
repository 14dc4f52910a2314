"""Watching a pane from outside its sentinel, and the record when a sentinel is lost.

The sentinel is trusted code in a process the pane's program can still kill or stop
(same uid). So the daemon never depends on it to end a pane: it signals the leader's
group itself (a sentinel reaps its leader only after the daemon has ended the pane, so
the group ID stays pinned while the pane is live), it sees
the leader's exit through a pidfd, and a sentinel that is dead, stopped, broken or silent
when its pane must end is killed and recorded as lost (``fault: "sentinel_lost"``), so
the record blames venomx rather than the program. The outcome then still comes from the
daemon's own reap of the leader, which re-parents to it when the sentinel goes.
"""

from __future__ import annotations

import asyncio
import logging
import os
import select
import signal
from typing import TYPE_CHECKING, Any

from venomx.daemon.procfs import stopped
from workers import tracer

if TYPE_CHECKING:
    from venomx.daemon.panes.contract import Owner
    from venomx.daemon.panes.link import Link
    from venomx.daemon.registry import Pane

log = logging.getLogger(__name__)
# After the leader exits, the sentinel sweeps, drains (at most 1 s) and sends EXIT; past
# this bound it is considered lost. Generous: the slowest hostile output measured (~65 KB/s
# of DECALN and deletes) takes ~2 s to parse one 128 KiB read, and the drain may hold
# several. A stopped sentinel is found at once by its state, not by this bound.
EXIT_BOUND = 10.0
STOP_CHECK = 0.1  # after the leader's exit, when a sentinel that has not reported is looked at
# After the leader is reaped (so the sentinel has exited), how long its EXIT may still
# take to come out of the channel.
CHANNEL_BOUND = 1.0


def watch(owner: Owner, pane: Pane, link: Link) -> None:
    """Start watching a committed pane: its leader's exit (pidfd) and its channel."""
    loop = asyncio.get_running_loop()
    if link.channel is not None:
        link.channel.closed.add_done_callback(lambda _: on_channel_closed(owner, pane, link))
        link.channel.on_broken = lambda: on_channel_closed(owner, pane, link)
    if link.leader_status is not None:
        loop.call_soon(owner.settle, pane)  # reaped before the commit: finish after the replay
        return
    try:
        # Safe: a live pane's leader is unreaped (its sentinel waits for the daemon).
        link.pidfd = os.pidfd_open(pane.pid)
    except (OSError, AttributeError):
        return  # no watch: the sentinel's EXIT or its death still end the pane
    loop.add_reader(link.pidfd, on_leader_exit, owner, pane, link)


def exited_unseen(link: Link) -> bool:
    """Whether the leader's pidfd, still watched, is readable: it has exited. A wait for
    I/O cut short by a signal past its timeout (CPython's ``epoll.poll`` then returns no
    events; a SIGSTOP and SIGCONT of the daemon do it) lets a turn run its timers
    before the exit's callback."""
    if link.pidfd < 0:
        return False
    waiter = select.poll()
    waiter.register(link.pidfd, select.POLLIN)
    return bool(waiter.poll(0))


def close_pidfd(link: Link) -> None:
    if link.pidfd >= 0:
        asyncio.get_running_loop().remove_reader(link.pidfd)
        os.close(link.pidfd)
        link.pidfd = -1


def unwatch(link: Link) -> None:
    close_pidfd(link)
    if link.watchdog is not None:
        link.watchdog.cancel()
        link.watchdog = None


def on_leader_exit(owner: Owner, pane: Pane, link: Link) -> None:
    """The leader exited (still unreaped): its sentinel must now report, or be lost."""
    close_pidfd(link)
    owner.runs.exit_seen(pane.run)
    if not link.leader_gone.done():
        link.leader_gone.set_result(None)
    if pane.live and pane.fault is not None:
        watch_tracer(owner, pane, link)
    if not pane.live or link.exit_seen or pane.fault is not None:
        return
    # A healthy sentinel reports within milliseconds, so the exit path reads nothing of
    # /proc: the sentinel is looked at only if it has not reported by then.
    link.watchdog = asyncio.get_running_loop().call_later(
        STOP_CHECK, look_at_sentinel, owner, pane, link
    )


def look_at_sentinel(owner: Owner, pane: Pane, link: Link) -> None:
    link.watchdog = None
    if not pane.live or link.exit_seen or pane.fault is not None:
        return
    if stopped(pane.sentinel_pid):
        lose(owner, pane, link, "stopped")
        return
    link.watchdog = asyncio.get_running_loop().call_later(
        EXIT_BOUND - STOP_CHECK, overdue, owner, pane, link
    )


def overdue(owner: Owner, pane: Pane, link: Link) -> None:
    """The sentinel did not report in time although its leader is gone."""
    link.watchdog = None
    if pane.live and not link.exit_seen:
        lose(owner, pane, link, "unresponsive")
        owner.settle(pane)


def on_channel_closed(owner: Owner, pane: Pane, link: Link) -> None:
    if pane.live and not link.exit_seen:
        broken = link.channel is not None and link.channel.broken
        lose(owner, pane, link, "broken channel" if broken else "channel closed")
        owner.settle(pane)


def lose(owner: Owner, pane: Pane, link: Link, why: str) -> None:
    """Record that venomx lost this pane's sentinel, and make sure it is gone.

    One turn: the fault, its event (before the pane's ``pane.exited``), the count. The
    sentinel is killed if it still exists: greeted, it is unreaped, so its pid is its
    own (``ForkServer.greet`` refuses a number reaped before the HELLO was taken); the
    leader then re-parents to the daemon, which reaps it.
    """
    if pane.fault is not None or not pane.live:
        return
    pane.fault = "sentinel_lost"
    log.error("sentinel of pane %s lost: %s", pane.id, why)
    owner.losses.add(pane, why)
    data: dict[str, Any] = {"pane": pane.id}
    if pane.run is not None:
        data["run"] = pane.run
    owner.events.emit("pane.sentinel_lost", f"pane:{pane.id}", data, pane.node)
    pid = pane.sentinel_pid
    if owner.registry.sentinels.get(pid) == pane.id and pid in owner.forkserver.greeted:
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
    if link.watchdog is not None:
        link.watchdog.cancel()
        link.watchdog = None
    if link.leader_gone.done():
        watch_tracer(owner, pane, link)
    # The channel is left to close when the sentinel dies: closing it ourselves would let
    # a sentinel that is still running reap its leader while the pane is live.


def watch_tracer(owner: Owner, pane: Pane, link: Link) -> None:
    """The leader of a pane whose sentinel is lost has exited, so the reaper should see it
    at once; if the pane is still live a grace later, a tracer holds the leader's zombie
    (``workers.tracer``) and is killed, then again each grace until the reap."""
    if link.watchdog is not None:
        link.watchdog.cancel()
    link.watchdog = asyncio.get_running_loop().call_later(
        tracer.GRACE, end_tracer, owner, pane, link
    )


def end_tracer(owner: Owner, pane: Pane, link: Link) -> None:
    link.watchdog = None
    if owner.leader_unreaped(pane):  # the number is its own
        if tracer.end_tracers(pane.pid):
            log.warning("pane %s: killed the tracer holding its exited leader", pane.id)
        watch_tracer(owner, pane, link)
