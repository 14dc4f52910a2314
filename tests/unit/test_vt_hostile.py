"""The terminal against hostile output: nothing raises, stalls, or drops the text after it.

Costs are measured by ``workers.vtcost.vt_costs`` (scripts/bench), never timed here; these
tests check behaviour: the content is kept, nothing raises, and what the VT holds while
parsing a flood stays bounded by what it keeps.
"""

from __future__ import annotations

import functools
import itertools
import os
import random
import unicodedata
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from pyte.screens import Char, StaticDefaultDict

from workers import fastpath, screen, vtcost
from workers.rows import Snapshot, capture, repaint, tail
from workers.screen import STRING_MAX
from workers.vt import Terminal

# Known crashers and stallers of pyte, and sequences pyte drew as text.
CORPUS = [
    b"\x1b[3K",
    b"\x1b[4J",
    b"\x1b[9J",
    b"\x1b[?3K",  # erase with a value pyte never set
    b"\x1b[1;2A",
    b"\x1b[?5n",
    b"\x1b[?1;2r",  # handler arity
    b"\x1b[" + b"9" * 5000 + b"m",
    b"\x1b[" + b"1;" * 3000 + b"m",  # huge CSI
    b"\x1b[" + "٣²".encode() + b"A",  # non-ASCII "digits"
    b"\x1b]0;" + b"t" * 20000,
    b"\x1b]2;title\x07",
    b"\x1b]\x07",
    b"\x1b]P12",  # OSC
    b"\x1bP+q544e\x1b\\",
    b"\x1b_Gf=100;AAAA\x1b\\",
    b"\x1bX\x9c",
    b"\x1b^pm\x1b\\",  # strings
    "\u200b\u202e\ufeff\u200d".encode(),
    "\u0301".encode() * 300,
    "\U000e0001".encode(),
    b"\x1b#8",
    b"\x1b[?5h",
    b"\x1b[?5l",
    b"\x1b[?3h",
    b"\x1b[?3l",
    b"\x1b[4h",
    b"\x1b[4l",
    b"\x1b[2;99r",
    b"\x1b[99;2r",
    b"\x1b[0;0r",
    b"\x1bM" * 30,
    b"\n" * 30,
    b"\x1bD\x1bE",
    b"\x1b[9999L",
    b"\x1b[9999M",
    b"\x1b[9999@",
    b"\x1b[9999P",
    b"\x1b[9999X",
    b"\x1b[9999b",
    b"\x1b[9999A\x1b[9999C",
    b"\x1b[9999;9999H",
    b"\t" * 40,
    b"\x1bH" * 10,
    b"\x1b[3g",
    b"\x1b7" * 100,
    b"\x1b8" * 101,
    b"\x1b%@\xe9\x1b%G",
    b"\x1b(0lqk\x1b(B",
    b"\x1b[=5u",
    b"\x1b[!p",
    b"\x1b[>4;2m",
    b"\x1b[38:2:255:0:0m",
    b"\x1b[2 q",
    b"\x1b F",
    b"\x1bc",
    b"\x1b[3J",
    b"\x1b[?1049h",
    b"\x1b[?1049l",
    b"\x1b[?47h",
    b"\x1b[?1047l",
    b"\xc2\x9b1m",
    b"\xc2\x9d0;x\x07",
    b"\xc2\x85\xc2\x90\xc2\x9f",
    b"\x00\x7f\x01\x1c",
    b"\x1b",
    b"\x1b[",
    b"\x1b[1",
    b"\x1b]",
    b"\xe2\x80",
    b"\xff\xfe",
    b"\x18",
    b"\x1a",
    "宽".encode() * 50,
    b"x" * 700,
    b"\r\n" * 3,
]

ZERO_WIDTH = (
    "\u0301\u0308\u0332\u200b\u200c\u200d\u200e\u200f\u202a\u202e\u2060\u2064\ufe0f\ufeff\U000e0001"
)
NARROW = "abcXYZ019 .-éñßΩжя"
CONTROLS = "\x01\x06\x10\x1c\x1f\x80\x85\x90\x9c\x9f"


