"""Every daemon<->sentinel message, and the framing they travel in (a length, then msgpack).

One module, one version: both sides import it, and ``PROTOCOL_VERSION`` changes with any
message. Daemon->sentinel kinds are 1-31, sentinel->daemon kinds are 32-63. ``decode``
raises ``ProtocolError`` for anything malformed, never ``KeyError`` or ``TypeError``.
Must not import ``venomx``.
"""

from __future__ import annotations

import dataclasses
import os
import struct
import types
import typing
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import IntEnum
from typing import Any, ClassVar

import msgpack

PROTOCOL_VERSION = 12
REPLAY_BYTES = 262144  # the latest output a sentinel holds for an attach that resumes
# The fork server takes at most this many channel fds (sentinels) per request.
FORK_BATCH_MAX = 8
# Process titles, which doctor reads: a sentinel is a spare from birth until SPAWN.
SENTINEL_TITLE = "venomx-sentinel "
SPARE_TITLE = SENTINEL_TITLE + "(spare)"
# A fork server's reserve (workers.forkserver.keep_reserve), and what it reports to the
# daemon when it has made the next fork server: its own pid, its intermediate's and the
# new one's.
FORKSERVER_TITLE = "venomx-forkserver"
RESERVE_TITLE = FORKSERVER_TITLE + " (reserve)"
RESERVE_REPORT = struct.Struct("qqq")
# The daemon's word to the new fork server, once it has read that report.
TAKE_OVER = b"G"


class ProtocolError(ValueError):
    """A frame that is not a valid message of this protocol version."""


class Kind(IntEnum):
    """The frame type of each message, first in its msgpack array."""

    # daemon -> sentinel
    SPAWN = 1
    RELEASE = 2
    ABORT = 3
    INPUT = 4
    RESIZE = 5
    # 6 was SIGNAL: the daemon signals a pane's group itself
    STREAM = 7
    CAPTURE = 8
    PING = 9
    FREEZE = 10
    # sentinel -> daemon
    HELLO = 32
    READY = 33
    STARTED = 34
    FAILED = 35
    OUTPUT = 36
    MARKER = 37
    ROWS = 38
    SCREEN = 39
    EXIT = 40
    RESIZED = 41
    WROTE = 42
    PONG = 43
    KEYPAD = 44


@dataclass(frozen=True)
class Message:
    """A frame between the daemon and a sentinel."""

    KIND: ClassVar[Kind]


@dataclass(frozen=True)
class Spawn(Message):
    """Open the PTY and prepare the leader; nothing runs until RELEASE."""

    KIND: ClassVar[Kind] = Kind.SPAWN
    pane: str
    argv: list[str]
    env: dict[str, str]
    cwd: str
    cols: int
    rows: int
    scrollback: int
    release: bool = False  # start at once: the daemon has nothing to wait for
    # The pane's cgroup directory, which the leader must be in before exec, and the one
    # the sentinel returns to after spawning it (both None without cgroups).
    cgroup: str | None = None
    cgroup_home: str | None = None
    eof: bool = False  # the terminal gives every read end of file (``leader.end_of_file``)


@dataclass(frozen=True)
class Release(Message):
    """Release the child-start barrier: start the leader now."""

    KIND: ClassVar[Kind] = Kind.RELEASE


@dataclass(frozen=True)
class Abort(Message):
    """Roll back before the barrier: exit without starting anything."""

    KIND: ClassVar[Kind] = Kind.ABORT


@dataclass(frozen=True)
class Input(Message):
    """Write ``data`` to the PTY; answered by WROTE ``req``. What is not written by
    ``until_ms`` (CLOCK_MONOTONIC, which both sides share) is dropped, never written late."""

    KIND: ClassVar[Kind] = Kind.INPUT
    data: bytes
    req: int
    until_ms: int


