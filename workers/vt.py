"""A pane's terminal state: a pyte screen plus text history in one row space.

Row numbers start at 0 when the pane is created; a row that scrolls off the top of the
primary screen keeps its number in history. The epoch changes when rows are renumbered
or history is destroyed (resize, RIS, ED 3). History is kept as text rows, never as
pyte cells, so scrollback costs one string per row.

``Terminal.feed`` takes a plain-text fast path (printable ASCII, CR, LF, SGR) whenever the
result is provably the same as pyte's, and hands pyte only what must end up on screen.

``RowView`` (live) and ``Snapshot`` (final state shipped with EXIT) share the row-reading
functions ``capture`` and ``tail``, which the daemon uses on frozen state without ever
parsing output itself. Must not import ``venomx``.
"""

from __future__ import annotations

import copy
import re
from collections import deque
from dataclasses import dataclass
from typing import Any, Protocol

import pyte
from pyte import modes as mo

ALT_MODES = {1049 << 5, 1047 << 5, 47 << 5}


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


def fresh_buffer(buffer: Any) -> Any:
    """An empty screen buffer of the same kind (pyte's is a defaultdict of lines)."""
    return type(buffer)(buffer.default_factory)


def shifted(buffer: Any, n: int, rows: int, cols: int) -> Any:
    """The buffer with its top ``n`` rows gone, ``rows`` rows kept, cells past ``cols`` cut."""
    new = fresh_buffer(buffer)
    for y in range(rows):
        if y + n in buffer:
            line = buffer[y + n]
            for x in [x for x in line if x >= cols]:
                del line[x]
            new[y] = line
    return new


def row_cells(line: Any, cols: int) -> list[str]:
    """One pyte line as cell strings ("" for the second cell of a wide character)."""
    # Only written cells are stored; visiting those alone keeps blank rows cheap.
    cells = [line.default.data] * cols
    for x, char in line.items():
        if x < cols:
            cells[x] = char.data
    return cells


def row_text(line: Any, cols: int) -> str:
    """The text form of one pyte line: cells in order, wide characters written once."""
    return "".join(row_cells(line, cols))


class _Screen(pyte.Screen):
    """pyte's screen with history capture, the alternate screen and ED 3 / RIS epochs."""

    def __init__(self, term: Terminal, cols: int, rows: int) -> None:
        self._term = term
        self._ready = False
        super().__init__(cols, rows)
        self._ready = True

    def index(self) -> None:
        term = self._term
        bottom = self.lines - 1
        if (not term.alternate and self.cursor.y == bottom
                and (self.margins is None or (self.margins.top == 0
                                              and self.margins.bottom == bottom))):
            term._push_history(row_text(self.buffer[0], self.columns))
        super().index()

    def set_mode(self, *modes: int, **kwargs: Any) -> None:
        if kwargs.get("private") and any((m << 5) in ALT_MODES for m in modes):
            self._term._enter_alternate(save_cursor=1049 in modes)
        super().set_mode(*modes, **kwargs)

    def reset_mode(self, *modes: int, **kwargs: Any) -> None:
        if kwargs.get("private") and any((m << 5) in ALT_MODES for m in modes):
            self._term._leave_alternate(restore_cursor=1049 in modes)
        super().reset_mode(*modes, **kwargs)

    def erase_in_display(self, how: int = 0, *args: Any, **kwargs: Any) -> None:
        if how == 3:
            # xterm: ED 3 erases saved lines only, the screen stays.
            self._term._erase_scrollback()
            return
        super().erase_in_display(how, *args, **kwargs)

    def reset(self) -> None:
        if self._ready:
            self._term._full_reset()
        super().reset()


class _ByteStream(pyte.ByteStream):
    """pyte's byte stream, except that a sequence pyte cannot handle is dropped, not fatal.

    pyte converts CSI parameters with ``int()``; one of more than 4300 digits raises
    ValueError (CPython's limit, which also keeps the conversion cheap). And pyte calls
    its handlers with whatever a CSI holds: ``ESC [ ? 1 A`` passes ``private=True`` and
    ``ESC [ 1 ; 2 A`` a second argument to handlers that take neither, a TypeError. Either
    would end the feed mid-chunk; the parser is reset and the rest of the chunk goes on.
    """

    def _send_to_parser(self, data: str) -> bool | None:
        try:
            return super()._send_to_parser(data)
        except (ValueError, TypeError):
            return True  # the parser was reset to ground by pyte itself


