"""Sentinel messages round-trip, and decode never raises anything but ProtocolError.

The channel is not an input of the program (issue 14.2): a frame whose any field has a
type other than its declared one is a ProtocolError, never a message and never another
exception.
"""

from __future__ import annotations

import dataclasses
import typing
from typing import Any

import msgpack
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from workers import protocol as P
from workers.rows import Snapshot, blank_snapshot


def state(rows: int = 2) -> dict[str, Any]:
    return {**blank_snapshot(4, rows), "history": ["old "], "oldest": 3}


SAMPLES = [
    P.Spawn("p0", ["sh"], {"A": "b"}, "/", 80, 24, 10000),
    P.Spawn("p1", ["sh"], {}, "/", 80, 24, 0, True, "/cg/x.p1", "/cg/daemon"),
    P.Release(),
    P.Abort(),
    P.Input(b"x", 4, 123456),
    P.Resize(10, 5, 6),
    P.Stream(True, 3),
    P.Ping(8),
    P.Freeze(),
    P.Capture(1, None, 0, None, 100),
    P.Hello(42),
    P.Ready(),
    P.Started(7),
    P.Failed("ENOENT"),
    P.Output(b"\x00\xff", 2),
    P.Marker("finished", 9, 0, None),
    P.Rows(1, {"a": 1}, None),
    P.Screen(1, 80, 24, 0, b"x"),
    P.Exit(256, state(), {"cpu_ms": 12, "max_rss_kib": 3456}),
    P.Resized(1, 2, 3, 6),
    P.Wrote(4, 1),
    P.Pong(8),
    P.Keypad(True),
]
BY_CLASS = {type(m): m for m in SAMPLES}


def frame(msg: P.Message) -> list[Any]:
    """The frame's body as the peer's unpacker hands it to decode."""
    out: list[Any] = msgpack.unpackb(P.encode(msg)[P.HEADER :], raw=False, strict_map_key=False)
    return out


def framed(body: bytes) -> bytes:
    """Any body, framed as ``encode`` frames a message's."""
    return len(body).to_bytes(P.HEADER, "big") + body


def test_every_kind_has_a_sample() -> None:
    assert {type(m) for m in SAMPLES} == set(P.MESSAGES.values())


@pytest.mark.parametrize("msg", SAMPLES, ids=lambda m: type(m).__name__)
def test_round_trip(msg: P.Message) -> None:
    dec = P.Decoder()
    data = P.encode(msg)
    out = []
    for i in range(len(data)):  # byte by byte: framing survives any split
        out += dec.feed(data[i : i + 1])
    assert out == [msg]
    assert dataclasses.asdict(out[0]) == dataclasses.asdict(msg)


def test_optional_fields_round_trip_set_and_unset() -> None:
    for msg in (
        P.Capture(1, 2, 3, 4, 5),
        P.Marker("status", 1, None, "busy"),
        P.Rows(2, {}, {"code": "x"}),
        P.Spawn("p", [], {}, "/", 1, 1, 0, True),
        P.Stream(False),
        P.Hello(1, P.PROTOCOL_VERSION),
        P.Exit(0, state(), None),
        P.Exit(0, state(), P.usage(0, 0, 0)),
        P.Exit(0, state(), {"cpu_ms": P.USAGE_MAX, "max_rss_kib": P.USAGE_MAX}),
    ):
        assert P.decode(frame(msg)) == msg


def test_trailing_defaults_may_be_omitted() -> None:
    assert P.decode([int(P.Kind.STREAM), True]) == P.Stream(True, 0)
    assert P.decode([int(P.Kind.HELLO), 5]) == P.Hello(5, P.PROTOCOL_VERSION)
    assert P.decode([int(P.Kind.EXIT), 0, state()]) == P.Exit(0, state(), None)


def test_a_real_exit_state_is_accepted_and_readable() -> None:
    from workers.vt import Terminal

    term = Terminal(20, 3, 100)
    term.feed(b"".join(b"line %d\r\n" % i for i in range(50)))
    msg = P.decode(frame(P.Exit(0, term.snapshot())))
    assert isinstance(msg, P.Exit)
    assert Snapshot.from_dict(msg.state).row(msg.state["oldest"]).startswith("line")
    blank = P.decode(frame(P.Exit(9, blank_snapshot(80, 24))))
    assert isinstance(blank, P.Exit) and blank.state["rows"] == 24


