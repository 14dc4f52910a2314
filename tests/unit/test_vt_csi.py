"""A whole CSI of the common shape is applied without the parser's state machine
(``_CSI_SIMPLE``: colour output spent most of its time stepping through it a character
at a time). The differential test feeds the same streams with and without that path,
split anywhere, and requires the same cells, attributes, cursor, modes and history."""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager

import pyte
from hypothesis import example, given, settings
from hypothesis import strategies as st
from pyte.screens import Char

from workers import screen as screen_module
from workers.vt import Terminal


@contextmanager
def state_machine_only() -> Iterator[None]:
    old = screen_module._CSI_SIMPLE
    screen_module._CSI_SIMPLE = re.compile("(?!)")
    try:
        yield
    finally:
        screen_module._CSI_SIMPLE = old


def fed(chunks: list[str], cols: int, rows: int) -> tuple[object, ...]:
    t = Terminal(cols, rows, 20)
    for chunk in chunks:
        t.offset += len(chunk)
        t.stream.feed(chunk.encode("utf-8", "surrogatepass"))
    s = t.screen
    cells = {
        (y, x): s.buffer[y][x] for y in range(s.lines) for x in range(s.columns) if x in s.buffer[y]
    }
    return (
        cells,
        (s.cursor.x, s.cursor.y, s.cursor.hidden, s.cursor.attrs),
        sorted(s.mode),
        s.margins,
        s.title,
        list(t.history),
        t.dropped,
        bytes(t.answers),
        t.screen_name,
        t.epoch,
    )


FINALS = list("@ABCDEFGHIJKLMPSTXZ`abcdefghilmnpqrstux~")
FIELD = st.one_of(
    st.integers(0, 300).map(str),
    st.integers(0, 10**7).map(str),
    st.just(""),
    st.text("0", min_size=1, max_size=7).flatmap(
        lambda z: st.integers(0, 99).map(lambda n: z + str(n))
    ),
)
CSI = st.builds(
    lambda private, fields, final: "\x1b[" + private + ";".join(fields) + final,
    st.sampled_from(["", "?", "?", ">"]),
    st.lists(FIELD, max_size=40),
    st.sampled_from(FINALS),
)
ODD = st.builds(
    lambda body, final: "\x1b[" + body + final,
    st.text("0123456789;?:<=>! $", max_size=12),
    st.sampled_from(FINALS),
)
PIECE = st.one_of(
    CSI,
    CSI,
    ODD,
    st.text("ab 中\u0301", max_size=6),
    st.sampled_from(
        ["\r", "\n", "\t", "\b", "\x07", "\x1b", "\x00", "\x7f", "\x1b7", "\x1b8", "\x1bc"]
    ),
)


@settings(max_examples=400, deadline=None)
@given(
    st.lists(PIECE, max_size=40),
    st.lists(st.integers(0, 400), max_size=4),
    st.integers(1, 12),
    st.integers(1, 6),
)
@example(["\x1b[38;5;196m", "x", "\x1b[48;5;21;1m", "y", "\x1b[0m"], [], 10, 2)
@example(["\x1b[?1049h", "alt", "\x1b[?1049l", "\x1b[2;3r", "\x1b[5S"], [3], 8, 4)
@example(["\x1b[" + "0" * 70 + "1m", "\x1b[00012345;0009H"], [], 6, 3)
def test_the_whole_csi_path_changes_nothing(
    pieces: list[str], cuts: list[int], cols: int, rows: int
) -> None:
    text = "".join(pieces)
    bounds = sorted({min(c, len(text)) for c in cuts})
    chunks = [text[a:b] for a, b in zip([0, *bounds], [*bounds, len(text)], strict=True)]
    fast = fed(chunks, cols, rows)
    with state_machine_only():
        slow = fed(chunks, cols, rows)
    assert fast == slow


def test_colour_output_takes_the_whole_csi_path() -> None:
    t = Terminal(20, 2)
    stream = t.stream
    calls: list[object] = []
    stream._csi = calls.append  # type: ignore[method-assign, assignment]
    t.feed(b"\x1b[38;5;12mword\x1b[0m \x1b[?25l")
    assert len(calls) == 3


ATTRS = st.builds(
    Char,
    st.sampled_from([" ", "x"]),
    st.sampled_from(["default", "red", "ff0000", "5f87af"]),
    st.sampled_from(["default", "blue", "000000"]),
    *[st.booleans()] * 6,
)


@settings(max_examples=3000, deadline=None)
@given(
    ATTRS,
    st.lists(
        st.one_of(
            st.sampled_from([0, 1, 3, 4, 5, 7, 9, 22, 23, 24, 25, 27, 29, 31, 39, 42, 49, 92]),
            st.sampled_from([101, 105, 2, 6, 8, 30, 37, 40, 47, 90, 97, 100, 107]),
            st.sampled_from([38, 48, 5, 2]),
            st.integers(0, 300),
        ),
        max_size=10,
    ).map(tuple),
    st.booleans(),
)
@example(Char(" "), (38, 5, 300, 1), False)
@example(Char(" "), (38, 2, 1, 2), False)
@example(Char(" ", fg="red"), (48, 2, 255, 0, 9999, 4), True)
@example(Char(" ", bold=True), (38,), False)
@example(Char(" "), (1, 0, 38, 5), False)
def test_sgr_sets_what_pytes_does(start: Char, attrs: tuple[int, ...], reverse: bool) -> None:
    """``Screen.select_graphic_rendition`` is pyte's rule made cheaper: any SGR leaves
    the attributes pyte's would."""
    ours = Terminal(4, 2).screen
    theirs = pyte.Screen(4, 2)
    for s in (ours, theirs):
        if reverse:
            s.set_mode(pyte.modes.DECSCNM >> 5, private=True)
        s.cursor.attrs = start
    ours.select_graphic_rendition(*attrs)
    theirs.select_graphic_rendition(*attrs)
    assert ours.cursor.attrs == theirs.cursor.attrs
    assert type(ours.cursor.attrs) is Char
