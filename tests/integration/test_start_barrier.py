"""A start past its barrier completes first (foundation §6, RFC-0015 §8): its program runs,
so its target changing meanwhile neither fails it nor frees its key; before the barrier a
change still rolls it back with nothing run. Real daemons, held at the test seams."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.helpers import Daemon, marker_count, start_daemon, stop_daemon, wait_for
from venomx.client import Client
from venomx.wire import VenomxError


def hold(d: Daemon, seam: str) -> None:
    d.call("seam.set", {"name": seam, "state": "hold"})


def release(d: Daemon, seam: str) -> None:
    d.call("seam.set", {"name": seam, "state": "release"})


def reached(d: Daemon, seam: str) -> None:
    d.call("seam.wait", {"name": seam, "timeout_ms": 10000})


def host(d: Daemon, s: str) -> str:
    """A pane that exits when it is sent a line."""
    return str(d.call("window.create", {"session": s, "argv": ["sh", "-c", "read x"]})["pane"])


def exit_host(d: Daemon, pane: str) -> None:
    d.call("pane.send", {"pane": pane, "text": "\n"})
    wait_for(
        lambda: any(
            p["pane"] == pane and p["state"] == "exited" for p in d.call("pane.list")["panes"]
        ),
        10,
        "the host exited",
    )


def split_across_exit(d: Daemon, seam: str, shell: str) -> tuple[Client, int, dict[str, Any], str]:
    """A split run of ``shell`` held at ``seam`` while its target exits (still held): the
    client and request it is answered on, its params and the target."""
    target = host(d, d.call("session.create")["session"])
    params = {"key": "k", "pane": target, "axis": "cols", "shell": shell}
    hold(d, seam)
    c = d.client()
    rid = c.start("run", params)
    reached(d, seam)
    exit_host(d, target)
    return c, rid, params, target


def test_a_split_whose_target_exits_after_the_barrier_commits(
    daemon: Daemon, tmp_path: Path
) -> None:
    """RFC-0015 §1: conflict.pane_exited means nothing was created and the key is free;
    so once the program ran, the split is committed beside its exited target, and a retry
    finds that run instead of running the program again."""
    marker = tmp_path / "m"
    shell = f"echo x >> {marker}; sleep 30"
    c, rid, params, target = split_across_exit(daemon, "run.after_barrier", shell)
    release(daemon, "run.after_barrier")
    first = c.response(rid)
    panes = {p["pane"]: p for p in daemon.call("pane.list")["panes"]}
    assert panes[first["pane"]]["window"] == panes[target]["window"]
    assert panes[first["pane"]]["state"] == "running"
    again = daemon.call("run", params)
    assert again["run"] == first["run"] and again["reused"] is True
    wait_for(lambda: marker_count(marker) == 1, 10, "the program ran")
    assert marker_count(marker) == 1


def test_a_target_that_exits_before_the_barrier_rolls_the_start_back(
    daemon: Daemon, tmp_path: Path
) -> None:
    marker = tmp_path / "m"
    c, rid, _, target = split_across_exit(daemon, "run.before_barrier", f"echo x >> {marker}")
    release(daemon, "run.before_barrier")
    with pytest.raises(VenomxError) as e:
        c.response(rid)
    assert e.value.code == "conflict.pane_exited"
    assert daemon.call("run.list")["runs"] == [] and marker_count(marker) == 0
    assert [p["pane"] for p in daemon.call("pane.list")["panes"]] == [target]


def held_in_session(d: Daemon, seam: str, shell: str) -> tuple[Client, int, dict[str, Any], str]:
    """A run of ``shell`` in a new session, held at ``seam``: the client and request it is
    answered on, its params and the session."""
    s = d.call("session.create")["session"]
    params = {"key": "k", "session": s, "shell": shell}
    hold(d, seam)
    c = d.client()
    rid = c.start("run", params)
    reached(d, seam)
    return c, rid, params, s


@pytest.mark.parametrize("recursive", [True, False])
def test_a_session_removed_after_the_barrier_waits_for_the_start(
    daemon: Daemon, tmp_path: Path, recursive: bool
) -> None:
    """The removal counts the started program as the live pane it is about to be: a
    recursive one ends it (cause removal), a plain one fails conflict.live_panes."""
    marker = tmp_path / "m"
    shell = f"echo x >> {marker}; sleep 30"
    c, rid, params, s = held_in_session(daemon, "run.after_barrier", shell)
    wait_for(lambda: marker_count(marker) == 1, 10, "the program ran")
    remover = daemon.client()
    removal = remover.start("session.remove", {"session": s, "recursive": recursive})
    release(daemon, "run.after_barrier")
    run = c.response(rid)
    if recursive:
        assert s in remover.response(removal)["removed"]
        rec = daemon.wait_exit(run["run"])
        assert (rec["outcome"], rec["cause"]) == ("terminated", "removal")
    else:
        with pytest.raises(VenomxError) as e:
            remover.response(removal)
        assert e.value.code == "conflict.live_panes"
        assert e.value.data == {"panes": [run["pane"]]}
    again = daemon.call("run", params)
    assert again["run"] == run["run"] and again["reused"] is True
    assert marker_count(marker) == 1


def test_a_request_that_joined_a_start_cancelled_before_its_barrier_starts_it(
    daemon: Daemon, tmp_path: Path
) -> None:
    """RFC-0015 §13 row 15: before the barrier nothing ran, and the repeat starts it. One
    that joined the cancelled start (it was waiting on it) is such a repeat too."""
    marker = tmp_path / "m"
    s = daemon.call("session.create")["session"]
    params = {"key": "k", "session": s, "shell": f"echo x >> {marker}"}
    hold(daemon, "run.before_barrier")
    first, joiner = daemon.client(), daemon.client()
    rid = first.start("run", params)
    reached(daemon, "run.before_barrier")
    jid = joiner.start("run", params)
    wait_for(lambda: daemon.call("doctor")["run"]["joined"] >= 1, 10, "the joiner waiting")
    first.cancel(rid)
    with pytest.raises(VenomxError) as e:
        first.response(rid)
    assert e.value.code == "cancelled"
    release(daemon, "run.before_barrier")
    run = joiner.response(jid)
    assert run["reused"] is False
    assert daemon.wait_exit(run["run"])["outcome"] == "succeeded"
    assert marker_count(marker) == 1


def test_doctor_while_a_start_prepares_leaves_its_cgroup(daemon: Daemon) -> None:
    """Doctor tidies empty pane cgroups; a start's is empty until its leader joins it."""
    s = daemon.call("session.create")["session"]
    hold(daemon, "run.before_barrier")
    c = daemon.client()
    rid = c.start("run", {"key": "k", "session": s, "argv": ["true"]})
    reached(daemon, "run.before_barrier")
    daemon.call("doctor")
    release(daemon, "run.before_barrier")
    run = c.response(rid)
    assert daemon.wait_exit(run["run"])["outcome"] == "succeeded"