@dataclass(frozen=True)
class Resize(Message):
    """Resize the PTY; answered by RESIZED with the new epoch."""

    KIND: ClassVar[Kind] = Kind.RESIZE
    cols: int
    rows: int
    req: int


@dataclass(frozen=True)
class Stream(Message):
    """Start (with a repaint tagged ``req``) or stop forwarding PTY output. ``after`` ≥ 0
    asks for the held output after that offset instead of the repaint (SCREEN ``replay``)."""

    KIND: ClassVar[Kind] = Kind.STREAM
    on: bool
    req: int = 0
    after: int = -1


@dataclass(frozen=True)
class Freeze(Message):
    """The pane is terminating and its input frozen (foundation §9): what is still queued
    is dropped, each INPUT answered by WROTE with what it wrote, and nothing more written."""

    KIND: ClassVar[Kind] = Kind.FREEZE


@dataclass(frozen=True)
class Capture(Message):
    """Read rows of the live terminal; answered by ROWS."""

    KIND: ClassVar[Kind] = Kind.CAPTURE
    req: int
    epoch: int | None
    start: int | None
    end: int | None
    limit: int


@dataclass(frozen=True)
class Ping(Message):
    """Answer PONG ``req`` at once: doctor's proof that the sentinel is responsive."""

    KIND: ClassVar[Kind] = Kind.PING
    req: int


@dataclass(frozen=True)
class Hello(Message):
    """First frame from a new sentinel: who it is."""

    KIND: ClassVar[Kind] = Kind.HELLO
    pid: int
    version: int = PROTOCOL_VERSION


@dataclass(frozen=True)
class Ready(Message):
    """PTY open; the barrier is held."""

    KIND: ClassVar[Kind] = Kind.READY


@dataclass(frozen=True)
class Started(Message):
    """Exec succeeded; ``pid`` is the leader (and its process group)."""

    KIND: ClassVar[Kind] = Kind.STARTED
    pid: int


@dataclass(frozen=True)
class Failed(Message):
    """Exec (or preparation) failed with this errno name; the sentinel exits next."""

    KIND: ClassVar[Kind] = Kind.FAILED
    errno: str


@dataclass(frozen=True)
class Output(Message):
    """Output bytes for attach streams, with the offset after them."""

    KIND: ClassVar[Kind] = Kind.OUTPUT
    data: bytes
    offset: int


@dataclass(frozen=True)
class Marker(Message):
    """An OSC 133/7501 observation: ``what`` is started, finished or status."""

    KIND: ClassVar[Kind] = Kind.MARKER
    what: str
    offset: int
    exit_code: int | None = None
    state: str | None = None


@dataclass(frozen=True)
class Rows(Message):
    """The answer to CAPTURE: rows, or an epoch conflict."""

    KIND: ClassVar[Kind] = Kind.ROWS
    req: int
    result: dict[str, Any] = field(default_factory=dict)
    error: dict[str, Any] | None = None


@dataclass(frozen=True)
class Screen(Message):
    """Repaint for a new attach: bytes that draw the current screen, at ``offset``; with
    ``replay``, instead the output bytes that end at ``offset`` (STREAM's ``after``)."""

    KIND: ClassVar[Kind] = Kind.SCREEN
    req: int
    cols: int
    rows: int
    offset: int
    data: bytes
    replay: bool = False


_SNAPSHOT_INTS = ("epoch", "offset", "cols", "rows", "oldest", "dropped")
_SNAPSHOT_KEYS = frozenset({"screen", *_SNAPSHOT_INTS, "history", "lines", "cursor"})
_STR = frozenset({str})
_SCREENS = ("primary", "alternate")


def _all_str(items: list[Any]) -> bool:
    return {*map(type, items)} <= _STR  # a third faster than all(...) over 10,000 rows