def view(t: Terminal) -> tuple[object, ...]:
    s = t.snapshot()
    return (
        s["history"],
        s["lines"],
        s["cursor"],
        s["oldest"],
        s["epoch"],
        s["offset"],
        s["screen"],
    )


def check_readable(t: Terminal) -> None:
    """Every reader works on the state and agrees with it."""
    s = t.snapshot()
    assert len(s["lines"]) == t.rows and all(type(r) is str for r in s["lines"] + s["history"])
    snap = Snapshot.from_dict(s)
    live = [t.row(n) for n in range(t.oldest, t.end)]
    assert [snap.row(n) for n in range(snap.oldest, snap.end)] == live
    row, col = t.cursor
    assert t.oldest <= row < t.end and 0 <= col < t.cols
    assert capture(t, None, None, None, 1000)["lines"] == live[-1000:]
    assert tail(t, 100, 10000) == tail(snap, 100, 10000)
    assert repaint(t) == repaint(snap)


def cut(data: bytes, points: list[int]) -> list[bytes]:
    edges = sorted({p % (len(data) + 1) for p in points} | {0, len(data)})
    return [data[a:b] for a, b in itertools.pairwise(edges)]


@settings(max_examples=150, deadline=None)
@given(
    st.lists(st.one_of(st.sampled_from(CORPUS), st.binary(max_size=200)), max_size=25),
    st.lists(st.integers(0, 1 << 20), max_size=12),
    st.integers(1, 30),
    st.integers(1, 8),
)
def test_any_chunking_of_the_corpus_is_survived_and_read(
    parts: list[bytes], points: list[int], cols: int, rows: int
) -> None:
    data = b"".join(parts) + b"\x1b[0m\x1b[?1049l\r\nEND"
    whole, chunked = Terminal(cols, rows, 50), Terminal(cols, rows, 50)
    whole.feed(data)
    for piece in cut(data, points):
        chunked.feed(piece)
    # the parser is a state machine over the byte stream: how it was read changes nothing
    assert view(whole) == view(chunked)
    assert whole.dropped == chunked.dropped
    check_readable(chunked)
    chunked.resize(max(1, cols - 3), rows + 1)
    chunked.feed(b"\x1b[999B\r\nafter")  # on a fresh bottom row
    check_readable(chunked)
    text = "".join(chunked.row(n) for n in range(chunked.oldest, chunked.end))
    assert text.rstrip(" ").endswith("after")


@settings(max_examples=60, deadline=None)
@given(st.binary(min_size=1, max_size=4000), st.lists(st.integers(0, 4000), max_size=20))
def test_random_bytes_in_random_chunks(data: bytes, points: list[int]) -> None:
    t = Terminal(20, 6, 30)
    with_fast = fastpath.FAST_MIN
    fastpath.FAST_MIN = 0  # let the fast path see every chunk too
    try:
        for piece in cut(data, points):
            t.feed(piece)
    finally:
        fastpath.FAST_MIN = with_fast
    check_readable(t)


def test_megabytes_of_urandom() -> None:
    rng = random.Random(14)
    t = Terminal(80, 24, 200)
    data = os.urandom(1 << 20) + rng.randbytes(1 << 20)
    for i in range(0, len(data), 131072):  # a sentinel's read size
        t.feed(data[i : i + 131072])
    t.feed(b"\x1b[0m\x1b[?1049l\x1b\\\x07\x18\r\nsurvived")
    assert "survived" in t.row(t.cursor[0])
    check_readable(t)


# -- text is never dropped ----------------------------------------------------------------


