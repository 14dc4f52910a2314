"""Terminal output as log lines (``venomx exec`` to a file or pipe)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from venomx.cli.textlog import MAX_LINE, TextLines


def lines_of(data: bytes) -> list[str]:
    t = TextLines()
    out = t.feed(data)
    last = t.close()
    return out + ([last] if last is not None else [])


def test_plain_lines_once_each_and_the_last_without_newline() -> None:
    assert lines_of(b"a\nb\r\nc") == ["a", "b", "c"]
    assert lines_of(b"") == []
    assert lines_of(b"\n\n") == ["", ""]


def test_carriage_return_rewrites_end_as_the_terminal_shows_them() -> None:
    bar = b"".join(b"\r[%-10s] %3d%%" % (b"#" * i, i * 10) for i in range(11))
    assert lines_of(bar + b"\ndone\n") == ["[##########] 100%", "done"]
    assert lines_of(b"abcdef\rXY\n") == ["XYcdef"]
    assert lines_of(b"abcdef\rXY\x1b[K\n") == ["XY"]
    assert lines_of(b"abc\b\bZ\n") == ["aZc"]


def test_escape_sequences_are_dropped() -> None:
    data = b"\x1b[1;31mred\x1b[0m \x1b]0;title\x07ok \x1b]8;;http://x\x1b\\link\x1b]8;;\x1b\\\n"
    assert lines_of(data) == ["red ok link"]
    assert lines_of(b"\x1b(Bx\x1b=y\n") == ["xy"]
    assert lines_of(b"a\tb\n") == ["a       b"]


def test_utf8_split_across_reads_and_invalid_bytes() -> None:
    t = TextLines()
    text = "naïve ✓\n".encode()
    out: list[str] = []
    for i in range(len(text)):
        out += t.feed(text[i : i + 1])
    assert out == ["naïve ✓"]
    assert lines_of(b"\xff\xfeok\n") == ["\ufffd\ufffdok"]


def test_a_line_without_end_is_cut_at_the_bound() -> None:
    out = lines_of(b"x" * (MAX_LINE * 2 + 5))
    assert [len(x) for x in out] == [MAX_LINE, MAX_LINE, 5]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.binary(max_size=200), max_size=20))
def test_any_bytes_in_any_pieces_never_raise_and_match_one_feed(chunks: list[bytes]) -> None:
    t = TextLines()
    out: list[str] = []
    for c in chunks:
        out += t.feed(c)
    last = t.close()
    whole = lines_of(b"".join(chunks))
    assert out + ([last] if last is not None else []) == whole
    assert all("\x1b" not in line and "\n" not in line for line in whole)
