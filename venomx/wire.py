"""NDJSON framing and the one error type, with its class -> exit status mapping.

Shared by the daemon, the client library, the CLI and the MCP adapter; imports nothing
from the daemon.
"""

from __future__ import annotations

import json
import re
from typing import Any

DEFAULT_MAX_FRAME = 1048576
MIN_MAX_FRAME = 4096
MAX_MAX_FRAME = 16777216
HUGE = 10**100
INFINITY = float("inf")
# How an ``unavailable.spawn`` message begins when venomx's own side of the start failed
# (not an exec of the program): the daemon says it, the CLI tells the two apart by it.
SPAWN_OURS = "venomx could not "

EXIT_CODES = {
    "internal": 1,
    "invalid_params": 2,
    "invalid_request": 2,
    "not_found": 3,
    "denied": 4,
    "conflict": 5,
    "unavailable": 6,
    "timeout": 7,
    "cancelled": 8,
    "transport": 9,
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
        return cls(
            str(d.get("code", "internal")),
            str(d.get("message", "")),
            d.get("data") if isinstance(d.get("data"), dict) else {},
        )

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


ID_DIGITS = 20  # no counter ever gets near 10**20
ID_BEYOND = 10**ID_DIGITS


def id_number(ident: str, prefix: str) -> int | None:
    """The counter in a daemon ID (``r12`` for prefix ``r``), or None if ``ident`` is not
    one: the prefix, then ASCII digits written as the daemon writes them (no leading
    zero). Digits past ``ID_DIGITS`` name no ID that can exist: ``ID_BEYOND``, above
    every real counter, without converting thousands of digits."""
    n = ident[len(prefix) :] if ident.startswith(prefix) else ""
    if not (n.isascii() and n.isdigit()) or (n[0] == "0" and len(n) > 1):
        return None
    return int(n) if len(n) <= ID_DIGITS else ID_BEYOND


# How much of a frame over max_frame is searched for its id (at most its first max_frame
# + 1 bytes, which are all in hand when it is found too long, however it was split), and
# how many steps that search may take: a request has a handful of top-level members, so
# a frame whose id does not turn up within them is answered with null.
ID_SCAN_BYTES = 65536
ID_SCAN_STEPS = 256
_STRING = rb'"[^"\\]*+(?:\\.[^"\\]*+)*+"'
_TOKEN = re.compile(rb"[ \t\r\n]*+(?:(" + _STRING + rb')|([{}\[\]:,])|([^ \t\r\n"{}\[\]:,]++))')
# inside a nested value only brackets matter: strings and everything else are skipped
# (possessive quantifiers: a cut frame must not make the search backtrack)
_NESTED = re.compile(rb'(?:[^"{}\[\]]++|' + _STRING + rb")*+([{}\[\]])")
_INT = re.compile(rb"-?(?:0|[1-9][0-9]{0,18})")


def frame_id(prefix: bytes, max_frame: int = ID_SCAN_BYTES) -> int | None:
    """The top-level integer ``id`` of a frame too large to parse, or None when it has
    none within its first ``min(ID_SCAN_BYTES, max_frame + 1)`` bytes and
    ``ID_SCAN_STEPS`` (foundation §2: a bad frame is answered with its id, or null where
    it has none). A number cut off by the end of those bytes is no id."""
    data = prefix[: min(ID_SCAN_BYTES, max_frame + 1)]
    m = _TOKEN.match(data)
    if m is None or m.group(2) != b"{":
        return None
    pos, expect, key, steps = m.end(), "key", b"", 0
    while steps < ID_SCAN_STEPS:
        steps += 1
        m = _TOKEN.match(data, pos)
        if m is None:
            return None
        pos = m.end()
        string, delim, bare = m.groups()
        if expect == "key" and string is not None:
            key, expect = string, "colon"
        elif expect == "colon" and delim == b":":
            expect = "value"
        elif expect == "value" and delim in (b"{", b"["):
            depth = 1
            while depth:
                steps += 1
                n = _NESTED.match(data, pos)
                if n is None or depth > MAX_DEPTH or steps > ID_SCAN_STEPS:
                    return None
                pos = n.end()
                depth += 1 if n.group(1) in (b"{", b"[") else -1
            expect = "comma"
        elif expect == "value" and delim is None:
            if key == b'"id"':
                token = bare or b""
                if pos == len(data):
                    return None  # the digits may go on past what was searched
                if _INT.fullmatch(token) and -(2**63) <= int(token) < 2**63:
                    return int(token)
                return None
            expect = "comma"
        elif expect == "comma" and delim == b",":
            expect = "key"
        else:
            return None
    return None


# Deepest nesting of arrays and objects in a frame; no verb needs more than four. A value
# inside a request's params, or a config value (echoed inside replies), gets two less.
MAX_DEPTH = 64
VALUE_MAX_DEPTH = MAX_DEPTH - 2


class JsonError(ValueError):
    """Text that is not one strict UTF-8 JSON value within a nesting bound.

    ``reason`` is ``utf8``, ``syntax`` or ``depth``; the message says what is wrong.
    """

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _finite_float(text: str) -> float:
    value = float(text)
    if abs(value) == INFINITY:
        raise ValueError(f"{text[:20]} is beyond a float")
    return value


def unsendable(value: Any) -> bool:
    """Whether a param's value has no JSON text a request could carry: it nests deeper
    than a request may, or holds a NaN, which JSON cannot spell (an infinity goes as
    ``1e999`` and is judged as a number). The CLI says ``invalid_params.type`` of the
    param for such a value, as its JSON text fails to parse."""
    if isinstance(value, float):
        return value != value
    return isinstance(value, (dict, list)) and _deeper_than(value, VALUE_MAX_DEPTH, nan=True)


def _deeper_than(value: Any, limit: int, nan: bool = False) -> bool:
    """Whether ``value`` nests more than ``limit`` deep (or, with ``nan``, holds a NaN)."""
    stack = [(value, 1)]
    while stack:
        node, depth = stack.pop()
        if depth > limit:
            return True
        for child in node.values() if isinstance(node, dict) else node:
            if isinstance(child, (dict, list)):
                stack.append((child, depth + 1))
            elif nan and isinstance(child, float) and child != child:
                return True
    return False


def loads(data: bytes | str, max_depth: int = MAX_DEPTH, finite: bool = False) -> Any:
    """Parse one frame or value; raises ``JsonError`` for anything that is not strict UTF-8
    JSON (no NaN or Infinity) nested at most ``max_depth`` arrays and objects deep.

    Integers past 300 digits become out of any declared range instead of failing; numbers
    too large for a float (``1e999``) are infinite floats, which no integer param takes,
    or with ``finite`` a ``JsonError`` (the daemon never sends one).
    """
    try:
        text = data.decode("utf-8") if isinstance(data, bytes) else data
    except UnicodeDecodeError:
        raise JsonError("utf8", "not UTF-8") from None
    try:
        value = json.loads(
            text,
            parse_int=parse_int,
            parse_constant=_reject_constant,
            parse_float=_finite_float if finite else None,
        )
    except RecursionError:
        raise _too_deep(max_depth) from None
    except ValueError as exc:
        raise JsonError("syntax", f"not JSON: {exc}") from None
    # Cheap first: nesting needs at least that many brackets.
    if (
        isinstance(value, (dict, list))
        and text.count("[") + text.count("{") > max_depth
        and _deeper_than(value, max_depth)
    ):
        raise _too_deep(max_depth)
    return value


class Malformed(VenomxError):
    """``transport``: the daemon's reply is not what foundation §2 says a reply is, or
    not what its verb returns. Not our daemon's speech (or a bug of ours), so connecting
    again does not help, and it is said as an error, never as a traceback."""

    def __init__(self, what: str) -> None:
        super().__init__("transport", f"a reply venomx cannot read: {what}", {})


# What reading a reply's fields raises when the reply has another shape than its verb's.
SHAPE_ERRORS = (KeyError, TypeError, ValueError, AttributeError, IndexError, OverflowError)


class Reading:
    """A block that reads a reply's fields: what its shape makes them raise
    (``SHAPE_ERRORS``) leaves it as ``Malformed``, a transport error, never a traceback."""

    def __init__(self, what: str = "") -> None:
        self.what = what

    def __enter__(self) -> Reading:
        return self

    def __exit__(self, kind: object, exc: BaseException | None, tb: object) -> None:
        if isinstance(exc, SHAPE_ERRORS):  # said briefly: its text may quote the reply
            raise Malformed(f"{self.what}{type(exc).__name__}: {str(exc)[:200]}") from None


def reply_frame(line: bytes) -> dict[str, Any]:
    """One frame from the daemon, checked for the shape every reader of it relies on: an
    object whose ``id`` is an integer or null, with an object ``ok`` or ``item``, or an
    ``error`` object whose code is of a class of foundation §3, whose message is a string
    and whose data is an object; no number beyond a float."""
    try:
        frame = loads(line, finite=True)
    except JsonError as exc:
        raise Malformed(str(exc)) from None
    if not isinstance(frame, dict):
        raise Malformed("a frame that is not an object")
    rid = frame.get("id")
    if rid is not None and (type(rid) is not int):
        raise Malformed("an id that is not an integer")
    if "error" in frame:
        err = frame["error"]
        if not (
            isinstance(err, dict)
            and isinstance(err.get("code"), str)
            and err["code"].split(".", 1)[0] in EXIT_CODES
            and isinstance(err.get("message", ""), str)
            and isinstance(err.get("data", {}), dict)
        ):
            raise Malformed("an error that is not a code of §3, a message and a data object")
    elif "item" in frame:
        if not isinstance(frame["item"], dict):
            raise Malformed("a stream item that is not an object")
    elif not isinstance(frame.get("ok"), dict):
        raise Malformed("a result that is not an object")
    return frame


def greeting(result: dict[str, Any]) -> dict[str, Any]:
    """hello's result, checked for what a client takes from it: the daemon's source (which
    a pinned client compares) and the agreed max_frame."""
    agreed = result.get("max_frame")
    if not (
        isinstance(result.get("source"), str)
        and type(agreed) is int
        and MIN_MAX_FRAME <= agreed <= MAX_MAX_FRAME
    ):
        raise Malformed("a hello result without a source and a max_frame")
    return result


def exit_status(value: Any) -> int:
    """A result's status as the CLI exits with it: 0–255 (RFC-0015 §4); anything else is
    a reply that is not our daemon's."""
    if type(value) is not int or not 0 <= value <= 255:
        raise Malformed(f"an exit status that is not an integer 0-255 ({type(value).__name__})")
    return value


def _too_deep(max_depth: int) -> JsonError:
    return JsonError("depth", f"nested deeper than {max_depth} arrays and objects")


def dumps(obj: Any) -> bytes:
    """Compact JSON, UTF-8, no trailing newline; NaN is refused (not JSON).

    Text that cannot be UTF-8 (lone surrogates) is sent as ``\\u`` escapes, which is
    still valid JSON, so the receiver can judge the value instead of the frame. An
    infinite float, which ``loads`` makes of a number too large (``1e999``), is written
    as such a number, so it reaches the daemon and is judged there like any wrong value.
    """
    text = _json(obj, False)
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:
        return _json(obj, True).encode("ascii")


# a JSON string (skipped whole) or a non-finite number token json.dumps wrote
_NON_FINITE = re.compile(r'"(?:[^"\\]|\\.)*"|-?Infinity|NaN')


def _json(obj: Any, ascii_only: bool) -> str:
    try:
        return json.dumps(obj, separators=(",", ":"), ensure_ascii=ascii_only, allow_nan=False)
    except ValueError:
        text = json.dumps(obj, separators=(",", ":"), ensure_ascii=ascii_only, allow_nan=True)
        return _NON_FINITE.sub(_finite, text)


def _finite(m: re.Match[str]) -> str:
    token = m.group()
    if token[0] == '"':
        return token
    if token == "NaN":
        raise ValueError("NaN is not JSON")
    return token.replace("Infinity", "1e999")