# One value of each shape msgpack can deliver; which annotations each one satisfies is
# written out by hand here, independent of protocol.py's own checks.
CANDIDATES: list[tuple[object, set[str]]] = [
    (None, {"int | None", "str | None", "dict[str, Any] | None", "dict[str, int] | None"}),
    (True, {"bool"}),
    (False, {"bool"}),
    (0, {"int", "int | None"}),
    (-5, {"int", "int | None"}),
    (2**64 - 1, {"int", "int | None"}),
    (1.5, set()),
    (float("nan"), set()),
    ("s", {"str", "str | None"}),
    ("", {"str", "str | None"}),
    (b"b", {"bytes"}),
    ([], {"list[str]", "list[int]"}),
    (["s"], {"list[str]"}),
    ([1], {"list[int]"}),
    ([True], set()),
    ([1, "s"], set()),
    ([b"s"], set()),
    ([None], set()),
    ([[1]], set()),
    ({}, {"dict[str, str]", "dict[str, Any]", "dict[str, Any] | None"}),
    ({"a": "b"}, {"dict[str, str]", "dict[str, Any]", "dict[str, Any] | None"}),
    ({"a": 1}, {"dict[str, Any]", "dict[str, Any] | None"}),
    ({"a": None}, {"dict[str, Any]", "dict[str, Any] | None"}),
    ({1: "a"}, set()),
    ({b"k": "a"}, set()),
    ({None: "a"}, set()),
    (msgpack.ExtType(5, b"x"), set()),
]


def annotation(cls: type[P.Message], name: str) -> str:
    hint = typing.get_type_hints(cls)[name]
    return hint.__name__ if isinstance(hint, type) else str(hint).replace("typing.", "")


WRONG = [
    pytest.param(cls, f.name, value, id=f"{cls.__name__}.{f.name}={value!r}")
    for cls in P.MESSAGES.values()
    for f in dataclasses.fields(cls)
    for value, fits in CANDIDATES
    if annotation(cls, f.name) not in fits or (cls, f.name) == (P.Exit, "state")
]


def test_every_field_has_wrong_values() -> None:
    fields = {(c, f.name) for c in P.MESSAGES.values() for f in dataclasses.fields(c)}
    assert fields == {(p.values[0], p.values[1]) for p in WRONG}


@pytest.mark.parametrize(("cls", "name", "value"), WRONG)
def test_wrong_field_type_is_protocol_error(cls: type[P.Message], name: str, value: object) -> None:
    values = frame(BY_CLASS[cls])
    index = 1 + [f.name for f in dataclasses.fields(cls)].index(name)
    values[index] = value
    with pytest.raises(P.ProtocolError, match=rf"{cls.__name__}\.{name} is not"):
        P.decode(values)
    # through the byte-level reader too (msgpack turns the NaN and ext into their own types)
    with pytest.raises(P.ProtocolError):
        P.Decoder().feed(framed(msgpack.packb(values, use_bin_type=True)))


def bad_states() -> list[Any]:
    good = state()
    out: list[Any] = [[], "state", {}, {**good, "extra": 1}]
    for key in good:
        out.append({k: v for k, v in good.items() if k != key})
        for value, _ in CANDIDATES:
            if key in ("history", "lines") and value in ([], ["s"]):
                continue  # these are valid lists of rows (lines checked for count below)
            if (
                key in ("epoch", "offset", "cols", "oldest", "dropped")
                and type(value) is int
                and value >= 0
            ):
                continue
            out.append({**good, key: value})
    out += [
        {**good, "lines": ["a"]},  # fewer rows than the screen has
        {**good, "lines": ["a", "b", "c"]},
        {**good, "history": ["a", 1]},
        {**good, "history": ["a"] * 5000 + [b"x"]},
        {**good, "lines": ["a", None]},
        {**good, "cursor": [0]},
        {**good, "cursor": [0, 1, 2]},
        {**good, "cursor": [0, "1"]},
        {**good, "cursor": [True, 0]},
        {**good, "cursor": (0, 0)},  # only a list comes off the wire
        {**good, "epoch": -1},
        {**good, "offset": -1},
        {**good, "rows": -1},
        {**good, "oldest": True},
        {**good, "screen": b"primary"},
        {**good, "screen": "Primary"},
    ]
    return out


@pytest.mark.parametrize("bad", bad_states())
def test_malformed_exit_state_is_protocol_error(bad: object) -> None:
    with pytest.raises(P.ProtocolError, match=r"Exit\.state is not a terminal state"):
        P.decode([int(P.Kind.EXIT), 0, bad])