def test_an_exited_target_is_not_evicted_under_a_start_past_its_barrier(tmp_path: Path) -> None:
    """With exited panes capped (panes.exited_max_bytes), the target's exit would evict
    it at once; a split past its barrier still needs it, so it stays until the commit."""
    d = start_daemon(config="[panes]\nexited_max_bytes = 1\n")
    try:
        marker = tmp_path / "m"
        s = d.call("session.create")["session"]
        target = host(d, s)
        params = {"key": "k", "pane": target, "axis": "cols", "shell": f"echo x >> {marker}"}
        hold(d, "run.after_barrier")
        c = d.client()
        rid = c.start("run", params)
        reached(d, "run.after_barrier")
        d.call("pane.send", {"pane": target, "text": "\n"})
        wait_for(lambda: d.call("doctor")["counters"]["panes"]["exited"] >= 1, 10, "exited")
        release(d, "run.after_barrier")
        run = c.response(rid)
        assert d.wait_exit(run["run"])["outcome"] == "succeeded"
        assert d.call("run", params)["reused"] is True
        assert marker_count(marker) == 1
    finally:
        stop_daemon(d)


@pytest.mark.timeout(60)
def test_a_removal_gives_up_on_a_start_stalled_past_its_bound(
    daemon: Daemon, tmp_path: Path
) -> None:
    """A start that has not committed 5 s into a removal of its session (a stalled
    sentinel; here a held seam) is given up: the removal goes on, and the start is then
    turned away with conflict.removing instead of becoming a pane nothing ends."""
    s = daemon.call("session.create")["session"]
    hold(daemon, "run.after_barrier")
    c = daemon.client()
    rid = c.start("run", {"key": "k", "session": s, "argv": ["sleep", "60"]})
    reached(daemon, "run.after_barrier")
    assert s in daemon.call("session.remove", {"session": s, "recursive": True})["removed"]
    release(daemon, "run.after_barrier")
    with pytest.raises(VenomxError) as e:
        c.response(rid)
    assert e.value.code == "conflict.removing"
    assert daemon.call("run.list")["runs"] == [] and daemon.call("pane.list")["panes"] == []


