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
