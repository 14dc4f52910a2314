"""An exited pane's final state: held compactly, every row read back exactly."""

from __future__ import annotations

import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from workers import protocol as P
from workers import vt
from workers.rows import OTHER_SPACES, Snapshot, TooLarge, capture, lines_size, tail
from workers.vt import Terminal


def snap_of(rows: list[str], cols: int, screen: int = 1) -> Snapshot:
    history, lines = rows[: len(rows) - screen], rows[len(rows) - screen :]
    return Snapshot("primary", 1, 0, cols, screen, 7, history, lines, (7, 0))


def test_ten_thousand_short_rows_cost_at_most_twice_their_text() -> None:
    cols = 80
    rows = [f"ok {i}".ljust(cols) for i in range(10_000)]
    snap = snap_of(rows, cols)
    text = sum(len(r.rstrip(" ").encode()) for r in rows)
    held = snap.nbytes()
    assert held <= 2 * text, (held, text)
    # nothing else of any size hangs off the object
    assert sys.getsizeof(snap) + sys.getsizeof(snap._rows) < 1000
    assert [snap.row(n) for n in range(snap.oldest, snap.end)] == rows
    assert (snap.oldest, snap.end) == (7, 10_007)


def test_rows_of_every_shape_read_back_identical() -> None:
    cols = 6
    rows = [
        "      ",
        "a     ",
        "  b  c",
        "宽宽  ",
        "e\u0301" + "\u0301" * 300 + "     ",
        "x" * 20,
        "",
        "   \u200b  ",
        "tab\t  ",
        "€" * 6,
        "      ",
    ]
    snap = snap_of(rows, cols, screen=3)
    assert [snap.row(n) for n in range(snap.oldest, snap.end)] == rows


def test_a_row_too_long_for_narrow_lengths() -> None:
    rows = ["a" * 70_000 + "  ", "b" + " " * 5]
    snap = snap_of(rows, 6)
    assert [snap.row(7), snap.row(8)] == rows


@settings(max_examples=200, deadline=None)
@given(st.lists(st.text(max_size=200), max_size=300), st.integers(1, 300))
def test_any_rows_round_trip(rows: list[str], cols: int) -> None:
    rows = [*rows, " " * cols]
    snap = snap_of(rows, cols)
    assert [snap.row(n) for n in range(snap.oldest, snap.end)] == rows
    assert [snap.row(n) for n in reversed(range(snap.oldest, snap.end))] == rows[::-1]
    for n in (snap.end - 1, snap.oldest, (snap.oldest + snap.end) // 2, snap.oldest):
        assert snap.row(n) == rows[n - snap.oldest]


def test_from_dict_reads_the_terminal_state() -> None:
    t = Terminal(20, 4, 100)
    t.feed(b"".join(b"line %d\r\n" % i for i in range(60)) + "宽 \u200bx".encode())
    d = t.snapshot()
    snap = Snapshot.from_dict(d)
    assert [snap.row(n) for n in range(snap.oldest, snap.end)] == [
        t.row(n) for n in range(t.oldest, t.end)
    ]
    assert d["history"][0] == "line 0"  # sent without its padding
    assert (snap.oldest, snap.end, snap.cursor, snap.dropped) == (t.oldest, t.end, t.cursor, 0)
    assert tail(snap, 5, 1000) == tail(t, 5, 1000)
    assert Snapshot.from_dict({**d, "dropped": 3}).dropped == 3


def test_only_spaces_are_stripped() -> None:
    assert set(OTHER_SPACES) == {
        chr(c) for c in range(sys.maxunicode + 1) if chr(c).isspace() and c != 32
    }
    rows = ["a" + w + "  " for w in OTHER_SPACES] + ["b\u3000", "c \xa0 "]
    snap = snap_of(rows, 4)
    assert [snap.row(n) for n in range(snap.oldest, snap.end)] == rows


def test_exit_carries_history_without_its_padding() -> None:
    """A wide pane's history of short rows: the frame is about the text, not cols x rows
    (it was 65535 x 6000 code points, over the channel's frame limit)."""
    t = Terminal(4000, 5, 10000)
    t.feed(b"\r\n".join(b"%d \xe5\xae\xbd" % i for i in range(3000)) + b"\r\n")
    frame = P.encode(P.Exit(0, t.snapshot()))
    assert len(frame) < 4000 * 5 * 2 + 3000 * 20
    (exit_,) = P.Decoder().feed(frame)
    assert isinstance(exit_, P.Exit)
    snap = Snapshot.from_dict(exit_.state)
    assert [snap.row(n) for n in range(snap.oldest, snap.end)] == [
        t.row(n) for n in range(t.oldest, t.end)
    ]


def test_exit_leaves_out_the_oldest_rows_past_its_budget(monkeypatch: pytest.MonkeyPatch) -> None:
    t = Terminal(10, 2, 1000)
    t.feed(b"".join(b"row %03d\r\n" % i for i in range(100)))
    monkeypatch.setattr(vt, "HISTORY_BUDGET", 8 * 10)
    d = t.snapshot()
    snap = Snapshot.from_dict(d)
    assert len(d["history"]) == 10 and snap.oldest == t.scrolled - 10
    assert [snap.row(n) for n in range(snap.oldest, snap.end)] == [
        t.row(n) for n in range(snap.oldest, t.end)
    ]
    assert P.snapshot_ok(d)
    assert not P.snapshot_ok({**d, "widths": [10] * 9})  # one per history row
    assert not P.snapshot_ok({**d, "widths": [10**12] * 10})  # never more than padding makes


def test_a_capture_counts_rows_wider_than_the_pane_now() -> None:
    """Rows written at 1000 columns stay that wide after a shrink to 10: a capture with a
    budget counts them as they are, not by the pane's width now."""
    t = Terminal(1000, 5, 100)
    t.feed(b"".join(b"x" * 1000 + b"\r\n" for _ in range(50)))
    t.resize(10, 5)
    with pytest.raises(TooLarge) as e:
        capture(t, None, None, None, 50, budget=10_000)
    assert e.value.lines == lines_size(t, t.end - 50, t.end) > 40_000
    assert capture(t, None, None, None, 50)["lines"][0] == "x" * 1000