def test_zero_width_does_not_end_the_line() -> None:
    t = Terminal(80, 3)
    t.feed("summary: \u200bFAIL: 3 tests failed\r\n".encode())
    assert t.row(0).rstrip() == "summary: \u200bFAIL: 3 tests failed"
    assert tail(t, 10, 1000)["lines"] == [t.row(0)]


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=NARROW + ZERO_WIDTH + CONTROLS, max_size=60), st.integers(0, 5))
def test_text_is_kept_as_written(text: str, indent: int) -> None:
    """Width-1 characters and zero-width code points come back in order, unnormalised,
    C0/C1 controls gone; a zero-width code point at column 0 joins the next character."""
    written = "".join(c for c in text if c not in CONTROLS)
    visible = sum(1 for c in written if c not in ZERO_WIDTH)
    t = Terminal(indent + visible + 1, 2)
    t.feed(b" " * indent + text.encode())
    if visible:
        assert t.row(0) == " " * indent + written + " " * (t.cols - indent - visible)
    elif indent:  # joined to the last space
        assert t.row(0) == " " * indent + written + " "
    else:  # nothing was drawn to carry them: no text, no cell
        assert t.row(0) == " " * t.cols
    assert unicodedata.is_normalized("NFC", t.row(0)) or written != unicodedata.normalize(
        "NFC", written
    )


def test_zero_width_at_column_0_joins_the_next_character() -> None:
    t = Terminal(10, 3)
    t.feed("\u200bFAIL\r\n\u202eabc\r\n\ufeff".encode())
    assert [t.row(n).rstrip() for n in range(3)] == ["\u200bFAIL", "\u202eabc", ""]
    assert t.dropped == 0
    t.feed(b"\x1b[3;5Hx")  # drawn elsewhere: the waiting BOM has no cell
    assert t.row(2).rstrip() == "    x" and t.dropped == 1


def test_zero_width_joins_a_wide_character_and_the_last_column() -> None:
    t = Terminal(4, 2)
    t.feed("宽\u0301ab\u0302".encode())
    assert t.row(0) == "宽\u0301ab\u0302" and t.cursor == (0, 3)
    t.feed(b"c")  # wraps only now: the mark did not move the cursor
    assert t.row(1).rstrip() == "c"


def test_controls_inside_text_are_dropped_alone() -> None:
    t = Terminal(20, 2)
    t.feed(b"a\x01b\x1cc\xc2\x85d\xc2\x90e\xc2\x9cf")
    assert t.row(0).rstrip() == "abcdef"


def test_sequences_are_not_drawn_as_text() -> None:
    t = Terminal(40, 2)
    t.feed(
        b"A\x1b[=5uB\x1b[!pC\x1b[38:2:255:0:0mD\x1bP+q544e\x1b\\E\x1b_Gf=1;AAAA\x1b\\F"
        b"\x1b[2 qG\x1b F\x1b*0H\x1b]0;t\x1b[1mI\x1b[1\xc3\xa9J"
    )
    assert t.row(0).rstrip() == "ABCDEFGHIéJ"


def test_erase_with_unknown_values_is_ignored() -> None:
    t = Terminal(10, 2)
    t.feed(b"abcdef\x1b[3K\x1b[4J\x1b[1;4Hx")
    assert t.row(0).rstrip() == "abcxef" and t.dropped == 0


def test_a_failing_handler_is_dropped_and_counted() -> None:
    t = Terminal(10, 2)
    t.feed(b"a\x1b[1;2Ab\x1b[1;2Bc")
    assert t.row(0).rstrip() == "abc" and t.dropped == 2


def test_a_failure_inside_draw_drops_one_character() -> None:
    t = Terminal(10, 2)

    def broken(count: int | None = None) -> None:
        raise RuntimeError("boom")

    t.screen.insert_characters = broken  # type: ignore[method-assign]
    t.feed("\x1b[4hé€b".encode())  # insert mode draws through insert_characters
    assert t.dropped == 3
    t.feed(b"\x1b[4lok")
    assert t.row(0).startswith("ok")
    check_readable(t)


def test_a_failing_parser_is_reset_and_the_chunk_goes_on() -> None:
    t = Terminal(10, 2)

    def broken() -> object:
        yield None
        raise RuntimeError("boom")

    t.stream._parser = broken()  # type: ignore[assignment]
    next(t.stream._parser)  # type: ignore[arg-type]
    t.stream._taking_plain_text = True
    t.feed(b"a\x07ok")  # the BEL reaches the parser, which fails
    assert t.row(0).startswith("aok") and t.dropped == 1
    t.feed(b"\x1b[31m!")  # a fresh parser
    assert t.row(0).startswith("aok!")


