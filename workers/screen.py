"""The pyte screen and byte stream a pane's ``Terminal`` is built on, made safe for hostile input.

History is kept by the ``Terminal`` as text rows, never as pyte cells, so scrollback costs
one string per row; the screen hands each row that scrolls off to it.

Every byte is hostile input: the parser never raises out of ``feed`` (a sequence whose
handler fails is dropped and counted through the owner's ``_lost``), never drops the text
that follows a sequence or a zero-width code point, and costs O(bytes) — at most
O(rows + cols) per byte, never O(rows x cols) or more.
"""

from __future__ import annotations

import copy
import re
from bisect import bisect_left, bisect_right, insort
from collections import Counter
from collections.abc import Callable, Generator
from typing import Any, Protocol

import pyte
from pyte import charsets as cs
from pyte import control as ctrl
from pyte import graphics
from pyte import modes as mo
from pyte.graphics import FG_BG_256
from pyte.screens import Char, Margins, StaticDefaultDict, wcwidth

ALT_MODES = {1049 << 5, 1047 << 5, 47 << 5}
DECCKM = 1 << 5  # application cursor keys, in pyte's shifted form
_BLANK, _BLANK_REVERSE = Char(" "), Char(" ", reverse=True)  # pyte's default_char
# Code points a cell keeps: its character and the zero-width ones after it (xterm keeps
# at most 10 marks, tmux 21 bytes); more are dropped and counted. Without a bound a flood
# of U+E0100 on one cell grew the sentinel by 5 MB/s and the exited pane by 210 MB.
CELL_MAX = 32
# SGR parameters that set one attribute, as pyte's tables give them: index in a cell
_SGR_SET: dict[int, tuple[int, str | bool]] = {
    **{k: (1, v) for k, v in graphics.FG_ANSI.items()},
    **{k: (2, v) for k, v in graphics.BG_ANSI.items()},
    **{k: (Char._fields.index(v[1:]), v[0] == "+") for k, v in graphics.TEXT.items()},
    **{k: (1, v) for k, v in graphics.FG_AIXTERM.items()},
    **{k: (2, v) for k, v in graphics.BG_AIXTERM.items()},
}
CELLS_KEPT = 8  # attribute sets whose cells are kept for reuse (``_cells_for``)
CHARS_KEPT = 128  # and characters drawn one by one for each (printable ASCII is kept too)
CSI_MAX_PARAMS = 256  # further parameters of one CSI are ignored (xterm keeps 30)
STRING_MAX = 4096  # characters of an OSC kept (the title); the rest is parsed, not kept
SAVEPOINTS_MAX = 1  # DECSC keeps one cursor, as xterm: DECRC restores the last saved
# Designations honoured in UTF-8 mode, as xterm and tmux do: G0 as DEC Special Graphics
# or back to ASCII (ncurses' smacs and rmacs for xterm-256color draw boxes with them)
G0_UTF8 = ("(0", "(B")


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
    return paired(cells)


def paired(cells: list[str]) -> list[str]:
    """``cells`` with each half of a wide character whose other half was written over
    made a blank, so that a row is always exactly its columns wide (foundation §7)."""
    if "" not in cells:
        joined = "".join(cells)
        if joined.isascii():
            return cells
        # no wide character, no mark alone: nothing to change (rows of box drawing and
        # check marks, which cost a step per cell each time they entered history)
        if all(map(_is_narrow, set(_NON_ASCII.findall(joined)))):
            return cells
    return cell_by_cell(cells)


def cell_by_cell(cells: list[str]) -> list[str]:
    """``paired``'s rule, a cell at a time: each given its neighbours, the one before as
    already made."""
    last = len(cells) - 1
    for x, c in enumerate(cells):
        if c == "" or not c.isascii():
            before = cells[x - 1] if x else ""
            cells[x] = _cell(c, before, cells[x + 1] if x < last else " ")
    return cells


_NON_ASCII = re.compile("[^\x00-\x7f]")
_narrow: dict[str, bool] = {}  # code points found one cell wide, or not
NARROW_MAX = 4096


def _is_narrow(c: str) -> bool:
    found = _narrow.get(c)
    if found is None:
        if len(_narrow) >= NARROW_MAX:
            _narrow.clear()
        found = _narrow[c] = wcwidth(c) == 1
    return found


def _cell(c: str, before: str, after: str) -> str:
    """A cell as the text form shows it, given its neighbours (``before`` "" at the
    row's start, ``after`` not "" at its end): the second half of a wide character whose
    first half is gone, or a wide character whose second half is, becomes a blank; a
    cell of zero-width code points alone (a half's mark) is still a cell."""
    if c == "":
        return c if before != "" and _width(before) == 2 else " "
    if c.isascii():
        return c
    width = _width(c)
    if width == 0:
        return " " + c
    return " " if width == 2 and after != "" else c


def padded(text: str, cols: int) -> str:
    """A row's text padded with blanks to ``cols`` cells, a wide character counting two."""
    n = padded_len(text, cols)
    return text if n == len(text) else text + " " * (n - len(text))


def padded_len(text: str, cols: int) -> int:
    """The length in code points of ``padded(text, cols)``."""
    if text.isascii():
        cells = len(text)
    else:  # each distinct character's width once (a history row is mostly repeats)
        cells = sum(max(0, wcwidth(c)) * n for c, n in Counter(text).items())
    return len(text) + max(0, cols - cells)


def _width(cell: str) -> int:
    """The cells the cell's character takes (after any zero-width code points that lead
    it, see ``_take_lead``); 0 when it holds only zero-width code points."""
    for c in cell:
        w = wcwidth(c)
        if w > 0:
            return int(w)
    return 0