class Terminal:
    """The live terminal state of one pane, fed every PTY byte in order."""

    def __init__(self, cols: int, rows: int, scrollback: int = 10000) -> None:
        self.epoch = 1
        self.offset = 0
        self.scrolled = 0
        self.history: deque[str] = deque(maxlen=scrollback)
        self._saved: tuple[Any, Any] | None = None
        self._restore_cursor = False
        self.screen = _Screen(self, cols, rows)
        self.stream = _ByteStream(self.screen)
        self.fast_bytes = 0
        # After a bulk chunk the screen is "cleared, then these parts drawn from (0,0) joined by
        # CR LF (then a CR)"; pyte is given them only when its state is needed.
        self.pending: tuple[list[str], bool] | None = None

    def materialize(self) -> None:
        """Hand pyte the screen the bulk path left pending (see ``_bulk_lines``)."""
        if self.pending is None:
            return
        parts, trailing_cr = self.pending
        self.pending = None
        s = self.screen
        s.buffer.clear()
        s.dirty.update(range(s.lines))
        s.cursor.y = 0
        s.cursor.x = 0
        self.stream.feed(("\r\n".join(parts) + ("\r" if trailing_cr else "")).encode())

    # -- callbacks from the screen ------------------------------------------------------
    def _push_history(self, text: str) -> None:
        self.history.append(text)
        self.scrolled += 1

    def _erase_scrollback(self) -> None:
        if self.history:
            self.history.clear()
        self.epoch += 1

    def _full_reset(self) -> None:
        self.history.clear()
        self.scrolled = 0
        self.epoch += 1
        self._saved = None

    def _enter_alternate(self, save_cursor: bool) -> None:
        if self.alternate:
            return
        s = self.screen
        self._saved = (s.buffer, copy.copy(s.cursor))
        self._restore_cursor = save_cursor
        s.buffer = fresh_buffer(s.buffer)

    def _resize_saved(self, cols: int, rows: int) -> None:
        """Apply a resize to the primary screen saved behind the alternate one."""
        if self._saved is None:
            return
        buffer, cursor = self._saved
        n = max(0, cursor.y + 1 - rows)
        for i in range(n):
            self._push_history(row_text(buffer[i], self.screen.columns))
        cursor.y = max(0, cursor.y - n)
        cursor.x = min(cursor.x, cols)
        self._saved = (shifted(buffer, n, rows, cols), cursor)

    def _leave_alternate(self, restore_cursor: bool) -> None:
        if self._saved is None:
            return
        s = self.screen
        s.buffer, cursor = self._saved
        if restore_cursor and self._restore_cursor:
            s.cursor = cursor
        s.cursor.y = min(s.cursor.y, s.lines - 1)
        s.cursor.x = min(s.cursor.x, s.columns)
        self._saved = None

    # -- input -----------------------------------------------------------------------------
    def feed(self, data: bytes) -> None:
        """Advance the state by these PTY bytes (any bytes at all)."""
        self.offset += len(data)
        if not fast_feed(self, data):
            self.materialize()
            self.stream.feed(data)

    def resize(self, cols: int, rows: int) -> None:
        """Resize like xterm: a shrink scrolls rows above the cursor into history.

        pyte alone drops rows from the top without keeping them and can leave the cursor
        below the last row; rows are renumbered either way, so the epoch changes.
        """
        self.materialize()
        s = self.screen
        if cols != s.columns and any(len(h) < s.columns for h in self.history):
            width = s.columns
            self.history = deque((h.ljust(width) for h in self.history),
                                 maxlen=self.history.maxlen)
        if self.alternate:
            self._resize_saved(cols, rows)
        if rows < s.lines:
            n = max(0, s.cursor.y + 1 - rows)
            if not self.alternate:
                for y in range(n):
                    self._push_history(row_text(s.buffer[y], s.columns))
            s.buffer = shifted(s.buffer, n, rows, s.columns)
            s.cursor.y = max(0, s.cursor.y - n)
            s.lines = rows
        s.resize(lines=rows, columns=cols)
        s.set_margins()  # pyte skips this when only the height changed (we set lines above)
        s.cursor.x = min(s.cursor.x, cols)
        s.cursor.y = min(s.cursor.y, rows - 1)
        self.epoch += 1

    # -- reading ---------------------------------------------------------------------------
    @property
    def alternate(self) -> bool:
        """On the alternate screen exactly while the primary one is saved behind it."""
        return self._saved is not None

    @property
    def screen_name(self) -> str:
        return "alternate" if self.alternate else "primary"

    @property
    def cols(self) -> int:
        return int(self.screen.columns)

    @property
    def rows(self) -> int:
        return int(self.screen.lines)

    @property
    def oldest(self) -> int:
        return 0 if self.alternate else self.scrolled - len(self.history)

    @property
    def end(self) -> int:
        return self.rows if self.alternate else self.scrolled + self.rows

    @property
    def cursor(self) -> tuple[int, int]:
        self.materialize()
        c = self.screen.cursor
        base = 0 if self.alternate else self.scrolled
        return base + c.y, min(c.x, self.cols - 1)

    def row(self, n: int) -> str:
        base = 0 if self.alternate else self.scrolled
        if n < base:
            # history rows from the bulk path are stored unpadded; the text form is padded
            text = self.history[n - self.oldest]
            return text if len(text) >= self.cols else text.ljust(self.cols)
        self.materialize()
        return row_text(self.screen.buffer[n - base], self.cols)

    def snapshot(self) -> dict[str, Any]:
        """The whole state as plain data, for EXIT."""
        base = 0 if self.alternate else self.scrolled
        return {
            "screen": self.screen_name, "epoch": self.epoch, "offset": self.offset,
            "cols": self.cols, "rows": self.rows, "oldest": self.oldest,
            "history": [] if self.alternate else [self.row(n) for n in range(
                self.oldest, self.scrolled)],
            "lines": [self.row(base + i) for i in range(self.rows)],
            "cursor": list(self.cursor),
        }



