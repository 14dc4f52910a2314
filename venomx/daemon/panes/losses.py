"""Sentinels lost since the daemon started, for doctor (``sentinels.lost``).

A lost sentinel is venomx's failure, never the program's: ``watch.lose`` records it
here and in the pane's record (``fault: "sentinel_lost"``).
"""

from __future__ import annotations

from collections import deque
from typing import TYPE_CHECKING, Any

from venomx.daemon.registry import now_iso

if TYPE_CHECKING:
    from venomx.daemon.registry import Pane

LOST_KEPT = 100  # doctor lists this many of the most recent losses


class Losses:
    """Sentinels lost since start, for doctor: a count and the most recent ones."""

    def __init__(self) -> None:
        self.count = 0
        self.recent: deque[dict[str, Any]] = deque(maxlen=LOST_KEPT)

    def add(self, pane: Pane, why: str) -> None:
        self.count += 1
        entry: dict[str, Any] = {
            "pane": pane.id,
            "pid": pane.sentinel_pid,
            "reason": why,
            "at": now_iso(),
        }
        if pane.run is not None:
            entry["run"] = pane.run
        self.recent.append(entry)