GOOD_USAGE = {"cpu_ms": 1, "max_rss_kib": 2}


def bad_usages() -> list[Any]:
    """Every way a usage can be wrong: not a map, a key missing, extra or misspelt, a
    value not an integer (a bool, float, string, None, list) or outside 0..USAGE_MAX."""
    out: list[Any] = [{}, [], [1, 2], "usage", True, 0, (1, 2), {**GOOD_USAGE, "extra": 0}]
    for key in GOOD_USAGE:
        out.append({k: v for k, v in GOOD_USAGE.items() if k != key})
        out.append({**{k: v for k, v in GOOD_USAGE.items() if k != key}, key.upper(): 1})
        for value, _ in CANDIDATES:
            if type(value) is int and 0 <= value <= P.USAGE_MAX:
                continue
            out.append({**GOOD_USAGE, key: value})
        for value in (-1, P.USAGE_MAX + 1, 2**64 - 1, -(2**63), 1.0, True, False, "1", b"1"):
            out.append({**GOOD_USAGE, key: value})
    out.append({b"cpu_ms": 1, b"max_rss_kib": 2})
    out.append({1: 1, 2: 2})
    return out


@pytest.mark.parametrize("bad", bad_usages())
def test_forged_exit_usage_is_protocol_error(bad: object) -> None:
    """A usage that is not exactly what the sentinel's wait gives is refused like any
    other malformed field, also through the byte-level reader."""
    with pytest.raises(P.ProtocolError, match=r"Exit\.usage is not a resource usage"):
        P.decode([int(P.Kind.EXIT), 0, state(), bad])
    with pytest.raises(P.ProtocolError):
        P.Decoder().feed(
            framed(msgpack.packb([int(P.Kind.EXIT), 0, state(), bad], use_bin_type=True))
        )


def test_usage_from_a_wait_is_in_bounds() -> None:
    assert P.usage(1_500, 2_700, 5) == {"cpu_ms": 4, "max_rss_kib": 5}  # rounded down
    assert P.usage(-5, 0, -1) == {"cpu_ms": 0, "max_rss_kib": 0}
    huge = P.usage(2**70, 2**70, 2**70)
    assert huge == {"cpu_ms": P.USAGE_MAX, "max_rss_kib": P.USAGE_MAX}
    for u in ({"cpu_ms": 0, "max_rss_kib": 0}, huge):
        assert P.usage_ok(u)
    assert P.decode([int(P.Kind.EXIT), 0, state(), huge]) == P.Exit(0, state(), huge)


@pytest.mark.parametrize(
    "obj",
    [
        None,
        1,
        "x",
        b"x",
        {},
        [],
        [None],
        [True],
        [False, 1],
        [1.0],
        ["1"],
        [[1]],
        [{}],
        [99],
        [-1],
        [2**64 - 1],
        [int(P.Kind.RELEASE), 1],
        [int(P.Kind.INPUT)],
        [int(P.Kind.OUTPUT), b"x", 1, 2],
    ],
)
def test_malformed_frames_are_protocol_errors(obj: object) -> None:
    with pytest.raises(P.ProtocolError):
        P.decode(obj)


@given(st.binary(max_size=200))
def test_decoder_fuzz(data: bytes) -> None:
    try:
        P.Decoder().feed(data)
    except P.ProtocolError:
        pass


@pytest.mark.parametrize("piece", [1 << 20, 4096, 7])
def test_large_frames_decode_in_any_pieces(piece: int) -> None:
    """Frames of MiBs (a full OUTPUT read, an EXIT with its history), back to back with
    small ones and split anywhere, arrive whole and in order."""
    big = P.Output(bytes(range(256)) * (3 * 4096 + 3), 10)
    msgs = [P.Pong(1), big, P.Pong(2), big, P.Ready()]
    data = b"".join(P.encode(m) for m in msgs)
    d, got = P.Decoder(), []
    for i in range(0, len(data), piece):
        got += d.feed(data[i : i + piece])
    assert got == msgs


def test_a_frame_longer_than_the_limit_fails_at_its_header() -> None:
    """At the limit a frame is waited for; one byte over, its length alone is an error,
    before any of its body arrives."""
    at = framed(msgpack.packb([int(P.Kind.OUTPUT), b"x" * 100, 1], use_bin_type=True))
    limit = len(at) - P.HEADER
    assert P.Decoder(limit).feed(at) == [P.Output(b"x" * 100, 1)]
    d = P.Decoder(limit)
    assert d.feed(at[:-1]) == []
    assert d.feed(at[-1:]) == [P.Output(b"x" * 100, 1)]
    with pytest.raises(P.ProtocolError, match="over"):
        P.Decoder(limit - 1).feed(at[: P.HEADER])


