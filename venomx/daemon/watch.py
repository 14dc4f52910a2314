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
import signal
from collections import deque
from typing import TYPE_CHECKING, Any

from venomx.daemon.registry import now_iso

if TYPE_CHECKING:
    from venomx.daemon.core import Daemon
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
LOST_KEPT = 100  # doctor lists this many of the most recent losses


class Losses:
    """Sentinels lost since start, for doctor: a count and the most recent ones."""

    def __init__(self) -> None:
        self.count = 0
        self.recent: deque[dict[str, Any]] = deque(maxlen=LOST_KEPT)

    def add(self, pane: Pane, why: str) -> None:
        self.count += 1
        entry = {"pane": pane.id, "reason": why, "at": now_iso()}
        if pane.run is not None:
            entry["run"] = pane.run
        self.recent.append(entry)


def proc_state(pid: int) -> str | None:
    """The one-letter state of a process in /proc (R, S, D, T, t, Z, ...), or None."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
    except OSError:
        return None
    end = stat.rfind(b")")
    return stat[end + 2:end + 3].decode("ascii", "replace") if end > 0 else None


def stopped(pid: int) -> bool:
    return proc_state(pid) in ("T", "t")


def watch(d: Daemon, pane: Pane) -> None:
    """Start watching a committed pane: its leader's exit (pidfd) and its channel."""
    loop = asyncio.get_running_loop()
    if pane.channel is not None:
        pane.channel.closed.add_done_callback(lambda _: on_channel_closed(d, pane))
        pane.channel.on_broken = lambda: on_channel_closed(d, pane)
    if pane.leader_status is not None:
        loop.call_soon(d.settle, pane)  # reaped before the commit: finish after the replay
        return
    try:
        # Safe: a live pane's leader is unreaped (its sentinel waits for the daemon).
        pane.pidfd = os.pidfd_open(pane.pid)
    except (OSError, AttributeError):
        return  # no watch: the sentinel's EXIT or its death still end the pane
    loop.add_reader(pane.pidfd, on_leader_exit, d, pane)


def close_pidfd(pane: Pane) -> None:
    if pane.pidfd >= 0:
        asyncio.get_running_loop().remove_reader(pane.pidfd)
        os.close(pane.pidfd)
        pane.pidfd = -1


def unwatch(pane: Pane) -> None:
    close_pidfd(pane)
    if pane.watchdog is not None:
        pane.watchdog.cancel()
        pane.watchdog = None


def on_leader_exit(d: Daemon, pane: Pane) -> None:
    """The leader exited (still unreaped): its sentinel must now report, or be lost."""
    close_pidfd(pane)
    if not pane.live or pane.exit_seen or pane.fault is not None:
        return
    # A healthy sentinel reports within milliseconds, so the exit path reads nothing of
    # /proc: the sentinel is looked at only if it has not reported by then.
    pane.watchdog = asyncio.get_running_loop().call_later(STOP_CHECK, look_at_sentinel,
                                                          d, pane)


def look_at_sentinel(d: Daemon, pane: Pane) -> None:
    pane.watchdog = None
    if not pane.live or pane.exit_seen or pane.fault is not None:
        return
    if stopped(pane.sentinel_pid):
        lose(d, pane, "stopped")
        return
    pane.watchdog = asyncio.get_running_loop().call_later(EXIT_BOUND - STOP_CHECK, overdue,
                                                          d, pane)


def overdue(d: Daemon, pane: Pane) -> None:
    """The sentinel did not report in time although its leader is gone."""
    pane.watchdog = None
    if pane.live and not pane.exit_seen:
        lose(d, pane, "unresponsive")
        d.settle(pane)


def on_channel_closed(d: Daemon, pane: Pane) -> None:
    if pane.live and not pane.exit_seen:
        broken = pane.channel is not None and pane.channel.broken
        lose(d, pane, "broken channel" if broken else "channel closed")
        d.settle(pane)


def lose(d: Daemon, pane: Pane, why: str) -> None:
    """Record that venomx lost this pane's sentinel, and make sure it is gone.

    One turn: the fault, its event (before the pane's ``pane.exited``), the count. The
    sentinel is killed if it still exists (it is our unreaped child, so its pid cannot
    have been reused); the leader then re-parents to the daemon, which reaps it.
    """
    if pane.fault is not None or not pane.live:
        return
    pane.fault = "sentinel_lost"
    log.error("sentinel of pane %s lost: %s", pane.id, why)
    d.losses.add(pane, why)
    data: dict[str, Any] = {"pane": pane.id}
    if pane.run is not None:
        data["run"] = pane.run
    d.events.emit("pane.sentinel_lost", f"pane:{pane.id}", data, pane.node)
    if d.registry.sentinels.get(pane.sentinel_pid) == pane.id:
        try:
            os.kill(pane.sentinel_pid, signal.SIGKILL)
        except OSError:
            pass
    if pane.watchdog is not None:
        pane.watchdog.cancel()
        pane.watchdog = None
    # The channel is left to close when the sentinel dies: closing it ourselves would let
    # a sentinel that is still running reap its leader while the pane is live.
