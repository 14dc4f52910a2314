"""Text for a person's terminal, with its control characters shown instead of obeyed.

What the CLI prints for a person carries strings a pane's program chose (its argv0 for a
split it started, names it gave): written raw, an escape sequence among them would set
the person's clipboard (OSC 52), title or colours. Rows of output are already plain text
(the VT keeps no control characters); this is for everything else.

A terminal that does not decode UTF-8 obeys the bytes 0x80-0x9F as C1 controls, and
UTF-8 puts them inside characters (``Û`` is C3 9B: ``Ã`` and CSI), so text that goes to
one is made ASCII first (``for_terminal``; JSON escapes it instead).
"""

from __future__ import annotations

import functools
import os
import re
import sys
from collections.abc import Mapping
from typing import Any

from venomx.wire import dumps

# C0 but the newline that separates lines, DEL, and C1 (ESC's 8-bit forms)
_ESCAPED = {c: f"\\x{c:02x}" for c in (*range(0x20), 0x7F, *range(0x80, 0xA0)) if c != 0x0A}
# The explicit bidirectional embeddings, overrides and isolates: on a terminal that
# reorders text they show the rest of a line in another order than it has ("Trojan
# Source"). The marks LRM and RLM, which right-to-left text uses, stay.
_ESCAPED.update({c: f"\\u{c:04x}" for c in (*range(0x202A, 0x202F), *range(0x2066, 0x206A))})


def visible(text: str) -> str:
    """``text`` with every control character but newline written as ``\\xNN``, and the
    bidirectional overrides, embeddings and isolates as ``\\uNNNN``."""
    return text.translate(_ESCAPED)


# JSON escapes C0 itself; DEL and C1 (U+009B is CSI, U+009D OSC) it leaves as they are
_RAW_IN_JSON = re.compile("[\x7f-\x9f]")


def json_line(obj: Any) -> bytes:
    """``obj`` as the one line of compact JSON the CLI prints (on stdout), with DEL and
    C1 written as ``\\u00XX``, and all of non-ASCII when stdout is a terminal that is not
    UTF-8: the same value, and nothing a terminal would act on."""
    data = dumps(obj)
    if data.isascii() and b"\x7f" not in data:
        return data
    text = data.decode()
    if ascii_terminal(sys.stdout):
        return _NON_ASCII.sub(_json_escapes, text).encode()
    return json_controls(text).encode()


def json_controls(text: str) -> str:
    """JSON text with DEL and C1 written as ``\\u00XX`` (JSON escapes C0 itself): the
    same value, with nothing in it that a terminal showing it would obey."""
    return text if _RAW_IN_JSON.search(text) is None else _RAW_IN_JSON.sub(_json_escapes, text)


def _json_escapes(m: re.Match[str]) -> str:
    units = m.group().encode("utf-16-be", "surrogatepass")
    return "".join(f"\\u{units[i]:02x}{units[i + 1]:02x}" for i in range(0, len(units), 2))


_NON_ASCII = re.compile("[^\x00-\x7f]+")
_LOCALE = ("LC_ALL", "LC_CTYPE", "LANG")


@functools.cache
def utf8_locale() -> bool:
    """Whether the person's terminal decodes UTF-8, judged as tmux judges it: by the name
    of the locale (LC_ALL, else LC_CTYPE, else LANG) this process was started with, which
    must say UTF-8. A question to the terminal would be answered as typing."""
    started = _started_with()
    for name in _LOCALE:
        value = started.get(name, "").lower()
        if value:
            return "utf-8" in value or "utf8" in value
    return False


def _started_with() -> Mapping[str, str]:
    """The locale of the environment this process was started with. Python replaces a C
    locale's LC_CTYPE with C.UTF-8 in ``os.environ`` (PEP 538, with PYTHONUTF8 set too);
    Linux keeps the original in /proc/self/environ, and elsewhere a C.UTF-8 LC_CTYPE is
    not taken as the person's."""
    try:
        with open("/proc/self/environ", "rb") as f:
            raw = f.read()
    except OSError:
        env = {name: os.environ.get(name, "") for name in _LOCALE}
        if env["LC_CTYPE"] == "C.UTF-8":
            env["LC_CTYPE"] = ""
        return env
    started = {}
    for item in raw.split(b"\0"):
        name, sep, value = item.partition(b"=")
        if sep and name.decode("ascii", "replace") in _LOCALE:
            started[name.decode()] = value.decode("utf-8", "replace")
    return started


def ascii_terminal(stream: Any) -> bool:
    """Whether ``stream`` is a terminal that does not decode UTF-8."""
    try:
        return bool(stream.isatty()) and not utf8_locale()
    except (AttributeError, ValueError):  # no stream, or a closed one
        return False


def as_ascii(text: str) -> str:
    """``text`` as tmux shows it on a terminal that is not UTF-8: every other character as
    an underscore per column it takes (none for a zero-width one)."""
    if text.isascii():
        return text
    import unicodedata  # one C module (wcwidth would load forty)

    def columns(c: str) -> str:
        if unicodedata.category(c) in ("Mn", "Me", "Cf"):
            return ""  # combining marks, ZWJ, variation selectors: no column of their own
        return "__" if unicodedata.east_asian_width(c) in ("W", "F") else "_"

    return _NON_ASCII.sub(lambda m: "".join(map(columns, m.group())), text)


def for_terminal(text: str, stream: Any) -> str:
    """``text`` as ``stream`` can show it: ASCII on a terminal that is not UTF-8."""
    if text.isascii() or not ascii_terminal(stream):
        return text
    return as_ascii(text)


__all__ = [
    "as_ascii",
    "ascii_terminal",
    "for_terminal",
    "json_controls",
    "json_line",
    "utf8_locale",
    "visible",
]