def snapshot_ok(d: object) -> bool:
    """Whether ``d`` is a final terminal state ``workers.vt.Snapshot.from_dict`` can read:
    exactly its keys, each of its type, a known screen, one text row per screen row.

    One pass over the rows and nothing per character: an EXIT may carry 10,000+ rows.
    """
    if type(d) is not dict or not _SNAPSHOT_KEYS <= d.keys() <= _SNAPSHOT_KEYS | {"widths"}:
        return False
    if d["screen"] not in _SCREENS:
        return False
    for key in _SNAPSHOT_INTS:
        v = d[key]
        if type(v) is not int or v < 0:
            return False
    history, lines, cursor = d["history"], d["lines"], d["cursor"]
    return (
        type(history) is list
        and type(lines) is list
        and len(lines) == d["rows"]
        and type(cursor) is list
        and len(cursor) == 2
        and type(cursor[0]) is int
        and type(cursor[1]) is int
        and _all_str(history)
        and _all_str(lines)
        and ("widths" not in d or _widths_ok(d))
    )


def _widths_ok(d: dict[str, Any]) -> bool:
    """``widths``, when EXIT sends it: one int per history row, each at most what padding
    that row to ``cols`` cells could make of it (reading a row allocates its width)."""
    widths, history, cols = d["widths"], d["history"], d["cols"]
    return (
        type(widths) is list
        and len(widths) == len(history)
        and {*map(type, widths)} <= {int}
        and all(0 <= w <= len(h) + cols for w, h in zip(widths, history, strict=True))
    )


# A resource usage: exactly these keys, each an integer in 0..USAGE_MAX (the largest
# integer every JSON reader keeps exact).
USAGE_KEYS = frozenset({"cpu_ms", "max_rss_kib"})
USAGE_MAX = 2**53 - 1


