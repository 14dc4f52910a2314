"""The last output bytes of panes that ended lately, for an attach that resumes after an
offset once the pane has ended.

``venomx exec`` starts a run and then attaches with ``after: 0``; a command that ends in a
few milliseconds ends before that attach arrives, and its sentinel, which held the bytes,
is gone. Its EXIT carries them (at most ``REPLAY_BYTES``), and they are kept here within
``BUDGET`` bytes in all: long enough for the attach that follows its start, without an
exited pane's bytes outliving their use.

The budget is shared fairly between the principals that created the panes: when it is
full, the oldest replay of whichever creator holds the most bytes goes (never the one
just added). A run's program
that ends many panes of its own (their creator is its pane principal) then evicts its own
replays, not those of the caller whose exec is about to attach.
"""

from __future__ import annotations

BUDGET = 8 * 1024 * 1024  # bytes held in all (at least 32 panes' full replays)


class Replays:
    """Pane ID -> its last output bytes, ending at its final offset, grouped by the
    principal that created the pane; the largest group's oldest out first."""

    def __init__(self, budget: int = BUDGET) -> None:
        self.budget = budget
        self.held: dict[str, bytes] = {}
        self.creator: dict[str, str] = {}  # pane ID -> the principal that created it
        self.groups: dict[str, dict[str, None]] = {}  # creator -> its panes, in exit order
        self.sizes: dict[str, int] = {}  # creator -> bytes it holds
        self.total = 0

    def add(self, pane_id: str, data: bytes, creator: str = "") -> None:
        if not data or len(data) > self.budget:
            return
        self.forget(pane_id)
        self.held[pane_id] = data
        self.creator[pane_id] = creator
        self.groups.setdefault(creator, {})[pane_id] = None
        self.sizes[creator] = self.sizes.get(creator, 0) + len(data)
        self.total += len(data)
        while self.total > self.budget:
            self.forget(self.evictable(pane_id))

    def evictable(self, newest: str) -> str:
        """The oldest replay of the creator holding the most bytes, never ``newest`` (the
        one being added: a replay is kept for the attach that follows it)."""
        for creator in sorted(self.sizes, key=self.sizes.__getitem__, reverse=True):
            oldest = next(iter(self.groups[creator]))
            if oldest != newest:
                return oldest
        raise AssertionError("only the newest replay is held, within the budget")

    def forget(self, pane_id: str) -> None:
        data = self.held.pop(pane_id, None)
        if data is None:
            return
        creator = self.creator.pop(pane_id)
        group = self.groups[creator]
        del group[pane_id]
        self.sizes[creator] -= len(data)
        if not group:
            del self.groups[creator], self.sizes[creator]
        self.total -= len(data)

    def after(self, pane_id: str, end: int, after: int) -> bytes | None:
        """The bytes after offset ``after`` of a pane whose output ended at ``end``, when
        all of them are held (at ``end`` itself none are missing: empty); None when some
        are gone, or the offset is past the end."""
        data = self.held.get(pane_id, b"")
        if not end - len(data) <= after <= end:
            return None
        return data[after - (end - len(data)) :]
