"""A pane's terminal state: a pyte screen plus text history in one row space.

Row numbers start at 0 when the pane is created; a row that scrolls off the top of the
primary screen keeps its number in history. The epoch changes when rows are renumbered
or history is destroyed (resize, RIS, ED 3). History is kept as text rows, never as
pyte cells, so scrollback costs one string per row.

Every byte is hostile input: the parser never raises out of ``feed`` (a sequence whose
handler fails is dropped and counted in ``Terminal.dropped``), never drops the text that
follows a sequence or a zero-width code point, and costs O(bytes) — at most O(rows + cols)
per byte, never O(rows x cols) or more.

``Terminal.feed`` takes a plain-text fast path (printable ASCII, CR, LF, SGR) whenever the
result is provably the same as pyte's, and hands pyte only what must end up on screen.

``RowView`` (live) and ``Snapshot`` (final state shipped with EXIT) share the row-reading
functions ``capture`` and ``tail``, which the daemon uses on frozen state without ever
parsing output itself. Must not import ``venomx``.
"""

from __future__ import annotations

import copy
import re
import sys
from array import array
from bisect import bisect_right
from collections import deque
from collections.abc import Callable, Generator
from itertools import accumulate, islice
from typing import Any, Protocol

import pyte
from pyte import control as ctrl
from pyte import modes as mo
from pyte.screens import Char, StaticDefaultDict, wcwidth

ALT_MODES = {1049 << 5, 1047 << 5, 47 << 5}
_BLANK, _BLANK_REVERSE = Char(" "), Char(" ", reverse=True)  # pyte's default_char
GROW_AT = 64  # a cell's text longer than this grows in a _Grown holder
CSI_MAX_PARAMS = 256  # further parameters of one CSI are ignored (xterm keeps 30)
STRING_MAX = 4096  # characters of an OSC kept (the title); the rest is parsed, not kept
SAVEPOINTS_MAX = 32  # DECSC nesting kept; the oldest is forgotten


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


class _Grown:
    """The text of a cell that zero-width code points made long, appended in O(1) amortised.

    A cell's text is a ``str`` while short; rebuilding a long one per code point would
    make a flood of combining marks quadratic. Read with ``text()``.
    """

    __slots__ = ("_done", "_tail")

    def __init__(self, text: str) -> None:
        self._done = [text]
        self._tail: list[str] = []

    def add(self, s: str) -> None:
        tail = self._tail
        tail.append(s)
        if len(tail) >= GROW_AT:  # one string per GROW_AT appends keeps it compact
            self._done.append("".join(tail))
            tail.clear()

    def text(self) -> str:
        if self._tail or len(self._done) > 1:
            self._done = ["".join(self._done) + "".join(self._tail)]
            self._tail.clear()
        return self._done[0]


class _Line(StaticDefaultDict[int, Char]):
    """One screen line of cells; ``grown`` once a cell's text is a ``_Grown``."""

    grown = False


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
    if getattr(line, "grown", False):
        return [c if c.__class__ is str else c.text() for c in cells]
    return cells


def row_text(line: Any, cols: int) -> str:
    """The text form of one pyte line: cells in order, wide characters written once."""
    return "".join(row_cells(line, cols))


