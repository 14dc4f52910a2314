"""A blank terminal built in advance (the fork server's) serves a pane of any size.

``Terminal.reshape`` must leave a never-fed terminal in exactly the state a terminal
built for that size starts in: every later byte then has the same effect on both.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from workers.vt import Terminal

SIZES = st.tuples(st.integers(1, 200), st.integers(1, 60), st.integers(0, 50))
STREAMS = st.lists(
    st.one_of(
        st.binary(max_size=200),
        st.sampled_from(
            [b"\t", b"\x1b[3g", b"\x1bH", b"\x1b[10;20r", b"\x1b[?1049h", b"\r\n" * 30, b"\x1bc"]
        ),
    ),
    max_size=12,
)


def state(t: Terminal) -> tuple[object, ...]:
    s = t.screen
    return (t.snapshot(), sorted(s.tabstops), s.margins, s.mode, t.history.maxlen)


@settings(max_examples=150, deadline=None)
@given(SIZES, STREAMS)
def test_a_reshaped_blank_terminal_is_a_new_one(
    size: tuple[int, int, int], chunks: list[bytes]
) -> None:
    cols, rows, scrollback = size
    blank = Terminal(80, 24, 10000)
    blank.reshape(cols, rows, scrollback)
    new = Terminal(cols, rows, scrollback)
    assert state(blank) == state(new)
    for chunk in chunks:
        blank.feed(chunk)
        new.feed(chunk)
        assert state(blank) == state(new)


def test_tab_stops_follow_the_new_width() -> None:
    t = Terminal(80, 24, 100)
    t.reshape(120, 10, 100)
    t.feed(b"\t" * 14 + b"x")  # past column 80: stops every 8 columns to the new edge
    assert t.row(0).index("x") == 112
    assert t.epoch == 1  # a blank terminal has not been resized: no row was renumbered


@settings(max_examples=100, deadline=None)
@given(STREAMS)
def test_reading_rows_stores_no_row_and_reads_blank_ones_as_before(chunks: list[bytes]) -> None:
    """Reading the screen (a capture, a snapshot) adds no line to pyte's row store, which
    creates one for any row it is asked for; a row never written reads as blanks."""
    t = Terminal(40, 10, 20)
    for chunk in chunks:
        t.feed(chunk)
    t.materialize()
    stored = dict(t.screen.buffer)
    base = 0 if t.alternate else t.scrolled
    lines = [t.row(base + i) for i in range(t.rows)]
    t.snapshot()
    assert dict(t.screen.buffer) == stored
    for i, text in enumerate(lines):
        if i not in stored:
            assert text == " " * t.cols
