"""An attach's output items are encoded once for every attach of the pane."""

from __future__ import annotations

import base64
import json

from venomx.verbs.pane import _output_items


def test_output_is_cut_into_items_with_their_end_offsets() -> None:
    data = bytes(range(256)) * 3
    items = [json.loads(i) for i in _output_items(data, 10_000, 300)]
    assert [i["offset"] for i in items] == [10_000 - 768 + 300, 10_000 - 768 + 600, 10_000]
    assert b"".join(base64.b64decode(i["data"]) for i in items) == data


def test_the_same_output_is_encoded_once_for_every_attach() -> None:
    """100 attaches each encoding every output chunk held the daemon at a full core and
    a 55 MB/s program at 1.6 MB/s; the next attach of the same output gets the same
    encoding, and other output, or the same bytes at another offset, its own."""
    data = b"x" * 5000
    first = _output_items(data, 5000, 1000)
    assert _output_items(data, 5000, 1000) is first
    assert _output_items(data, 6000, 1000) is not first
    again = bytes(bytearray(data))  # equal, but another message's
    assert _output_items(again, 6000, 1000) is not _output_items(data, 6000, 1000)
