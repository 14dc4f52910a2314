"""What of a pane's output reaches a person's terminal: an allowlist of what draws.

`venomx attach` and `venomx exec` show a pane's bytes on the person's own terminal. The
program behind them is untrusted, and a terminal obeys far more than drawing: OSC 52
sets the clipboard the person pastes from next, window reports and DECRQSS type their
answers into whatever reads the terminal after the view has gone, `CSI 3 J` erases the
person's scrollback, S8C1T or `ESC % @` change how the terminal speaks, and every
terminal's parser has had bugs in its rarer strings. tmux shows a pane by drawing its
own screen, so none of that reaches the outer terminal; this shows the byte stream
itself (foundation §8), so it passes only text, the C0 controls that move the cursor,
and the cursor, erase, colour and mode sequences that full-screen programs draw with.
Everything else is dropped whole, however it is split across reads:

- strings (OSC, DCS, SOS, PM, APC), with their contents: titles, hyperlinks, the
  clipboard, colour queries, sixels, terminal-specific extensions;
- queries, whose answers would arrive as keystrokes (DSR, DA, DECRQM, XTVERSION,
  window reports; the pane's own terminal answers DSR and DA itself);
- modes and resets that outlive the view or touch what the person set (DECCOLM, LNM,
  S7C1T, charset switches, the keyboard protocols, tab stops, selective erase; DECSTR
  and RIS are sent as the resets of what a program may set here), and C1 controls,
  which are re-sent in their 7-bit forms when they are CSI or a string's start and
  dropped otherwise.

Text is sent as UTF-8 only to a terminal that decodes it (``visible.utf8_locale``); to
any other, UTF-8's bytes 0x80-0x9F would be C1 controls, so it gets ASCII. A REP repeats at
most the terminal's width.

Under `attach` (``alternate=False``: the view already sits on the terminal's alternate
screen) the program's own alternate screen is drawn in place, and leaving it asks for a
repaint (`repaint_wanted`), as the primary screen it returns to is not on the terminal.
"""

from __future__ import annotations

import codecs
import os
import re

from venomx.visible import as_ascii, utf8_locale

# Drawn text, and C0 controls that only move the cursor or ring the bell.
_TEXT = re.compile("[^\x00-\x1f\x7f-\x9f]+")
_MOVES = frozenset("\x07\x08\x09\x0a\x0b\x0c\x0d")
_CSI_BODY = re.compile("([\x30-\x3f]*)([\x20-\x2f]*)")
_ESC_BODY = re.compile("[\x20-\x2f]*")
_STRING_END = re.compile("[\x07\x18\x1a\x1b\x9c]")
_CSI_SKIP_END = re.compile("[^\x20-\x3f]")
_ESC_SKIP_END = re.compile("[^\x20-\x2f]")
_PARAMS = re.compile("[0-9;]*")
_SGR_PARAMS = re.compile("[0-9;:]*")
# A CSI longer than this is dropped whole (no program draws with one), so what is
# held between reads stays small and the result does not depend on where reads split.
CSI_MAX = 256

_ESC_FINALS = frozenset("78DEM=>")  # DECSC, DECRC, IND, NEL, RI, DECKPAM, DECKPNM
_ESC_CHARSETS = frozenset({"(0", "(B", ")0", ")B", "#8"})
# CSI finals without a prefix that draw or move: ICH CUU CUD CUF CUB CNL CPL CHA CUP CHT
# ED EL IL DL DCH SU SD ECH CBT HPA HPR REP VPA VPR HVP DECSTBM SCOSC SCORC (tab stops
# are left alone: they would outlive the view)
_CSI_FINALS = frozenset("@ABCDEFGHIJKLMPSTXZ`abdefrsu")
_ANSI_MODES = frozenset({4})  # IRM
# DECCKM DECOM DECAWM DECTCEM, mouse reports, focus events, bracketed paste, synchronized
# output; each is put back by ``restore`` when the program touched it
_PRIVATE_MODES = frozenset(
    {1, 6, 7, 25, 1000, 1002, 1003, 1004, 1005, 1006, 1015, 1016, 2004, 2026}
)
_DEFAULT_ON = frozenset({"?7", "?25"})
_ALTERNATE_MODES = frozenset({47, 1047, 1049})
_C1_INTRODUCERS = {"\x9b": "[", "\x9d": "]", "\x90": "P", "\x98": "X", "\x9e": "^", "\x9f": "_"}
# DECSTR as the sequences it resets that the guard lets a program set: DECSTR itself
# also resets what the person set (xterm's and VTE's palette, kitty's keyboard flags).
_SOFT_RESET = "\x1b[0m\x1b[4l\x1b[?1l\x1b>\x1b[?7h\x1b[?25h\x1b(B"