def test_a_failing_fast_path_falls_back_to_the_parser() -> None:
    t = Terminal(10, 2)
    old = fastpath._bulk_lines

    def broken(term: fastpath.Terminal, text: str) -> bool:
        raise RuntimeError("boom")

    fastpath._bulk_lines = broken
    try:
        t.feed(b"".join(b"line %d\r\n" % i for i in range(200)))
    finally:
        fastpath._bulk_lines = old
    assert t.dropped == 1 and t.row(t.cursor[0] - 1).rstrip() == "line 199"


# -- floods keep their content and bounded parser state -----------------------------------


KEPT = screen.CELL_MAX - 1  # zero-width code points a cell keeps after its character


def test_a_combining_flood_keeps_a_cells_worth_and_counts_the_rest() -> None:
    """A cell keeps CELL_MAX code points (xterm keeps 10 marks, tmux 21 bytes): a flood
    on one cell (U+E0100 grew a sentinel by 5 MB/s, session 24) costs no memory."""
    t = Terminal(10, 2)
    t.feed(b"a" + "\u0301".encode() * 100_000 + b"b")
    assert t.row(0) == "a" + "\u0301" * KEPT + "b" + " " * 8
    assert t.dropped == 100_000 - KEPT
    t.feed("\x1b[1;3H\u0302".encode())  # joins the cell before the cursor: b
    assert t.row(0) == "a" + "\u0301" * KEPT + "b\u0302" + " " * 8
    t = Terminal(10, 2)
    t.feed(b"a" + "\U000e0100".encode() * 50_000)
    assert t.row(0) == "a" + "\U000e0100" * KEPT + " " * 9


def test_interleaved_marks_and_controls_are_kept_to_a_cells_worth() -> None:
    t = Terminal(10, 2)
    t.feed(b"a" + "\u0301\x00".encode() * 20_000)
    assert t.row(0) == "a" + "\u0301" * KEPT + " " * 9


def test_a_zero_width_flood_at_column_0() -> None:
    t = Terminal(5, 2)
    t.feed("\u200b".encode() * 50_000 + b"X")
    assert t.row(0) == "\u200b" * KEPT + "X    "
    assert t.dropped == 50_000 - KEPT


def test_a_full_cell_moves_scrolls_and_is_overwritten() -> None:
    t = Terminal(6, 2, 1000)
    marks = "\u0308" * KEPT
    t.feed(("ab" + marks + "cd").encode())
    t.feed(b"\x1b[1;1H\x1b[2@")  # insert two blanks: the cluster moves right
    assert t.row(0) == "  ab" + marks + "cd"
    t.feed(b"\x1b[2;1H\n")  # scrolls the row into history
    assert t.row(0) == "  ab" + marks + "cd"
    t.feed(b"\x1b[1;1H" + b"z" * 600 + b"\r\n" * 4)  # the fast path over a later row
    assert t.row(t.oldest) == "  ab" + marks + "cd"


def test_huge_csi_parameters_are_clamped_not_dropped() -> None:
    t = Terminal(10, 5)
    t.feed(b"\x1b[5;5Ha\x1b[" + b"0" * 10000 + b"1" + b"A" + b"b")
    assert t.cursor == (3, 6) and t.row(3).rstrip() == "     b"
    t.feed(b"\x1b[" + b"9" * 100000 + b"Ac")
    assert t.cursor == (0, 7) and t.row(0).rstrip() == "      c"


def test_an_unterminated_csi_holds_bounded_state() -> None:
    t = Terminal(10, 2)
    t.feed(b"\x1b[" + b"123456789;" * 20000)
    frame = t.stream._parser.gi_frame  # type: ignore[union-attr]
    assert len(frame.f_locals["params"]) == screen.CSI_MAX_PARAMS
    assert len(frame.f_locals["current"]) <= 5
    t.feed(b"mok")
    assert t.row(0).startswith("ok")


