"""What exited panes hold, and the opt-in eviction that bounds it (issue 15 §4).

An exited pane keeps its final rows until it is removed (foundation §7): that is the
history a run's ``complete: false`` points at. The rows are stored compactly
(``workers.rows.Snapshot``); this module counts them, for doctor, and, only when
``panes.exited_max_bytes`` is set, removes the oldest exited panes past it. It never
removes the pane of a run whose record is still retained.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from venomx.daemon.config import Config
    from venomx.daemon.panes.contract import Owner
    from venomx.daemon.registry import Pane


LISTED = 100  # doctor names this many of the largest exited panes


class ExitedPanes:
    """The bytes each exited pane holds, in exit order, and how many were evicted."""

    def __init__(self) -> None:
        self.held: dict[str, int] = {}  # pane ID -> bytes, in exit order
        self.total = 0
        self.evicted = 0
        self.vt_dropped = 0  # hostile sequences the exited panes' VTs dropped, in all

    def add(self, pane: Pane) -> None:
        n = pane.final.nbytes() if pane.final is not None else 0
        self.vt_dropped += pane.final.dropped if pane.final is not None else 0
        self.held[pane.id] = n
        self.total += n

    def forget(self, pane_id: str) -> None:
        self.total -= self.held.pop(pane_id, 0)

    def report(self, config: Config) -> tuple[dict[str, Any], dict[str, str]]:
        """Doctor's section and check: bytes in all and for the largest panes, and a
        warning past ``panes.exited_warn_bytes`` (0: never)."""
        warn_at = int(config["panes.exited_warn_bytes"])
        status = "warn" if warn_at and self.total > warn_at else "ok"
        largest = sorted(self.held.items(), key=lambda kv: kv[1], reverse=True)[:LISTED]
        section = {
            "count": len(self.held),
            "bytes": self.total,
            "largest": dict(largest),
            "warn_bytes": warn_at,
            "max_bytes": int(config["panes.exited_max_bytes"]),
            "evicted": self.evicted,
        }
        detail = f"{len(self.held)} exited panes hold {self.total} bytes"
        return section, {"name": "exited_panes", "status": status, "detail": detail}

    def enforce(self, owner: Owner) -> None:
        """Remove the oldest exited panes while their total passes ``panes.exited_max_bytes``
        (0: never), skipping any pane whose run record is retained and any that a start
        past its barrier is about to be committed beside."""
        limit = int(owner.config["panes.exited_max_bytes"])
        if not limit or self.total <= limit:
            return
        targets = owner.split_targets()
        for pane_id in list(self.held):
            if pane_id in targets:
                continue
            if self.total <= limit:
                return
            pane = owner.registry.panes.get(pane_id)
            if pane is None:
                self.forget(pane_id)
                continue
            if pane.run is not None and pane.run in owner.runs.runs:
                continue
            owner.remove(pane)
            self.evicted += 1