def blank_snapshot(cols: int, rows: int) -> dict[str, Any]:
    """``Terminal(cols, rows).snapshot()`` before any byte, without building a screen."""
    return {"screen": "primary", "epoch": 1, "offset": 0, "cols": cols, "rows": rows,
            "oldest": 0, "history": [], "lines": [" " * cols] * rows, "cursor": [0, 0]}


@dataclass
class Snapshot:
    """A pane's final terminal state, as shipped with EXIT; read-only."""

    screen_name: str
    epoch: int
    offset: int
    cols: int
    rows: int
    oldest: int
    history: list[str]
    lines: list[str]
    cursor: tuple[int, int]

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Snapshot:
        return cls(d["screen"], d["epoch"], d["offset"], d["cols"], d["rows"], d["oldest"],
                   list(d["history"]), list(d["lines"]), (d["cursor"][0], d["cursor"][1]))

    @property
    def end(self) -> int:
        return self.oldest + len(self.history) + len(self.lines)

    def row(self, n: int) -> str:
        i = n - self.oldest
        if i < len(self.history):
            return self.history[i]
        return self.lines[i - len(self.history)]

    def nbytes(self) -> int:
        return sum(len(x) for x in self.history) + sum(len(x) for x in self.lines)


def repaint(src: RowSource) -> bytes:
    """Bytes that redraw the screen (text only) on a real terminal: for attach."""
    base = src.end - src.rows
    lines = [src.row(base + i).rstrip(" ") for i in range(src.rows)]
    row, col = src.cursor
    return ("\x1b[H\x1b[2J" + "\r\n".join(lines)
            + f"\x1b[{row - base + 1};{col + 1}H").encode("utf-8", "replace")