def usage(utime_us: int, stime_us: int, maxrss_kib: int) -> dict[str, int]:
    """A usage from a wait's ``rusage``: user+system CPU in whole milliseconds (rounded
    down) and the largest resident set in KiB (Linux's ``ru_maxrss`` unit)."""
    return {
        "cpu_ms": min(USAGE_MAX, max(0, utime_us + stime_us) // 1000),
        "max_rss_kib": min(USAGE_MAX, max(0, maxrss_kib)),
    }


def wait_status(info: os.waitid_result | None) -> int:
    """The wait status a reap gives (``wait4``'s), from a ``waitid`` of the same child."""
    if info is None:  # pragma: no cover - only called once the child has exited
        return 0
    if info.si_code == os.CLD_EXITED:
        return (info.si_status & 0xFF) << 8
    return info.si_status | (0x80 if info.si_code == os.CLD_DUMPED else 0)


def usage_ok(u: object) -> bool:
    """Whether ``u`` is absent (None) or a usage as ``usage`` builds it."""
    if u is None:
        return True
    if type(u) is not dict or u.keys() != USAGE_KEYS:
        return False
    return all(type(v) is int and 0 <= v <= USAGE_MAX for v in u.values())


@dataclass(frozen=True)
class Exit(Message):
    """The leader exited (``status``: its wait status, from the sentinel's own ``waitid``
    on the child it started) and the PTY was drained: the pane's final terminal state,
    and what the leader used (``usage``, from the same zombie; None when the kernel did
    not say). The sentinel reaps the leader only after the daemon has closed the channel."""

    KIND: ClassVar[Kind] = Kind.EXIT
    status: int
    state: dict[str, Any] = field(metadata={"check": snapshot_ok, "type": "a terminal state"})
    usage: dict[str, int] | None = field(
        default=None, metadata={"check": usage_ok, "type": "a resource usage"}
    )
    # The pane's last output bytes (at most REPLAY_BYTES), ending at the final offset:
    # an attach that resumes after an offset (``venomx exec``'s, which may only begin
    # once the pane has ended) still gets bytes, not rows.
    replay: bytes = b""
    # When the sentinel saw the exit (CLOCK_MONOTONIC, which both sides share, in ns; 0:
    # unknown): a deadline is decided by it, not by when the daemon got to the exit.
    ended_ns: int = 0


@dataclass(frozen=True)
class Resized(Message):
    """The answer to RESIZE, also sent when the size changed."""

    KIND: ClassVar[Kind] = Kind.RESIZED
    cols: int
    rows: int
    epoch: int
    req: int


@dataclass(frozen=True)
class Wrote(Message):
    """INPUT ``req`` is done: ``written`` of its bytes reached the PTY, the rest dropped."""

    KIND: ClassVar[Kind] = Kind.WROTE
    req: int
    written: int


@dataclass(frozen=True)
class Pong(Message):
    """The answer to PING."""

    KIND: ClassVar[Kind] = Kind.PONG
    req: int


@dataclass(frozen=True)
class Keypad(Message):
    """The program turned application cursor keys (DECCKM) on or off: the arrow keys
    ``pane.send`` types are then ``ESC O A`` rather than ``ESC [ A``."""

    KIND: ClassVar[Kind] = Kind.KEYPAD
    cursor: bool


MESSAGES: dict[int, type[Message]] = {
    cls.KIND: cls
    for cls in (
        Spawn,
        Release,
        Abort,
        Input,
        Resize,
        Stream,
        Capture,
        Ping,
        Freeze,
        Hello,
        Ready,
        Started,
        Failed,
        Output,
        Marker,
        Rows,
        Screen,
        Exit,
        Resized,
        Wrote,
        Pong,
        Keypad,
    )
}


# Per class: its kind as a plain int and its field names in declaration order, found once
# at import (in the fork server) instead of by reflection in every sentinel, where each
# path run for the first time copies the pages it touches.
LAYOUT: dict[type[Message], tuple[int, tuple[str, ...]]] = {
    cls: (int(cls.KIND), tuple(f.name for f in dataclasses.fields(cls)))
    for cls in MESSAGES.values()
}


# One packer per process, made at import: ``msgpack.packb`` builds a Packer, and
# allocates its 256 KiB buffer, for every message. Not thread-safe; the daemon encodes on
# its reactor only, and a sentinel has one thread. A packer's buffer grows to its largest
# message and never shrinks, so one that packed more than KEEP is replaced.
def _packer() -> msgpack.Packer:
    return msgpack.Packer(use_bin_type=True)


PACKER = _packer()
KEEP = 256 * 1024
HEADER = 4  # a frame's length prefix


def encode(msg: Message) -> bytes:
    """One frame: the body's length (``HEADER`` bytes, big-endian), then the body, one
    msgpack array of the kind and the fields in declaration order."""
    global PACKER
    kind, names = LAYOUT[type(msg)]
    body: bytes = PACKER.pack([kind, *[getattr(msg, n) for n in names]])
    if len(body) > KEEP:
        PACKER = _packer()
    return len(body).to_bytes(HEADER, "big") + body


Check = Callable[[object], bool]


def _check(hint: Any) -> Check:
    """A predicate for values of the annotated type, as msgpack delivers them: exact
    types, so a bool is no int and a float no int."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin is types.UnionType and len(args) == 2 and args[1] is type(None):
        inner = _check(args[0])
        return lambda v: v is None or inner(v)
    if hint in (int, bool, str, bytes):
        return lambda v: type(v) is hint
    if origin is list and args in ((int,), (str,)):
        only = frozenset(args)
        return lambda v: type(v) is list and {*map(type, v)} <= only
    if origin is dict and args == (str, str):
        return lambda v: (
            type(v) is dict and all(type(k) is str and type(x) is str for k, x in v.items())
        )
    if origin is dict and args == (str, Any):
        return lambda v: type(v) is dict and all(type(k) is str for k in v)
    raise TypeError(f"no wire check for {hint!r}")


# Per kind: the class, how many fields it needs, and (name, check, type) per field.
Shape = tuple[type[Message], int, tuple[tuple[str, Check, str], ...]]


def _name(hint: Any) -> str:
    return hint.__name__ if isinstance(hint, type) else str(hint).replace("typing.", "")


def _shape(cls: type[Message]) -> Shape:
    hints = typing.get_type_hints(cls)
    fields = dataclasses.fields(cls)
    required = sum(
        1
        for f in fields
        if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
    )
    return (
        cls,
        required,
        tuple(
            (
                f.name,
                f.metadata.get("check") or _check(hints[f.name]),
                f.metadata.get("type") or _name(hints[f.name]),
            )
            for f in fields
        ),
    )


SHAPES: dict[int, Shape] = {kind: _shape(cls) for kind, cls in MESSAGES.items()}


def decode(obj: object) -> Message:
    """Build the message an unpacked frame describes, or raise ``ProtocolError``: the
    kind must be known, the field count fit and every field have its declared type."""
    if (type(obj) is not list and type(obj) is not tuple) or not obj:
        raise ProtocolError("frame is not [kind, fields...]")
    kind = obj[0]
    if type(kind) is not int:
        raise ProtocolError("frame is not [kind, fields...]")
    shape = SHAPES.get(kind)
    if shape is None:
        raise ProtocolError(f"unknown message kind {kind}")
    cls, required, fields = shape
    values = obj[1:]
    if not required <= len(values) <= len(fields):
        raise ProtocolError(f"{cls.__name__} takes {len(fields)} fields, got {len(values)}")
    for (name, check, expected), value in zip(fields, values, strict=False):
        if not check(value):
            raise ProtocolError(f"{cls.__name__}.{name} is not {expected}")
    return cls(*values)


MAX_FRAME = 256 * 1024 * 1024  # the largest body a Decoder accepts by default
Buffer = bytes | bytearray | memoryview


class Decoder:
    """Incremental frame reader: feed bytes, get whole messages in order.

    Frames carry their length, so a channel holds only its unfinished frame and each body
    is unpacked on its own. A msgpack ``Unpacker`` per channel instead allocated ~56 KiB
    and zeroed the ~40 KiB of its parse stack, which the daemon paid for every pane.
    After a ``ProtocolError`` the stream has no trustworthy frame boundary left: every
    later ``feed`` raises it again."""

    __slots__ = ("_broken", "_held", "_max")

    def __init__(self, max_frame: int = MAX_FRAME) -> None:
        self._held = bytearray()
        self._max = max_frame
        self._broken = ""  # why, once the stream is broken

    def feed(self, data: Buffer) -> list[Message]:
        """The messages completed by ``data``, which is not kept: what remains of an
        unfinished frame is copied. Raises only ``ProtocolError``."""
        if self._broken:
            raise ProtocolError(self._broken)
        held = self._held
        try:
            if held:
                held += data
                out, used = self._frames(held)
                del held[:used]
            else:
                out, used = self._frames(data)
                held += memoryview(data)[used:]
        except ProtocolError as exc:
            self._broken = f"after an earlier bad frame ({exc})"
            held.clear()
            raise
        return out

    def _frames(self, buf: Buffer) -> tuple[list[Message], int]:
        """The whole frames at the start of ``buf``, and the bytes they took."""
        out: list[Message] = []
        pos, end = 0, len(buf)
        with memoryview(buf) as view:
            while end - pos >= HEADER:
                size = int.from_bytes(view[pos : pos + HEADER], "big")
                if size > self._max:
                    raise ProtocolError(f"frame of {size} bytes, over {self._max}")
                stop = pos + HEADER + size
                if stop > end:
                    break
                try:
                    obj = msgpack.unpackb(
                        view[pos + HEADER : stop], raw=False, strict_map_key=False
                    )
                    out.append(decode(obj))
                except ProtocolError:
                    raise
                except Exception as exc:  # msgpack raises several unrelated types
                    raise ProtocolError(f"undecodable frame: {exc.__class__.__name__}") from None
                pos = stop
        return out, pos