def row_text(line: Any, cols: int, pad: bool = True) -> str:
    """The text form of one pyte line: cells in order, wide characters written once;
    without ``pad``, without its trailing blanks (a row entering history).

    A line with few cells written (a program that moves to column 9000 and prints one
    character per row) is built from its written cells and runs of blanks, so a row
    costs its written cells, not its width: every line feed turns a row into text."""
    if len(line) * SPARSE_AT >= cols:
        row = "".join(row_cells(line, cols))
        return row if pad else row.rstrip(" ")
    blank = line.default.data
    text = {x: char.data for x, char in line.items() if x < cols}
    pieces: list[str] = []
    end = 0
    for x in sorted(text):
        c = text[x]
        if c == "" or not c.isascii():
            before = text.get(x - 1, blank) if x else ""
            c = _cell(c, before, text.get(x + 1, blank) if x < cols - 1 else " ")
        if x > end:
            pieces.append(blank * (x - end))
        pieces.append(c)
        end = x + 1
    if pad or blank != " ":
        pieces.append(blank * (cols - end))
    return "".join(pieces) if pad else "".join(pieces).rstrip(" ")


SPARSE_AT = 8  # a line with fewer than 1 written cell in this many is built sparsely
REBUILD_AT = 64  # cells moved by one ICH/DCH past which the line is rebuilt in one pass
ANSI_MODES = frozenset({mo.IRM, mo.LNM})  # the non-private modes pyte applies


def _written(line: Any, start: int, end: int) -> list[int]:
    """The written columns in ``start``..``end``, in order: found from whichever is
    smaller, the line's cells or the columns (pyte walked the columns)."""
    if end - start < len(line):
        return [k for k in range(start, end) if k in line]
    return sorted(k for k in line if start <= k < end)


def _rebuild(line: Any, cells: dict[int, Any]) -> None:
    line.clear()
    line.update(cells)


class Host(Protocol):
    """The ``Terminal`` a screen belongs to (``workers.vt``), as the screen sees it: what
    it reports back and the state changes it hands over. A protocol, so that this module
    does not import the one built on it."""

    scrolled: int
    dropped: int

    @property
    def alternate(self) -> bool: ...

    def _lost(self) -> None: ...

    def _answer(self, text: str) -> None: ...

    def _push_history_rows(self, texts: list[str]) -> None: ...

    def _erase_scrollback(self) -> None: ...

    def _full_reset(self) -> None: ...

    def _enter_alternate(self, save_cursor: bool) -> None: ...

    def _leave_alternate(self, restore_cursor: bool) -> None: ...


