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


def test_a_creator_that_ends_many_panes_evicts_its_own_replays_first() -> None:
    r = Replays(budget=100)
    r.add("p0", b"v" * 20, "g1")  # the caller's exec, about to attach
    for i in range(1, 40):  # a run's program ends pane after pane of its own
        r.add(f"p{i}", b"a" * 19, "g2")
    assert r.after("p0", 20, 0) == b"v" * 20
    assert r.total <= 100 and r.sizes == {"g1": 20, "g2": 76}
    assert [p for p in r.held if r.creator[p] == "g2"] == ["p36", "p37", "p38", "p39"]
    r.add("p40", b"b" * 30, "g3")  # then the largest holder gives way, oldest first
    assert r.sizes == {"g1": 20, "g2": 38, "g3": 30} and "p37" not in r.held
    r.add("p41", b"c" * 40, "g1")  # its own older one goes first, then the next largest
    assert r.sizes == {"g1": 40, "g2": 19, "g3": 30} and "p0" not in r.held
    r.add("p42", b"d" * 90, "g3")  # a new replay is never its own victim
    assert r.sizes == {"g3": 90} and r.total == 90 and r.after("p42", 90, 0) == b"d" * 90
    for p in list(r.held):
        r.forget(p)
    assert r.total == 0 and not r.groups and not r.sizes


def test_a_pane_added_again_replaces_its_bytes() -> None:
    r = Replays(budget=100)
    r.add("p0", b"x" * 30, "g1")
    r.add("p0", b"y" * 10, "g1")
    assert r.total == 10 and r.sizes == {"g1": 10} and r.after("p0", 10, 0) == b"y" * 10
