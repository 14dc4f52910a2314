"""The terminal state: row space, text form, capture, tail, resize, and the fast path.

The differential tests feed the same streams through the fast path and through plain
pyte (the same screen class with the fast path off) and require identical rows, cursor
and history.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from pyte.screens import wcwidth

from workers import fastpath
from workers.rows import EpochConflict, Snapshot, blank_snapshot, capture, repaint, tail
from workers.vt import UNSTATE, Terminal


def plain(cols: int, rows: int, scrollback: int = 50) -> Terminal:
    t = Terminal(cols, rows, scrollback)

    def feed(data: bytes) -> None:
        t.offset += len(data)
        t.stream.feed(data)

    t.feed = feed  # type: ignore[method-assign]
    return t


@contextmanager
def fast_for_any_size() -> Iterator[None]:
    """Let the fast path take chunks of any size, so short examples exercise it."""
    old = fastpath.FAST_MIN
    fastpath.FAST_MIN = 0
    try:
        yield
    finally:
        fastpath.FAST_MIN = old


def state(t: Terminal) -> tuple[object, ...]:
    s = t.snapshot()
    return (
        s["history"],
        s["lines"],
        s["cursor"],
        s["oldest"],
        s["epoch"],
        s["offset"],
        t.screen.cursor.attrs,
    )


def test_text_form_and_history() -> None:
    t = Terminal(5, 2, 3)
    t.feed(b"ab\r\ncdefgh\r\nxy")
    assert [t.row(n) for n in range(t.oldest, t.end)] == ["ab   ", "cdefg", "h    ", "xy   "]
    assert (t.oldest, t.end, t.epoch) == (0, 4, 1)
    t.feed(b"\r\n1\r\n2\r\n3\r\n")
    assert t.oldest == 3 and len(t.history) == 3


def test_wide_characters_are_written_once() -> None:
    t = Terminal(6, 2)
    t.feed("a宽b".encode())
    assert t.row(0) == "a宽b  " and len(t.row(0)) == 5


def test_a_wide_character_that_does_not_fit_wraps_whole() -> None:
    """As xterm and tmux do: a row never holds more cells than its columns."""
    t = Terminal(9, 3)
    t.feed("abcdefgh中中中中中".encode())
    assert [t.row(n) for n in range(3)] == ["abcdefgh ", "中中中中 ", "中       "]
    t = Terminal(9, 2)
    t.feed("\x1b[?7labcdefgh中".encode())  # no autowrap: the last two cells take it
    assert t.row(0) == "abcdefg中" and t.cursor == (0, 8)
    t = Terminal(1, 2)
    t.feed("中a".encode())  # a one-column pane has no cell for it
    assert [t.row(0), t.row(1)] == ["a", " "]


def test_a_wide_character_written_half_over_is_blanked() -> None:
    t = Terminal(6, 1)
    t.feed("中中中".encode())
    t.feed(b"\x1b[1;2Ha\x1b[1;5Hb")  # the second half of the first, the first of the last
    assert t.row(0) == " a中b "
    t = Terminal(4, 1)  # a mark on the half a deletion left: a cell of its own still
    t.feed("中ab".encode() + b"\x1b[1;1H\x1b[P\x1b[C" + "\u0301".encode())
    assert t.row(0) == " \u0301ab " and display_width(t.row(0)) == 4


def test_alternate_screen_keeps_primary() -> None:
    t = Terminal(5, 2)
    t.feed(b"main\r\n")
    t.feed(b"\x1b[?1049h\x1b[HALT")
    assert t.screen_name == "alternate" and t.row(0) == "ALT  "
    t.feed(b"\x1b[?1049l")
    assert t.screen_name == "primary" and t.row(0) == "main "


def test_epoch_changes_on_ris_ed3_resize() -> None:
    t = Terminal(5, 2)
    t.feed(b"\x1b[3J")
    assert t.epoch == 2
    t.feed(b"\x1bc")
    assert t.epoch == 3
    t.resize(4, 2)
    assert t.epoch == 4
    try:
        capture(t, 1, None, None, 10)
    except EpochConflict as exc:
        assert exc.epoch == 4
    else:
        raise AssertionError("no conflict")


def test_shrink_keeps_rows_in_history() -> None:
    t = Terminal(20, 5)
    t.feed(b"".join(b"%d\r\n" % i for i in range(1, 31)))
    t.resize(20, 2)
    rows = [t.row(n).strip() for n in range(t.oldest, t.end)]
    assert rows[-2:] == ["30", ""] and rows[-3] == "29"
    t.feed(b"X\r\nY\r\nZ")
    rows = [t.row(n).strip() for n in range(t.oldest, t.end)]
    assert rows[-3:] == ["X", "Y", "Z"]
    assert t.cursor[0] == t.end - 1


def test_capture_clamps() -> None:
    t = Terminal(3, 2, 5)
    t.feed(b"".join(b"%d\r\n" % i for i in range(10)))
    r = capture(t, None, 0, 1000, 100)
    assert r["start"] == t.oldest and r["end"] == t.end
    assert capture(t, None, None, None, 2)["start"] == t.end - 2


def test_tail_rules() -> None:
    snap = Snapshot("primary", 1, 9, 4, 3, 0, ["€€€€", "€€€€"], ["€€€€", "    ", "    "], (3, 0))
    out = tail(snap, 100, 30)
    assert out["lines"] == ["€€€€", "€€€€"] and out["start"] == 1 and out["end"] == 3
    assert out["complete"] is False
    assert tail(snap, 0, 1000)["lines"] == []
    full = tail(snap, 100, 1000)
    assert full["complete"] is True and full["start"] == 0


def test_a_tail_on_the_alternate_screen_is_never_complete() -> None:
    """Its rows [0, rows) are not the rows the pane printed before it switched."""
    t = Terminal(5, 2)
    t.feed(b"".join(b"%d\r\n" % i for i in range(50)) + b"\x1b[?1049h\x1b[HALT")
    out = tail(t, 100, 1000)
    assert (out["screen"], out["epoch"], out["start"]) == ("alternate", 1, 0)
    assert out["complete"] is False and out["lines"] == ["ALT  "]


# -- fast path --------------------------------------------------------------------------


def test_fast_path_is_taken_for_plain_text() -> None:
    t = Terminal(80, 24)
    data = b"".join(b"%d\r\n" % i for i in range(5000))
    t.feed(data)
    ref = plain(80, 24, 10000)
    ref.feed(data)
    assert t.fast_bytes == len(data)
    assert state(t)[:6] == state(ref)[:6]


TOKENS = st.sampled_from(
    [
        b"a",
        b"hello world",
        b"x" * 37,
        b"\r",
        b"\n",
        b"\r\n",
        b"\x1b[31m",
        b"\x1b[0m",
        b"\x1b[m",
        b"\x1b[1;4m",
        "宽".encode(),
        "e\u0301".encode(),
        b"\x1b[2A",
        b"\x1b[K",
        b"\x1b[2J",
        b"\x1b[1;3r",
        b"\x1b[r",
        b"\x1b[?1049h",
        b"\x1b[?1049l",
        b"\t",
        b"\x08",
        b"\x1b[5;5H",
        b"\x1b]133;C\x07",
        b"\xff",
        b"\x1b[",
        b"7m",
        # zero-width code points (at column 0 they wait for the next character), a cluster
        # long enough to grow, and the handlers this module replaces
        "\u200b".encode(),
        "\u0301".encode() * 70,
        b"\x1b#8",
        b"\x1b[2@",
        b"\x1b[2P",
        b"\x1b[1K",
        b"\x1b[J",
        b"\x1bM",
        b"\x1bH",
        b"\x1b[?5h",
        b"\x1b[3K",
        # handlers added after a differential run against tmux (REP reads the last
        # character drawn, which the fast path must note as pyte's draw does)
        b"\x1b[3b",
        b"\x1b[2;4r",
        b"\x1b[r",
        b"\x1b[S",
        b"\x1b[T",
        b"\x1b[s",
        b"\x1b[u",
        b"\x1bE",
        b"\x1b[Z",
        b"\x1b[2M",
        b"\x1b[?7l",
        b"\x1b[?7h",
    ]
)


@settings(max_examples=150, deadline=None)
@given(
    st.lists(st.lists(TOKENS, max_size=120), min_size=1, max_size=6),
    st.integers(1, 30),
    st.integers(1, 8),
    st.booleans(),
)
def test_fast_path_matches_pyte(
    chunks: list[list[bytes]], cols: int, rows: int, plain_heavy: bool
) -> None:
    fast = Terminal(cols, rows, 50)
    ref = plain(cols, rows, 50)
    with fast_for_any_size():
        for chunk in chunks:
            data = b"".join(chunk)
            if plain_heavy:
                data = data.replace(b"\x1b[2A", b"").replace(b"\x1b[5;5H", b"")
            fast.feed(data)
            ref.feed(data)
            assert state(fast) == state(ref)


@settings(max_examples=100, deadline=None)
@given(
    st.lists(
        st.sampled_from(
            [b"ab", b"x" * 9, b"\r\n", b"\n", b"\r", b"\x1b[32m", b"\x1b[0m", b"0123456789"]
        ),
        max_size=400,
    ),
    st.integers(1, 12),
    st.integers(1, 5),
)
def test_fast_path_long_plain_streams(tokens: list[bytes], cols: int, rows: int) -> None:
    with fast_for_any_size():
        fast, ref = Terminal(cols, rows, 1000), plain(cols, rows, 1000)
        data = b"".join(tokens)
        fast.feed(data)
        ref.feed(data)
        assert state(fast) == state(ref)


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=300), st.integers(1, 20), st.integers(1, 6))
def test_any_bytes_never_break_the_terminal(data: bytes, cols: int, rows: int) -> None:
    t = Terminal(cols, rows, 20)
    t.feed(data)
    t.resize(max(1, cols - 1), max(1, rows - 1))
    t.feed(data)
    capture(t, None, None, None, 100)
    tail(t, 10, 100)
    Snapshot.from_dict(t.snapshot())


def display_width(row: str) -> int:
    return sum(max(0, wcwidth(c)) for c in row)


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        TOKENS | st.sampled_from([b"\x1b[?7l", b"\x1b[?7h", b"\x1b[D", b"\x1b[1;2H", b"\x1b[4h"]),
        max_size=60,
    ),
    st.integers(1, 12),
    st.integers(1, 4),
)
def test_every_row_is_exactly_its_columns_wide(tokens: list[bytes], cols: int, rows: int) -> None:
    """foundation §7: one physical row per string, padded to cols, a wide character two."""
    t = Terminal(cols, rows, 50)
    with fast_for_any_size():
        t.feed(b"".join(tokens))
    assert all(display_width(t.row(n)) == cols for n in range(t.oldest, t.end))


@settings(max_examples=150, deadline=None)
@given(
    st.lists(st.text(alphabet="ab c", max_size=14), min_size=1, max_size=60),
    st.integers(1, 12),
    st.integers(1, 6),
    st.lists(TOKENS, max_size=20),
    st.booleans(),
)
def test_bulk_lines_match_pyte(
    lines: list[str], cols: int, rows: int, prelude: list[bytes], trailing: bool
) -> None:
    """Whole CR LF lines (the bulk case) after any prior state, against plain pyte."""
    with fast_for_any_size():
        fast, ref = Terminal(cols, rows, 1000), plain(cols, rows, 1000)
        for t in (fast, ref):
            t.feed(b"".join(prelude))
        data = "\r\n".join(lines).encode() + (b"\r\n" if trailing else b"")
        fast.feed(data)
        ref.feed(data)
        assert state(fast) == state(ref)


def test_rows_below_the_cursor_survive_a_short_scroll() -> None:
    """A chunk that scrolls less than a screen keeps the old rows below the cursor."""
    for prefix in (b"", b"\x1b[m"):
        fast, ref = Terminal(80, 24), plain(80, 24)
        for t in (fast, ref):
            t.feed(b"".join(b"X" * 80 for _ in range(24)))
            t.feed(prefix + b"\x1b[H" + (b"y" * 20 + b"\r\n") * 25)
        assert state(fast) == state(ref)


def test_history_keeps_its_text_after_narrowing() -> None:
    """A row wider than the pane now is its text, padded to no more than the pane."""
    fast, ref = Terminal(10, 5, 1000), plain(10, 5, 1000)
    data = b"".join(b"L%d\r\n" % i for i in range(200))
    for t in (fast, ref):
        t.feed(data)
        t.resize(3, 5)
    assert fast.row(fast.oldest + 146) == ref.row(ref.oldest + 146) == "L146"
    assert fast.row(fast.oldest + 5) == ref.row(ref.oldest + 5) == "L5 "


def test_resize_on_the_alternate_screen() -> None:
    t = Terminal(10, 9)
    t.feed(b"".join(b"R%d\r\n" % i for i in range(9)))
    t.feed(b"\x1b[?1049h")
    t.resize(10, 5)
    t.feed(b"\x1b[?1049l")
    row, _ = t.cursor
    assert t.oldest <= row < t.end
    t.feed(b"".join(b"N%d\r\n" % i for i in range(120)))
    assert t.row(t.cursor[0] - 1).strip() == "N119"


def test_giant_csi_parameter_is_dropped_not_fatal() -> None:
    t = Terminal(10, 2)
    t.feed(b"a\x1b[" + b"9" * 5000 + b"mb\x1b[" + b"1" * 100000 + b"Ac")
    assert t.row(0).startswith("abc")


def test_height_only_shrink_resets_the_scroll_region() -> None:
    t = Terminal(80, 24)
    t.feed(b"\x1b[1;24r" + b"".join(b"L%d\r\n" % i for i in range(16)))
    t.resize(80, 10)
    t.feed(b"".join(b"M%d\r\n" % i for i in range(30)))
    assert t.row(t.cursor[0] - 1).strip() == "M29" and t.cursor[0] < t.end
    assert [t.row(n).strip() for n in range(t.oldest, t.end)].count("M17") == 1


def test_mode_1047_resize_keeps_rows() -> None:
    t = Terminal(10, 24, 100)
    t.feed(b"".join(b"L%d\r\n" % i for i in range(24)))
    t.feed(b"\x1b[?1047h")
    t.resize(10, 10)
    t.feed(b"\x1b[?1047l")
    rows = [t.row(n).strip() for n in range(t.oldest, t.end)]
    assert "L23" in rows and "L10" in rows  # nothing lost: scrolled into history


def test_narrowing_behind_the_alternate_screen_cuts_the_saved_primary() -> None:
    t = Terminal(80, 5)
    t.feed(b"A" * 80 + b"\x1b[?1049h")
    t.resize(40, 5)
    t.resize(80, 5)
    t.feed(b"\x1b[?1049l")
    assert t.row(t.oldest + 0).rstrip() == "A" * 40


@given(st.integers(1, 300), st.integers(1, 120))
def test_blank_snapshot_is_a_fresh_terminal(cols: int, rows: int) -> None:
    # a sentinel whose pane never wrote a byte reports this instead of building a screen
    assert blank_snapshot(cols, rows) == Terminal(cols, rows).snapshot()


def test_every_csi_is_survived() -> None:
    # pyte calls its handlers with whatever a CSI holds; a private marker or an extra
    # parameter used to raise TypeError and kill the sentinel (found by the output fuzz)
    for lead in (b"", b"?", b">", b"=", b"!"):
        for final in range(0x40, 0x7F):
            for params in (b"", b"0", b"1", b"1;2", b"1;2;3"):
                t = Terminal(10, 3)
                t.feed(b"\x1b[" + lead + params + bytes([final]) + b"\x1b[Hok")
                assert t.snapshot()["lines"][0].startswith("ok"), (lead, final, params)


def screen_rows(t: Terminal) -> list[str]:
    return [t.row(t.scrolled + y).rstrip() for y in range(t.rows)]


def test_su_and_sd_scroll_the_region_and_su_feeds_history() -> None:
    """``CSI n S`` / ``CSI n T`` (terminfo's indn and rin for xterm-256color): a full
    screen scrolled up sends its top lines to history, keeping their row numbers."""
    t = Terminal(10, 4, 100)
    t.feed(b"L1\r\nL2\r\nL3\r\nL4\x1b[H\x1b[2S")
    assert [t.row(n).rstrip() for n in range(2)] == ["L1", "L2"]
    assert screen_rows(t) == ["L3", "L4", "", ""] and t.epoch == 1 and t.cursor == (2, 0)
    t.feed(b"\x1b[T")
    assert screen_rows(t) == ["", "L3", "L4", ""]
    t.feed(b"\x1b[2;3r\x1b[5S")  # inside a region: nothing enters history
    assert screen_rows(t) == ["", "", "", ""] and t.scrolled == 2
    t.feed(b"\x1b[r\x1b[HA\r\nB\x1b[?1;2S\x1b[1;2;3;4;5T")  # XTSMGRAPHICS, mouse tracking
    assert screen_rows(t) == ["A", "B", "", ""]
    t.feed(b"\x1b[9999S")  # at most the region's height, in one pass
    assert screen_rows(t) == ["", "", "", ""] and t.scrolled == 6


def test_dec_special_graphics_draws_boxes_in_utf8() -> None:
    """ncurses' smacs/rmacs for xterm-256color are ESC ( 0 and ESC ( B, in UTF-8 too."""
    t = Terminal(10, 3, 10)
    t.feed(b"\x1b(0lqqk\x1b(Bok\r\n\x1b)0\x0eqq\x0fx")  # G1 and SO stay ignored in UTF-8
    assert screen_rows(t)[:2] == ["┌──┐ok", "qqx"]
    t.feed(b"\x1b(0" + b"q" * 3)  # the bulk path must not skip the translation
    assert screen_rows(t)[1] == "qqx───"


def test_an_ansi_mode_is_not_taken_for_a_private_one() -> None:
    """pyte keeps both in one set, a private mode shifted by 5: CSI 32 h is not DECCKM."""
    t = Terminal(10, 3, 10)
    t.feed(b"\x1b[32h\x1b[4h")
    assert 32 not in t.screen.mode and 4 in t.screen.mode
    t.feed(b"\x1b[?1h")
    assert 32 in t.screen.mode


def screen_of(cols: int, rows: int, data: bytes) -> list[str]:
    t = Terminal(cols, rows, 100)
    t.feed(data)
    assert t.dropped == 0  # every sequence applied, none dropped as unapplicable
    return screen_rows(t)


XTERM_CASES = [
    # (why, cols, rows, bytes, the screen's rows as xterm shows them)
    ("DL with no line below to move up", 10, 3, b"abc\r\x1b[M", ["", "", ""]),
    (
        "DL of two with the rows below unwritten",
        10,
        4,
        b"abc\r\ndef\r\nghi\x1b[2;1H\x1b[2M",
        ["abc", "", "", ""],
    ),
    (
        "IL moves blank rows down too",
        10,
        4,
        b"abc\r\n\r\nghi\x1b[1;1H\x1b[L",
        ["", "abc", "", "ghi"],
    ),
    ("CSI s / CSI u save and restore", 10, 3, b"x\x1b[sAB\x1b[uY", ["xYB", "", ""]),
    ("CUU ends a pending wrap", 10, 3, b"\r\n0123456789\x1b[AX", ["         X", "0123456789", ""]),
    (
        "LF below the scroll region moves within the screen",
        10,
        5,
        b"a\r\nb\r\nc\r\nd\x1b[2;3r\x1b[4;1H\nX",
        ["a", "b", "c", "d", "X"],
    ),
    (
        "RI above the scroll region moves within the screen",
        10,
        5,
        b"a\r\nb\r\nc\r\nd\x1b[3;4r\x1b[2;1H\x1bMX",
        ["X", "b", "c", "d", ""],
    ),
    ("CSI r homes the cursor", 10, 3, b"ab\x1b[rX", ["Xb", "", ""]),
    (
        "a top-only DECSTBM runs to the last line",
        10,
        6,
        b"a\r\nb\r\nc\r\nd\r\ne\r\nf\x1b[2;3r\x1b[4r\x1b[6;1H\r\nX",
        ["a", "b", "c", "e", "f", "X"],
    ),
    ("REP repeats the last character", 20, 3, b"-\x1b[9b|", ["----------|", "", ""]),
    ("NEL is CR LF", 10, 3, b"ab\x1bEX", ["ab", "X", ""]),
    ("CBT goes back a tab stop", 20, 3, b"abcdefghijklmnop\x1b[ZX", ["abcdefghXjklmnop", "", ""]),
    ("HPA moves to a column", 10, 3, b"abc\x1b[6`X", ["abc  X", "", ""]),
    (
        "DECOM clamps a CUP past the region",
        10,
        5,
        b"a\r\nb\r\nc\r\nd\x1b[3;4r\x1b[?6h\x1b[9;1HX",
        ["a", "b", "c", "X", ""],
    ),
    ("TAB keeps a pending wrap", 10, 3, b"0123456789\tX", ["0123456789", "X", ""]),
    (
        "a saved cursor is restored as often as asked",
        10,
        4,
        b"ab\x1b[s\r\n\x1b[uX\r\n\x1b[uY",
        ["abY", "", "", ""],
    ),
    (
        "DECRC brings back autowrap off",
        10,
        3,
        b"\x1b[?7l\x1b7\x1b[?7h\x1b8abcdefghijklm",
        ["abcdefghim", "", ""],
    ),
    (
        "a mark after a line drawn to the end without autowrap",
        5,
        2,
        "\x1b[?7labcde\u0301".encode(),
        ["abcde\u0301", ""],
    ),
    (
        "VPA under DECOM with a full-screen region",
        10,
        5,
        b"\x1b[1;5r\x1b[?6h\x1b[4dV",
        ["", "", "", "V", ""],
    ),
    ("REP stops at the end of the line, as in tmux", 5, 3, b"ab\x1b[9bc", ["abbbb", "c", ""]),
    (
        "without autowrap the cursor stays on the last column",
        6,
        3,
        b"\x1b[?7lPASSED\x1b[K",
        ["PASSE", "", ""],
    ),
]


@pytest.mark.parametrize(("why", "cols", "rows", "data", "want"), XTERM_CASES)
def test_moves_and_edits_as_xterm_does(
    why: str, cols: int, rows: int, data: bytes, want: list[str]
) -> None:
    assert screen_of(cols, rows, data) == want, why


def test_decrc_with_nothing_saved_takes_the_defaults_at_home() -> None:
    """With nothing saved (or after DECSTR), DECRC goes home with the defaults xterm's
    soft reset saves: autowrap on, no origin mode, ASCII. xterm itself, never having
    saved, turns autowrap off; a repaint could not put that state on a person's
    terminal, so the pane takes the soft reset's."""
    term = Terminal(10, 3)
    term.feed(b"\x1b[2;3r\x1b[?6h\x1b[?7l\x1b(0\x1b[3;5H\x1b8qqabcdefghijkl")
    assert [row.rstrip() for row in term.screen.display] == ["qqabcdefgh", "ijkl", ""]


def test_a_region_at_the_top_of_the_screen_scrolls_into_history() -> None:
    """apt keeps its progress line below a region of the other rows: what scrolls out
    of that region's top is history, as in xterm."""
    t = Terminal(10, 3, 100)
    t.feed(b"a\r\nb\x1b[1;2r\x1b[2;1H\nc\x1b[2;1H\x1b[S")
    assert [t.row(n).rstrip() for n in range(t.oldest, t.scrolled)] == ["a", "b"]
    t.feed(b"\x1b[2;3r\x1b[3;1H\n")  # a region below the top: nothing enters history
    assert t.scrolled == 2


def test_rep_after_a_fast_chunk_repeats_its_last_character() -> None:
    """The fast path hands pyte only the chunk's last screen (here blank lines): the last
    character drawn is noted for REP as pyte's draw would."""
    data = [b"line Q\r\n" * 100 + b"\r\n" * 6, b"\x1b[3b"]
    fast, ref = Terminal(10, 5, 50), plain(10, 5, 50)
    with fast_for_any_size():
        for chunk in data:
            fast.feed(chunk)
            ref.feed(chunk)
    assert state(fast) == state(ref)
    assert screen_rows(fast)[-1] == "QQQ"


@given(st.lists(st.sampled_from(["a", " ", "\r", "\n", "\x1b[1m", "b "]), max_size=16))
def test_the_last_character_drawn_is_read_from_the_chunks_end(pieces: list[str]) -> None:
    """The fast path notes it from the chunk's last lines: the same as stripping every
    SGR from the whole chunk, then its trailing line ends."""
    text = "".join(pieces)
    rest = b"\x1b" if "\x1b" in text else b""
    screen = Terminal(10, 3, 10).screen
    screen._last = "?"
    fastpath._note_last(screen, text, rest)
    whole = (fastpath._SGR.sub("", text) if rest else text).rstrip("\r\n")
    assert screen._last == (whole[-1] if whole else "?")


@pytest.mark.parametrize(
    ("what", "data", "answer"),
    [
        ("DSR 5: OK", b"\x1b[5n", b"\x1b[0n"),
        ("DSR 6 at home", b"\x1b[6n", b"\x1b[1;1R"),
        ("DSR 6 after motion", b"\x1b[3;7H\x1b[6n", b"\x1b[3;7R"),
        ("DSR 6 at a pending wrap: the last column", b"x" * 10 + b"\x1b[6n", b"\x1b[1;10R"),
        (
            "DSR 6 under DECOM: within the region",
            b"\x1b[2;4r\x1b[?6h\x1b[2;3H\x1b[6n",
            b"\x1b[2;3R",
        ),
        ("primary DA, as tmux answers it", b"\x1b[c", b"\x1b[?1;2c"),
        ("primary DA with its 0", b"\x1b[0c", b"\x1b[?1;2c"),
        ("two queries, answered in order", b"\x1b[6n\x1b[c", b"\x1b[1;1R\x1b[?1;2c"),
        ("DECXCPR is not answered", b"\x1b[?6n", b""),
        ("secondary DA is not answered", b"\x1b[>c", b""),
        ("a DA answer echoed back is not a query", b"\x1b[?1;2c", b""),
        ("a cursor report echoed back is not a query", b"\x1b[1;1R", b""),
        ("other DSR modes are not answered", b"\x1b[15n\x1b[6;1n", b""),
    ],
)
def test_queries_are_answered(what: str, data: bytes, answer: bytes) -> None:
    """A program that asks where its cursor is (or what terminal this is) and waits for
    the answer gets one, as under xterm and tmux; the sentinel writes it to the program's
    input."""
    term = Terminal(10, 5)
    term.feed(data)
    assert bytes(term.answers) == answer, what


def test_answers_are_bounded() -> None:
    """A program that asks without reading cannot make the terminal hold more than
    ANSWERS_MAX bytes of answers."""
    from workers.vt import ANSWERS_MAX

    term = Terminal(80, 24)
    term.feed(b"\x1b[24;80H" + b"\x1b[6n" * 10_000)
    assert ANSWERS_MAX - 8 < len(term.answers) <= ANSWERS_MAX
    assert bytes(term.answers).startswith(b"\x1b[24;80R\x1b[24;80R")


def test_decstr_is_a_soft_reset() -> None:
    """DECSTR (``CSI ! p``, sent by ``tput reset``) puts back what xterm's soft reset does,
    cursor keys included, and leaves the text and the cursor where they are."""
    term = Terminal(10, 5)
    term.feed(b"ab\x1b[?1h\x1b[4h\x1b[?6h\x1b[?7l\x1b[?25l\x1b[2;4r\x1b[1;31m\x1b(0\x1b7\x1b[3;3H")
    s = term.screen
    term.feed(b"\x1b[!p")
    assert (1 << 5) not in s.mode and 4 not in s.mode and (6 << 5) not in s.mode
    assert (7 << 5) in s.mode and (25 << 5) in s.mode and not s.cursor.hidden
    assert s.margins is None and s.savepoints == []
    assert (s.cursor.y, s.cursor.x) == (3, 2)  # CUP under DECOM: the region's row 3
    term.feed(b"q")
    cell = s.buffer[3][2]
    assert (cell.data, cell.fg, cell.bold) == ("q", "default", False)
    assert s.display[0].startswith("ab")
    odd = Terminal(10, 5)
    odd.feed(b"\x1b[?1h\x1b[1!p\x1b[?!p\x1b[!!p")
    assert (1 << 5) in odd.screen.mode  # not DECSTR: parsed, not applied


HOME_SAVED = b"\x1b[H\x1b7"  # nothing saved: DECRC goes home


@pytest.mark.parametrize(
    ("data", "restated"),
    [
        (b"\x1b[?6h\x1b[3;4H", HOME_SAVED + b"\x1b[?6h\x1b[3;4H"),  # origin mode, no region
        (b"\x1b[2;5r\x1b[?6h\x1b[2;3H", HOME_SAVED + b"\x1b[2;5r\x1b[?6h\x1b[2;3H"),
        (b"\x1b[2;5r\x1b[7;1H", HOME_SAVED + b"\x1b[2;5r\x1b[7;1H"),  # below the region
        (
            b"\x1b[?2004h\x1b[?25l\x1b[?7l\x1b[4h\x1b(0",
            HOME_SAVED + b"\x1b[1;1H\x1b[?2004h\x1b[?25l\x1b[?7l\x1b[4h\x1b(0",
        ),
        (b"plain", HOME_SAVED + b"\x1b[1;6H"),
        (  # the saved cursor, on a terminal that has the defaults, and left with them
            b"\x1b[?6h\x1b[?7l\x1b(0\x1b[3;4H\x1b7\x1b[?6l\x1b[?7h\x1b(B\x1b[5;1H",
            b"\x1b[?6h\x1b[3;4H\x1b[?7l\x1b(0\x1b7\x1b[?6l\x1b[?7h\x1b(B\x1b[5;1H",
        ),
        (b"x" * 20, HOME_SAVED + b"\x1b[1;20Hx"),  # a pending wrap: the last cell again
        ("x" * 18 + "中", HOME_SAVED + "\x1b[1;19H中".encode()),  # all of a wide one
        # drawn to the end, then autowrap off: the next character after it is turned
        # back on still starts the next line, so the pending wrap is restated too
        (b"x" * 20 + b"\x1b[?7l", HOME_SAVED + b"\x1b[1;20Hx\x1b[?7l"),
    ],
)
def test_restate_carries_what_draws_what_follows(data: bytes, restated: bytes) -> None:
    """A repaint ends with what a fresh terminal needs to draw the pane's next output as
    the pane does."""
    term = Terminal(20, 8)
    term.feed(data if isinstance(data, bytes) else data.encode())
    assert term.restate() == restated


def test_a_repaint_after_a_narrowing_resize_keeps_the_next_line() -> None:
    """A wide character cut by a narrower pane, at a pending wrap: the repaint shows its
    cell blank, and what the program prints next starts the next line, as in the pane
    (drawing the wide character again would wrap it onto that line)."""
    pane = Terminal(4, 3)
    pane.feed("中中".encode())
    pane.resize(3, 3)
    person = Terminal(3, 3)
    person.feed(UNSTATE + repaint(pane) + pane.restate())
    for term in (pane, person):
        term.feed(b"Z")
    assert person.screen.reported_cursor() == pane.screen.reported_cursor() == (1, 1)
    assert person.screen.display[1] == pane.screen.display[1] == "Z  "


_PROGRAM = st.lists(
    st.sampled_from(
        [
            b"ab",
            b"wxyz" * 3,
            "中".encode(),
            b"\r",
            b"\n",
            b"\x1b7",
            b"\x1b8",
            b"\x1b[2;4r",
            b"\x1b[r",
            b"\x1b[?6h",
            b"\x1b[?6l",
            b"\x1b[?7l",
            b"\x1b[?7h",
            b"\x1b[4h",
            b"\x1b[4l",
            b"\x1b(0",
            b"\x1b(B",
            b"\x1b[2;9H",
            b"\x1b[5;3H",
            b"\x1b[H",
            b"\x1b[10G",
            b"\x1b[!p",
        ]
    ),
    max_size=14,
).map(b"".join)


def _shown(t: Terminal) -> list[str]:
    """The rows on screen as capture reads them: a wide character whose right half was
    written over is a blank cell, as in xterm (pyte's ``display`` still draws it)."""
    return [t.row(n) for n in range(t.end - t.rows, t.end)]


@settings(max_examples=300, deadline=None)
@given(before=_PROGRAM, after=_PROGRAM)
@example(before=b"abababab" + "中".encode() + b"\x1b[?7lab", after=b"")
def test_a_repaint_draws_what_follows_as_the_pane_does(before: bytes, after: bytes) -> None:
    """A terminal that was shown the pane's repaint (attach) and then the program's next
    output shows the same text, with the cursor in the same place, as the pane itself:
    whatever the program saved, scrolled, wrapped or switched before the repaint."""
    pane = Terminal(10, 5)
    pane.feed(before)
    person = Terminal(10, 5)
    person.feed(UNSTATE + repaint(pane) + pane.restate())
    for data in (b"", after):
        pane.feed(data)
        person.feed(data)
        assert _shown(person) == _shown(pane)
        assert person.screen.reported_cursor() == pane.screen.reported_cursor()