class Screen(pyte.Screen):
    """pyte's screen with history capture, the alternate screen and ED 3 / RIS epochs.

    Also what pyte gets wrong on hostile input: zero-width code points never end a
    ``draw`` (pyte drops the rest of the text), clusters are never NFC-rebuilt (quadratic),
    handlers given values pyte does not expect do nothing instead of raising, and nothing
    costs more than O(rows + cols) per sequence (pyte's DECALN, ED, DECSCNM and DECCOLM
    visit every cell; its tab sorts every stop).
    """

    def __init__(self, term: Host, cols: int, rows: int) -> None:
        self._term = term
        self._ready = False
        self._stops: list[int] | None = None
        self._last = ""  # the last character drawn, for REP
        # zero-width code points met at column 0, kept for the next character drawn there
        self._lead: str | None = None
        self._lead_y = 0
        self._cells: dict[Char, dict[str, Char]] = {}  # see _cells_for
        super().__init__(cols, rows)
        self.buffer = _Buffer(  # type: ignore[assignment]
            lambda: StaticDefaultDict(_BLANK_REVERSE if mo.DECSCNM in self.mode else _BLANK)
        )
        self._ready = True

    # -- attributes ---------------------------------------------------------------------
    def select_graphic_rendition(self, *attrs: int) -> None:
        """pyte's rule, applied to the attributes as a list and made into a cell once:
        pyte's general path (a dict of changes, then ``_replace``) took a fifth of the
        time colour output costs. Parameters it does not know are skipped, as there."""
        if not attrs or attrs == (0,):
            self.cursor.attrs = self.default_char
            return
        a = list(self.cursor.attrs)
        i, n = 0, len(attrs)
        while i < n:
            code = attrs[i]
            i += 1
            hit = _SGR_SET.get(code)
            if hit is not None:
                a[hit[0]] = hit[1]
            elif code == 0:
                a = list(self.default_char)
            elif (code == 38 or code == 48) and i < n:
                field = 1 if code == 38 else 2
                kind = attrs[i]
                i += 1
                if kind == 5 and i < n:
                    if attrs[i] < len(FG_BG_256):
                        a[field] = FG_BG_256[attrs[i]]
                    i += 1
                elif kind == 2:
                    if i + 3 <= n:
                        a[field] = "{:02x}{:02x}{:02x}".format(*attrs[i : i + 3])
                    i += 3
        self.cursor.attrs = tuple.__new__(Char, a)

    # -- text -------------------------------------------------------------------------
    def draw(self, data: str) -> None:
        data = data.translate(self.g1_charset if self.charset else self.g0_charset)
        if data:
            self._last = data[-1]
        if mo.IRM in self.mode:
            self._draw_inserting(data)
        elif (
            data.isascii() and data.isprintable() and self._lead is None and mo.DECAWM in self.mode
        ):
            try:
                self._draw_ascii(data)
            except Exception:
                self._term._lost()
        else:
            self._draw_cells(data, insert=False)

    def _draw_inserting(self, data: str) -> None:
        """``draw`` in insert mode: the room for the characters that fit on the cursor's
        line is made by one ICH, not one per character (each moves every written cell
        after the cursor: REP in insert mode cost 65535 moves of 65535 cells). A
        character that does not fit is drawn alone, wrapping as it would."""
        columns = self.columns
        widths = [w if 0 < w <= columns else 0 for w in map(wcwidth, data)]
        i, n = 0, len(data)
        while i < n:
            room = columns - self.cursor.x
            total, j = 0, i
            while j < n and total + widths[j] <= room:
                total += widths[j]
                j += 1
            if j == i:  # it wraps first
                self._draw_cells(data[i], insert=True)
                i += 1
                continue
            if total:
                try:
                    self.insert_characters(total)
                except Exception:  # no room made: the characters are dropped, not drawn over
                    self._term._lost()
                    self._term.dropped += j - i - 1
                    i = j
                    continue
            fits = data[i:j]
            if fits.isascii() and fits.isprintable() and self._lead is None:
                try:
                    self._draw_ascii(fits)  # it fits: no wrap, whatever DECAWM says
                except Exception:
                    self._term._lost()
            else:
                self._draw_cells(fits, insert=False)
            i = j

    def _draw_cells(self, data: str, insert: bool) -> None:
        """``draw`` character by character: wide ones, zero-width ones joining the cell
        before, and with ``insert`` an ICH before each."""
        cursor = self.cursor
        columns = self.columns
        buffer = self.buffer
        autowrap = mo.DECAWM in self.mode
        attrs = tuple(cursor.attrs)[1:]
        make = tuple.__new__
        stub = make(Char, ("", *attrs))
        cells = self._cells_for(cursor.attrs)
        for char in data:
            try:
                width = wcwidth(char)
                if width > columns:
                    continue  # a wide character in a one-column pane: no cell can hold it
                if width > 0:
                    x = cursor.x
                    if x + width > columns:  # a wide character wraps whole, as in xterm
                        if autowrap:
                            self.carriage_return()
                            self.linefeed()
                            x = cursor.x
                        else:
                            x = cursor.x = columns - width
                    if insert:
                        self.insert_characters(width)
                    line = buffer[cursor.y]
                    if self._lead is None:
                        cell = cells.get(char)
                        if cell is None:
                            cell = make(Char, (char, *attrs))
                            if len(cells) < CHARS_KEPT:
                                cells[char] = cell
                    else:
                        cell = make(Char, (self._take_lead(char), *attrs))
                    line[x] = cell
                    if width == 2 and x + 1 < columns:
                        line[x + 1] = stub
                    x += width
                    cursor.x = x if x < columns else columns
                elif width == 0:
                    self._join(char)
                # width < 0: a C0/C1 control or DEL reached as text; not text, so not kept
            except Exception:
                self._term._lost()
        self.dirty.add(cursor.y)

    def _draw_ascii(self, data: str) -> None:
        """``draw`` for printable ASCII with autowrap: a row's worth of cells at a time."""
        cursor = self.cursor
        columns = self.columns
        cells = self._cells_for(cursor.attrs)
        missing = set(data).difference(cells)
        if missing:
            attrs = tuple(cursor.attrs)[1:]
            make = tuple.__new__
            for ch in missing:
                cells[ch] = make(Char, (ch, *attrs))
        cell = cells.__getitem__
        i, n = 0, len(data)
        while i < n:
            if cursor.x >= columns:
                self.carriage_return()
                self.linefeed()
            x = cursor.x
            k = min(n - i, columns - x)
            self.buffer[cursor.y].update(
                zip(range(x, x + k), map(cell, data[i : i + k]), strict=True)
            )
            cursor.x = x + k
            i += k
        self.dirty.add(cursor.y)

    def _cells_for(self, attrs: Char) -> dict[str, Char]:
        """The cells drawn with ``attrs``, by character, shared by every draw with them:
        colour output changes attributes every few characters, and each draw made a
        cell for each of its characters (a third of a draw's cost)."""
        known = self._cells
        cells = known.get(attrs)
        if cells is None:
            if len(known) >= CELLS_KEPT:
                known.clear()
            cells = known[attrs] = {}
        return cells

    def _join(self, char: str) -> None:
        """A zero-width code point joins the cell before the cursor, as written (no NFC)."""
        c = self.cursor
        if c.x > 0:
            line = self.buffer[c.y]
            x = min(c.x, self.columns) - 1
            if x and line[x].data == "":  # a wide character's second cell: join the character
                x -= 1
            old = line[x]
            if len(old.data) < CELL_MAX:
                line[x] = old._replace(data=old.data + char)
            else:
                self._term.dropped += 1
            return
        if self._lead is not None and self._lead_y != self._row_number():
            self._term.dropped += 1
            self._lead = None
        if self._lead is None:
            self._lead = ""
            self._lead_y = self._row_number()
        if len(self._lead) < CELL_MAX - 1:  # the character it waits for is the last
            self._lead += char
        else:
            self._term.dropped += 1

    def _row_number(self) -> int:
        """The cursor's row in the pane's row space: a scroll moves the text, and a code
        point waiting at column 0 must not follow the cursor to the next line's text."""
        return self.cursor.y + (0 if self._term.alternate else self._term.scrolled)

    def _take_lead(self, char: str) -> str:
        """The text of a character drawn while code points wait at column 0."""
        lead, self._lead = self._lead, None
        assert lead is not None
        if self.cursor.x != 0 or self._row_number() != self._lead_y:
            self._term.dropped += 1
            return char
        return lead + char

    # -- rows -------------------------------------------------------------------------
    def index(self) -> None:
        top, bottom = self.margins or (0, self.lines - 1)
        if self.cursor.y != bottom:
            self._move(1)
        else:
            self._scroll(-1, top, bottom)

    def reverse_index(self) -> None:
        top, bottom = self.margins or (0, self.lines - 1)
        if self.cursor.y != top:
            self._move(-1)
        else:
            self._scroll(1, top, bottom)

    def _scroll(self, n: int, top: int, bottom: int) -> None:
        """The scroll region ``top``..``bottom`` moves ``n`` rows (up when ``n`` < 0, at
        most its height). Rows leaving the top of a region at the top of the screen enter
        history, as in xterm (apt keeps its progress line under such a region)."""
        height = bottom - top + 1
        n = max(-height, min(n, height))
        term = self._term
        if n < 0 and top == 0 and not term.alternate:
            # unwritten rows leave as "", at C speed: SU 999 on a blank 1024-row pane
            # costs its written rows, not its height in Python calls
            texts = [""] * -n
            for y in [y for y in self.buffer if y < -n]:
                texts[y] = row_text(self.buffer[y], self.columns, False)
            term._push_history_rows(texts)
        self._shift_rows(top, bottom, n)

    def _shift_rows(self, first: int, bottom: int, n: int) -> None:
        """Rows ``first``..``bottom`` move ``n`` rows down (up when ``n`` < 0): those moved
        past either end are gone, and those left behind are blank (unwritten)."""
        buf = self.buffer
        if first == 0 and bottom >= max(buf, default=0):  # every written row moves
            moved = {y + n: line for y, line in buf.items() if 0 <= y + n <= bottom}
            buf.clear()
            buf.update(moved)
            return
        moved = {}
        for y in [y for y in buf if first <= y <= bottom]:  # written rows only
            line = buf.pop(y)
            if first <= y + n <= bottom:
                moved[y + n] = line
        buf.update(moved)

    # -- the cursor and the scroll region, as xterm moves them --------------------------
    def _move(self, dy: int) -> None:
        """Up or down within the scroll region while inside it, else within the screen
        (pyte always stopped at the region's edges, pulling a cursor outside into it)."""
        top, bottom = self.margins or (0, self.lines - 1)
        y = self.cursor.y
        low = top if y >= top else 0
        high = bottom if y <= bottom else self.lines - 1
        self.cursor.y = min(max(y + dy, low), high)

    def cursor_up(self, count: int | None = None) -> None:
        self._move(-max(count or 1, 1))
        self._no_wrap()

    def cursor_down(self, count: int | None = None) -> None:
        self._move(max(count or 1, 1))
        self._no_wrap()

    def cursor_to_line(self, line: int | None = None) -> None:
        """VPA; with DECOM, relative to the region and clamped to it (pyte asserted a
        region was set, and a full-screen DECSTBM sets none)."""
        top, bottom = self.margins or (0, self.lines - 1)
        y = max(line or 1, 1) - 1
        if mo.DECOM in self.mode:
            y = min(y + top, bottom)
        self.cursor.y = min(y, self.lines - 1)
        self._no_wrap()

    def report_device_status(self, mode: int = 0, *more: int, **kwargs: Any) -> None:
        """DSR, answered as xterm and tmux do: 5 is "OK", 6 the cursor position (within
        the region under DECOM; the last column at a pending wrap). pyte's asserted a
        region under DECOM and reported the column past the last."""
        if more or kwargs.get("private"):
            return
        if mode == 5:
            self._term._answer("\x1b[0n")
        elif mode == 6:
            y, x = self.reported_cursor()
            self._term._answer(f"\x1b[{y + 1};{x + 1}R")

    def report_device_attributes(self, mode: int = 0, *more: int, **kwargs: Any) -> None:
        """Primary DA, answered as tmux does (a VT100 with advanced video); programs send
        it after a query to learn, from which answer comes first, that the query has none."""
        if mode == 0 and not more and not kwargs.get("private"):
            self._term._answer("\x1b[?1;2c")

    def reported_cursor(self) -> tuple[int, int]:
        """The cursor as a terminal reports and addresses it (from 0): its row counted
        from the region's top under DECOM, the last column at a pending wrap."""
        y = self.cursor.y
        if mo.DECOM in self.mode and self.margins is not None:
            y -= self.margins.top
        return y, min(self.cursor.x, self.columns - 1)

    def _column(self) -> int:
        """The column a line edit acts on. Past the last one without autowrap (a line
        drawn to the end) it is the last, as the cursor shows it there; at a pending wrap
        the edit acts on nothing, as in tmux (xterm would take the last column)."""
        if mo.DECAWM in self.mode:
            return self.cursor.x
        return min(self.cursor.x, self.columns - 1)

    def _no_wrap(self) -> None:
        """A vertical move ends a pending wrap (xterm's ResetWrap): the cursor stays on
        the last column instead of wrapping onto the line it moved to."""
        if self.cursor.x >= self.columns:
            self.cursor.x = self.columns - 1

    def cursor_position(self, line: int | None = None, column: int | None = None) -> None:
        if self.margins is not None and mo.DECOM in self.mode:
            top, bottom = self.margins
            line = min(max(line or 1, 1) + top, bottom + 1) - top  # clamped, as xterm
        super().cursor_position(line, column)

    def set_margins(self, top: int | None = None, bottom: int | None = None) -> None:
        """DECSTBM: a missing or 0 bottom is the last line, and the cursor goes home
        however the margins change (xterm). Called with no values (pyte's resize), the
        margins are reset and the cursor stays."""
        if top is None and bottom is None:
            self.margins = None
            return
        t = max(0, min((top or 1) - 1, self.lines - 1))
        b = self.lines - 1 if not bottom else max(0, min(bottom - 1, self.lines - 1))
        if b - t < 1:
            return  # a region of one line is refused, as xterm does
        self.margins = None if (t, b) == (0, self.lines - 1) else Margins(t, b)
        self.cursor_position()

    def _lines_from_cursor(self, count: int | None) -> tuple[int, int, int] | None:
        """IL and DL act on the cursor's row to the region's bottom, ``count`` lines, and
        only while the cursor is in the region."""
        top, bottom = self.margins or (0, self.lines - 1)
        y0 = self.cursor.y
        if not top <= y0 <= bottom:
            return None
        self.dirty.update(range(y0, self.lines))
        return y0, bottom, max(count or 1, 1)

    def insert_lines(self, count: int | None = None) -> None:
        """IL: pyte moved only the rows that were written, so a blank row moved down left
        the text below it standing."""
        if (span := self._lines_from_cursor(count)) is None:
            return
        y0, bottom, n = span
        self._shift_rows(y0, bottom, n)
        self.carriage_return()

    def delete_lines(self, count: int | None = None) -> None:
        """DL: pyte kept a row whose replacement from below was never written."""
        if (span := self._lines_from_cursor(count)) is None:
            return
        y0, bottom, n = span
        self._shift_rows(y0, bottom, -n)
        self.carriage_return()

    def next_line(self) -> None:
        """NEL (``ESC E``): a carriage return and a line feed (pyte made it a line feed)."""
        self.carriage_return()
        self.index()

    def sco_save(self, *params: int, private: bool = False) -> None:
        """``CSI s``: save the cursor (SCOSC), as DECSC."""
        if not private:
            self.save_cursor()

    def sco_restore(self, *params: int, private: bool = False) -> None:
        """``CSI u``: restore it (SCORC), as DECRC."""
        if not private:
            self.restore_cursor()

    def back_tab(self, count: int | None = None, *more: int, private: bool = False) -> None:
        """CBT (``CSI n Z``): back to the ``n``-th tab stop before the cursor."""
        if more or private:
            return
        stops = self._stops
        if stops is None:
            stops = self._stops = sorted(self.tabstops)
        x = min(self.cursor.x, self.columns - 1)
        for _ in range(min(max(count or 1, 1), self.columns)):
            i = bisect_left(stops, x)
            x = stops[i - 1] if i > 0 else 0
        self.cursor.x = x

    def repeat(self, count: int | None = None, *more: int, private: bool = False) -> None:
        """REP (``CSI n b``): the last character drawn, ``n`` more times, to the end of
        the line at most, as tmux does (xterm wraps: up to 9,999 cells for 7 bytes)."""
        n = min(max(count or 1, 1), self.columns - self.cursor.x)
        if more or private or n <= 0 or wcwidth(self._last or "\0") <= 0:
            return
        self.draw(self._last * n)

    def scroll_up(self, count: int | None = None, *more: int, private: bool = False) -> None:
        """SU (``CSI n S``): the scroll region's lines move up ``n``; lines leaving the top
        of a region at the top of the screen enter history, as with line feeds."""
        if more or private:
            return  # CSI ? ... S is XTSMGRAPHICS, not a scroll
        self._scroll(-max(count or 1, 1), *(self.margins or (0, self.lines - 1)))

    def scroll_down(self, count: int | None = None, *more: int, private: bool = False) -> None:
        """SD (``CSI n T``): the scroll region's lines move down ``n``, blank lines in at
        its top. ``CSI`` with more parameters and ``T`` is mouse tracking: ignored."""
        if more or private:
            return
        self._scroll(max(count or 1, 1), *(self.margins or (0, self.lines - 1)))

    def erase_in_line(self, how: int = 0, private: bool = False) -> None:
        if how not in (0, 1, 2):
            return  # xterm ignores other values; pyte raised
        y, x = self.cursor.y, self._column()
        self.dirty.add(y)
        line = self.buffer[y]
        if how == 2:
            del self.buffer[y]
            return
        if line.default.data != " " and (how == 0) == (x < self.columns - x):
            # a DECALN line, erased over its larger part: its unwritten E's on the
            # smaller side are written out, and unwritten becomes blank
            kept = range(0, x) if how == 0 else range(x + 1, self.columns)
            for k in kept:
                if k not in line:
                    line[k] = line.default
            line.default = self.default_char
        for k in _written(line, x, self.columns) if how == 0 else _written(line, 0, x + 1):
            del line[k]
        if line.default.data != " ":  # the smaller part erased is written blank
            self._blanks(line, *((x, self.columns) if how == 0 else (0, x + 1)))

    def erase_in_display(self, how: int = 0, *args: Any, **kwargs: Any) -> None:
        if how == 3:
            # xterm: ED 3 erases saved lines only, the screen stays.
            self._term._erase_scrollback()
            return
        if how not in (0, 1, 2):
            return  # xterm ignores other values; pyte raised
        y = self.cursor.y
        rows = range(y + 1, self.lines) if how == 0 else range(y) if how == 1 else None
        if rows is None:
            self.dirty.update(range(self.lines))
            self.buffer.clear()
            return
        self.dirty.update(rows)
        for r in rows:
            self.buffer.pop(r, None)
        self.erase_in_line(how)

    def alignment_display(self) -> None:
        # DECALN: every row becomes E's without writing a cell (pyte wrote rows x cols)
        self.dirty.update(range(self.lines))
        e = Char("E")
        for y in range(self.lines):
            self.buffer[y] = StaticDefaultDict(e)

    def _solid(self, line: Any) -> None:
        """Write out a DECALN line's E's, so cells moved or added past them are blank."""
        if line.default.data != " ":
            for x in range(self.columns):
                if x not in line:
                    line[x] = line.default
            line.default = self.default_char

    # ICH, DCH and ECH touch the written cells only (pyte visited every column: in a
    # 65535-column pane each cost ~65,000 steps for a few bytes of output). Unwritten
    # cells show the line's default, so where it is not a blank (a DECALN line: E) the
    # blanks brought in are written out.
    def insert_characters(self, count: int | None = None) -> None:
        n = max(count or 1, 1)
        self._shift_cells(n)
        x = self._column()
        self._blanks(self.buffer[self.cursor.y], x, min(x + n, self.columns))

    def delete_characters(self, count: int | None = None) -> None:
        n = max(count or 1, 1)
        self._shift_cells(-n)
        x, cols = self._column(), self.columns
        self._blanks(self.buffer[self.cursor.y], max(x, cols - n), cols)

    def _shift_cells(self, n: int) -> None:
        """ICH (``n`` > 0) and DCH (``n`` < 0): the written cells from the cursor on move
        ``n`` columns; those that leave the cursor's column..the last are gone."""
        y, x, cols = self.cursor.y, self._column(), self.columns
        self.dirty.add(y)
        line = self.buffer[y]
        keys = _written(line, x, cols)
        if len(keys) > REBUILD_AT:
            _rebuild(
                line,
                {
                    k if k < x else k + n: c
                    for k, c in line.items()
                    if k < x or (k < cols and x <= k + n < cols)
                },
            )
            return
        for k in reversed(keys) if n > 0 else keys:
            char = line.pop(k)
            if x <= k + n < cols:
                line[k + n] = char

    def erase_characters(self, count: int | None = None) -> None:
        y, x = self.cursor.y, self._column()
        self.dirty.add(y)
        line = self.buffer[y]
        end = min(x + max(count or 1, 1), self.columns)
        # as EL: erased cells are blanks (their colour is not kept), forgotten
        for k in _written(line, x, end):
            del line[k]
        self._blanks(line, x, end)

    def _blanks(self, line: Any, start: int, end: int) -> None:
        """Cells ``start``..``end`` blank on a line whose unwritten cells are not."""
        if line.default.data != " ":
            blank = self.default_char
            for k in range(start, end):
                line[k] = blank

    def resize(self, lines: int | None = None, columns: int | None = None) -> None:
        if columns is not None and columns > self.columns:
            for line in self.buffer.values():
                self._solid(line)
        super().resize(lines, columns)

    # -- modes ------------------------------------------------------------------------
    def set_mode(self, *modes: int, **kwargs: Any) -> None:
        if kwargs.get("private"):
            if any((m << 5) in ALT_MODES for m in modes):
                self._term._enter_alternate(save_cursor=1049 in modes)
            modes = self._own_modes(modes, on=True)
        super().set_mode(*modes, **kwargs)

    def reset_mode(self, *modes: int, **kwargs: Any) -> None:
        if kwargs.get("private"):
            if any((m << 5) in ALT_MODES for m in modes):
                self._term._leave_alternate(restore_cursor=1049 in modes)
            modes = self._own_modes(modes, on=False)
        super().reset_mode(*modes, **kwargs)

    # SM and RM from the stream: pyte keeps ANSI modes and private ones (shifted by 5)
    # in one set, so of the ANSI ones only those it applies may reach it (CSI 32 h would
    # be DECCKM); its own calls pass modes already shifted.
    def set_modes(self, *modes: int, private: bool = False) -> None:
        if private:
            self.set_mode(*modes, private=True)
        else:
            self.set_mode(*(m for m in modes if m in ANSI_MODES))

    def reset_modes(self, *modes: int, private: bool = False) -> None:
        if private:
            self.reset_mode(*modes, private=True)
        else:
            self.reset_mode(*(m for m in modes if m in ANSI_MODES))

    def _own_modes(self, modes: tuple[int, ...], on: bool) -> tuple[int, ...]:
        """Apply DECCOLM and DECSCNM here; the private modes left are pyte's to apply.

        DECCOLM clears the screen and homes the cursor like tmux, without changing the
        width (that is the pane's, set by resize). DECSCNM (reverse video) changes no text,
        so no cell is rewritten: pyte rewrote every written cell per toggle.
        """
        if mo.DECCOLM >> 5 in modes:
            self.erase_in_display(2)
            self.cursor_position()
        if mo.DECSCNM >> 5 in modes:
            if on:
                self.mode.add(mo.DECSCNM)
            else:
                self.mode.discard(mo.DECSCNM)
            self.select_graphic_rendition(7 if on else 27)
        return tuple(m for m in modes if m != mo.DECCOLM >> 5 and m != mo.DECSCNM >> 5)

    # -- cursor -----------------------------------------------------------------------
    def tab(self) -> None:
        if self.cursor.x >= self.columns:
            return  # a pending wrap stays pending (xterm)
        stops = self._stops
        if stops is None:
            stops = self._stops = sorted(self.tabstops)
        i = bisect_right(stops, self.cursor.x)
        self.cursor.x = min(stops[i], self.columns - 1) if i < len(stops) else self.columns - 1

    def set_tab_stop(self) -> None:
        """HTS: a stop at the cursor, kept in the sorted list too (sorting every stop
        again at the next tab made HTS + TAB cost O(cols log cols) on a wide pane)."""
        fresh = self.cursor.x not in self.tabstops
        super().set_tab_stop()
        if fresh and self._stops is not None and self.cursor.x in self.tabstops:
            insort(self._stops, self.cursor.x)

    def reshape_blank(self, cols: int, rows: int) -> None:
        """Become the screen ``Screen(term, cols, rows)`` starts as, when never used: pyte's
        own reset, not ours (which counts a full reset, an epoch, in the terminal)."""
        self.columns, self.lines = cols, rows
        self.dirty.clear()
        pyte.Screen.reset(self)
        self._stops = None
        self._lead = None

    def clear_tab_stop(self, how: int = 0) -> None:
        super().clear_tab_stop(how)
        self._stops = None

    def save_cursor(self) -> None:
        super().save_cursor()
        if len(self.savepoints) > SAVEPOINTS_MAX:
            del self.savepoints[0]

    def restore_cursor(self) -> None:
        """DECRC: the cursor last saved, as often as asked (xterm keeps one; pyte popped,
        so a progress line's second restore went home), with origin mode and autowrap
        as they were, and clamped to the screen, not pulled into the region. With
        nothing saved (or after DECSTR or RIS), the defaults at home, as xterm's soft
        reset saves them: a repaint can save exactly that on a person's terminal."""
        if not self.savepoints:
            self.reset_mode(mo.DECOM)
            self.set_mode(mo.DECAWM)
            self.default_charsets()
            self.cursor_position()
            return
        saved = self.savepoints[-1]
        self.g0_charset, self.g1_charset = saved.g0_charset, saved.g1_charset
        self.charset = saved.charset
        (self.set_mode if saved.origin else self.reset_mode)(mo.DECOM)
        (self.set_mode if saved.wrap else self.reset_mode)(mo.DECAWM)
        self.cursor = copy.copy(saved.cursor)
        self.ensure_hbounds()
        self.ensure_vbounds()

    def soft_reset(self) -> None:
        """DECSTR, as xterm does it: the cursor shown, replace mode, absolute origin,
        autowrap (xterm's default), normal cursor keys, full-screen margins, default
        charsets and rendition, the saved cursor at home; the cursor stays put."""
        self.mode -= {mo.IRM, mo.DECOM, DECCKM}
        self.mode |= {mo.DECAWM, mo.DECTCEM}
        self.cursor.hidden = False
        self.margins = None
        self.default_charsets()
        self.select_graphic_rendition(0)
        self.savepoints.clear()

    def default_charsets(self) -> None:
        """G0 ASCII, G1 line drawing, G0 in use: what a reset and an empty DECRC give."""
        self.charset = 0
        self.g0_charset, self.g1_charset = cs.LAT1_MAP, cs.VT100_MAP

    def reset(self) -> None:
        if self._ready:
            self._term._full_reset()
        super().reset()
        self._stops = None
        self._lead = None
        self._last = ""

    def repair(self) -> None:
        """Bring the cursor and margins back in bounds after a handler failed midway."""
        c = self.cursor
        c.x = min(max(0, c.x), self.columns)
        c.y = min(max(0, c.y), self.lines - 1)
        m = self.margins
        if m is not None and not 0 <= m.top < m.bottom < self.lines:
            self.margins = None


