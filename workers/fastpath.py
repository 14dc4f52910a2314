"""The plain-text fast path: chunks of printable ASCII, CR, LF and SGR fed without pyte.

A chunk is taken here only when the result is provably the same as pyte's (a differential
test checks it); pyte is then handed only what must end up on screen, so a flood of text
costs one pass over its bytes instead of pyte's per-character dispatch.
"""

from __future__ import annotations

import re
from collections import deque
from typing import TYPE_CHECKING, Any, Protocol

import pyte
from pyte import modes as mo

from workers.screen import paired, row_cells, row_text

if TYPE_CHECKING:
    from workers.history import History
    from workers.screen import ByteStream, Screen


class Terminal(Protocol):
    """What the fast path reads and writes of a ``workers.vt.Terminal``. A protocol, so
    that this module does not import the one that calls it."""

    screen: Screen
    stream: ByteStream
    history: History
    scrolled: int
    fast_bytes: int
    # the screen is "cleared, then these parts drawn from (0,0) joined by CR LF (then a CR)"
    pending: tuple[list[str], bool] | None

    @property
    def alternate(self) -> bool: ...

    def materialize(self) -> None: ...

    def _push_history_rows(self, texts: list[str]) -> None: ...


_FAST_CHUNK = re.compile(rb"(?:[\x20-\x7e\r\n]|\x1b\[[0-9;]*m)*\Z")
_PLAIN = bytes(range(0x20, 0x7F)) + b"\r\n"  # bytes the fast path takes without a regex
_SGR = re.compile(r"\x1b\[[0-9;]*m")
_SGR_RESET = re.compile(r"\x1b\[(?:0*)?m")
_PIECE = re.compile(r"\r|\x1b\[[0-9;]*m|[\x20-\x7e]+")
FAST_MIN = 512


class _NotFast(Exception):
    """The chunk touches a row the fast path must not read."""


def _fast_state_ok(term: Terminal) -> bool:
    s = term.screen
    st = term.stream
    return bool(
        not term.alternate
        and st._taking_plain_text
        and 0 <= s.cursor.y < s.lines
        and 0 <= s.cursor.x <= s.columns
        and st.utf8_decoder.getstate()[0] == b""
        and st.use_utf8
        and (s.margins is None or (s.margins.top == 0 and s.margins.bottom == s.lines - 1))
        and mo.DECAWM in s.mode
        and mo.IRM not in s.mode
        and mo.LNM not in s.mode
        and s.charset == 0
        and s.g0_charset is pyte.charsets.LAT1_MAP
        and s._lead is None
    )


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
    first[x0 : x0 + len(parts[0])] = parts[0]
    out = ["".join(cells) for cells in old[:y0]]
    out.append("".join(paired(first)))
    fresh_from = max(y0 + 1, nrows)  # rows at or past the old bottom start blank
    for r in range(y0 + 1, min(top, fresh_from)):
        part = parts[r - y0]
        cells = old[r]
        cells[: len(part)] = part
        out.append("".join(paired(cells)))
    term.history.extend(out)
    if top > fresh_from:
        # only what the history can hold is kept; rows are padded when read
        keep = term.history.maxlen if term.history.maxlen is not None else top
        term.history.extend(parts[max(fresh_from, top - keep) - y0 : top - y0])
    term.scrolled += top
    term.pending = (parts[top - y0 :], trailing_cr)
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
        _note_last(s, text, rest)
        return True
    term.materialize()
    x, y0 = s.cursor.x, s.cursor.y
    # rows touched by this chunk, by absolute number from the current screen top
    rows: dict[int, list[str]] = {}
    row = y0
    # rows below ``floor`` would pass through the whole history and out again: not kept
    floor = 0
    beyond = lines - 1 + (term.history.maxlen or 0)

    def get(r: int) -> list[str]:
        nonlocal floor
        t = rows.get(r)
        if t is None:
            while floor < r - beyond:
                rows.pop(floor, None)
                floor += 1
            if r < lines:
                t = row_cells(s.buffer[r], cols)
            else:
                # as far as it is written: a row below the screen costs what is drawn on
                # it, not the width (a flood of bare LFs on a 65535-column pane)
                t = []
            rows[r] = t
        return t

    entries: deque[tuple[int, int, int]] = deque(maxlen=lines + 1)  # (row, pos, x at entry)
    # blanks written before text that starts past a row's end: with bare LFs (``~OPOST``)
    # the column carries to the next row, and "\nb" repeated on a 65535-column pane built
    # rows of every width, 342 s of CPU and 1.4 GB per MB; past this the parser takes the
    # chunk, whose rows stay sparse
    pad_left = 32 * len(data)
    try:
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
                        cells = get(row)
                        if len(cells) < x:
                            pad_left -= x - len(cells)
                            if pad_left < 0:
                                raise _NotFast
                            cells += " " * (x - len(cells))
                        cells[x : x + n] = tok[i : i + n]
                        x += n
                        i += n
    except _NotFast:
        return False
    top = max(0, row - lines + 1)
    if top < lines:  # some old rows stay on screen: pyte must keep them
        return False
    entry = next(((r, pos, ex) for r, pos, ex in entries if r == top), None)
    if entry is None:  # pragma: no cover - every row above y0 was entered in this chunk
        return False
    _, pos, ex = entry
    skipped = min(floor, top)
    term.scrolled += skipped
    leaving: list[str] = []
    for r in range(skipped, top):
        # read once, as it leaves
        written = rows.get(r)
        if written is None and r < lines:  # a screen row this chunk did not write
            leaving.append(row_text(s.buffer[r], cols, False))  # its written cells
        else:
            leaving.append("".join(paired(written or [])).rstrip(" "))
    term._push_history_rows(leaving)
    prefix = text[:pos]
    sgrs = _SGR.findall(prefix)
    last_reset = max((i for i, q in enumerate(sgrs) if _SGR_RESET.fullmatch(q)), default=-1)
    s.buffer.clear()
    s.dirty.update(range(lines))
    if sgrs[last_reset + 1 :] or last_reset >= 0:
        term.stream.feed("".join(sgrs[max(last_reset, 0) :]).encode())
    s.cursor.y = 0
    s.cursor.x = ex
    term.stream.feed(text[pos:].encode())
    term.fast_bytes += len(data)
    _note_last(s, text, rest)
    return True


def _drawn_end(text: str, end: int) -> int:
    """One past the last character of ``text[:end]`` that is no CR or LF. ``rstrip()``
    (whitespace) runs ~17 times faster than ``rstrip("\\r\\n")``; the only other
    whitespace a fast chunk holds is the blank, found again among what it stripped."""
    kept = len(text[:end].rstrip())
    return max(kept, text.rfind(" ", kept, end) + 1)


def _note_last(s: Any, text: str, rest: bytes) -> None:
    """The chunk's last character drawn, for REP, as pyte's draw would have noted it (the
    screen may be handed only the chunk's end, or nothing yet): read from the end, line
    by line, so a chunk costs its last lines, not a pass over all of it."""
    end = len(text)
    while end:
        if text[end - 1] in "\r\n":  # a chunk may be thousands of blank lines
            end = _drawn_end(text, end)
            if not end:
                return
        start = max(text.rfind("\n", 0, end), text.rfind("\r", 0, end)) + 1
        drawn = _SGR.sub("", text[start:end]) if rest else text[start:end]
        if drawn:
            s._last = drawn[-1]
            return
        end = start
