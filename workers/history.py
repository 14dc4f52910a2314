"""A pane's history: the rows that scrolled off the top of the primary screen.

Rows are kept in blocks of ``BLOCK`` joined into one string, so a retained row costs its
characters and a share of one object, where a ``deque`` of strings paid a string object,
its allocator's rounding and a slot per row (scrollback is most of an idle pane's data).
A row is never a control character, so ``\\n`` can join rows unambiguously.
Must not import ``venomx``.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Iterator

BLOCK = 64


class History:
    """At most ``maxlen`` rows, oldest first, with the indexing and appending of the
    ``deque(maxlen=...)`` it replaces.

    With a ``budget``, the oldest rows also go while the rows hold more code points
    than that (whole blocks while there are newer rows, then row by row; the newest row
    stays): a program that fills every row of a 65535-column pane must not make its
    sentinel hold gigabytes.
    """

    __slots__ = (
        "_blocks",
        "_chars",
        "_len",
        "_seen",
        "_seen_rows",
        "_skip",
        "_tail",
        "budget",
        "maxlen",
    )

    def __init__(self, maxlen: int, rows: Iterable[str] = (), budget: int | None = None) -> None:
        self.maxlen = maxlen
        self.budget = budget
        self._blocks: deque[str] = deque()  # full blocks, BLOCK rows each
        self._tail: list[str] = []  # the rows of the block being filled
        self._skip = 0  # rows of the first block already dropped
        self._len = 0
        self._chars = 0  # code points in the blocks and the tail
        self._seen = -1  # the block last split, kept split for reads in order
        self._seen_rows: list[str] = []
        self.extend(rows)

    def __len__(self) -> int:
        return self._len

    def append(self, row: str) -> None:
        self.extend((row,))

    def extend(self, rows: Iterable[str]) -> None:
        if self.maxlen <= 0:
            return
        tail = self._tail
        rows = list(rows)
        tail.extend(rows)
        self._len += len(rows)
        self._chars += sum(map(len, rows))  # the new rows: a tail may be long (``_join``)
        if len(tail) >= BLOCK:
            self._join()
        excess = self._len - self.maxlen
        if excess > 0:
            self._drop(excess)
        budget = self.budget
        while budget is not None and self._chars > budget and self._len > 1:
            self._trim()

    def _join(self) -> None:
        """Join the tail's oldest rows into blocks, ``BLOCK`` rows each, while a block
        would hold at most a quarter of the budget: a block goes whole, so one larger
        would be split back into rows by the next trim and joined again by the next
        row (3.2 ms a row of 132,000 code points), and dropping it would take most of
        the history with it. Rows that large stay rows: each is its own object anyway."""
        tail, most = self._tail, None if self.budget is None else self.budget // 4
        i = 0
        while len(tail) - i >= BLOCK:
            rows = tail[i : i + BLOCK]
            # with the newlines that join them
            if most is not None and sum(map(len, rows)) + BLOCK - 1 > most:
                break
            self._blocks.append("\n".join(rows))
            self._chars += BLOCK - 1
            i += BLOCK
        del tail[:i]

    def _trim(self) -> None:
        """Forget the oldest rows for the budget: the oldest block, which holds at most
        a quarter of it (``_join``), else the tail's oldest row. A lone block is never
        over the budget, so the newest row always stays."""
        self._drop(BLOCK - self._skip if self._blocks else 1)

    def _drop(self, n: int) -> None:
        """Forget the ``n`` oldest rows."""
        self._len -= n
        self._seen = -1
        skip = self._skip + n
        while skip >= BLOCK and self._blocks:
            self._chars -= len(self._blocks.popleft())
            skip -= BLOCK
        if self._blocks:
            self._skip = skip
        else:  # the rows dropped reach into the tail
            self._chars -= sum(map(len, self._tail[:skip]))
            del self._tail[:skip]
            self._skip = 0

    def clear(self) -> None:
        self._blocks.clear()
        self._tail.clear()
        self._skip = self._len = self._chars = 0
        self._seen = -1

    def __getitem__(self, i: int) -> str:
        if i < 0:
            i += self._len
        if not 0 <= i < self._len:
            raise IndexError("history row out of range")
        j = i + self._skip
        block, k = divmod(j, BLOCK)
        if block >= len(self._blocks):
            return self._tail[j - len(self._blocks) * BLOCK]
        if block != self._seen:
            self._seen_rows = self._blocks[block].split("\n")
            self._seen = block
        return self._seen_rows[k]

    def __iter__(self) -> Iterator[str]:
        for i in range(self._len):
            yield self[i]