_Line = StaticDefaultDict[int, Char]  # one screen line (a type: lines are made plainly)


class _Buffer(dict[int, _Line]):
    """pyte's screen buffer (a defaultdict of lines) with a factory ``fresh_buffer`` reuses."""

    def __init__(self, default_factory: Callable[[], _Line]) -> None:
        super().__init__()
        self.default_factory = default_factory

    def __missing__(self, y: int) -> _Line:
        line = self[y] = self.default_factory()
        return line


_STRING_RUN = re.compile("[^\x00-\x1f\x7f\x9c]+")  # OSC/DCS body characters, sent as one run
# A whole CSI of the common shape (SGR, cursor moves, erases, private modes), applied
# without the state machine, which takes a character per step: colour output spent
# most of its time there. Longer or odder ones go through it.
_CSI_SIMPLE = re.compile("\x1b\\[(\\?)?([0-9;]{0,64})([\x40-\x7e])")
_STRING_INTRO = frozenset("PX^_")  # DCS, SOS, PM, APC: parsed to their end, never drawn


class ByteStream(pyte.ByteStream):
    """pyte's byte stream with a parser that never raises, drops text or stalls.

    The parser is pyte's state machine rewritten after ECMA-48 and xterm: a CSI takes
    parameter and intermediate bytes and ends at its final byte (pyte ended it at any
    unknown byte and drew the rest as text), parameters are bounded as they are read
    (pyte built a string of every digit), an OSC keeps at most ``STRING_MAX`` characters,
    DCS/SOS/PM/APC strings are consumed, and ESC or a non-ASCII character inside a
    sequence ends it and is processed afresh. Input is always UTF-8: ``ESC % @`` (Latin-1,
    which pyte applied from the next read on) is ignored like tmux does. A handler that
    raises has its sequence dropped and counted through ``lost``; anything else that
    raises resets the parser to ground and the rest of the chunk goes on.
    """

    csi = {  # noqa: RUF012
        **pyte.ByteStream.csi,
        "S": "scroll_up",
        "T": "scroll_down",
        "s": "sco_save",
        "u": "sco_restore",
        "Z": "back_tab",
        "`": "cursor_to_column",
        "b": "repeat",
        "h": "set_modes",
        "l": "reset_modes",
    }
    escape = {**pyte.ByteStream.escape, "E": "next_line"}  # noqa: RUF012

    def __init__(self, screen: Screen, lost: Callable[[], None]) -> None:
        self._lost = lost
        super().__init__(screen)

    def _initialize_parser(self) -> None:
        super()._initialize_parser()
        listener = self.listener
        assert listener is not None
        self._csi_calls = {k: getattr(listener, v) for k, v in self.csi.items()}

    def feed(self, data: bytes) -> None:  # type: ignore[override]
        self.feed_text(self.utf8_decoder.decode(data) if self.use_utf8 else data.decode("latin-1"))

    def _csi(self, m: re.Match[str]) -> None:
        """Apply a CSI ``_CSI_SIMPLE`` matched, as the state machine would."""
        private, body, final = m.groups()
        params = [
            int(f) if 0 < len(f) < 5 else min(int(f.lstrip("0")[:5] or 0), 9999)
            for f in body.split(";")
        ]
        assert self.listener is not None
        fn = self._csi_calls.get(final, self.listener.debug)
        try:
            if private:
                fn(*params, private=True)
            else:
                fn(*params)
        except Exception:
            self._lost()

    def feed_text(self, data: str) -> None:
        """Parse decoded text; the one place the parser is driven."""
        assert self.listener is not None and self._parser is not None
        draw = self.listener.draw
        match_text = self._text_pattern.match
        match_string = _STRING_RUN.match
        match_csi = _CSI_SIMPLE.match
        send = self._parser.send
        taking = self._taking_plain_text
        offset, length = 0, len(data)
        while True:
            try:
                while offset < length:
                    if taking:
                        m = match_text(data, offset)
                        if m is not None:
                            start, offset = m.span()
                            draw(data[start:offset])
                            continue
                        if data[offset] == "\x1b":
                            m = match_csi(data, offset)
                            if m is not None:
                                offset = m.end()
                                self._csi(m)
                                continue
                    elif taking is False:  # inside an OSC/DCS body: the run in one send
                        m = match_string(data, offset)
                        if m is not None:
                            start, offset = m.span()
                            taking = send(data[start:offset])
                            continue
                    offset += 1
                    taking = send(data[offset - 1])
                break
            except Exception:
                self._lost()
                self._initialize_parser()
                send = self._parser.send
                taking = self._taking_plain_text
        self._taking_plain_text = taking

    def _parser_fsm(self) -> Generator[bool | None, str, None]:
        """Yields True in ground (plain text may be drawn directly), None for one more
        character, False inside a string body (a run of body characters may be sent)."""
        listener = self.listener
        assert listener is not None
        draw = listener.draw
        debug = listener.debug
        soft_reset = getattr(listener, "soft_reset", debug)  # DECSTR: our Screen's own
        lost = self._lost

        def table(mapping: dict[str, str]) -> dict[str, Callable[..., None]]:
            return {k: getattr(listener, v) for k, v in mapping.items()}

        basic, escape = table(self.basic), table(self.escape)
        sharp, csi = table(self.sharp), table(self.csi)
        ESC, CSI_C1, OSC_C1, ST_C1 = ctrl.ESC, ctrl.CSI_C1, ctrl.OSC_C1, ctrl.ST_C1
        BEL, CAN, SUB, DEL = ctrl.BEL, ctrl.CAN, ctrl.SUB, ctrl.DEL
        SHIFTS = ctrl.SI + ctrl.SO
        IN_CSI = frozenset(ctrl.BEL + ctrl.BS + ctrl.HT + ctrl.LF + ctrl.VT + ctrl.FF + ctrl.CR)

        def call(fn: Callable[..., None], *args: Any, **kwargs: Any) -> None:
            try:
                fn(*args, **kwargs)
            except Exception:
                lost()

        def control(c: str) -> None:
            if c in basic and not (c in SHIFTS and self.use_utf8):
                call(basic[c])

        char: str | None = None
        while True:
            if char is None:
                char = yield True
            c, char = char, None
            if c == ESC:
                c = yield None
                if c == "[":
                    c = CSI_C1
                elif c == "]":
                    c = OSC_C1
                elif c in _STRING_INTRO:
                    while True:
                        c = yield False
                        if c == ST_C1 or c == CAN or c == SUB:
                            break
                        if c == ESC:  # ST or a new sequence: either way the string ends
                            char = c
                            break
                    continue
                elif "\x20" <= c <= "\x2f":  # intermediates, then a final byte
                    first = c
                    c = yield None
                    while "\x20" <= c <= "\x2f":
                        c = yield None
                    if not "\x30" <= c <= "\x7e":
                        char = c
                    elif first == "#":
                        call(sharp.get(c, debug))
                    elif first in "()" and (not self.use_utf8 or first + c in G0_UTF8):
                        call(listener.define_charset, c, mode=first)
                    continue
                elif "\x30" <= c <= "\x7e":
                    call(escape.get(c, debug))
                    continue
                elif c == ESC or c > DEL:  # a new sequence, or text: processed afresh
                    char = c
                    continue
                else:  # a control inside an escape is executed; the escape goes on
                    control(c)
                    char = ESC
                    continue
            if c == CSI_C1:
                params: list[int] = []
                current = ""
                private = False
                odd: bool | str = False
                while True:
                    c = yield None
                    if "0" <= c <= "9":
                        if len(current) < 5 and (current or c != "0"):
                            current += c  # 5 digits already exceed pyte's cap of 9999
                    elif c == ";":
                        if len(params) < CSI_MAX_PARAMS:
                            params.append(min(int(current or 0), 9999))
                        current = ""
                    elif c == "?":
                        private = True
                    elif "\x40" <= c <= "\x7e":
                        if len(params) < CSI_MAX_PARAMS:
                            params.append(min(int(current or 0), 9999))
                        if not odd:
                            if private:
                                call(csi.get(c, debug), *params, private=True)
                            else:
                                call(csi.get(c, debug), *params)
                        elif odd == "!" and c == "p":
                            call(soft_reset)
                        break
                    elif "\x20" <= c <= "\x3f":  # ":" "<" "=" ">" or an intermediate
                        # a sequence pyte has no handler for: parsed, not applied; but
                        # DECSTR, a bare "!" then "p"
                        bare = c == "!" and not (odd or private or current or params)
                        odd = "!" if bare else True
                    elif c in IN_CSI:
                        control(c)
                    elif c == CAN or c == SUB:
                        break
                    elif c == ESC or c > DEL:
                        char = c
                        break
                    # other C0 controls and DEL are ignored inside a CSI
            elif c == OSC_C1:
                code = yield None
                if code == "R":  # Linux: reset the palette
                    continue
                if code == "P":  # Linux: set a palette entry, seven hex digits
                    for _ in range(7):
                        c = yield None
                        if c not in "0123456789abcdefABCDEF":
                            char = c
                            break
                    continue
                kept: list[str] | None = []
                size = 0
                c = code
                while True:
                    if c == BEL or c == ST_C1:
                        break
                    if c == ESC:
                        char = c
                        break
                    if c == CAN or c == SUB:
                        kept = None
                        break
                    if size < STRING_MAX and not (c < " " or c == DEL):
                        kept.append(c)  # type: ignore[union-attr]
                        size += len(c)
                    c = yield False
                if kept:
                    name, _, param = "".join(kept)[:STRING_MAX].partition(";")
                    if name in ("0", "1"):
                        call(listener.set_icon_name, param)
                    if name in ("0", "2"):
                        call(listener.set_title, param)
            elif c in basic:
                if not (c in SHIFTS and self.use_utf8):
                    try:
                        basic[c]()
                    except Exception:
                        lost()
            elif c != ctrl.NUL and c != DEL:
                draw(c)
