"""OSC 133 (C, D[;exit]) and OSC 7501 (state=<word>) observation in a pane's output.

These are untrusted observations: the scanner only reports them, with the stream offset
just past each marker. Markers may be split across reads at any byte; an unterminated
sequence is carried (bounded) into the next read. Must not import ``venomx``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_MARKER = re.compile(
    rb"\x1b\](?:133;(C)|133;(D)(?:;(\d{1,9}))?|7501;state=([A-Za-z0-9_.:-]{0,64}))"
    rb"(?:\x07|\x1b\\)"
)
_TERMINATOR = re.compile(rb"\x07|\x1b\\")
MAX_CARRY = 256


@dataclass(frozen=True)
class Observation:
    """A shell-integration marker (OSC 133) or a status the program reported."""

    what: str  # "started" | "finished" | "status"
    offset: int
    exit_code: int | None = None
    state: str | None = None


class Scanner:
    """Feed every output chunk in order; get the markers completed by it."""

    def __init__(self) -> None:
        self._carry = b""

    def feed(self, data: bytes, offset_after: int) -> list[Observation]:
        if b"\x1b" not in data and not self._carry:
            return []
        buf = self._carry + data
        base = offset_after - len(buf)
        found = []
        for m in _MARKER.finditer(buf):
            at = base + m.end()
            if m.group(1):
                found.append(Observation("started", at))
            elif m.group(2):
                code = m.group(3)
                found.append(Observation("finished", at, int(code) if code else None))
            else:
                word = m.group(4).decode("ascii")
                found.append(Observation("status", at, state=word or None))
        start = buf.rfind(b"\x1b]", max(0, len(buf) - MAX_CARRY))
        if start != -1 and not _TERMINATOR.search(buf, start):
            self._carry = buf[start:]
        elif buf.endswith(b"\x1b"):
            self._carry = b"\x1b"
        else:
            self._carry = b""
        return found
