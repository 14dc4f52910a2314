"""The bytes of panes that ended lately (venomx.daemon.panes.replays)."""

from __future__ import annotations

from venomx.daemon.panes.replays import Replays


def test_replays_keep_the_newest_within_their_budget() -> None:
    r = Replays(budget=10)
    r.add("p0", b"abcd")
    r.add("p1", b"efgh")
    assert r.after("p0", 100, 96) == b"abcd" and r.after("p0", 100, 98) == b"cd"
    assert r.after("p0", 100, 100) == b""
    assert r.after("p0", 100, 95) is None  # a byte before what is held
    assert r.after("p0", 100, 101) is None  # past the end
    r.add("p2", b"ijkl")  # 12 bytes: the oldest goes
    assert r.after("p0", 100, 96) is None and r.after("p1", 8, 4) == b"efgh"
    assert r.total == 8
    r.forget("p1")
    assert r.total == 4 and r.after("p1", 8, 7) is None
    assert r.after("p1", 8, 8) == b""  # at the end, nothing is missing: an empty replay
    r.add("p3", b"x" * 11)  # larger than the budget: not kept, nothing evicted for it
    assert r.total == 4 and r.after("p3", 11, 0) is None
    r.add("p4", b"")  # a pane that printed nothing: its replay from 0 is empty
    assert r.after("p4", 0, 0) == b"" and "p4" not in r.held