@pytest.mark.timeout(60)
def test_a_plain_removal_counts_a_stalled_start_as_live(daemon: Daemon, tmp_path: Path) -> None:
    """A plain removal that waited its 5 s for a start fails conflict.live_panes naming it,
    and gives nothing up: the start then commits, and a retry finds its run."""
    marker = tmp_path / "m"
    shell = f"echo x >> {marker}; sleep 30"
    c, rid, params, s = held_in_session(daemon, "run.after_barrier", shell)
    err = daemon.error("session.remove", {"session": s})
    assert err.code == "conflict.live_panes" and len(err.data["panes"]) == 1
    release(daemon, "run.after_barrier")
    run = c.response(rid)
    assert err.data["panes"] == [run["pane"]]
    assert daemon.call("run", params)["reused"] is True
    wait_for(lambda: marker_count(marker) == 1, 10, "the program ran")


@pytest.mark.timeout(60)
def test_removing_a_split_target_waits_for_the_start_beside_it(
    daemon: Daemon, tmp_path: Path
) -> None:
    """pane.remove of an exited target with a split past its barrier beside it: the split
    commits first and the removal then takes the target alone (it took the window, and
    the start failed not_found.pane after its program ran, freeing its key for a retry
    that ran it twice)."""
    marker = tmp_path / "m"
    c, rid, params, target = split_across_exit(
        daemon, "run.after_barrier", f"echo x >> {marker}; sleep 30"
    )
    wait_for(lambda: marker_count(marker) == 1, 10, "the program ran")
    window = next(p["window"] for p in daemon.call("pane.list")["panes"] if p["pane"] == target)
    remover = daemon.client()
    removal = remover.start("pane.remove", {"pane": target})
    release(daemon, "run.after_barrier")
    run = c.response(rid)
    assert remover.response(removal)["removed"] == [target]
    panes = daemon.call("pane.list")["panes"]
    assert [(p["pane"], p["window"], p["state"]) for p in panes] == [
        (run["pane"], window, "running")
    ]
    again = daemon.call("run", params)
    assert again["run"] == run["run"] and again["reused"] is True
    assert marker_count(marker) == 1


@pytest.mark.timeout(60)
def test_removing_a_split_target_counts_a_stalled_start_beside_it_as_live(
    daemon: Daemon, tmp_path: Path
) -> None:
    """One still uncommitted 5 s later fails the removal conflict.pane_live naming it, and
    nothing is given up: the start then commits beside the target, which is still there."""
    marker = tmp_path / "m"
    c, rid, params, target = split_across_exit(
        daemon, "run.after_barrier", f"echo x >> {marker}; sleep 30"
    )
    err = daemon.error("pane.remove", {"pane": target})
    assert err.code == "conflict.pane_live" and len(err.data["panes"]) == 1
    release(daemon, "run.after_barrier")
    run = c.response(rid)
    assert err.data["panes"] == [run["pane"]]
    assert {p["pane"] for p in daemon.call("pane.list")["panes"]} == {target, run["pane"]}
    assert daemon.call("run", params)["reused"] is True
    assert daemon.call("pane.remove", {"pane": target})["removed"] == [target]
    wait_for(lambda: marker_count(marker) == 1, 10, "the program ran")


