"""The services a request may use, as the daemon wires them: handed to every connection
and, through ``dispatch.Context``, to every handler. Nothing here acts; ``Daemon``
constructs each service and connects their callbacks."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from venomx.daemon import auth
from venomx.daemon.ancestry import Pane
from venomx.daemon.auth import AuditLog
from venomx.daemon.collector import Collector
from venomx.daemon.config import Config
from venomx.daemon.crowd import Crowd
from venomx.daemon.doctor import Doctor
from venomx.daemon.events import EventLog
from venomx.daemon.inflight import InFlight
from venomx.daemon.lifecycle import Lifecycle
from venomx.daemon.panes import Panes
from venomx.daemon.registry import Principal, Registry
from venomx.daemon.runs import RunTable
from venomx.daemon.seams import Seams


@dataclass(frozen=True)
class Services:
    """The daemon's services, each owning one kind of state."""

    source: str
    registry: Registry
    config: Config
    events: EventLog
    audit: AuditLog
    runs: RunTable
    panes: Panes
    seams: Seams
    doctor: Doctor
    lifecycle: Lifecycle
    owner: Principal  # the daemon user's principal (@owner)
    connections: set[Any]
    collector: Collector  # counts requests, to collect garbage once they pause
    # The venomx panes the daemon was started in: their programs are its owner's.
    launched_in: frozenset[Pane] = frozenset()
    in_flight: InFlight = field(default_factory=InFlight)  # requests waiting, daemon-wide
    crowd: Crowd = field(default_factory=Crowd)  # all connections together

    # The two anonymous principals every connection without a token shares, so that a
    # change of ``auth.default_grants`` reaches the connections already open at once.
    reader: Principal = field(
        default_factory=lambda: Principal("anonymous", None, [], anonymous=True)
    )
    nobody: Principal = field(
        default_factory=lambda: Principal("anonymous", None, [], anonymous=True)
    )

    def __post_init__(self) -> None:
        self.refresh_anonymous()

    def refresh_anonymous(self) -> None:
        """Give the anonymous reader the configured default grants, read rights only."""
        self.reader.grants = [
            g for g in auth.parse_grants(self.config["auth.default_grants"]) if g.right == "read"
        ]

    def anonymous(self, in_pane: bool = False) -> Principal:
        """A caller without a token: the configured default grants; none at all for a
        program started in a pane, which reads with its pane's token."""
        return self.nobody if in_pane else self.reader