class TermGuard:
    """Turns a pane's byte stream, fed in any pieces, into bytes safe for a person's
    terminal. ``alternate``: whether the program's alternate-screen switches pass;
    ``utf8``: whether the terminal decodes UTF-8 (else text is shown as ASCII);
    ``columns``: its width, the most a REP may repeat (xterm and kitty repeat up to
    65,535 cells for 9 bytes)."""

    def __init__(self, alternate: bool = True, utf8: bool = True, columns: int = 1024) -> None:
        self.alternate = alternate
        self.utf8 = utf8
        self.columns = max(1, columns)
        self.repaint_wanted = False
        self.in_alternate = False  # the program's alternate screen, shown on the terminal's
        self._touched: set[str] = set()  # modes ("4", "?1000"), "keypad", "margins", …
        self._decoder = codecs.getincrementaldecoder("utf-8")("replace")
        self._held = ""  # the start of a sequence the next read completes
        self._state = _NORMAL
        self.line_start = True  # the last text, CR or LF sent was a CR or LF

    @classmethod
    def for_terminal(cls, fd: int, alternate: bool) -> TermGuard:
        """A guard for the terminal on ``fd``, with this process's locale."""
        try:
            columns = os.get_terminal_size(fd).columns
        except OSError:
            columns = 0
        return cls(alternate, utf8_locale(), columns or 1024)

    def resync(self) -> None:
        """Forget a sequence under way: the stream starts afresh (a new attach)."""
        self._decoder.reset()
        self._held = ""
        self._state = _NORMAL

    def feed(self, data: bytes) -> bytes:
        text = self._held + self._decoder.decode(data)
        self._held = ""
        out: list[str] = []
        i, n = 0, len(text)
        while i < n:
            if self._state == _STRING:
                m = _STRING_END.search(text, i)
                if m is None:
                    break
                j = m.start()
                if text[j] != "\x1b":
                    self._state, i = _NORMAL, j + 1
                elif j + 1 == n:
                    self._held = "\x1b"  # ST's first half, or a new sequence's
                    break
                else:
                    self._state = _NORMAL
                    i = j + 2 if text[j + 1] == "\\" else j
                continue
            if self._state != _NORMAL:  # the rest of a sequence too long to take
                csi = self._state == _SKIP
                m = (_CSI_SKIP_END if csi else _ESC_SKIP_END).search(text, i)
                if m is None:
                    break
                self._state = _NORMAL
                final = m.group()
                i = m.start() + ("\x40" <= final <= "\x7e" if csi else "\x30" <= final <= "\x7e")
                continue
            m = _TEXT.match(text, i)
            if m is not None:
                out.append(m.group())
                i = m.end()
                self.line_start = False
                continue
            c = text[i]
            if c in _MOVES:
                out.append(c)
                i += 1
                if c != "\x07":
                    self.line_start = c in "\r\n\x0b\x0c"
            elif c == "\x1b" or c in _C1_INTRODUCERS:
                done = self._sequence(text, i, out)
                if done < 0:
                    self._held = text[i:]
                    break
                i = done
            else:
                i += 1  # any other C0, DEL, or C1
        shown = "".join(out)
        if not self.utf8:
            shown = as_ascii(shown)
        return shown.encode()

    def _sequence(self, text: str, i: int, out: list[str]) -> int:
        """Take the sequence at ``i``; where it ends, or -1 if the text ends first."""
        n = len(text)
        if text[i] == "\x1b":
            if i + 1 == n:
                return -1
            intro, body = text[i + 1], i + 2
        else:
            intro, body = _C1_INTRODUCERS[text[i]], i + 1
        if intro == "[":
            end, m = self._bounded(text, i, body, _CSI_BODY, _SKIP, "\x40")
            if m is not None:
                out.append(self._csi(m.group(1), m.group(2), text[end - 1]))
            return end
        if intro in "]PX^_":
            self._state = _STRING
            return body
        if "\x20" <= intro <= "\x2f":
            end, m = self._bounded(text, i, body, _ESC_BODY, _SKIP_ESC, "\x30")
            if m is not None and text[i + 1 : end] in _ESC_CHARSETS:
                self._touched.add("charset")
                out.append(text[i:end])
            return end
        if intro in _ESC_FINALS:
            if intro in "=>":
                self._touched.add("keypad")
            out.append("\x1b" + intro)
            return body
        if intro == "c":  # RIS: the resets, the program's modes ended, a cleared screen
            out.append(self._soft_reset(every_mode=True) + "\x1b[H\x1b[2J")
            return body
        if "\x30" <= intro <= "\x7e":
            return body  # an escape sequence that does not draw
        return i + 1  # ESC before a control or text: the ESC alone is dropped

    def _bounded(
        self, text: str, i: int, body: int, pattern: re.Pattern[str], skip: int, lowest: str
    ) -> tuple[int, re.Match[str] | None]:
        """The body of a CSI (or of an escape with intermediates) at ``i``, up to its
        final byte (from ``lowest`` to ``~``): where the sequence ends, and its body if
        that final byte ended it; -1 if the text ends first. One too long to draw with is
        skipped to its end (``skip``); one broken off by any other character is dropped,
        and that character is taken afresh."""
        m = pattern.match(text, body)
        assert m is not None  # it matches the empty string
        end = m.end()
        if end - i > CSI_MAX:
            self._state = skip
            return end, None
        if end == len(text):
            return -1, None
        if lowest <= text[end] <= "\x7e":
            return end + 1, m
        return end, None

    def _csi(self, params: str, inter: str, final: str) -> str:
        """The CSI to send for one the program sent: itself, a part of it, or nothing."""
        prefix = ""
        if params[:1] in ("<", "=", ">", "?"):
            prefix, params = params[0], params[1:]
        if inter:
            if inter == " " and final == "q" and not prefix and _PARAMS.fullmatch(params):
                self._touched.add("shape")
                return f"\x1b[{params} q"  # DECSCUSR: the cursor's shape
            if inter == "!" and final == "p" and not prefix and not params:
                return self._soft_reset(every_mode=False)  # DECSTR
            return ""
        if final == "m":
            return _sgr(params) if not prefix and _SGR_PARAMS.fullmatch(params) else ""
        if not _PARAMS.fullmatch(params):
            return ""
        if final in "hl":
            return self._modes(prefix, params, final)
        if prefix or final not in _CSI_FINALS:
            return ""
        if final == "b":  # REP, at most a line of the terminal
            if ";" in params:
                return ""
            return f"\x1b[{min(max(int(params or 0), 1), self.columns)}b"
        if final == "J" and params.lstrip("0") not in ("", "1", "2"):
            return ""  # ED 3 erases the person's own scrollback
        if final == "r":
            self._touched.add("margins")
        return f"\x1b[{params}{final}"

    def _modes(self, prefix: str, params: str, final: str) -> str:
        if prefix not in ("", "?"):
            return ""
        kept: list[str] = []
        alternate = ""
        for p in params.split(";"):
            if not p:
                continue
            mode = int(p)
            if (mode in _ANSI_MODES) if prefix == "" else (mode in _PRIVATE_MODES):
                kept.append(str(mode))
                self._touched.add(prefix + str(mode))
            elif prefix == "?" and mode in _ALTERNATE_MODES:
                if self.alternate:
                    kept.append(str(mode))
                    self.in_alternate = final == "h"
                else:
                    alternate = self._in_place(mode, final)
        sent = f"\x1b[{prefix}{';'.join(kept)}{final}" if kept else ""
        return sent + alternate

    def restore(self) -> str:
        """What puts back, once the view ends, everything the program changed that
        outlives it on the terminal: its modes, keypad, cursor shape, charset, margins
        (the cursor then goes to the last line, as DECSTBM homes it) and alternate
        screen; and colours and a visible cursor always."""
        parts = ["\x1b[0m"]
        for key in sorted(self._touched):
            if key[0] in "?0123456789" and key != "?25":
                parts.append(f"\x1b[{key}{'h' if key in _DEFAULT_ON else 'l'}")
        if "keypad" in self._touched:
            parts.append("\x1b>")
        if "shape" in self._touched:
            parts.append("\x1b[0 q")
        if "charset" in self._touched:
            parts.append("\x1b(B\x1b)B")
        if "margins" in self._touched or "?6" in self._touched:
            parts.append("\x1b[r")
            if not self.in_alternate:
                parts.append("\x1b[9999;1H\r\n")
        if self.in_alternate:
            parts.append("\x1b[?1049l")
        parts.append("\x1b[?25h")
        return "".join(parts)

    def _soft_reset(self, every_mode: bool) -> str:
        """DECSTR's resets, or with ``every_mode`` RIS's, which also ends the program's
        mouse reports, alternate screen and the rest; origin mode and margins only if
        the program set them, as resetting them homes the cursor."""
        parts = [_SOFT_RESET]
        if every_mode:
            for key in sorted(self._touched):
                if key.startswith("?") and key not in _DEFAULT_ON and key != "?6":
                    parts.append(f"\x1b[{key}l")
            if "shape" in self._touched:
                parts.append("\x1b[0 q")
            if self.in_alternate:
                parts.append("\x1b[?1049l")
                self.in_alternate = False
        if "margins" in self._touched or "?6" in self._touched:
            # Both home the cursor. There, with the defaults just set, save it: the pane's
            # reset leaves nothing saved, and its DECRC then goes home with the defaults.
            parts.append("\x1b[?6l\x1b[r\x1b7")
        return "".join(parts)

    def _in_place(self, mode: int, final: str) -> str:
        """The program's alternate screen, on a view that is itself one: entering clears
        it (saving the cursor for 1049); leaving clears it too, and asks for a repaint of
        the primary screen the program returned to."""
        if final == "h":
            return "\x1b7\x1b[2J" if mode == 1049 else "\x1b[2J"
        self.repaint_wanted = True
        return "\x1b[2J\x1b8" if mode == 1049 else "\x1b[2J"