@pytest.mark.timeout(60)
def test_removing_a_split_target_while_a_session_removal_gives_up_on_the_split(
    daemon: Daemon, tmp_path: Path
) -> None:
    """A recursive removal of the session gives up on the stalled split (it never becomes
    a pane) and takes the target while a pane.remove of the target waits: that answers
    not_found.pane, or removes the target itself if it runs first, but never
    conflict.pane_live naming the split, which it did."""
    c, rid, _, target = split_across_exit(daemon, "run.after_barrier", "sleep 30")
    session = next(p["session"] for p in daemon.call("pane.list")["panes"] if p["pane"] == target)
    remover = daemon.client()  # one connection: the session's removal starts first
    removal = remover.start("session.remove", {"session": session, "recursive": True})
    pane_removal = remover.start("pane.remove", {"pane": target})
    answers: dict[int, dict[str, Any]] = {}
    while len(answers) < 2:
        frame = remover.read()
        answers[frame["id"]] = frame
    assert session in answers[removal]["ok"]["removed"]
    answer = answers[pane_removal]
    assert answer.get("ok", {}).get("removed") == [target] or (
        answer.get("error", {}).get("code") == "not_found.pane"
    ), answer
    assert daemon.call("session.list")["sessions"] == []
    release(daemon, "run.after_barrier")
    with pytest.raises(VenomxError) as started:
        c.response(rid)
    assert started.value.code == "conflict.removing"


def test_a_start_held_at_shutdown_is_answered_and_runs_nothing(tmp_path: Path) -> None:
    """Every request is answered before the transport closes (foundation §2): a start
    still before its barrier rolls back, and a stream still open ends, ``cancelled``."""
    d = start_daemon()
    try:
        marker = tmp_path / "m"
        s = d.call("session.create")["session"]
        hold(d, "run.before_barrier")
        c = d.client()
        rid = c.start("run", {"key": "k", "session": s, "shell": f"echo x >> {marker}"})
        reached(d, "run.before_barrier")
        events = d.client()
        sub = events.start("events.subscribe", {})
        d.call("shutdown")
        for client, request in ((c, rid), (events, sub)):
            with pytest.raises(VenomxError) as ended:
                client.response(request)
            assert ended.value.code == "cancelled", ended.value
        assert d.proc.wait(20) == 0
        assert marker_count(marker) == 0
    finally:
        stop_daemon(d)


@pytest.mark.parametrize("first_runs", [True, False])
def test_other_parameters_under_a_key_still_preparing_are_told_at_once(
    daemon: Daemon, tmp_path: Path, first_runs: bool
) -> None:
    """RFC-0015 §11: the key lookup is answered in the request's first reactor turn, and
    §13 row 16 sends "K with different argv" beside a start held while preparing. Such
    a request waited for the held start (a caller waiting for that answer before it
    releases the start would wait forever); it is told `conflict.run_key` at once,
    naming the ID the start will commit under. A start that then fails binds nothing:
    that ID never becomes a run, and the same request again starts its own."""
    s = daemon.call("session.create")["session"]
    argv = ["true"] if first_runs else [str(tmp_path / "missing")]
    hold(daemon, "run.before_barrier")
    c = daemon.client()
    first = c.start("run", {"key": "K", "session": s, "argv": argv})
    reached(daemon, "run.before_barrier")
    other = {"key": "K", "session": s, "argv": ["echo", "other"]}
    with pytest.raises(VenomxError) as err:
        daemon.call("run", other)  # answered while the first is still held
    assert err.value.code == "conflict.run_key"
    named = err.value.data["run"]
    release(daemon, "run.before_barrier")
    if first_runs:
        assert c.response(first)["run"] == named
        assert daemon.call("run.get", {"run": named})["run"] == named  # it exists
        with pytest.raises(VenomxError) as again:
            daemon.call("run", other)
        assert again.value.code == "conflict.run_key" and again.value.data == {"run": named}
    else:
        with pytest.raises(VenomxError) as failed:
            c.response(first)
        assert failed.value.code == "unavailable.spawn"
        mine = daemon.call("run", other)  # the key was never bound: a start of its own
        assert mine["reused"] is False and mine["run"] != named
        assert daemon.wait_exit(mine["run"])["outcome"] == "succeeded"