class _Screen(pyte.Screen):
    """pyte's screen with history capture, the alternate screen and ED 3 / RIS epochs.

    Also what pyte gets wrong on hostile input: zero-width code points never end a
    ``draw`` (pyte drops the rest of the text), clusters are never NFC-rebuilt (quadratic),
    handlers given values pyte does not expect do nothing instead of raising, and nothing
    costs more than O(rows + cols) per sequence (pyte's DECALN, ED, DECSCNM and DECCOLM
    visit every cell; its tab sorts every stop).
    """

    def __init__(self, term: Terminal, cols: int, rows: int) -> None:
        self._term = term
        self._ready = False
        self._stops: list[int] | None = None
        # zero-width code points met at column 0, kept for the next character drawn there
        self._lead: _Grown | None = None
        self._lead_y = 0
        super().__init__(cols, rows)
        self.buffer = _Buffer(  # type: ignore[assignment]
            lambda: _Line(_BLANK_REVERSE if mo.DECSCNM in self.mode else _BLANK))
        self._ready = True

    # -- text -------------------------------------------------------------------------
    def draw(self, data: str) -> None:
        data = data.translate(self.g1_charset if self.charset else self.g0_charset)
        if (data.isascii() and data.isprintable() and self._lead is None
                and mo.DECAWM in self.mode and mo.IRM not in self.mode):
            try:
                self._draw_ascii(data)
            except Exception:
                self._term._lost()
            return
        cursor = self.cursor
        columns = self.columns
        buffer = self.buffer
        autowrap = mo.DECAWM in self.mode
        insert = mo.IRM in self.mode
        attrs = tuple(cursor.attrs)[1:]
        make = tuple.__new__
        stub = make(Char, ("", *attrs))
        cells: dict[str, Char] = {}
        for char in data:
            try:
                width = wcwidth(char)
                if width > 0:
                    x = cursor.x
                    if x >= columns:
                        if autowrap:
                            self.carriage_return()
                            self.linefeed()
                            x = cursor.x
                        else:
                            x = cursor.x = max(0, columns - width)
                    if insert:
                        self.insert_characters(width)
                    line = buffer[cursor.y]
                    if self._lead is None:
                        cell = cells.get(char)
                        if cell is None:
                            cell = cells[char] = make(Char, (char, *attrs))
                    else:
                        cell = make(Char, (self._take_lead(line, char), *attrs))
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
        attrs = tuple(cursor.attrs)[1:]
        make = tuple.__new__
        cell = {ch: make(Char, (ch, *attrs)) for ch in set(data)}.__getitem__
        i, n = 0, len(data)
        while i < n:
            if cursor.x >= columns:
                self.carriage_return()
                self.linefeed()
            x = cursor.x
            k = min(n - i, columns - x)
            cells = map(cell, data[i:i + k])
            self.buffer[cursor.y].update(zip(range(x, x + k), cells, strict=True))
            cursor.x = x + k
            i += k
        self.dirty.add(cursor.y)

    def _join(self, char: str) -> None:
        """A zero-width code point joins the cell before the cursor, as written (no NFC)."""
        c = self.cursor
        if c.x > 0:
            self._append(self.buffer[c.y], min(c.x, self.columns) - 1, char)
            return
        if self._lead is not None and self._lead_y != c.y:
            self._term.dropped += 1
            self._lead = None
        if self._lead is None:
            self._lead = _Grown("")
            self._lead_y = c.y
        self._lead.add(char)

    def _take_lead(self, line: Any, char: str) -> str | _Grown:
        """The text of a character drawn while code points wait at column 0."""
        lead, self._lead = self._lead, None
        assert lead is not None
        if self.cursor.x != 0 or self.cursor.y != self._lead_y:
            self._term.dropped += 1
            return char
        text = lead.text() + char
        if len(text) <= GROW_AT:
            return text
        line.grown = True
        return _Grown(text)

    @staticmethod
    def _append(line: Any, x: int, s: str) -> None:
        old = line[x]
        d = old.data
        if d.__class__ is _Grown:
            d.add(s)
            return
        d += s
        if len(d) > GROW_AT:
            line.grown = True
            line[x] = old._replace(data=_Grown(d))
        else:
            line[x] = old._replace(data=d)

    # -- rows -------------------------------------------------------------------------
    def index(self) -> None:
        term = self._term
        bottom = self.lines - 1
        if (not term.alternate and self.cursor.y == bottom
                and (self.margins is None or (self.margins.top == 0
                                              and self.margins.bottom == bottom))):
            term._push_history(row_text(self.buffer[0], self.columns))
        top, bottom = self.margins or (0, self.lines - 1)
        if self.cursor.y != bottom:
            self.cursor_down()
            return
        buf = self.buffer
        pop = buf.pop
        for y in range(top, bottom):
            line = pop(y + 1, None)
            if line is None:
                pop(y, None)
            else:
                buf[y] = line
        pop(bottom, None)

    def reverse_index(self) -> None:
        top, bottom = self.margins or (0, self.lines - 1)
        if self.cursor.y != top:
            self.cursor_up()
            return
        buf = self.buffer
        pop = buf.pop
        for y in range(bottom, top, -1):
            line = pop(y - 1, None)
            if line is None:
                pop(y, None)
            else:
                buf[y] = line
        pop(top, None)

    def erase_in_line(self, how: int = 0, private: bool = False) -> None:
        if how not in (0, 1, 2):
            return  # xterm ignores other values; pyte raised
        y, x = self.cursor.y, self.cursor.x
        self.dirty.add(y)
        line = self.buffer[y]
        if line.default.data != " ":
            super().erase_in_line(how)  # a DECALN line: erased cells must be written blank
        elif how == 2:
            del self.buffer[y]
        elif how == 0:
            for k in [k for k in line if k >= x]:
                del line[k]
        else:
            for k in [k for k in line if k <= x]:
                del line[k]

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
            self.buffer[y] = _Line(e)

    def _solid(self, line: Any) -> None:
        """Write out a DECALN line's E's, so cells moved or added past them are blank."""
        if line.default.data != " ":
            for x in range(self.columns):
                if x not in line:
                    line[x] = line.default
            line.default = self.default_char

    def insert_characters(self, count: int | None = None) -> None:
        self._solid(self.buffer[self.cursor.y])
        super().insert_characters(count)

    def delete_characters(self, count: int | None = None) -> None:
        self._solid(self.buffer[self.cursor.y])
        super().delete_characters(count)

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
        stops = self._stops
        if stops is None:
            stops = self._stops = sorted(self.tabstops)
        i = bisect_right(stops, self.cursor.x)
        self.cursor.x = min(stops[i], self.columns - 1) if i < len(stops) else self.columns - 1

    def set_tab_stop(self) -> None:
        super().set_tab_stop()
        self._stops = None

    def clear_tab_stop(self, how: int = 0) -> None:
        super().clear_tab_stop(how)
        self._stops = None

    def save_cursor(self) -> None:
        super().save_cursor()
        if len(self.savepoints) > SAVEPOINTS_MAX:
            del self.savepoints[0]

    def reset(self) -> None:
        if self._ready:
            self._term._full_reset()
        super().reset()
        self._stops = None
        self._lead = None

    def repair(self) -> None:
        """Bring the cursor and margins back in bounds after a handler failed midway."""
        c = self.cursor
        c.x = min(max(0, c.x), self.columns)
        c.y = min(max(0, c.y), self.lines - 1)
        m = self.margins
        if m is not None and not 0 <= m.top < m.bottom < self.lines:
            self.margins = None


