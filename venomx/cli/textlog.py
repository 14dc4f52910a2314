"""Terminal output as plain text lines, for a log that is not a terminal (``venomx exec``).

A line is what a terminal shows on it when the program moves on to the next one: a
carriage return goes back to the start of the line and what follows overwrites it (a
progress bar ends as its last state), a backspace steps back, ``ESC [ K`` erases to the
end. Escape sequences (colours, titles, cursor keys) are dropped. Cursor movement to
other lines cannot be followed line by line and is ignored. Every byte costs constant
time; a line longer than ``MAX_LINE`` characters is cut into pieces of that size.
"""

from __future__ import annotations

import codecs

MAX_LINE = 1 << 16
TAB = 8
# states of the escape-sequence scanner
TEXT, ESC, CSI, STRING, STRING_ESC, ESC_INTER = range(6)


class TextLines:
    """Feed bytes, take finished lines; ``close`` returns the unfinished last one."""

    def __init__(self) -> None:
        self.decoder = codecs.getincrementaldecoder("utf-8")("replace")
        self.line: list[str] = []
        self.col = 0
        self.state = TEXT
        self.csi = ""

    def feed(self, data: bytes) -> list[str]:
        out: list[str] = []
        for ch in self.decoder.decode(data):
            self._char(ch, out)
        return out

    def close(self) -> str | None:
        """The last line if the output did not end with a newline (None if empty)."""
        out: list[str] = []
        for ch in self.decoder.decode(b"", final=True):
            self._char(ch, out)
        if out:
            return out[0]
        if self.line:
            return self._take()
        return None

    def _take(self) -> str:
        text = "".join(self.line).rstrip()
        self.line = []
        self.col = 0
        return text

    def _char(self, ch: str, out: list[str]) -> None:
        state = self.state
        if state == ESC:
            if ch == "[":
                self.state, self.csi = CSI, ""
            elif ch in "]PX^_":
                self.state = STRING  # OSC, DCS, SOS, PM, APC: up to BEL or ST
            elif " " <= ch <= "/":
                self.state = ESC_INTER  # ESC ( B and the like: up to a final byte
            else:
                self.state = TEXT  # a two-byte sequence (charset, keypad mode, ...)
            return
        if state == ESC_INTER:
            if not " " <= ch <= "/":
                self.state = TEXT
            return
        if state == CSI:
            if "\x40" <= ch <= "\x7e":
                self.state = TEXT
                self._csi(ch)
            elif len(self.csi) < 32:
                self.csi += ch
            return
        if state in (STRING, STRING_ESC):
            if ch == "\x07" or (state == STRING_ESC and ch == "\\"):
                self.state = TEXT
            else:
                self.state = STRING_ESC if ch == "\x1b" else STRING
            return
        if ch == "\n":
            out.append(self._take())
        elif ch == "\r":
            self.col = 0
        elif ch == "\b":
            self.col = max(0, self.col - 1)
        elif ch == "\t":
            self._put(" " * (TAB - self.col % TAB), out)
        elif ch == "\x1b":
            self.state = ESC
        elif ch >= " " and ch != "\x7f" and not ("\x80" <= ch <= "\x9f"):
            self._put(ch, out)

    def _put(self, text: str, out: list[str]) -> None:
        for ch in text:
            if self.col >= MAX_LINE:
                out.append(self._take())
            if self.col < len(self.line):
                self.line[self.col] = ch
            else:
                self.line.extend(" " * (self.col - len(self.line)))
                self.line.append(ch)
            self.col += 1

    def _csi(self, final: str) -> None:
        args = self.csi
        if final == "K":
            mode = args or "0"
            if mode == "0":
                del self.line[self.col :]
            elif mode == "1":
                self.line[: self.col] = [" "] * min(self.col, len(self.line))
            elif mode == "2":
                self.line = []
        elif final in "CDG" and (args == "" or args.isdigit()):
            n = int(args) if args.isdigit() else 1
            if final == "C":
                self.col = min(MAX_LINE - 1, self.col + n)
            elif final == "D":
                self.col = max(0, self.col - n)
            elif final == "G":
                self.col = max(0, min(MAX_LINE - 1, n - 1))
