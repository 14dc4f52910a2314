"""An attach's output items are encoded once for every attach of the pane."""

from __future__ import annotations

import base64
import json

from hypothesis import given
from hypothesis import strategies as st

from venomx.verbs import pane
from venomx.verbs.pane import _output_items
from venomx.wire import dumps


@given(st.binary(max_size=5000), st.integers(256, 4000), st.integers(0, 1 << 40))
def test_output_is_cut_into_items_with_their_end_offsets(data: bytes, chunk: int, at: int) -> None:
    end = at + len(data)
    items = _output_items(data, end, chunk)
    step = chunk - chunk % 3
    pieces = [data[i : i + step] for i in range(0, len(data), step)]
    assert items == [
        dumps({"data": base64.b64encode(p).decode(), "offset": end - len(data) + i * step + len(p)})
        for i, p in enumerate(pieces)
    ]
    assert all(len(json.loads(i)["data"]) <= step // 3 * 4 for i in items)


def test_the_same_output_is_encoded_once_for_every_attach() -> None:
    """100 attaches each encoding every output chunk held the daemon at a full core and
    a 55 MB/s program at 1.6 MB/s; the next attach of the same output gets the same
    items, one cutting it to another size the same base64 (attaches alternating two
    sizes otherwise re-encoded it all, helper-133), and other output its own."""
    data = b"x" * 5000
    first = _output_items(data, 5000, 1000)
    assert _output_items(data, 5000, 1000) is first
    encoded = pane._LAST.encoded
    other = _output_items(data, 5000, 1003)
    assert other is not first and pane._LAST.encoded is encoded
    assert _output_items(data, 6000, 1000) is not first
    again = bytes(bytearray(data))  # equal, but another message's
    assert _output_items(again, 6000, 1000) is not _output_items(data, 6000, 1000)
