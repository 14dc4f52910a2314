"""The row model a pane's terminal state is read through: live or final, same functions.

Row numbers start at 0 when the pane is created; a row that scrolls off the top of the
primary screen keeps its number in history. The epoch changes when rows are renumbered
or history is destroyed (resize, RIS, ED 3).

``capture``, ``tail`` and ``repaint`` read any ``RowSource``: the sentinel's live
``Terminal`` or the ``Snapshot`` shipped with EXIT, which the daemon keeps for an exited
pane and reads without ever parsing output itself. So the daemon can import this module
without loading a terminal emulator, it must not import pyte (nor ``venomx``).
"""

from __future__ import annotations

import json
import sys
from array import array
from itertools import accumulate, islice
from typing import Any, Protocol


class EpochConflict(Exception):
    """The caller's epoch is not the pane's current one."""

    def __init__(self, epoch: int) -> None:
        super().__init__(f"epoch is {epoch}")
        self.epoch = epoch


class RowSource(Protocol):
    """What capture and tail read: a live ``Terminal`` or a final ``Snapshot``."""

    @property
    def screen_name(self) -> str: ...
    @property
    def epoch(self) -> int: ...
    @property
    def offset(self) -> int: ...
    @property
    def cols(self) -> int: ...
    @property
    def rows(self) -> int: ...
    @property
    def oldest(self) -> int: ...
    @property
    def end(self) -> int: ...
    @property
    def cursor(self) -> tuple[int, int]: ...

    def row(self, n: int) -> str: ...

    def blank(self, n: int) -> bool:
        """Whether row ``n`` holds only spaces, found without padding it to ``cols``."""
        ...

    def stripped(self, n: int) -> tuple[str, int]:
        """Row ``n`` without its trailing spaces, and its length in code points padded."""
        ...


def blank_snapshot(cols: int, rows: int) -> dict[str, Any]:
    """``Terminal(cols, rows).snapshot()`` before any byte, without building a screen."""
    return {
        "screen": "primary",
        "epoch": 1,
        "offset": 0,
        "cols": cols,
        "rows": rows,
        "oldest": 0,
        "history": [],
        "lines": [" " * cols] * rows,
        "cursor": [0, 0],
        "dropped": 0,
    }


class Snapshot:
    """A pane's final terminal state, as shipped with EXIT; read-only.

    An exited pane keeps this until it is removed, so the rows are held compactly
    (``_Rows``) rather than as one padded string per row.
    """

    __slots__ = (
        "_rows",
        "cols",
        "cursor",
        "dropped",
        "epoch",
        "offset",
        "oldest",
        "rows",
        "screen_name",
    )

    def __init__(
        self,
        screen_name: str,
        epoch: int,
        offset: int,
        cols: int,
        rows: int,
        oldest: int,
        history: list[str],
        lines: list[str],
        cursor: tuple[int, int],
        dropped: int = 0,
        widths: list[int] | None = None,
    ) -> None:
        """``widths``: each history row's length once padded, when ``history`` comes
        without its padding (as EXIT sends it); else every row is taken as it is."""
        self.screen_name = screen_name
        self.epoch = epoch
        self.offset = offset
        self.cols = cols
        self.rows = rows
        self.oldest = oldest
        self.cursor = cursor
        self.dropped = dropped
        self._rows = _Rows(
            [*history, *lines], cols, None if widths is None else [*widths, *map(len, lines)]
        )

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Snapshot:
        return cls(
            d["screen"],
            d["epoch"],
            d["offset"],
            d["cols"],
            d["rows"],
            d["oldest"],
            d["history"],
            d["lines"],
            (d["cursor"][0], d["cursor"][1]),
            d.get("dropped", 0),
            d.get("widths") or [d["cols"]] * len(d["history"]),
        )

    @property
    def end(self) -> int:
        return self.oldest + len(self._rows)

    def row(self, n: int) -> str:
        return self._rows[n - self.oldest]

    def blank(self, n: int) -> bool:
        return self._rows.blank(n - self.oldest)

    def stripped(self, n: int) -> tuple[str, int]:
        return self._rows.stripped(n - self.oldest)

    def nbytes(self) -> int:
        """Bytes held for the rows (what an exited pane costs until it is removed)."""
        return self._rows.nbytes()