def test_after_a_bad_frame_the_decoder_refuses_everything() -> None:
    """A bad frame leaves no frame boundary to trust: good frames after it, in the same
    read or a later one, are never taken as messages."""
    d = P.Decoder()
    with pytest.raises(P.ProtocolError):
        d.feed(P.encode(P.Pong(1)) + framed(b"\xc1") + P.encode(P.Pong(2)))
    for _ in range(3):
        with pytest.raises(P.ProtocolError, match="earlier bad frame"):
            d.feed(P.encode(P.Pong(3)))


@pytest.mark.parametrize(
    "body",
    [
        b"",  # no msgpack value at all
        msgpack.packb([int(P.Kind.PONG), 1]) + msgpack.packb([int(P.Kind.PONG), 2]),  # two
        msgpack.packb([int(P.Kind.PONG), 1])[:-1],  # cut short
    ],
    ids=["empty", "two values", "short"],
)
def test_a_body_that_is_not_exactly_one_value_is_protocol_error(body: bytes) -> None:
    with pytest.raises(P.ProtocolError):
        P.Decoder().feed(framed(body) + P.encode(P.Pong(3)))


MSGPACK = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**63), 2**64 - 1)
    | st.floats()
    | st.text(max_size=8)
    | st.binary(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(st.text(max_size=4) | st.integers(-(2**63), 2**64 - 1), inner, max_size=4)
    ),
    max_leaves=12,
)


def expect_decoded(obj: list[Any]) -> None:
    """Decode; if it is a message, it re-encodes to the same frame and its state reads."""
    try:
        msg = P.decode(obj)
    except P.ProtocolError:
        return
    assert P.decode(frame(msg)) == msg
    if isinstance(msg, P.Exit):
        Snapshot.from_dict(msg.state)


@settings(max_examples=300)
@given(st.lists(MSGPACK, max_size=8))
def test_decode_fuzz(obj: list[Any]) -> None:
    expect_decoded(msgpack.unpackb(msgpack.packb(obj), strict_map_key=False))


@settings(max_examples=500, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(SAMPLES), st.data())
def test_decode_fuzz_one_field(msg: P.Message, data: st.DataObject) -> None:
    """A valid frame with one field (or one key of the EXIT state or usage) replaced by any
    msgpack value, or cut short or extended: a message of the right types, or
    ProtocolError."""
    values = frame(msg)
    where = data.draw(st.integers(0, len(values)))
    value = data.draw(MSGPACK)
    if where == len(values):
        values.append(value) if data.draw(st.booleans()) else values.pop()
    elif isinstance(msg, P.Exit) and where in (2, 3) and data.draw(st.booleans()):
        values[where][data.draw(st.sampled_from(sorted(values[where])))] = value  # state, usage
    else:
        values[where] = value
    expect_decoded(msgpack.unpackb(msgpack.packb(values), strict_map_key=False))


def test_spawn_cgroup_paths_are_strings_or_absent() -> None:
    ok = frame(P.Spawn("p1", ["sh"], {}, "/", 80, 24, 0, True, "/cg/x.p1", "/cg/daemon"))
    assert P.decode(ok) == P.Spawn("p1", ["sh"], {}, "/", 80, 24, 0, True, "/cg/x.p1", "/cg/daemon")
    assert P.decode(ok[:9]).cgroup is None  # type: ignore[attr-defined]
    for bad in (1, b"/cg", ["/cg"]):
        with pytest.raises(P.ProtocolError):
            P.decode([*ok[:9], bad, "/cg/daemon"])


def test_a_packer_that_grew_past_keep_is_replaced() -> None:
    """A msgpack packer keeps its largest message's buffer for good: one that packed
    more than ``KEEP`` is dropped for a new one, and small messages keep the same."""
    P.encode(P.Pong(1))
    small = P.PACKER
    P.encode(P.Output(b"x" * (P.KEEP // 2), 1))
    assert P.PACKER is small
    big = P.Output(b"x" * (P.KEEP + 1), 1)
    data = P.encode(big)
    assert P.PACKER is not small
    assert P.Decoder().feed(data) == [big]
    assert P.Decoder().feed(P.encode(P.Pong(2))) == [P.Pong(2)]
