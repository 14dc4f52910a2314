"""A frame too large to parse is still answered with its id (foundation §2)."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from venomx.wire import ID_SCAN_BYTES, frame_id

scalars = st.none() | st.booleans() | st.integers() | st.text(max_size=20)
values = st.recursive(
    scalars,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=5), inner, max_size=4)
    ),
    max_leaves=20,
)
ids = st.integers(-(2**63), 2**63 - 1)


@given(
    st.dictionaries(st.text(max_size=8).filter(lambda k: k != "id"), values, max_size=5),
    ids,
    st.integers(0, 5),
    st.booleans(),
)
def test_the_top_level_id_is_found_wherever_it_stands(
    rest: dict[str, Any], rid: int, where: int, spaced: bool
) -> None:
    items = list(rest.items())
    items.insert(min(where, len(items)), ("id", rid))
    text = json.dumps(dict(items), indent=1 if spaced else None, ensure_ascii=False)
    assert frame_id(text.encode()) == rid


@given(st.dictionaries(st.text(max_size=8).filter(lambda k: k != "id"), values, max_size=5))
def test_no_top_level_id_is_none(rest: dict[str, Any]) -> None:
    nested = {**rest, "params": {"id": 5, "x": [{"id": 6}]}}
    assert frame_id(json.dumps(nested).encode()) is None


@given(st.binary(max_size=200))
def test_any_bytes_give_an_int_or_none(data: bytes) -> None:
    found = frame_id(data)
    assert found is None or isinstance(found, int)


def test_what_is_not_a_64_bit_integer_id_is_none() -> None:
    for rid in (b"1.5", b"1e3", b'"7"', b"true", b"null", b"01", b"9223372036854775808"):
        assert frame_id(b'{"id":' + rid + b',"verb":"x"}') is None
    assert frame_id(b'{"id":-9223372036854775808}') == -(2**63)


def test_a_cut_frame_keeps_an_id_read_before_the_cut() -> None:
    head = b'{"verb":"pane.send","id":12,"params":{"text":"'
    assert frame_id(head + b"a" * 10_000_000) == 12
    assert frame_id(b'{"params":{"text":"' + b"a" * ID_SCAN_BYTES + b'"},"id":12}') is None


def test_an_id_cut_off_by_the_end_of_the_search_is_none() -> None:
    for cut in range(1, 6):
        pad = ID_SCAN_BYTES - len(b'{"a":"","id":') - cut
        frame = b'{"a":"' + b"x" * pad + b'","id":12345}'
        assert frame[:ID_SCAN_BYTES].endswith(b":" + b"12345"[:cut])
        assert frame_id(frame) is None


def test_the_search_reaches_only_the_bytes_a_too_long_frame_has_in_hand() -> None:
    """Found too long once past max_frame bytes, a frame has at least max_frame + 1 of
    them, however its writes were split: the answer does not depend on the split."""
    frame = b'{"a":"' + b"x" * 5000 + b'","id":7}'
    assert frame_id(frame) == 7
    assert frame_id(frame, max_frame=4096) is None
    assert frame_id(b'{"id":7,"a":"' + b"x" * 5000, max_frame=4096) == 7