_CHECKPOINT = 64  # rows between stored offsets; a row is found by summing at most this many
# what str.isspace() holds besides " " (a unit test checks it against the running Python)
OTHER_SPACES = (
    "\t\n\x0b\x0c\r\x1c\x1d\x1e\x1f\x85\xa0\u1680"
    + "".join(map(chr, range(0x2000, 0x200B)))
    + "\u2028\u2029\u202f\u205f\u3000"
)


class _Rows:
    """Text rows held compactly: UTF-8 with trailing spaces stripped, in one blob.

    Per row: its byte length (one byte while rows are short) and, only when some row's
    length is not ``cols`` (wide characters, clusters, history of another width), its
    length in characters to pad it back to (``widths``, else each row's own length).
    Every ``_CHECKPOINT`` rows an absolute offset. ``self[i]`` returns the row padded back;
    reading rows in order, forwards or backwards as capture and tail do, costs O(1) per
    row.
    """

    __slots__ = ("_at", "_blob", "_cols", "_lens", "_marks", "_widths")

    def __init__(self, rows: list[str], cols: int, widths: list[int] | None = None) -> None:
        joined = "".join(rows)
        if any(c in joined for c in OTHER_SPACES):
            stripped = [r.rstrip(" ") for r in rows]
        else:  # rstrip() strips whitespace, here only spaces: eight times faster
            stripped = list(map(str.rstrip, rows))
        text = "".join(stripped)
        if text.isascii():
            self._blob = text.encode("ascii")
            self._lens = _packed(list(map(len, stripped)))
        else:
            encoded = [r.encode("utf-8", "surrogatepass") for r in stripped]
            self._blob = b"".join(encoded)
            self._lens = _packed(list(map(len, encoded)))
        self._marks = array("Q", islice(accumulate(self._lens, initial=0), 0, None, _CHECKPOINT))
        self._cols = cols
        if widths is None:
            widths = list(map(len, rows))
        self._widths = None if set(widths) <= {cols} else _packed(widths)
        self._at = (0, 0)  # the last row read and where it starts in the blob

    def __len__(self) -> int:
        return len(self._lens)

    def stripped(self, i: int) -> tuple[str, int]:
        """Row ``i`` without its trailing spaces, and its length once padded back."""
        lens = self._lens
        if not 0 <= i < len(lens):
            raise IndexError(i)
        last, at = self._at
        if i == last + 1:
            start = at + lens[last]
        elif i == last - 1:
            start = at - lens[i]
        elif i == last:
            start = at
        else:
            base = i - i % _CHECKPOINT
            start = self._marks[base // _CHECKPOINT] + sum(lens[base:i])
        self._at = (i, start)
        text = self._blob[start : start + lens[i]].decode("utf-8", "surrogatepass")
        width = self._cols if self._widths is None else self._widths[i]
        return text, width

    def __getitem__(self, i: int) -> str:
        text, width = self.stripped(i)
        return text + " " * (width - len(text))

    def blank(self, i: int) -> bool:
        """Whether row ``i`` is all spaces (stored stripped, so empty)."""
        return self._lens[i] == 0

    def nbytes(self) -> int:
        return (
            sys.getsizeof(self._blob)
            + sys.getsizeof(self._lens)
            + sys.getsizeof(self._marks)
            + sys.getsizeof(self._widths)
        )


def _packed(values: list[int]) -> array[int]:
    """Unsigned ints in the narrowest array that holds them."""
    top = max(values, default=0)
    for code, limit in (("B", 1 << 8), ("H", 1 << 16), ("I", 1 << 32)):
        if top < limit:
            return array(code, values)
    return array("Q", values)


def repaint(src: RowSource) -> bytes:
    """Bytes that redraw the screen (text only) on a real terminal: for attach."""
    base = src.end - src.rows
    lines = [src.row(base + i).rstrip(" ") for i in range(src.rows)]
    row, col = src.cursor
    return ("\x1b[H\x1b[2J" + "\r\n".join(lines) + f"\x1b[{row - base + 1};{col + 1}H").encode(
        "utf-8", "replace"
    )


class TooLarge(Exception):
    """A capture whose rows would not fit the budget it was given: ``result`` is the
    answer without its rows, ``lines`` the bytes its ``lines`` array would take as JSON."""

    def __init__(self, result: dict[str, Any], lines: int) -> None:
        super().__init__(f"rows of {lines} bytes")
        self.result = result
        self.lines = lines


def lines_size(src: RowSource, start: int, end: int) -> int:
    """The bytes of rows ``[start, end)`` as a compact JSON array (``venomx.wire.dumps``),
    counted without padding each row to ``cols``: in a wide pane that would build hundreds
    of megabytes only for the reply to be refused."""
    total = 2 + max(0, end - start - 1)
    for n in range(start, end):
        text, width = src.stripped(n)
        quoted = json.dumps(text, ensure_ascii=False).encode("utf-8", "surrogatepass")
        total += len(quoted) + width - len(text)
    return total


def _most(src: RowSource, start: int, end: int) -> int:
    """At most the bytes of rows ``[start, end)`` as JSON (a code point takes at most six
    escaped), from their unpadded text: a row is as wide as it was written, which may be
    wider than the pane is now."""
    total = 2
    for n in range(start, end):
        text, width = src.stripped(n)
        total += 6 * len(text) + max(0, width - len(text)) + 3
    return total


def capture(
    src: RowSource,
    epoch: int | None,
    start: int | None,
    end: int | None,
    limit: int,
    budget: int | None = None,
) -> dict[str, Any]:
    """Rows ``[start, end)`` of the active screen, clamped to ``[oldest, end]`` (§7);
    ``TooLarge`` when their JSON would take more than ``budget`` bytes."""
    if epoch is not None and epoch != src.epoch:
        raise EpochConflict(src.epoch)
    oldest, cur_end = src.oldest, src.end
    e = cur_end if end is None else max(oldest, min(end, cur_end))
    s = max(oldest, e - limit) if start is None else max(oldest, min(start, cur_end))
    if e < s:
        e = s
    if e - s > limit:
        e = s + limit
    row, col = src.cursor
    result: dict[str, Any] = {
        "screen": src.screen_name,
        "epoch": src.epoch,
        "offset": src.offset,
        "cols": src.cols,
        "rows": src.rows,
        "oldest": oldest,
        "start": s,
        "end": e,
        "lines": [],
        "cursor": {"row": row, "col": col},
    }
    if budget is not None and _most(src, s, e) > budget:  # may not fit: count exactly first
        size = lines_size(src, s, e)
        if size > budget:
            raise TooLarge(result, size)
    result["lines"] = [src.row(n) for n in range(s, e)]
    return result


def tail(src: RowSource, output_rows: int, output_bytes: int) -> dict[str, Any]:
    """RFC-0015 §4's output tail: rows ``[s, e)``, whole rows only, trailing blanks dropped."""
    oldest = src.oldest
    e = src.end
    while e > oldest and src.blank(e - 1):
        e -= 1
    s, used = e, 0
    while s > oldest and e - s < output_rows:
        size = len(src.row(s - 1).encode("utf-8"))
        if used + size > output_bytes:
            break
        used += size
        s -= 1
    complete = src.screen_name == "primary" and src.epoch == 1 and oldest == 0 and s == 0
    return {
        "screen": src.screen_name,
        "epoch": src.epoch,
        "offset": src.offset,
        "cols": src.cols,
        "rows": src.rows,
        "oldest": oldest,
        "start": s,
        "end": e,
        "complete": complete,
        "lines": [src.row(n) for n in range(s, e)],
    }