class _Buffer(dict[int, _Line]):
    """pyte's screen buffer (a defaultdict of lines) with a factory ``fresh_buffer`` reuses."""

    def __init__(self, default_factory: Callable[[], _Line]) -> None:
        super().__init__()
        self.default_factory = default_factory

    def __missing__(self, y: int) -> _Line:
        line = self[y] = self.default_factory()
        return line


_STRING_RUN = re.compile("[^\x00-\x1f\x7f\x9c]+")  # OSC/DCS body characters, sent as one run
_STRING_INTRO = frozenset("PX^_")  # DCS, SOS, PM, APC: parsed to their end, never drawn


class _ByteStream(pyte.ByteStream):
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

    def __init__(self, screen: _Screen, lost: Callable[[], None]) -> None:
        self._lost = lost
        super().__init__(screen)

    def feed(self, data: bytes) -> None:  # type: ignore[override]
        self.feed_text(self.utf8_decoder.decode(data) if self.use_utf8
                       else data.decode("latin-1"))

    def feed_text(self, data: str) -> None:
        """Parse decoded text; the one place the parser is driven."""
        assert self.listener is not None and self._parser is not None
        draw = self.listener.draw
        match_text = self._text_pattern.match
        match_string = _STRING_RUN.match
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
                    elif first in "()" and not self.use_utf8:
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
                private = odd = False
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
                        break
                    elif "\x20" <= c <= "\x3f":  # ":" "<" "=" ">" or an intermediate
                        odd = True  # a sequence pyte has no handler for: parsed, not applied
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

class Terminal:
    """The live terminal state of one pane, fed every PTY byte in order."""

    def __init__(self, cols: int, rows: int, scrollback: int = 10000) -> None:
        self.epoch = 1
        self.offset = 0
        self.scrolled = 0
        self.history: deque[str] = deque(maxlen=scrollback)
        self._saved: tuple[Any, Any] | None = None
        self._restore_cursor = False
        self.dropped = 0  # sequences dropped because applying them raised
        self.screen = _Screen(self, cols, rows)
        self.stream = _ByteStream(self.screen, self._lost)
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
    def _lost(self) -> None:
        """A sequence or code point could not be applied: count it, keep the state sound."""
        self.dropped += 1
        self.screen.repair()

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
        try:
            fast = fast_feed(self, data)
        except Exception:  # it changes nothing before it is sure to succeed
            self._lost()
            fast = False
        if not fast:
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
            "cursor": list(self.cursor), "dropped": self.dropped,
        }