# SGR values that only draw: attributes and their ends, the 8 and 16 colours and their
# defaults, overline, the underline colour's default; and the colour forms, checked below.
_SGR_DRAWS = frozenset(
    (
        *range(10),
        *range(21, 38),
        39,
        *range(40, 48),
        49,
        53,
        55,
        59,
        *range(90, 98),
        *range(100, 108),
    )
)
_COLOURS = (38, 48, 58)


def _number(item: str) -> int | None:
    """An SGR item's number; None for one of more than three digits (leading zeros
    aside), which the Linux console would wrap, and for one that is not a number at
    all (``38;5;:``: a colon where the number belongs)."""
    if item and not item.isdigit():
        return None
    return int(item or 0) if len(item.lstrip("0")) <= 3 else None


def _byte(item: str) -> bool:
    n = _number(item)
    return n is not None and n <= 255


def _sgr(params: str) -> str:
    """SGR with only values that draw. Others are dropped (fonts 10-19 make the Linux
    console obey C1 inside UTF-8 text again, and SGR 0 does not end that), and so is all
    that follows a colour form the Linux console would misread (an unknown 58, missing
    or out-of-range arguments, which it takes as SGRs themselves; huge numbers wrap)."""
    items = params.split(";")
    kept: list[str] = []
    i = 0
    while i < len(items):
        item = items[i]
        if ":" in item:  # ITU colours and underline styles; the console ignores them
            head, *rest = item.split(":")
            if _number(head) in (*_COLOURS, 4) and all(map(_byte, rest)):
                kept.append(item)
            i += 1
            continue
        n = _number(item)
        if n in _COLOURS:
            kind = _number(items[i + 1]) if i + 1 < len(items) else None
            take = {5: 3, 2: 5}.get(kind or 0, 0)
            args = items[i + 2 : i + take]
            if n == 58 or not take or len(args) != take - 2 or not all(map(_byte, args)):
                break
            kept.extend(items[i : i + take])
            i += take
            continue
        if n in _SGR_DRAWS:
            kept.append(item)
        i += 1
    return f"\x1b[{';'.join(kept)}m" if kept else ""


_NORMAL, _STRING, _SKIP, _SKIP_ESC = range(4)

__all__ = ["CSI_MAX", "TermGuard"]