def capture(src: RowSource, epoch: int | None, start: int | None, end: int | None,
            limit: int) -> dict[str, Any]:
    """Rows ``[start, end)`` of the active screen, clamped to ``[oldest, end]`` (§7)."""
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
    return {
        "screen": src.screen_name, "epoch": src.epoch, "offset": src.offset,
        "cols": src.cols, "rows": src.rows, "oldest": oldest, "start": s, "end": e,
        "lines": [src.row(n) for n in range(s, e)], "cursor": {"row": row, "col": col},
    }


def tail(src: RowSource, output_rows: int, output_bytes: int) -> dict[str, Any]:
    """RFC-0015 §4's output tail: rows ``[s, e)``, whole rows only, trailing blanks dropped."""
    oldest = src.oldest
    e = src.end
    while e > oldest and not src.row(e - 1).strip(" "):
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
        "screen": src.screen_name, "epoch": src.epoch, "offset": src.offset,
        "cols": src.cols, "rows": src.rows, "oldest": oldest, "start": s, "end": e,
        "complete": complete, "lines": [src.row(n) for n in range(s, e)],
    }


# -- the plain-text fast path ---------------------------------------------------------------

_FAST_CHUNK = re.compile(rb"(?:[\x20-\x7e\r\n]|\x1b\[[0-9;]*m)*\Z")
_PLAIN = bytes(range(0x20, 0x7f)) + b"\r\n"  # bytes the fast path takes without a regex
_SGR = re.compile(r"\x1b\[[0-9;]*m")
_SGR_RESET = re.compile(r"\x1b\[(?:0*)?m")
_PIECE = re.compile(r"\r|\x1b\[[0-9;]*m|[\x20-\x7e]+")
FAST_MIN = 512


def _fast_state_ok(term: Terminal) -> bool:
    s = term.screen
    st = term.stream
    return bool(not term.alternate and st._taking_plain_text
            and 0 <= s.cursor.y < s.lines and 0 <= s.cursor.x <= s.columns
            and st.utf8_decoder.getstate()[0] == b"" and st.use_utf8
            and (s.margins is None or (s.margins.top == 0 and s.margins.bottom == s.lines - 1))
            and mo.DECAWM in s.mode and mo.IRM not in s.mode and mo.LNM not in s.mode
            and s.charset == 0 and s.g0_charset is pyte.charsets.LAT1_MAP)


def _bulk_lines(term: Terminal, text: str) -> bool:
    """The commonest case at C speed: whole lines ending in CR LF, none wider than the screen.

    Only taken when every CR is followed by LF and vice versa, there is no escape, no line
    wraps, and the chunk scrolls the whole screen; otherwise the general fast path runs.
    """
    if not text:
        return False
    s = term.screen
    cols, nrows = s.columns, s.lines
    pending = term.pending
    if pending is not None:
        prev, prev_cr = pending
        x0, y0 = (0 if prev_cr else len(prev[-1])), len(prev) - 1

        def old_row(y: int) -> list[str]:
            return list(prev[y].ljust(cols)) if y < len(prev) else [" "] * cols
    else:
        x0, y0 = s.cursor.x, s.cursor.y

        def old_row(y: int) -> list[str]:
            return row_cells(s.buffer[y], cols)
    if text[0] == "\n" and x0 == 0:
        text = "\r" + text  # the LF of a CR LF split across reads: the same at column 0
    trailing_cr = text[-1] == "\r"
    if trailing_cr:
        text = text[:-1]  # a CR whose LF comes in the next read; pyte gets it at the end
    n_crlf = text.count("\r\n")
    if not n_crlf or text.count("\r") != n_crlf or text.count("\n") != n_crlf:
        return False
    parts = text.split("\r\n")
    if x0 + len(parts[0]) > cols or max(map(len, parts[1:])) > cols:
        return False
    final_row = y0 + len(parts) - 1
    top = final_row - nrows + 1
    if top < nrows:  # some old rows stay on screen: pyte must keep them
        return False
    # rows [0, top) leave the screen: the old rows above the cursor, the cursor's row with
    # the first part written over it, then rows made of whole parts
    old = [old_row(y) for y in range(min(nrows, top))]
    first = old[y0] if y0 < len(old) else [" "] * cols
    first[x0:x0 + len(parts[0])] = parts[0]
    out = ["".join(cells) for cells in old[:y0]]
    out.append("".join(first))
    fresh_from = max(y0 + 1, nrows)  # rows at or past the old bottom start blank
    for r in range(y0 + 1, min(top, fresh_from)):
        part = parts[r - y0]
        cells = old[r]
        cells[:len(part)] = part
        out.append("".join(cells))
    term.history.extend(out)
    if top > fresh_from:
        # only what the history can hold is kept; rows are padded when read
        keep = term.history.maxlen if term.history.maxlen is not None else top
        term.history.extend(parts[max(fresh_from, top - keep) - y0:top - y0])
    term.scrolled += top
    term.pending = (parts[top - y0:], trailing_cr)
    return True


