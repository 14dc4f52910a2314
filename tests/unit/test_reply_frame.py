"""What the client reads from its socket is checked before any field of it is used: any
bytes at all are a reply of foundation §2's shape or ``Malformed`` (a transport error),
never another exception."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from venomx.wire import Malformed, exit_status, greeting, reply_frame

JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=20,
)
FRAMES = st.fixed_dictionaries(
    {},
    optional={
        "id": st.none() | st.integers() | st.text(),
        "ok": JSON,
        "item": JSON,
        "error": JSON
        | st.fixed_dictionaries({"code": JSON}, optional={"message": JSON, "data": JSON}),
    },
)


def read(line: bytes) -> dict[str, Any] | None:
    try:
        return reply_frame(line)
    except Malformed as err:
        assert err.code == "transport"
        return None


@settings(max_examples=400, deadline=None)
@given(st.binary(max_size=200))
def test_any_bytes_are_a_reply_or_malformed(line: bytes) -> None:
    read(line + b"\n")


@settings(max_examples=400, deadline=None)
@given(FRAMES)
def test_a_frame_taken_has_what_its_readers_use(frame: dict[str, Any]) -> None:
    taken = read(json.dumps(frame).encode() + b"\n")
    if taken is None:
        return
    rid = taken.get("id")
    assert rid is None or type(rid) is int
    if "error" in taken:
        assert isinstance(taken["error"]["code"], str)
        assert isinstance(taken["error"].get("message", ""), str)
        assert isinstance(taken["error"].get("data", {}), dict)
    elif "item" in taken:
        assert isinstance(taken["item"], dict)
    else:
        assert isinstance(taken["ok"], dict)


def test_the_spec_examples_are_taken() -> None:
    ok = b'{"id":0,"ok":{"protocol":1,"server":"venomx/0.1.0","source":"venomx/x",'
    ok += b'"principal":"g0","max_frame":1048576}}\n'
    assert greeting(reply_frame(ok)["ok"])["source"] == "venomx/x"
    err = b'{"id":null,"error":{"code":"invalid_request.json","message":"m","data":{}}}\n'
    assert reply_frame(err)["error"]["code"] == "invalid_request.json"
    assert reply_frame(b'{"id":3,"item":{"data":""}}\n')["item"] == {"data": ""}


@pytest.mark.parametrize("status", [0, 1, 124, 255])
def test_an_exit_status_is_0_to_255(status: int) -> None:
    assert exit_status(status) == status


@pytest.mark.parametrize("status", [-1, 256, "0", 0.0, True, None, [0]])
def test_anything_else_is_not_a_status(status: object) -> None:
    with pytest.raises(Malformed):
        exit_status(status)


@pytest.mark.parametrize(
    "line",
    [
        b'{"id":1,"ok":{"n":1e999}}\n',  # int() of it raises OverflowError
        b'{"id":1,"ok":{"n":-1e999}}\n',
        b'{"id":1,"error":{"code":"bogus","message":"","data":{}}}\n',
        b'{"id":1,"error":{"code":"","message":"","data":{}}}\n',
    ],
)
def test_what_the_daemon_never_sends_is_malformed(line: bytes) -> None:
    with pytest.raises(Malformed):
        reply_frame(line)


@pytest.mark.parametrize("code", ["internal", "denied.read", "timeout.wait", "cancelled"])
def test_every_class_of_foundation_3_is_taken(code: str) -> None:
    frame = {"id": 1, "error": {"code": code, "message": "m", "data": {}}}
    assert reply_frame(json.dumps(frame).encode())["error"]["code"] == code
    assert reply_frame(b'{"id":1,"ok":{"ratio":1.5e300}}\n')["ok"]["ratio"] == 1.5e300
