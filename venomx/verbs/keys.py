"""Key names for pane.send ``keys`` (tmux-style names) and the bytes they send."""

from __future__ import annotations

import re

from venomx.wire import VenomxError

NAMED = {
    "Enter": b"\r",
    "Tab": b"\t",
    "BTab": b"\x1b[Z",
    "Escape": b"\x1b",
    "Space": b" ",
    "BSpace": b"\x7f",
    "Backspace": b"\x7f",
    "Up": b"\x1b[A",
    "Down": b"\x1b[B",
    "Right": b"\x1b[C",
    "Left": b"\x1b[D",
    "Home": b"\x1b[H",
    "End": b"\x1b[F",
    "PageUp": b"\x1b[5~",
    "PPage": b"\x1b[5~",
    "PageDown": b"\x1b[6~",
    "NPage": b"\x1b[6~",
    "Insert": b"\x1b[2~",
    "IC": b"\x1b[2~",
    "Delete": b"\x1b[3~",
    "DC": b"\x1b[3~",
    "F1": b"\x1bOP",
    "F2": b"\x1bOQ",
    "F3": b"\x1bOR",
    "F4": b"\x1bOS",
    "F5": b"\x1b[15~",
    "F6": b"\x1b[17~",
    "F7": b"\x1b[18~",
    "F8": b"\x1b[19~",
    "F9": b"\x1b[20~",
    "F10": b"\x1b[21~",
    "F11": b"\x1b[23~",
    "F12": b"\x1b[24~",
}
CTRL_SPECIAL = {"@": 0, "[": 27, "\\": 28, "]": 29, "^": 30, "_": 31, "Space": 0, "?": 127}
# What the cursor keys send while the program has application cursor keys on (DECCKM,
# ``CSI ? 1 h``; ncurses' keypad mode for xterm-256color, whose kcuu1 is ESC O A), as
# xterm and tmux send them.
APPLICATION = {
    "Up": b"\x1bOA",
    "Down": b"\x1bOB",
    "Right": b"\x1bOC",
    "Left": b"\x1bOD",
    "Home": b"\x1bOH",
    "End": b"\x1bOF",
}


METAS = re.compile(r"(?:M-)*")


def encode_key(name: str, application: bool = False) -> bytes | None:
    """A key name's bytes: each leading ``M-`` adds an ESC to what the rest sends (counted,
    not recursed, so that a megabyte of ``M-`` costs its length once)."""
    metas = METAS.match(name).end() // 2  # type: ignore[union-attr]
    if metas and 2 * metas == len(name):  # the last "M-" is the key itself
        metas -= 1
    key = one_key(name[2 * metas :], application)
    return b"\x1b" * metas + key if key is not None else None


def one_key(name: str, application: bool) -> bytes | None:
    if application and name in APPLICATION:
        return APPLICATION[name]
    if name in NAMED:
        return NAMED[name]
    if name.startswith("C-") and len(name) > 2:
        k = name[2:]
        if len(k) == 1 and k.isascii() and k.isalpha():
            return bytes([ord(k.lower()) - 96])
        if k in CTRL_SPECIAL:
            return bytes([CTRL_SPECIAL[k]])
        return None
    if len(name) == 1 and not "\ud800" <= name <= "\udfff":  # a lone surrogate is no key
        return name.encode("utf-8")
    return None


def encode_keys(keys: list[str], application: bool = False) -> bytes:
    out = bytearray()
    for i, name in enumerate(keys):
        b = encode_key(name, application)
        if b is None:
            raise VenomxError(
                "invalid_params.input",
                f"unknown key name {name[:32]}",
                {"param": "keys", "reason": "unknown_key", "index": i},
            )
        out += b
    return bytes(out)
