"""The last output bytes of panes that ended lately, for an attach that resumes after an
offset once the pane has ended.

``venomx exec`` starts a run and then attaches with ``after: 0``; a command that ends in a
few milliseconds ends before that attach arrives, and its sentinel, which held the bytes,
is gone. Its EXIT carries them (at most ``REPLAY_BYTES``), and they are kept here, newest
first, within ``BUDGET`` bytes in all: long enough for the attach that follows its start,
without an exited pane's bytes outliving their use.
"""

from __future__ import annotations

BUDGET = 8 * 1024 * 1024  # bytes held in all (at least 32 panes' full replays)


class Replays:
    """Pane ID -> its last output bytes, ending at its final offset; oldest out first."""

    def __init__(self, budget: int = BUDGET) -> None:
        self.budget = budget
        self.held: dict[str, bytes] = {}  # in exit order
        self.total = 0

    def add(self, pane_id: str, data: bytes) -> None:
        if not data or len(data) > self.budget:
            return
        self.held[pane_id] = data
        self.total += len(data)
        while self.total > self.budget:
            self.forget(next(iter(self.held)))

    def forget(self, pane_id: str) -> None:
        self.total -= len(self.held.pop(pane_id, b""))

    def after(self, pane_id: str, end: int, after: int) -> bytes | None:
        """The bytes after offset ``after`` of a pane whose output ended at ``end``, when
        all of them are held (at ``end`` itself none are missing: empty); None when some
        are gone, or the offset is past the end."""
        data = self.held.get(pane_id, b"")
        if not end - len(data) <= after <= end:
            return None
        return data[after - (end - len(data)) :]