def fast_feed(term: Terminal, data: bytes) -> bool:
    """Feed ``data`` without pyte when it only prints ASCII text, CR, LF and SGR.

    Returns False (and changes nothing) when the chunk or the state is outside that case.
    History rows are computed as text; pyte is handed only the bytes that draw the final
    screen, starting on a cleared screen at the row where that screen begins, after the
    SGR state in force there. Correctness is checked against plain pyte by a
    differential test.
    """
    if len(data) < FAST_MIN or not _fast_state_ok(term):
        return False
    rest = data.translate(None, _PLAIN)  # what is left besides printable ASCII, CR and LF
    if rest and (rest.count(b"\x1b") != len(rest) or not _FAST_CHUNK.match(data)):
        return False
    s = term.screen
    cols, lines = s.columns, s.lines
    text = data.decode("ascii")
    if not rest and _bulk_lines(term, text):
        term.fast_bytes += len(data)
        return True
    term.materialize()
    x, y0 = s.cursor.x, s.cursor.y
    # rows touched by this chunk, by absolute number from the current screen top
    rows: dict[int, list[str]] = {}
    row = y0

    def get(r: int) -> list[str]:
        t = rows.get(r)
        if t is None:
            t = row_cells(s.buffer[r], cols) if r < lines else [" "] * cols
            rows[r] = t
        return t

    entries: deque[tuple[int, int, int]] = deque(maxlen=lines + 1)  # (row, pos, x at entry)
    for m in re.finditer(r"\n|[^\n]+", text):
        piece = m.group()
        if piece == "\n":
            row += 1
            entries.append((row, m.end(), x))
            continue
        for p in _PIECE.finditer(piece):
            tok = p.group()
            if tok == "\r":
                x = 0
            elif tok[0] == "\x1b":
                continue
            else:
                pos = m.start() + p.start()
                i = 0
                while i < len(tok):
                    if x == cols:
                        x = 0
                        row += 1
                        entries.append((row, pos + i, 0))
                    n = min(len(tok) - i, cols - x)
                    get(row)[x:x + n] = tok[i:i + n]
                    x += n
                    i += n
    top = max(0, row - lines + 1)
    if top < lines:  # some old rows stay on screen: pyte must keep them
        return False
    entry = next(((r, pos, ex) for r, pos, ex in entries if r == top), None)
    if entry is None:  # pragma: no cover - every row above y0 was entered in this chunk
        return False
    _, pos, ex = entry
    for r in range(top):
        term._push_history("".join(get(r)))
    prefix = text[:pos]
    sgrs = _SGR.findall(prefix)
    last_reset = max((i for i, q in enumerate(sgrs) if _SGR_RESET.fullmatch(q)), default=-1)
    s.buffer.clear()
    s.dirty.update(range(lines))
    if sgrs[last_reset + 1:] or last_reset >= 0:
        term.stream.feed("".join(sgrs[max(last_reset, 0):]).encode())
    s.cursor.y = 0
    s.cursor.x = ex
    term.stream.feed(text[pos:].encode())
    term.fast_bytes += len(data)
    return True
