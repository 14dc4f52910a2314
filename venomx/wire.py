"""NDJSON framing and the one error type, with its class -> exit status mapping.

Shared by the daemon, the client library, the CLI and the MCP adapter; imports nothing
from the daemon.
"""

from __future__ import annotations

import json
from typing import Any

DEFAULT_MAX_FRAME = 1048576
MIN_MAX_FRAME = 4096
MAX_MAX_FRAME = 16777216
HUGE = 10**100

EXIT_CODES = {
    "internal": 1, "invalid_params": 2, "invalid_request": 2, "not_found": 3, "denied": 4,
    "conflict": 5, "unavailable": 6, "timeout": 7, "cancelled": 8, "transport": 9,
    "unsupported": 10,
}


class VenomxError(Exception):
    """An error with a stable code (``class.detail``), a message and a data object."""

    def __init__(self, code: str, message: str, data: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.data = data or {}

    def to_dict(self) -> dict[str, Any]:
        return {"code": self.code, "message": self.message, "data": self.data}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> VenomxError:
        return cls(str(d.get("code", "internal")), str(d.get("message", "")),
                   d.get("data") if isinstance(d.get("data"), dict) else {})

    @property
    def exit_code(self) -> int:
        return exit_code_for(self.code)


def exit_code_for(code: str) -> int:
    return EXIT_CODES.get(code.split(".", 1)[0], 1)


def parse_int(text: str) -> int:
    # Past CPython's digit limit an integer is simply out of every range we declare.
    if len(text.lstrip("-")) > 300:
        return -HUGE if text.startswith("-") else HUGE
    return int(text)


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def loads(data: bytes) -> Any:
    """Parse one frame; raises ValueError for anything that is not strict UTF-8 JSON."""
    try:
        text = data.decode("utf-8")
        return json.loads(text, parse_int=parse_int, parse_constant=_reject_constant)
    except (UnicodeDecodeError, RecursionError) as exc:
        raise ValueError(str(exc)) from None


def dumps(obj: Any) -> bytes:
    """Compact JSON, UTF-8, no trailing newline; NaN/Infinity are refused (not JSON).

    Text that cannot be UTF-8 (lone surrogates) is sent as ``\\u`` escapes, which is
    still valid JSON, so the receiver can judge the value instead of the frame.
    """
    text = json.dumps(obj, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:
        return json.dumps(obj, separators=(",", ":"), allow_nan=False).encode("ascii")