def blank_snapshot(cols: int, rows: int) -> dict[str, Any]:
    """``Terminal(cols, rows).snapshot()`` before any byte, without building a screen."""
    return {"screen": "primary", "epoch": 1, "offset": 0, "cols": cols, "rows": rows,
            "oldest": 0, "history": [], "lines": [" " * cols] * rows, "cursor": [0, 0],
            "dropped": 0}


class Snapshot:
    """A pane's final terminal state, as shipped with EXIT; read-only.

    An exited pane keeps this until it is removed, so the rows are held compactly
    (``_Rows``) rather than as one padded string per row.
    """

    __slots__ = ("_rows", "cols", "cursor", "dropped", "epoch", "offset", "oldest", "rows",
                 "screen_name")

    def __init__(self, screen_name: str, epoch: int, offset: int, cols: int, rows: int,
                 oldest: int, history: list[str], lines: list[str], cursor: tuple[int, int],
                 dropped: int = 0) -> None:
        self.screen_name = screen_name
        self.epoch = epoch
        self.offset = offset
        self.cols = cols
        self.rows = rows
        self.oldest = oldest
        self.cursor = cursor
        self.dropped = dropped
        self._rows = _Rows([*history, *lines], cols)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Snapshot:
        return cls(d["screen"], d["epoch"], d["offset"], d["cols"], d["rows"], d["oldest"],
                   d["history"], d["lines"], (d["cursor"][0], d["cursor"][1]),
                   d.get("dropped", 0))

    @property
    def end(self) -> int:
        return self.oldest + len(self._rows)

    def row(self, n: int) -> str:
        return self._rows[n - self.oldest]

    def nbytes(self) -> int:
        """Bytes held for the rows (what an exited pane costs until it is removed)."""
        return self._rows.nbytes()


_CHECKPOINT = 64  # rows between stored offsets; a row is found by summing at most this many
# what str.isspace() holds besides " " (a unit test checks it against the running Python)
OTHER_SPACES = "\t\n\x0b\x0c\r\x1c\x1d\x1e\x1f\x85\xa0\u1680" + "".join(
    map(chr, range(0x2000, 0x200B))) + "\u2028\u2029\u202f\u205f\u3000"


class _Rows:
    """Text rows held compactly: UTF-8 with trailing spaces stripped, in one blob.

    Per row: its byte length (one byte while rows are short) and, only when some row's
    length is not ``cols`` (wide characters, clusters, history of another width), its
    length in characters to pad it back to. Every ``_CHECKPOINT`` rows an absolute
    offset. ``self[i]`` returns exactly the string that was stored; reading rows in order,
    forwards or backwards as capture and tail do, costs O(1) per row.
    """

    __slots__ = ("_at", "_blob", "_cols", "_lens", "_marks", "_widths")

    def __init__(self, rows: list[str], cols: int) -> None:
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
        self._widths = None if set(map(len, rows)) <= {cols} else _packed(list(map(len, rows)))
        self._at = (0, 0)  # the last row read and where it starts in the blob

    def __len__(self) -> int:
        return len(self._lens)

    def __getitem__(self, i: int) -> str:
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
        text = self._blob[start:start + lens[i]].decode("utf-8", "surrogatepass")
        width = self._cols if self._widths is None else self._widths[i]
        return text + " " * (width - len(text))

    def nbytes(self) -> int:
        return (sys.getsizeof(self._blob) + sys.getsizeof(self._lens)
                + sys.getsizeof(self._marks) + sys.getsizeof(self._widths))


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


class _NotFast(Exception):
    """The chunk touches a row the fast path must not read."""


