"""Sentinel messages round-trip, and decode never raises anything but ProtocolError."""

from __future__ import annotations

import dataclasses

import msgpack
import pytest
from hypothesis import given
from hypothesis import strategies as st

from workers import protocol as P

SAMPLES = [
    P.Spawn("p0", ["sh"], {"A": "b"}, "/", 80, 24, 10000), P.Release(), P.Abort(),
    P.Input(b"x"), P.Resize(10, 5), P.Signal([18, 1]), P.Stream(True, 3),
    P.Capture(1, None, 0, None, 100), P.Hello(42), P.Ready(), P.Started(7), P.Failed("ENOENT"),
    P.Output(b"\x00\xff", 2), P.Marker("finished", 9, 0, None), P.Rows(1, {"a": 1}, None),
    P.Screen(1, 80, 24, 0, b"x"), P.Exit(0, 0, None, 5, {"lines": []}), P.Resized(1, 2, 3),
]


def test_every_kind_has_a_sample() -> None:
    assert {type(m) for m in SAMPLES} == set(P.MESSAGES.values())


@pytest.mark.parametrize("msg", SAMPLES, ids=lambda m: type(m).__name__)
def test_round_trip(msg: P.Message) -> None:
    dec = P.Decoder()
    data = P.encode(msg)
    out = []
    for i in range(len(data)):  # byte by byte: framing survives any split
        out += dec.feed(data[i:i + 1])
    assert out == [msg]
    assert dataclasses.asdict(out[0]) == dataclasses.asdict(msg)


@given(st.binary(max_size=200))
def test_decoder_fuzz(data: bytes) -> None:
    try:
        P.Decoder().feed(data)
    except P.ProtocolError:
        pass


@given(st.lists(st.one_of(st.integers(-2**63, 2**63 - 1), st.text(), st.binary(), st.none()), max_size=6))
def test_decode_fuzz(obj: list[object]) -> None:
    try:
        P.decode(msgpack.unpackb(msgpack.packb(obj)))
    except P.ProtocolError:
        pass
