"""What the pane owner lends its helpers: the ``Owner`` protocol.

The spawn sequence, the watch on a pane's processes, termination and the retention of
exited panes are the owner's own steps, kept in files of their own. They name this
protocol instead of ``Panes``, so every import in the package runs one way: ``owner``
imports its helpers, and no helper imports ``owner``. ``Panes`` satisfies it (mypy
checks each place that passes ``self``); a member a helper starts using is added here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from venomx.daemon.cgroups import Cgroups
    from venomx.daemon.config import Config
    from venomx.daemon.events import EventLog
    from venomx.daemon.lifecycle import Lifecycle
    from venomx.daemon.panes.link import Link
    from venomx.daemon.panes.losses import Losses
    from venomx.daemon.panes.pacing import Pacer
    from venomx.daemon.panes.sentinels import ForkServer
    from venomx.daemon.registry import Pane, Registry
    from venomx.daemon.runs import RunTable
    from venomx.daemon.seams import Seams
    from workers import protocol as P


class Owner(Protocol):
    """The services, state and transitions of ``Panes`` that its helpers use."""

    registry: Registry
    events: EventLog
    runs: RunTable
    config: Config
    seams: Seams
    lifecycle: Lifecycle
    cgroups: Cgroups
    forkserver: ForkServer
    pacer: Pacer
    losses: Losses
    links: dict[str, Link]
    preparing: set[str]
    socket_path: str
    cwd: str

    def base_env(self) -> dict[str, str]: ...

    def on_sentinel(self, pane: Pane, link: Link, m: P.Message) -> None: ...

    def signal(self, pane: Pane, sigs: list[int]) -> None: ...

    def leader_unreaped(self, pane: Pane) -> bool: ...

    def settle(self, pane: Pane) -> None: ...

    def remove(self, pane: Pane) -> list[str]: ...

    def hold(self, pane_id: str, session: str, window: str | None, target: str | None) -> None: ...

    def start_done(self, pane_id: str) -> None: ...

    def abandoned(self, pane_id: str) -> bool: ...

    def split_targets(self) -> set[str]: ...
