"""A pane's terminal state: a pyte screen plus text history in one row space.

Row numbers start at 0 when the pane is created; a row that scrolls off the top of the
primary screen keeps its number in history (see ``workers.rows``). History is kept as
text rows, never as pyte cells, so scrollback costs one string per row.

Every byte is hostile input (see ``workers.screen``). ``Terminal.feed`` takes the
plain-text fast path (``workers.fastpath``) whenever the result is provably the same as
pyte's, and hands pyte only what must end up on screen. The terminal is a ``RowSource``:
``capture``, ``tail`` and ``repaint`` read it live. Must not import ``venomx``.
"""

from __future__ import annotations

import copy
from typing import Any

import pyte
from pyte import modes as mo
from pyte.screens import wcwidth

from workers.fastpath import fast_feed
from workers.history import History
from workers.screen import (
    ByteStream,
    Screen,
    fresh_buffer,
    padded,
    padded_len,
    row_text,
    shifted,
)

# Code points of history an EXIT carries at most (up to 4 bytes each in UTF-8, and as
# many in the sentinel's and the daemon's strings): a 10,000-row scrollback of 80-column
# rows is under a tenth of it, the newest rows matter most to a run, and the EXIT must be
# built, sent and taken in well inside the daemon's bound on it (watch.EXIT_BOUND).
HISTORY_BUDGET = 8 * 1024 * 1024
# Private modes a program turns on that a repaint turns on again: cursor keys, mouse
# reports and their encodings, focus events, bracketed paste.
RESTATED = (1, 1000, 1002, 1003, 1004, 1005, 1006, 1015, 1016, 2004)
# What a repaint starts with: the state ``restate`` may set, back at its defaults, so a
# terminal that showed this pane before (an attach starting again) draws from scratch.
UNSTATE = (
    "\x1b[m\x1b[r\x1b[?6l\x1b[4l\x1b[?7h\x1b[?25h\x1b(B\x1b[?" + ";".join(map(str, RESTATED)) + "l"
).encode()
# Answer bytes waiting for the program at most: a few hundred cursor reports, far more
# than a program that reads its answers ever has outstanding.
ANSWERS_MAX = 4096


def new_history(scrollback: int) -> History:
    """``scrollback`` rows, and no more code points than an EXIT could carry of them (or
    256 a row, for a scrollback set larger than that allows): rows are their text, and
    a program that fills every row of a 65535-column pane would otherwise make its
    sentinel hold gigabytes, outside the pane's own cgroup."""
    return History(scrollback, budget=max(HISTORY_BUDGET, 256 * scrollback))