def test_an_endless_osc_holds_bounded_state() -> None:
    t = Terminal(10, 2)
    for _ in range(16):
        t.feed(b"\x1b]2;" if _ == 0 else b"t" * 131072)
    kept = t.stream._parser.gi_frame.f_locals["kept"]  # type: ignore[union-attr]
    assert sum(map(len, kept)) <= STRING_MAX + 131072
    t.feed(b"\x07after")
    assert len(t.screen.title) == STRING_MAX - 2 and t.row(0).startswith("after")


def test_savepoints_are_bounded() -> None:
    t = Terminal(10, 2)
    t.feed(b"\x1b7" * 10_000)
    assert len(t.screen.savepoints) == screen.SAVEPOINTS_MAX


# -- the cheap forms of pyte's whole-screen handlers keep its text ------------------------


def test_alignment_display_and_what_follows() -> None:
    t = Terminal(6, 3)
    t.feed(b"\x1b#8")
    assert [t.row(n) for n in range(3)] == ["EEEEEE"] * 3
    t.feed(b"\x1b[1;3H\x1b[2@\x1b[2;3H\x1b[2P\x1b[3;3H\x1b[K")
    assert [t.row(n) for n in range(3)] == ["EE  EE", "EEEE  ", "EE    "]
    t.feed(b"\x1b[2J")
    assert [t.row(n) for n in range(3)] == ["      "] * 3
    t.feed(b"\x1b#8")
    t.resize(3, 3)
    t.resize(8, 3)
    assert t.row(t.end - 1) == "EEE     "


def test_erase_in_display_and_line() -> None:
    for seq, want in [
        (b"\x1b[J", ["abcd", "ef  ", "    "]),
        (b"\x1b[1J", ["    ", "   h", "ijkl"]),
        (b"\x1b[2J", ["    "] * 3),
        (b"\x1b[K", ["abcd", "ef  ", "ijkl"]),
        (b"\x1b[1K", ["abcd", "   h", "ijkl"]),
        (b"\x1b[2K", ["abcd", "    ", "ijkl"]),
    ]:
        t = Terminal(4, 3)
        t.feed(b"abcdefghijkl\x1b[2;3H" + seq)
        assert [t.row(n) for n in range(3)] == want, seq


def test_reverse_video_and_column_mode_keep_the_width() -> None:
    t = Terminal(10, 2)
    t.feed(b"hello\x1b[?5h\x1b[?5l")
    assert t.row(0) == "hello     "
    t.feed(b"\x1b[?3h")
    assert t.cols == 10 and t.row(0) == " " * 10 and t.cursor == (0, 0)


def test_tabs_with_stops_anywhere() -> None:
    t = Terminal(20, 2)
    t.feed(b"\x1b[3g\x1b[1;4H\x1bH\x1b[1;9H\x1bH\x1b[1;1H\tA\tB\tC")
    assert t.row(0) == "   A    B          C"
    t.feed(b"\x1b[1;9H\x1b[g\x1b[1;1H\t\tD")  # no stop left after 3: the last column
    assert t.row(0) == "   A    B          D"


def test_a_stop_set_after_tabs_were_used_is_a_stop_at_once() -> None:
    # tab keeps the stops sorted between uses; HTS adds to that list, it does not resort
    t = Terminal(30, 2)
    t.feed(b"\tX\x1b[1;4H\x1bH\x1b[1;12H\x1bH\x1b[1;4H\x1bH\x1b[2;1H\tA\tB\tC\tD")
    assert t.row(1) == "   A    B  C    D             "
    t.feed(b"\x1b[3g\x1b[2;7H\x1bH\x1b[2;1H\tE\tF")  # all cleared, one set: then the end
    assert t.row(1) == "   A  E B  C    D            F"


def test_wide_pane_costs_are_reported_for_every_shape() -> None:
    costs = vtcost.wide_costs(seconds=0.01, most=4096)
    assert [c["pattern"] for c in costs] == [w[0] for w in vtcost.WIDE_PATTERNS]
    assert all(c["bytes"] > 0 and c["kb_per_s"] > 0 for c in costs)


