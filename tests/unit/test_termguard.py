"""What of a pane's output reaches a person's terminal (``venomx attach``, ``venomx exec``):
only what draws, however the bytes are split, at a cost linear in them."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.helpers import ROOT
from venomx.cli.termguard import CSI_MAX, TermGuard

SOFT = b"\x1b[0m\x1b[4l\x1b[?1l\x1b>\x1b[?7h\x1b[?25h\x1b(B"

# What a terminal may be given, written independently of the guard's tables.
SAFE = re.compile(
    r"(?:[^\x00-\x1f\x7f-\x9f]|[\x07-\x0d]"
    r"|\x1b[78DEM=>]|\x1b[()][0B]|\x1b#8"
    r"|\x1b\[[0-9;:]*m"
    r"|\x1b\[[0-9;]*[@ABCDEFGHIKLMPSTXZ`abdefrsu]"
    r"|\x1b\[0*[12]?J"
    r"|\x1b\[\??[0-9;]*[hl]|\x1b\[[0-9;]* q)*"
)
MODES = re.compile(r"\x1b\[(\??)([0-9;]*)[hl]")
ALLOWED_MODES = {
    "": {"4"},
    "?": {"1", "6", "7", "25", "1000", "1002", "1003", "1004", "1005", "1006", "1015"}
    | {"1016", "2004", "2026"},
}


def safe(out: bytes, alternate: bool) -> bool:
    text = out.decode()  # strict: what is sent is valid UTF-8
    if SAFE.fullmatch(text) is None:
        return False
    extra = {"47", "1047", "1049"} if alternate else set()
    for prefix, params in MODES.findall(text):
        if not set(filter(None, params.split(";"))) <= ALLOWED_MODES[prefix] | extra:
            return False
    return True


@pytest.mark.parametrize(
    ("what", "data", "shown"),
    [
        ("text and colours", b"a\x1b[1;31mb\x1b[38:2::1:2:3mc\x1b[m\r\n\t", None),
        ("cursor motion and erases", b"\x1b[5;7H\x1b[2K\x1b[J\x1b[3A\x1b[2@\x1b[4P", None),
        ("the modes full-screen programs use", b"\x1b[?1h\x1b=\x1b[?1000;1006h\x1b[?25l", None),
        ("line drawing", b"\x1b(0qqq\x1b(B", None),
        ("a clipboard write", b"a\x1b]52;c;cm0gLXJmIH4K\x07b", b"ab"),
        ("a title, ended by ST", b"a\x1b]2;title\x1b\\b", b"ab"),
        ("a hyperlink", b"\x1b]8;;https://x.test\x1b\\link\x1b]8;;\x1b\\", b"link"),
        ("DECRQSS and XTGETTCAP", b"\x1bP$qm\x1b\\\x1bP+q544e\x1b\\x", b"x"),
        ("APC, PM and SOS", b"\x1b_Gi=1;AAAA\x1b\\\x1b^pm\x1b\\\x1bXsos\x1b\\x", b"x"),
        ("queries whose answers would be typed", b"\x1b[6n\x1b[c\x1b[>c\x1b[=c\x1bZ", b""),
        ("window reports and resizes", b"\x1b[21t\x1b[8;100;300t\x1b[14t", b""),
        ("DECRQM and XTVERSION", b"\x1b[?2026$p\x1b[>q\x1b[?u", b""),
        ("the person's scrollback is not erased", b"\x1b[3J\x1b[0;3J", b""),
        ("modes that outlive the view", b"\x1b[?3h\x1b[20h\x1b[?1001h\x1b[>4;2m", b""),
        ("a mode list keeps the allowed ones", b"\x1b[?3;1000;9999h", b"\x1b[?1000h"),
        ("S8C1T and UTF-8 switches", b"\x1b G\x1b%@\x1b%G", b""),
        ("tab stops are left alone", b"\x1bH\x1b[3g", b""),
        ("ENQ and other C0 controls", b"a\x05\x00\x0e\x0f\x1cb\x7f", b"ab"),
        ("C1 controls as UTF-8", "\u009b31mx\u009d0;t\u009cy\u0085\u0084".encode(), b"\x1b[31mxy"),
        ("invalid UTF-8 is replaced", b"a\xff\x9bb", "a\ufffd\ufffdb".encode()),
        ("RIS: the resets and a cleared screen", b"\x1bc", SOFT + b"\x1b[H\x1b[2J"),
        ("DECSTR: the resets, not DECSTR (it resets the palette)", b"\x1b[!p", SOFT),
        ("selective erase (DECSED 3 erases scrollback)", b"\x1b[?3J\x1b[?1K", b""),
        ("fonts 10-19 (the Linux console's C1 switch)", b"\x1b[11m\x1b[1;12;31m", b"\x1b[1;31m"),
        ("colour 11 is no font", b"\x1b[38;5;11m\x1b[48;2;11;12;13m", None),
        ("the console reads 58's arguments as SGRs", b"\x1b[58;5;11m\x1b[58;2;11;0;0m", b""),
        ("an incomplete colour ends what passes", b"\x1b[1;38;2;11m\x1b[48;2;12;1m", b"\x1b[1m"),
        ("a colour past 255, a wrapping number", b"\x1b[1;38;5;300;4m\x1b[4294967307m", b"\x1b[1m"),
        ("underline styles and ITU colours", b"\x1b[4:3m\x1b[58:2::1:2:3m\x1b[59m", None),
        ("leading zeros", b"\x1b[01;34m\x1b[038;05;208;1m\x1b[00m", None),
        (
            "REP repeats at most a line",
            b"a\x1b[65535b\x1b[b\x1b[0b\x1b[1;2b",
            b"a\x1b[1024b\x1b[1b\x1b[1b",
        ),
        ("a broken CSI is dropped", b"\x1b[12\x01x", b"x"),
        ("ESC before text", b"\x1b\x1b[1mx", b"\x1b[1mx"),
        ("an unended string swallows the rest", b"a\x1b]0;" + b"x" * 1000, b"a"),
        ("CAN ends a string", b"\x1bPq#0\x18after", b"after"),
        ("a CSI too long to be drawing", b"\x1b[" + b"1" * CSI_MAX + b"mX", b"X"),
    ],
)
def test_what_a_terminal_is_shown(what: str, data: bytes, shown: bytes | None) -> None:
    out = TermGuard().feed(data)
    assert out == (data if shown is None else shown), what
    assert safe(out, alternate=True)


def test_the_alternate_screen_in_place() -> None:
    """attach already shows the pane on the alternate screen: the program's own is drawn
    there, and leaving it asks for a repaint of the primary screen it returns to."""
    g = TermGuard(alternate=False)
    assert g.feed(b"\x1b[?1049h") == b"\x1b7\x1b[2J"
    assert not g.repaint_wanted
    assert g.feed(b"vim\x1b[?1;1049l") == b"vim\x1b[?1l\x1b[2J\x1b8"
    assert g.repaint_wanted and not g.in_alternate
    passing = TermGuard()
    assert passing.feed(b"\x1b[?1049h") == b"\x1b[?1049h" and passing.in_alternate
    assert not passing.repaint_wanted


def test_restore_puts_back_what_the_program_changed() -> None:
    g = TermGuard()
    assert g.restore() == "\x1b[0m\x1b[?25h"  # nothing to undo: the cursor stays put
    g.feed(b"\x1b[?1000h\x1b[?7l\x1b[4h\x1b=\x1b[5 q\x1b(0\x1b[2;5r\x1b[?1049h\x1b[?25l")
    out = g.restore()
    for part in ("\x1b[?1000l", "\x1b[?7h", "\x1b[4l", "\x1b>", "\x1b[0 q", "\x1b(B", "\x1b[r"):
        assert part in out, part
    assert out.endswith("\x1b[?1049l\x1b[?25h") and out.count("\x1b[?25h") == 1
    inline = TermGuard()
    inline.feed(b"\x1b[1;20r")  # apt's progress line, left behind
    assert inline.restore() == "\x1b[0m\x1b[r\x1b[9999;1H\r\n\x1b[?25h"


# fmt: off
TOKENS = [
    b"\x1b", b"\x1b[", b"\x1b[?", b"\x1b]", b"\x1bP", b"\x1b\\", b"\x1b(", b"\x1b ",
    b"[", b"?", b">", b"1", b"6", b"0", b"4", b"1049", b";", b":", b"h", b"l", b"m",
    b"n", b"c", b"t", b"J", b"q", b" ", b"!", b"$", b"\x07", b"\x18", b"%", b"#",
    b"x", b"\r\n", b"\xc2\x9b", b"\xc2\x9d", b"\xc2\x9c", b"\xc2", b"\xe2\x94\x80",
    b"\xff", b"\x05", b"\x7f", b"38", b"48", b"5", b"2",
]
# fmt: on
HOSTILE = st.lists(st.sampled_from(TOKENS), max_size=60).map(b"".join)


@settings(max_examples=400, deadline=None)
@given(data=HOSTILE | st.binary(max_size=300), cuts=st.lists(st.integers(0, 10**6), max_size=30))
def test_any_bytes_split_anywhere(data: bytes, cuts: list[int]) -> None:
    """Whatever the program prints, and however reads split it, the terminal is given
    the same bytes, and only bytes that draw."""
    for alternate, utf8 in ((True, True), (False, True), (True, False)):
        whole = TermGuard(alternate, utf8)
        expected = whole.feed(data)
        assert safe(expected, alternate)
        assert utf8 or expected.isascii()
        pieces = TermGuard(alternate, utf8)
        got = b""
        last = 0
        for cut in sorted(c % (len(data) + 1) for c in cuts):
            got += pieces.feed(data[last:cut])
            last = cut
        got += pieces.feed(data[last:])
        assert got == expected
        assert pieces.restore() == whole.restore()
        assert pieces.repaint_wanted == whole.repaint_wanted


@pytest.mark.parametrize(
    "sgr", [b"\x1b[38;5;:m", b"\x1b[38;5:1m", b"\x1b[38;:m", b"\x1b[48;2;1;2;:m", b"\x1b[58;5;1:m"]
)
def test_a_colour_whose_number_is_a_colon_is_dropped_not_raised(sgr: bytes) -> None:
    """Nine bytes a program prints must not end the view of everyone watching it."""
    guard = TermGuard()
    assert guard.feed(b"a" + sgr + b"b") == b"ab"


@pytest.mark.parametrize(
    "pattern",
    [
        b"\x1b[" + b"1" * 1_000_000,
        b"\x1b[" * 500_000,
        b"\x1b]" + b"x" * 1_000_000,
        b"\x1b" * 1_000_000,
        b"\x1b(" * 500_000,
        b"\x1b[?1049h\x1b[?1049l" * 50_000,
    ],
)
def test_hostile_megabytes_cost_one_pass(pattern: bytes) -> None:
    """A megabyte of each pattern, in 4 KiB reads, within the test's timeout: nothing
    held between reads grows past CSI_MAX, so no read rescans what came before."""
    g = TermGuard(alternate=False)
    out = b"".join(g.feed(pattern[i : i + 4096]) for i in range(0, len(pattern), 4096))
    assert safe(out, alternate=False)
    assert len(g._held) <= CSI_MAX + 2


def test_overlong_sequences_are_dropped_wherever_reads_split() -> None:
    for data in (b"\x1b" + b" " * 300 + b"0after", b"\x1b[" + b"1" * 300 + b"mafter"):
        whole = TermGuard().feed(data)
        for cut in (1, 2, 200, 257, 258, 301):
            g = TermGuard()
            assert g.feed(data[:cut]) + g.feed(data[cut:]) == whole == b"after"


def test_a_terminal_that_is_not_utf8_is_given_ascii() -> None:
    """In UTF-8, U+00DB is C3 9B; an 8-bit terminal reads 9B as CSI, so ``Û6n`` would be
    a cursor query. Such a terminal is shown an underscore per column, as tmux does."""
    g = TermGuard(utf8=False)
    shown = "\u00db6n \u4e2d e\u0301 \u2764\ufe0f \x1b[1m".encode()
    assert g.feed(shown) == b"_6n __ e _ \x1b[1m"  # as wide as the pane's terminal has it


@pytest.mark.parametrize(
    ("env", "utf8"),
    [
        ({"LANG": "en_US.UTF-8"}, True),
        ({"LANG": "C.utf8"}, True),
        ({"LC_ALL": "C", "LANG": "en_US.UTF-8"}, False),
        ({"LANG": "C"}, False),  # Python sets LC_CTYPE=C.UTF-8 itself: not the person's
        ({}, False),
        ({"LC_CTYPE": "C.UTF-8", "LANG": "C"}, True),
        ({"LANG": "C", "PYTHONUTF8": "1"}, False),  # coerced all the same
        ({"LANG": "C", "PYTHONUTF8": "0"}, False),
        ({"LC_CTYPE": "C", "LANG": "en_US.UTF-8"}, False),
    ],
)
def test_utf8_is_judged_by_the_locale_as_tmux_does(env: dict[str, str], utf8: bool) -> None:
    probe = "from venomx.visible import utf8_locale; print(utf8_locale())"
    done = subprocess.run(
        [sys.executable, "-c", probe],
        env={"PATH": os.environ.get("PATH", ""), "PYTHONPATH": str(ROOT), **env},
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert done.stdout.strip() == str(utf8), done.stderr


JSON_PROBE = (
    "import sys; from venomx.visible import json_line; "
    "sys.stdout.buffer.write(json_line({'a': '\\u00db\\u009b\\U0001f600'}))"
)


@pytest.mark.parametrize(
    ("lang", "shown"),
    [
        ("C", rb'{"a":"\u00db\u009b\ud83d\ude00"}'),
        ("C.UTF-8", '{"a":"\u00db\\u009b\U0001f600"}'.encode()),
    ],
)
def test_json_to_a_terminal_that_is_not_utf8_is_ascii(lang: str, shown: bytes) -> None:
    """--json on such a terminal escapes every non-ASCII character: the same value, and
    no byte 0x80-0x9F for the terminal to obey; C1 is escaped everywhere."""
    main, sub = os.openpty()
    try:
        subprocess.run(
            [sys.executable, "-c", JSON_PROBE],
            stdout=sub,
            env={"PATH": os.environ.get("PATH", ""), "PYTHONPATH": str(ROOT), "LANG": lang},
            timeout=30,
            check=True,
        )
        got = os.read(main, 4096)
    finally:
        os.close(sub)
        os.close(main)
    assert got == shown


def test_exec_knows_whether_its_line_starts_a_line() -> None:
    """Only text, CR and LF move where the next line starts: a colour reset after the
    last newline, or a progress line's CR and erase, leave exec's line where it is."""
    g = TermGuard()
    g.feed(b"abc\r\n\x1b[0m")
    assert g.line_start
    g.feed(b"partial\x1b[K")
    assert not g.line_start
    g.feed(b"\r\x1b[K")
    assert g.line_start


def test_json_escapes_del_in_ascii_too() -> None:
    from venomx.visible import json_line

    assert json_line({"a": "x\x7f"}) == b'{"a":"x\\u007f"}'


def test_a_soft_reset_under_attach_forgets_the_saved_cursor_as_the_pane_does() -> None:
    """DECSTR empties the pane's saved cursor, so its next DECRC goes home; the person's
    terminal, whose saved cursor the repaint set, must go home too (the guard replaces
    DECSTR with the resets it implies, and saves the cursor where they leave it)."""
    from workers.rows import repaint
    from workers.vt import UNSTATE, Terminal

    pane = Terminal(10, 5)
    pane.feed(b"\x1b[5;3H\x1b7progress")
    person = Terminal(10, 5)
    guard = TermGuard(alternate=False)
    person.feed(guard.feed(UNSTATE + repaint(pane) + pane.restate()))
    after = b"\x1b[!p\x1b8X"
    pane.feed(after)
    person.feed(guard.feed(after))
    assert pane.screen.reported_cursor() == person.screen.reported_cursor() == (0, 1)
    assert person.screen.display[0].startswith("X") and pane.screen.display[0].startswith("X")