class Terminal:
    """The live terminal state of one pane, fed every PTY byte in order."""

    def __init__(self, cols: int, rows: int, scrollback: int = 10000) -> None:
        self.epoch = 1
        self.offset = 0
        self.scrolled = 0
        self.history = new_history(scrollback)
        self._saved: tuple[Any, Any] | None = None
        self._restore_cursor = False
        self.dropped = 0  # sequences dropped because applying them raised
        self.screen = Screen(self, cols, rows)
        self.stream = ByteStream(self.screen, self._lost)
        self.fast_bytes = 0
        # Answers to the program's queries (DSR, DA), for the sentinel to write to its
        # input; bounded, as a program may ask without ever reading them.
        self.answers = bytearray()
        # After a bulk chunk the screen is "cleared, then these parts drawn from (0,0) joined by
        # CR LF (then a CR)"; pyte is given them only when its state is needed.
        self.pending: tuple[list[str], bool] | None = None

    def reshape(self, cols: int, rows: int, scrollback: int) -> None:
        """Give a terminal never fed, resized or read the state ``Terminal(cols, rows,
        scrollback)`` starts in: a blank one built in advance then serves any pane."""
        if self.history.maxlen != scrollback:
            self.history = new_history(scrollback)
        if (self.screen.columns, self.screen.lines) != (cols, rows):
            self.screen.reshape_blank(cols, rows)

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
    def _answer(self, text: str) -> None:
        if len(self.answers) + len(text) <= ANSWERS_MAX:
            self.answers += text.encode()

    def _lost(self) -> None:
        """A sequence or code point could not be applied: count it, keep the state sound."""
        self.dropped += 1
        self.screen.repair()

    def _push_history_rows(self, texts: list[str]) -> None:
        """Rows scrolled off the top, in order, without their trailing blanks: rows are
        read back padded to the width of the day."""
        self.history.extend(texts)
        self.scrolled += len(texts)

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
        self._push_history_rows(
            [row_text(buffer[i], self.screen.columns, pad=False) for i in range(n)]
        )
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
        if self.alternate:
            self._resize_saved(cols, rows)
        if rows < s.lines:
            n = max(0, s.cursor.y + 1 - rows)
            if not self.alternate:
                self._push_history_rows(
                    [row_text(s.buffer[y], s.columns, pad=False) for y in range(n)]
                )
            s.buffer = shifted(s.buffer, n, rows, s.columns)
            s.cursor.y = max(0, s.cursor.y - n)
            s.lines = rows
        s.resize(lines=rows, columns=cols)
        s.set_margins()  # pyte skips this when only the height changed (we set lines above)
        s.cursor.x = min(s.cursor.x, cols)
        s.cursor.y = min(s.cursor.y, rows - 1)
        self.epoch += 1

    def restate(self) -> bytes:
        """What a repaint adds so that a fresh terminal takes the output that follows as
        this one does: the saved cursor (DECSC), the scroll region and origin mode, the
        cursor again (at a pending wrap, by drawing the last cell again), the modes a
        program turned on (``RESTATED``), a hidden cursor, no autowrap, insert mode, line
        drawing. Without them a person attached to a pane that already has them types
        without bracketed paste or mouse reports, what scrolls in a region is drawn
        wrong, and a progress line that restores a cursor it saved earlier is drawn at
        the top of the screen."""
        self.materialize()
        s = self.screen
        parts = self._saved_cursor()
        if s.margins is not None:
            parts.append(f"\x1b[{s.margins.top + 1};{s.margins.bottom + 1}r")
        if mo.DECOM in s.mode:
            parts.append("\x1b[?6h")
        y, x = s.reported_cursor()
        if s.cursor.x >= s.columns:  # drawn up to the end: autowrap is still on here
            line: dict[int, Any] = s.buffer.get(s.cursor.y) or {}
            cell = line.get(x)
            if x > 0 and cell is not None and cell.data == "":
                x -= 1  # the second half of a wide character: draw all of it
                cell = line.get(x)
            text = (cell.data if cell else "") or " "
            if x == s.columns - 1 and wcwidth(text[0]) > 1:
                text = " "  # cut by a narrower pane: the repaint shows it blank
            parts.append(f"\x1b[{y + 1};{x + 1}H{text}")
        else:
            parts.append(f"\x1b[{y + 1};{x + 1}H")
        parts.extend(f"\x1b[?{m}h" for m in RESTATED if m << 5 in s.mode)
        if mo.DECTCEM not in s.mode:
            parts.append("\x1b[?25l")
        if mo.DECAWM not in s.mode:
            parts.append("\x1b[?7l")
        if mo.IRM in s.mode:
            parts.append("\x1b[4h")
        if s.g0_charset is pyte.charsets.VT100_MAP:
            parts.append("\x1b(0")
        return "".join(parts).encode()

    def _saved_cursor(self) -> list[str]:
        """The cursor DECRC goes back to, saved on a terminal that has the defaults
        (``UNSTATE``) and left with them: its place, origin mode, autowrap and line
        drawing. With nothing saved, DECRC goes home."""
        s = self.screen
        if not s.savepoints:
            return ["\x1b[H\x1b7"]
        saved = s.savepoints[-1]
        y = min(saved.cursor.y, s.lines - 1)
        x = min(saved.cursor.x, s.columns - 1)
        on, off = [], []
        if saved.origin:  # set first: it homes the cursor; the region is the screen here
            on.append("\x1b[?6h")
            off.append("\x1b[?6l")
        on.append(f"\x1b[{y + 1};{x + 1}H")
        if not saved.wrap:
            on.append("\x1b[?7l")
            off.append("\x1b[?7h")
        if saved.g0_charset is pyte.charsets.VT100_MAP:
            on.append("\x1b(0")
            off.append("\x1b(B")
        return [*on, "\x1b7", *off]

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

    def _kept(self, n: int) -> str | None:
        """History row ``n`` without its trailing spaces (rows from the bulk path are
        stored unpadded, others padded to the width they had); None for a screen row."""
        if n < (0 if self.alternate else self.scrolled):
            return self.history[n - self.oldest].rstrip(" ")
        return None

    def row(self, n: int) -> str:
        text = self._kept(n)
        if text is not None:
            return padded(text, self.cols)
        base = 0 if self.alternate else self.scrolled
        self.materialize()
        # ``get``: the buffer is a defaultdict, and indexing a row never written would
        # store a new empty line object (a capture of a blank screen made one per row).
        line = self.screen.buffer.get(n - base)
        if line is None:
            return " " * self.cols  # pyte's default character, whatever its attributes
        return row_text(line, self.cols)

    def stripped(self, n: int) -> tuple[str, int]:
        text = self._kept(n)
        if text is not None:
            return text, padded_len(text, self.cols)
        row = self.row(n)
        return row.rstrip(" "), len(row)

    def blank(self, n: int) -> bool:
        text = self._kept(n)
        return not (self.row(n) if text is None else text).strip(" ")

    def snapshot(self) -> dict[str, Any]:
        """The whole state as plain data, for EXIT.

        History rows go without their padding, which would make the frame ``cols`` times
        the rows (a wide pane's history of short lines passed the channel's frame limit,
        and the pane's output was lost with it); ``widths`` gives each row's padded
        length where one is not ``cols`` (wide characters, another width before a
        resize). The oldest rows are left out past ``HISTORY_BUDGET`` code points.
        """
        base = 0 if self.alternate else self.scrolled
        history: list[str] = []
        widths: list[int] = []
        oldest = self.oldest
        if not self.alternate:
            cols, total = self.cols, 0
            for n in range(self.scrolled - 1, self.oldest - 1, -1):  # newest first
                text = self.history[n - self.oldest].rstrip(" ")
                total += len(text) + 1
                if total > HISTORY_BUDGET:
                    oldest = n + 1
                    break
                history.append(text)
                widths.append(padded_len(text, cols))
            history.reverse()
            widths.reverse()
        state: dict[str, Any] = {
            "screen": self.screen_name,
            "epoch": self.epoch,
            "offset": self.offset,
            "cols": self.cols,
            "rows": self.rows,
            "oldest": oldest,
            "history": history,
            "lines": [self.row(base + i) for i in range(self.rows)],
            "cursor": list(self.cursor),
            "dropped": self.dropped,
        }
        if any(w != self.cols for w in widths):
            state["widths"] = widths
        return state
