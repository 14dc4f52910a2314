"""Every daemon<->sentinel message, and the msgpack framing they travel in.

One module, one version: both sides import it, and ``PROTOCOL_VERSION`` changes with any
message. Daemon->sentinel kinds are 1-31, sentinel->daemon kinds are 32-63. ``decode``
raises ``ProtocolError`` for anything malformed, never ``KeyError`` or ``TypeError``.
Must not import ``venomx``.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from enum import IntEnum
from typing import Any, ClassVar

import msgpack

PROTOCOL_VERSION = 2
# The fork server takes at most this many channel fds (sentinels) per request.
FORK_BATCH_MAX = 8
# Process titles, which doctor reads: a sentinel is a spare from birth until SPAWN.
SENTINEL_TITLE = "venomx-sentinel "
SPARE_TITLE = SENTINEL_TITLE + "(spare)"


class ProtocolError(ValueError):
    """A frame that is not a valid message of this protocol version."""


class Kind(IntEnum):
    # daemon -> sentinel
    SPAWN = 1
    RELEASE = 2
    ABORT = 3
    INPUT = 4
    RESIZE = 5
    SIGNAL = 6
    STREAM = 7
    CAPTURE = 8
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


@dataclass(frozen=True)
class Message:
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
    KIND: ClassVar[Kind] = Kind.INPUT
    data: bytes


@dataclass(frozen=True)
class Resize(Message):
    KIND: ClassVar[Kind] = Kind.RESIZE
    cols: int
    rows: int


@dataclass(frozen=True)
class Signal(Message):
    """Send these signals, in order, to the leader's process group while it is pinned."""

    KIND: ClassVar[Kind] = Kind.SIGNAL
    signals: list[int]


@dataclass(frozen=True)
class Stream(Message):
    """Start (with a repaint tagged ``req``) or stop forwarding PTY output."""

    KIND: ClassVar[Kind] = Kind.STREAM
    on: bool
    req: int = 0


@dataclass(frozen=True)
class Capture(Message):
    KIND: ClassVar[Kind] = Kind.CAPTURE
    req: int
    epoch: int | None
    start: int | None
    end: int | None
    limit: int


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
    KIND: ClassVar[Kind] = Kind.ROWS
    req: int
    result: dict[str, Any] = field(default_factory=dict)
    error: dict[str, Any] | None = None


@dataclass(frozen=True)
class Screen(Message):
    """Repaint for a new attach: bytes that draw the current screen, at ``offset``."""

    KIND: ClassVar[Kind] = Kind.SCREEN
    req: int
    cols: int
    rows: int
    offset: int
    data: bytes


@dataclass(frozen=True)
class Exit(Message):
    """The leader was reaped after the group sweep and the drain; final state follows."""

    KIND: ClassVar[Kind] = Kind.EXIT
    status: int
    exit_code: int | None
    signal: int | None
    offset: int
    state: dict[str, Any]


@dataclass(frozen=True)
class Resized(Message):
    KIND: ClassVar[Kind] = Kind.RESIZED
    cols: int
    rows: int
    epoch: int


MESSAGES: dict[int, type[Message]] = {
    cls.KIND: cls
    for cls in (Spawn, Release, Abort, Input, Resize, Signal, Stream, Capture, Hello, Ready,
                Started, Failed, Output, Marker, Rows, Screen, Exit, Resized)
}


def encode(msg: Message) -> bytes:
    """One msgpack array: the kind, then the fields in declaration order."""
    values = [getattr(msg, f.name) for f in dataclasses.fields(msg)]
    data: bytes = msgpack.packb([int(msg.KIND), *values], use_bin_type=True)
    return data


def decode(obj: object) -> Message:
    """Build the message an unpacked frame describes, or raise ``ProtocolError``."""
    if not isinstance(obj, (list, tuple)) or not obj or not isinstance(obj[0], int):
        raise ProtocolError("frame is not [kind, fields...]")
    cls = MESSAGES.get(obj[0])
    if cls is None:
        raise ProtocolError(f"unknown message kind {obj[0]}")
    fields = dataclasses.fields(cls)
    values = list(obj[1:])
    required = sum(1 for f in fields if f.default is dataclasses.MISSING
                   and f.default_factory is dataclasses.MISSING)
    if not required <= len(values) <= len(fields):
        raise ProtocolError(f"{cls.__name__} takes {len(fields)} fields, got {len(values)}")
    try:
        return cls(*values)
    except TypeError as exc:  # pragma: no cover - arity is checked above
        raise ProtocolError(str(exc)) from None


class Decoder:
    """Incremental frame reader: feed bytes, get whole messages in order."""

    def __init__(self, max_buffer: int = 256 * 1024 * 1024) -> None:
        self._unpacker = msgpack.Unpacker(raw=False, max_buffer_size=max_buffer,
                                          strict_map_key=False)

    def feed(self, data: bytes) -> list[Message]:
        try:
            self._unpacker.feed(data)
            return [decode(obj) for obj in self._unpacker]
        except ProtocolError:
            raise
        except Exception as exc:  # msgpack raises several unrelated types
            raise ProtocolError(f"undecodable frame: {exc.__class__.__name__}") from None