def test_costs_are_reported_for_every_pattern() -> None:
    costs = vtcost.vt_costs(n=10_000, tries=1)
    assert {c["pattern"] for c in costs} == set(vtcost.COST_PATTERNS)
    for c in costs:
        assert c["bytes_2n"] > c["bytes_n"] > 0 and c["seconds_n"] >= 0 and c["ratio"] >= 0


def test_the_fast_path_scrolls_a_grown_row_out_once() -> None:
    """A row holding a long cluster may leave the screen through the fast path."""
    data = [b"aa" + "\u0301".encode() * (KEPT + 6), b"a" * 40]
    old = fastpath.FAST_MIN
    try:
        fastpath.FAST_MIN = 1 << 30
        ref = Terminal(1, 2, 100)
        for d in data:
            ref.feed(d)
        fastpath.FAST_MIN = 0
        fast = Terminal(1, 2, 100)
        for d in data:
            fast.feed(d)
    finally:
        fastpath.FAST_MIN = old
    assert fast.fast_bytes == 40 and fast.dropped == 6
    assert view(fast) == view(ref)
    assert fast.row(1) == "a" + "\u0301" * KEPT


def test_the_fast_path_holds_only_rows_history_can_keep() -> None:
    """A read of 64K lines on a wide pane: rows that would pass through the whole
    history are never built (pyte-equal result, memory bounded by scrollback)."""
    import tracemalloc

    data = b"ab\n" * 20_000 + b"\x1b[31mc\x1b[0m\n" * 20_000
    old = fastpath.FAST_MIN
    try:
        fastpath.FAST_MIN = 1 << 30
        ref = Terminal(7, 4, 5)
        ref.feed(data)
    finally:
        fastpath.FAST_MIN = old
    fast = Terminal(7, 4, 5)
    fast.feed(data)
    assert fast.fast_bytes == len(data) and view(fast) == view(ref)
    wide = Terminal(400, 24, 1000)
    tracemalloc.start()
    try:
        wide.feed((b"a" * 15 + b"\n") * 65536)  # a row costs 16 bytes and its column
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert wide.fast_bytes == 16 * 65536 and len(wide.history) == 1000
    assert peak < 40 << 20  # 1000 + 24 rows of 400 cells; every row of the read was 200 MB


def test_bare_line_feeds_carrying_the_column_do_not_build_every_width() -> None:
    """With ``~OPOST`` a bare LF keeps the column, so "\\nb" repeated writes each row one
    column further out. The fast path padded every such row to its column: on a
    65535-column pane a read of them held rows of every width (1.4 GB per MB, session
    32). Past a few blanks per byte the parser takes the chunk, its rows sparse; the
    result is pyte's."""
    import tracemalloc

    data = b"\nb" * 6000
    old = fastpath.FAST_MIN
    try:
        fastpath.FAST_MIN = 1 << 30
        ref = Terminal(65535, 16)
        ref.feed(data)
    finally:
        fastpath.FAST_MIN = old
    fast = Terminal(65535, 16)
    tracemalloc.start()
    try:
        fast.feed(data)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert view(fast) == view(ref)
    assert peak < 48 << 20  # every row of the read, padded as a list of cells: 144 MB
    narrow = Terminal(80, 24)
    narrow.feed(b"\nb" * 6000)  # rows at most 80 wide: the fast path keeps the chunk
    assert narrow.fast_bytes == 12000


def test_a_code_point_waiting_at_column_0_never_moves_to_another_row() -> None:
    # on the bottom row a line feed scrolls: the screen row stays, the text row does not
    term = Terminal(20, 3)
    term.feed("a\r\nb\r\nc\r\n\u200b\r\nOK done\r\n".encode())
    rows = [term.row(n).rstrip() for n in range(term.oldest, term.end)]
    assert "OK done" in rows and not any("\u200b" in r and "OK" in r for r in rows)
    assert term.dropped == 1


CELL_TEXTS = st.sampled_from(["a", " ", "", "中", "\u0301", "e\u0301", "\u200b", "é", "🙂", "ｱ"])


