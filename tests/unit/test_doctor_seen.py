"""Doctor's judgement of /proc facts against what the registry held (``doctor.Seen``),
on plain data: which processes it excuses as ours, and which it counts as escapees."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from venomx.daemon import doctor
from venomx.daemon.doctor import ProcFacts, Seen


def fake_doctor(panes: dict[str, Any], sentinels: dict[int, str]) -> Any:
    registry = SimpleNamespace(panes=panes, sentinels=sentinels)
    forkserver = SimpleNamespace(pid=1, spare_pids=[], live_sessions=set, leftover=set)
    return SimpleNamespace(
        registry=registry,
        panes=SimpleNamespace(
            forkserver=forkserver, cgroups=SimpleNamespace(groups={}), preparing=set()
        ),
        reaper=SimpleNamespace(reaped_escapees=0),
    )


def pane(pid: int, sentinel: int, live: bool) -> Any:
    return SimpleNamespace(id="p0", pid=pid, sentinel_pid=sentinel, live=live, run="r0")


def test_a_process_with_an_exited_panes_old_sentinel_pid_is_an_escapee() -> None:
    """An exited pane keeps its record, and its sentinel's pid may be reused by a process
    that left that pane (a program knows its sentinel's pid): that pid excuses nothing."""
    d = fake_doctor({"p0": pane(100, 4242, live=False)}, sentinels={})
    facts = ProcFacts(children={4242: ("sh", "sleeping")}, pane_env={4242: "p0"})
    seen = Seen.now(d)
    section = doctor.escapees(d, facts, doctor.sentinel_panes(facts, seen), seen)[1]
    assert section["count"] == 1 and section["pids"] == {"p0": [4242]}


def test_a_live_panes_sentinel_is_ours() -> None:
    d = fake_doctor({"p0": pane(100, 4242, live=True)}, sentinels={4242: "p0"})
    facts = ProcFacts(
        children={4242: ("venomx-sentinel p0", "sleeping")}, group={100: 100}, pane_env={100: "p0"}
    )
    seen = Seen.now(d)
    assert doctor.sentinel_panes(facts, seen) == {4242: "p0"}
    assert doctor.escapees(d, facts, doctor.sentinel_panes(facts, seen), seen)[1]["count"] == 0


def test_a_process_titled_as_an_exited_panes_sentinel_is_still_an_escapee() -> None:
    d = fake_doctor({"p0": pane(100, 4242, live=False)}, sentinels={})
    facts = ProcFacts(children={4242: ("venomx-sentinel p0", "sleeping")}, pane_env={4242: "p0"})
    seen = Seen.now(d)
    assert doctor.escapees(d, facts, doctor.sentinel_panes(facts, seen), seen)[1]["count"] == 1


def test_a_child_still_in_a_live_panes_group_has_not_escaped() -> None:
    """Between a leader's exit and its sentinel's sweep of the pane's group, the leader's
    background job is re-parented to the daemon but still in the group, which the sweep
    ends: not an escapee. (A loaded CI machine let doctor read /proc in that moment.)
    One that left the group (setsid, setpgid) is."""
    d = fake_doctor({"p0": pane(100, 4242, live=True)}, sentinels={4242: "p0"})
    facts = ProcFacts(
        children={
            4242: ("venomx-sentinel p0", "sleeping"),
            300: ("sleep", "sleeping"),
            301: ("sleep", "sleeping"),
        },
        group={300: 100, 301: 301},
        pane_env={300: "p0", 301: "p0"},
    )
    seen = Seen.now(d)
    section = doctor.escapees(d, facts, doctor.sentinel_panes(facts, seen), seen)[1]
    assert section["count"] == 1 and section["pids"] == {"p0": [301]}
