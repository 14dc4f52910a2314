"""OSC 133/7501 markers are found wherever reads split them."""

from __future__ import annotations

from workers.osc import Observation, Scanner

STREAM = (
    b"hello\x1b]133;C\x07 out \x1b]133;D;7\x1b\\ more \x1b]7501;state=busy\x07"
    b"\x1b]7501;state=\x07\x1b]133;D\x07 end \x1b]2;title\x07"
)


def scan(chunks: list[bytes]) -> list[Observation]:
    s = Scanner()
    off = 0
    found = []
    for c in chunks:
        off += len(c)
        found += s.feed(c, off)
    return found


def test_whole_stream() -> None:
    got = scan([STREAM])
    assert [(o.what, o.exit_code, o.state) for o in got] == [
        ("started", None, None),
        ("finished", 7, None),
        ("status", None, "busy"),
        ("status", None, None),
        ("finished", None, None),
    ]
    assert got[0].offset == STREAM.index(b" out")


def test_every_split_point_and_every_byte() -> None:
    whole = scan([STREAM])
    for i in range(len(STREAM) + 1):
        assert scan([STREAM[:i], STREAM[i:]]) == whole, i
    assert scan([STREAM[i : i + 1] for i in range(len(STREAM))]) == whole


def test_unterminated_is_bounded() -> None:
    s = Scanner()
    s.feed(b"\x1b]133;" + b"x" * 10000, 10006)
    assert len(s._carry) <= 256