@given(
    st.integers(1, 300),
    st.dictionaries(st.integers(0, 320), CELL_TEXTS, max_size=40),
    st.booleans(),
)
def test_a_sparse_row_reads_as_the_dense_one(
    cols: int, cells: dict[int, str], reverse: bool
) -> None:
    """A row with few cells written is built from those cells and runs of blanks; its
    text is exactly the cell-by-cell one (wide halves, zero-width cells and all)."""
    line: StaticDefaultDict[int, Char] = StaticDefaultDict(
        screen._BLANK_REVERSE if reverse else screen._BLANK
    )
    for x, text in cells.items():
        line[x] = screen._BLANK._replace(data=text)
    assert screen.row_text(line, cols) == "".join(screen.row_cells(line, cols))


def test_a_line_feed_in_a_very_wide_pane_costs_its_written_cells() -> None:
    """One character at column 9000 per row: each line feed turns a row of 65535 cells
    into text. Counted in cells visited, not time: the row is built sparsely."""
    term = Terminal(65535, 16, 100)
    visited = 0
    dense = screen.row_cells

    def counting(line: object, cols: int) -> list[str]:
        nonlocal visited
        visited += cols
        return dense(line, cols)

    screen.row_cells = counting  # type: ignore[assignment]
    try:
        term.feed(b"\x1b[9000GX\r\n" * 200)
    finally:
        screen.row_cells = dense  # type: ignore[assignment]
    assert visited == 0
    assert term.row(term.oldest).rstrip() == " " * 8999 + "X"


def test_a_very_wide_panes_history_is_bounded_in_code_points() -> None:
    """Every row 9000 cells of text: the scrollback of 10000 rows would be 90 M code
    points; the oldest rows go past the budget instead, and what is kept reads whole."""
    from workers.history import BLOCK
    from workers.vt import HISTORY_BUDGET

    term = Terminal(65535, 16, 10000)
    term.feed(b"\x1b[9000GX\r\n" * 4000)
    kept = len(term.history)
    assert kept < 4000 and term.oldest == term.scrolled - kept > 0
    assert term.history._chars <= HISTORY_BUDGET + 2 * BLOCK * 9001
    assert term.row(term.oldest).rstrip() == " " * 8999 + "X"
    assert term.row(term.oldest).__len__() == 65535


EDITS = st.lists(
    st.one_of(
        st.tuples(st.just("draw"), st.integers(0, 40), st.text("ab中é", min_size=1, max_size=6)),
        st.tuples(
            st.sampled_from(["ich", "dch", "ech", "el0", "el1", "el2"]),
            st.integers(0, 40),
            st.integers(0, 50),
        ),
        st.tuples(st.just("decaln"), st.just(0), st.just(0)),
    ),
    max_size=12,
)


OPS = {"ich": "insert_characters", "dch": "delete_characters", "ech": "erase_characters"}
EL = {"el0": 0, "el1": 1, "el2": 2}


@settings(max_examples=300, deadline=None)
@given(st.integers(1, 40), EDITS, st.booleans())
def test_insert_and_delete_characters_move_only_written_cells(
    cols: int, edits: list[tuple[str, int, object]], rebuild: bool
) -> None:
    """ICH, DCH and ECH visit the cells written, not every column; rows read exactly as
    with pyte's column-by-column versions (after writing out a DECALN line's E's, and
    without the cell pyte keeps past the right edge), moving cells one by one or
    rebuilding the row."""
    import pyte

    ours, ref = Terminal(cols, 3, 0), Terminal(cols, 3, 0)
    kept = screen.REBUILD_AT
    screen.REBUILD_AT = 0 if rebuild else kept
    try:
        edit_both(cols, edits, ours, ref, pyte)
    finally:
        screen.REBUILD_AT = kept


