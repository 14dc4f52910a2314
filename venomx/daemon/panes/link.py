"""The daemon's hold on one pane's processes: everything about a pane that is not record.

A ``Link`` lives in the pane owner (``Panes``) beside the pane's record: the sentinel's
channel, the leader's pidfd and the watchdog, the termination in progress, what the
sentinel or the daemon's own reap said about the exit, and the attach streams.
``termination.py`` starts and escalates a ``Termination``.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from venomx.daemon.panes.sentinels import Channel
    from venomx.daemon.registry import Pane
    from workers import protocol as P
    from workers.rows import Snapshot


def _future() -> asyncio.Future[None]:
    return asyncio.get_running_loop().create_future()


class Termination:
    """One pane's termination in progress: its first signal and cause, and the timer that
    calls ``escalate`` (SIGKILL) at the grace deadline."""

    def __init__(
        self,
        pane: Pane,
        signame: str,
        grace_ms: int,
        cause: str,
        escalate: Callable[[Termination], None],
    ) -> None:
        self.pane = pane
        self.signame = signame
        self.grace_ms = grace_ms
        self.cause = cause
        self.escalate = escalate
        self.started = time.monotonic()
        self.killed_at: float | None = None
        self.killed: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.timer: asyncio.TimerHandle | None = None

    def cap_grace(self, grace_ms: int) -> None:
        """Bring the SIGKILL deadline forward to at most ``grace_ms`` from now."""
        if self.timer is None:
            return
        loop = asyncio.get_running_loop()
        due = loop.time() + grace_ms / 1000.0
        if self.timer.when() > due:
            self.timer.cancel()
            self.timer = loop.call_at(due, self.escalate, self)

    def cancel_timer(self) -> None:
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None


@dataclass(eq=False)
class Link:
    """The daemon's hold on one pane's processes (see the module's docstring)."""

    channel: Channel | None
    exited: asyncio.Future[None] = field(default_factory=_future)  # done in the exit turn
    termination: Termination | None = None
    # The wait status comes from the sentinel's EXIT, or, when the sentinel is lost
    # (the record's ``fault``), from the daemon's own reap of the leader (``leader_status``).
    leader_status: int | None = None
    # The leader's usage (workers.protocol.usage) from the wait that gave each status.
    leader_usage: dict[str, int] | None = None
    exit_usage: dict[str, int] | None = None
    exit_seen: bool = False
    application_keys: bool = False  # the program turned DECCKM on (its sentinel said so)
    exit_status: int = 0
    exit_state: Snapshot | None = None
    exit_raw: dict[str, Any] | None = None  # EXIT's state, decoded when the pane settles
    exit_replay: bytes = b""  # EXIT's last output bytes, kept once the pane has exited
    pidfd: int = -1  # readable once the leader has exited (before anyone reaps it)
    # done when that pidfd said so: the leader is dead, what is left is the sentinel's
    # drain and report, which its watchdog bounds
    leader_gone: asyncio.Future[None] = field(default_factory=_future)
    watchdog: asyncio.TimerHandle | None = None
    attachers: dict[int, Callable[[P.Message], None]] = field(default_factory=dict)
    command_open: bool = False  # an OSC 133 command started and has not finished
    status_set: bool = False  # the program set a status it has not cleared