def _fast_state_ok(term: Terminal) -> bool:
    s = term.screen
    st = term.stream
    return bool(not term.alternate and st._taking_plain_text
            and 0 <= s.cursor.y < s.lines and 0 <= s.cursor.x <= s.columns
            and st.utf8_decoder.getstate()[0] == b"" and st.use_utf8
            and (s.margins is None or (s.margins.top == 0 and s.margins.bottom == s.lines - 1))
            and mo.DECAWM in s.mode and mo.IRM not in s.mode and mo.LNM not in s.mode
            and s.charset == 0 and s.g0_charset is pyte.charsets.LAT1_MAP
            and s._lead is None)


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
    # rows below ``floor`` would pass through the whole history and out again: not kept
    floor = 0
    beyond = lines - 1 + (term.history.maxlen or 0)

    def get(r: int, leaving: bool = False) -> list[str]:
        nonlocal floor
        t = rows.get(r)
        if t is None:
            while floor < r - beyond:
                rows.pop(floor, None)
                floor += 1
            if r < lines:
                line: Any = s.buffer[r]
                if line.grown and not leaving:
                    # a chunk that may yet fall back to pyte must not read a long cluster:
                    # chunk after chunk, that would be quadratic
                    raise _NotFast
                t = row_cells(line, cols)
            else:
                t = [" "] * cols
            rows[r] = t
        return t

    entries: deque[tuple[int, int, int]] = deque(maxlen=lines + 1)  # (row, pos, x at entry)
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
                        get(row)[x:x + n] = tok[i:i + n]
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
    for r in range(skipped, top):
        term._push_history("".join(get(r, leaving=True)))  # read once, as it leaves
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


# -- cost of hostile output (scripts/bench) -------------------------------------------------

def _rep(unit: bytes, n: int, head: bytes = b"") -> bytes:
    return head + unit * max(1, (n - len(head)) // len(unit))


def _noise(n: int) -> bytes:
    import random

    return random.Random(14).randbytes(n)


COST_PATTERNS: dict[str, Callable[[int], bytes]] = {
    "seq": lambda n: b"".join(b"%d\r\n" % i for i in range(n // 6))[:n],
    "random": _noise,
    "combining": lambda n: _rep("\u0301".encode(), n, b"a"),
    "combining_nul": lambda n: _rep("\u0301\x00".encode(), n, b"a"),
    "zero_width": lambda n: _rep("\u200b".encode(), n, b"a"),
    "zero_width_col0": lambda n: _rep("\u200b".encode(), n),
    "c0_in_text": lambda n: _rep(b"a\x01\x02", n),
    "csi_4300_digits": lambda n: _rep(b"\x1b[" + b"9" * 4300 + b"m", n),
    "csi_many_params": lambda n: _rep(b"1;", n, b"\x1b["),
    "osc_endless": lambda n: _rep(b"t", n, b"\x1b]0;"),
    "erase_crashers": lambda n: _rep(b"\x1b[3K\x1b[4J", n),
    "scroll_region_lf": lambda n: _rep(b"\n", n, b"\x1b[2;23r\x1b[23H"),
    "reverse_index": lambda n: _rep(b"\x1bM", n, b"\x1b[2;23r\x1b[2H"),
    "insert_lines": lambda n: _rep(b"\x1b[9999L", n),
    "insert_chars": lambda n: _rep(b"\x1b[9999@", n),
    "cursor_moves": lambda n: _rep(b"\x1b[9999B\x1b[9999C\x1b[9999A\x1b[9999D", n),
    "tab_stops_everywhere": lambda n: _rep(b"\t", n, b"\x1b[H" + b"\x1bH\x1b[C" * 80),
    "decaln_ed2": lambda n: _rep(b"\x1b#8\x1b[2J", n),
    "reverse_video": lambda n: _rep(b"\x1b[?5h\x1b[?5l", n, b"x" * 1920),
    "wide": lambda n: _rep("宽".encode(), n),
}


def vt_costs(n: int = 200_000, cols: int = 80, rows: int = 24,
             tries: int = 3) -> list[dict[str, Any]]:
    """CPU time to feed each hostile pattern of about ``n`` and ``2n`` bytes, best of
    ``tries``, in a sentinel's 128 KiB reads; a ``ratio`` near 2 means linear cost."""
    import time

    out: list[dict[str, Any]] = []
    for name, make in COST_PATTERNS.items():
        result: dict[str, Any] = {"pattern": name}
        for label, size in (("n", n), ("2n", 2 * n)):
            data = make(size)
            best = float("inf")
            for _ in range(tries):
                term = Terminal(cols, rows)
                t0 = time.process_time()
                for i in range(0, len(data), 131072):
                    term.feed(data[i:i + 131072])
                term.snapshot()
                best = min(best, time.process_time() - t0)
            result[f"bytes_{label}"] = len(data)
            result[f"seconds_{label}"] = best
        result["ratio"] = result["seconds_2n"] / max(result["seconds_n"], 1e-9)
        result["mb_per_s"] = result["bytes_2n"] / max(result["seconds_2n"], 1e-9) / 1e6
        out.append(result)
    return out