def edit_both(
    cols: int, edits: list[tuple[str, int, object]], ours: Terminal, ref: Terminal, pyte: Any
) -> None:
    for op, x, arg in edits:
        for t in (ours, ref):
            s = t.screen
            s.cursor.y, s.cursor.x = 1, min(x, cols - 1)
            if op == "draw":
                s.draw(str(arg))
            elif op == "decaln":
                s.alignment_display()
            elif op in EL:
                if t is ours:
                    s.erase_in_line(EL[op])
                else:
                    s._solid(s.buffer[1])
                    for k in (
                        range(cols)
                        if EL[op] == 2
                        else range(s.cursor.x, cols)
                        if EL[op] == 0
                        else range(s.cursor.x + 1)
                    ):
                        s.buffer[1].pop(k, None)
            elif t is ours:
                getattr(s, OPS[op])(int(str(arg)))
            else:
                s._solid(s.buffer[1])
                getattr(pyte.Screen, OPS[op])(s, int(str(arg)))
                for k in [k for k in s.buffer[1] if k >= cols]:
                    del s.buffer[1][k]  # pyte keeps a cell pushed past the edge; no terminal does
        seen = [[t.row(t.scrolled + n) for n in range(3)] for t in (ours, ref)]
        assert seen[0] == seen[1], (op, x, arg)


def test_insert_and_delete_in_a_very_wide_pane_touch_only_written_cells() -> None:
    term = Terminal(65535, 4, 0)
    term.feed(b"\x1b[2;9000HX\x1b[2;1H\x1b[5@\x1b[3P\x1b[2X")
    line = term.screen.buffer[1]
    assert len(line) == 1 and term.row(1).rstrip() == " " * 9001 + "X"


@given(
    st.integers(1, 300),
    st.dictionaries(st.integers(0, 320), CELL_TEXTS, max_size=40),
    st.booleans(),
)
def test_a_row_entering_history_is_its_text_without_trailing_blanks(
    cols: int, cells: dict[int, str], decaln: bool
) -> None:
    line: StaticDefaultDict[int, Char] = StaticDefaultDict(
        screen._BLANK._replace(data="E") if decaln else screen._BLANK
    )
    for x, text in cells.items():
        line[x] = screen._BLANK._replace(data=text)
    assert screen.row_text(line, cols, pad=False) == screen.row_text(line, cols).rstrip(" ")


INSERTED = st.lists(
    st.one_of(
        st.text("ab中é\u0301\u200b", min_size=1, max_size=8),
        st.sampled_from(["\r", "\n", "\x1b[3b", "\x1b[99b", "\x1b[?7l", "\x1b[?7h", "\x1b#8"]),
        st.integers(1, 14).map(lambda x: f"\x1b[{x}G"),
    ),
    max_size=14,
)


@settings(max_examples=300, deadline=None)
@given(st.integers(1, 12), INSERTED)
def test_insert_mode_makes_room_once_and_draws_as_character_by_character(
    cols: int, pieces: list[str]
) -> None:
    """Insert mode drew each character after its own ICH, which moves every written cell
    after the cursor: REP in insert mode cost 65535 moves of 65535 cells. The room for
    what fits on the line is made at once; rows, cursor and the cells that fall off the
    end are exactly those of the character-by-character drawing."""
    data = ("\x1b[4h" + "".join(pieces)).encode()
    ours = Terminal(cols, 3, 5)
    ours.feed(b"xyz" * 8 + b"\x1b[H")
    ours.feed(data)
    ref = Terminal(cols, 3, 5)
    per_character = functools.partial(ref.screen._draw_cells, insert=True)
    ref.screen._draw_inserting = per_character  # type: ignore[method-assign]
    ref.feed(b"xyz" * 8 + b"\x1b[H")
    ref.feed(data)
    assert view(ours) == view(ref)


def test_rep_in_insert_mode_on_a_very_wide_pane_moves_the_row_once() -> None:
    term = Terminal(65535, 4, 0)
    moved = 0
    shift = term.screen._shift_cells

    def counting(n: int) -> None:
        nonlocal moved
        moved += len(term.screen.buffer[term.screen.cursor.y])
        shift(n)

    term.feed(b"a\x1b[65535b\r")
    n = len(term.row(0).rstrip())  # REP's count is clamped as any parameter is
    term.screen._shift_cells = counting  # type: ignore[method-assign]
    term.feed(b"\x1b[4hb\x1b[65535b")
    assert moved <= 3 * n  # once per draw ("b", then REP), not once per character (n * n)
    assert term.row(0).rstrip() == "b" * n + "a" * n
