"""Events (§10): log, subscribe with snapshot, read, filtering, OSC observation."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import Daemon, wait_for
from venomx.client import Client


def test_snapshot_then_live_without_gap_or_duplicate(daemon: Daemon) -> None:
    s = daemon.call("session.create")["session"]
    stop = threading.Event()
    errors: list[BaseException] = []

    def churn() -> None:
        try:
            while not stop.is_set():
                w = daemon.call("window.create", {"session": s, "argv": ["sleep", "30"]})
                daemon.call("pane.kill", {"pane": w["pane"], "grace_ms": 0})
        except BaseException as exc:  # reported below, not lost in the thread
            errors.append(exc)

    t = threading.Thread(target=churn)
    t.start()
    try:
        wait_for(lambda: len(daemon.call("pane.list")["panes"]) >= 2, 20, "churn")
        with Client(daemon.socket, "@owner") as c:
            c.sock.settimeout(20)
            stream = c.stream("events.subscribe", {})
            snap = next(stream)["snapshot"]
            seqs = []
            for item in stream:
                seqs.append(item["event"]["seq"])
                if len(seqs) == 30:
                    break
    finally:
        stop.set()
        t.join(30)
    assert not errors, errors
    assert seqs == list(range(snap["seq"] + 1, snap["seq"] + 31))
    kinds = {e["kind"] for e in snap["entities"]}
    assert {"session", "window", "pane"} <= kinds


def test_resume_after_and_cursor_errors(daemon: Daemon) -> None:
    daemon.call("session.create")
    daemon.call("session.create")
    with Client(daemon.socket, "@owner") as c:
        stream = c.stream("events.subscribe", {"after": 1})
        first = next(stream)
        assert first["event"]["seq"] == 2 and first["event"]["type"] == "session.created"
    e = daemon.error("events.subscribe", {"source": "venomx/other"})
    assert e.code == "conflict.source" and e.data == {"source": daemon.call("whoami")["source"]}
    daemon.call("config.set", {"path": "events.retain_count", "value": "2"})
    for _ in range(3):
        daemon.call("session.create")
    e = daemon.error("events.read", {"after": 1})
    assert e.code == "not_found.cursor" and e.data["oldest"] > 2
    nxt = daemon.call("events.read", {"limit": 1024})["next"]
    assert daemon.call("events.read", {"after": nxt})["events"] == []  # the newest is fine
    for verb in ("events.read", "events.subscribe"):  # one never issued is not
        e = daemon.error(verb, {"after": nxt + 1})
        assert e.code == "not_found.cursor" and "never issued" in e.message, verb


def test_events_read_waits(daemon: Daemon) -> None:
    nxt = daemon.call("events.read")["next"]
    assert daemon.call("events.read", {"after": nxt, "timeout_ms": 0})["events"] == []
    res: list[dict[str, Any]] = []
    t = threading.Thread(
        target=lambda: res.append(daemon.call("events.read", {"after": nxt, "timeout_ms": 10000}))
    )
    t.start()
    wait_for(lambda: len(daemon.call("doctor")["counters"]) and t.is_alive(), 5, "waiting")
    daemon.call("session.create")
    t.join(15)
    assert res[0]["events"][0]["type"] == "session.created" and res[0]["next"] == nxt + 1


def test_filtering_by_read_and_frozen_after_removal(daemon: Daemon) -> None:
    s = daemon.call("session.create")["session"]
    a = daemon.call("window.create", {"session": s, "argv": ["true"]})
    daemon.call("window.create", {"session": s, "argv": ["true"]})
    tok = daemon.call(
        "principal.create", {"grants": [{"right": "read", "scope": f"pane:{a['pane']}"}]}
    )["token"]
    wait_for(
        lambda: all(p["state"] == "exited" for p in daemon.call("pane.list")["panes"]), 10, "exits"
    )
    daemon.call("pane.remove", {"pane": a["pane"]})
    evs = daemon.call("events.read", {"limit": 1024}, token=tok)["events"]
    assert evs and all(e["data"].get("pane") == a["pane"] for e in evs)
    assert {"pane.created", "pane.exited", "pane.removed"} <= {e["type"] for e in evs}


def test_slow_subscriber_is_dropped(daemon: Daemon) -> None:
    import socket

    sk = socket.socket(socket.AF_UNIX)
    sk.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sk.connect(daemon.socket)
    sk.sendall(
        b'{"id":0,"verb":"hello","params":{"protocol":1,"token":"@owner"}}\n'
        b'{"id":1,"verb":"events.subscribe","params":{}}\n'
    )
    s = daemon.call("session.create")["session"]
    with Client(daemon.socket, "@owner") as c:
        for i in range(400):  # events with big layouts, never read by the subscriber
            c.start("session.create", {"name": f"n{i}" + "x" * 50})
        c.call("whoami")
    assert daemon.call("whoami")["principal"] == "g0"
    assert s
    sk.close()


FORGE = (
    r'printf "\033]133;C\007"; printf "\033]7501;state=busy\007"; '
    'while [ ! -e "$1" ]; do sleep 0.01; done; exit 4'
)


def test_osc_observation_and_pane_exit_sequence(daemon: Daemon, tmp_path: Path) -> None:
    go = tmp_path / "go"
    s = daemon.call("session.create")["session"]
    w = daemon.call("window.create", {"session": s, "argv": ["sh", "-c", FORGE, "sh", str(go)]})
    # the program exits only once both observations are events, never racing them
    wait_for(
        lambda: (
            "program.status_changed"
            in [e["type"] for e in daemon.call("events.read", {"limit": 1024})["events"]]
        ),
        10,
        "busy",
    )
    go.touch()
    wait_for(lambda: daemon.call("pane.list")["panes"][0]["state"] == "exited", 10, "exit")
    evs = [
        e
        for e in daemon.call("events.read", {"limit": 1024})["events"]
        if e["resource"] == f"pane:{w['pane']}"
    ]
    types = [e["type"] for e in evs]
    assert types == [
        "pane.created",
        "command.started",
        "program.status_changed",
        "command.finished",
        "program.status_changed",
        "pane.exited",
    ]
    assert evs[2]["data"] == {"pane": w["pane"], "state": "busy"}
    assert evs[3]["data"] == {"pane": w["pane"], "reason": "pane_exit"}
    assert evs[4]["data"] == {"pane": w["pane"], "state": None}
    assert evs[5]["data"] == {"pane": w["pane"], "exit_code": 4}
    assert daemon.call("pane.list")["panes"][0]["exit_code"] == 4


def test_events_cli(daemon: Daemon) -> None:
    daemon.call("session.create", {"name": "evcli"})
    r = daemon.cli("events", "--after", "0")
    assert r.code == 0 and "session.created" in r.out and "evcli" in r.out
    j = daemon.cli("events", "--json")
    assert j.code == 0 and '"type":"session.created"' in j.out
    assert daemon.cli("events", "--after", "999999").out == ""
    e = daemon.error("events.read", {"after": -1})
    assert (e.code, e.data) == ("invalid_params.range", {"param": "after", "min": 0, "max": 2**62})


def many_events(daemon: Daemon, n: int) -> int:
    """``n`` session.created events, pipelined in batches; the newest seq."""
    with Client(daemon.socket, "@owner") as c:
        for _ in range(0, n, 500):
            for _ in range(500):
                c.start("session.create", {})
            c.call("whoami")  # the replies are read meanwhile, so no buffer fills
    return last_seq(daemon)


def last_seq(daemon: Daemon) -> int:
    with Client(daemon.socket, "@owner") as c:
        snap = next(c.stream("events.subscribe", {"snapshot": True}))
    return int(snap["snapshot"]["seq"])


@pytest.mark.timeout(120)
def test_a_long_scan_of_unreadable_events_crosses_turns(daemon: Daemon) -> None:
    """Events scanned a turn at a time (1,024): a caller who may read none of 9,000 still
    gets none, and a cursor past all of them."""
    newest = many_events(daemon, 9000)
    other = daemon.call(
        "principal.create", {"grants": [{"right": "read", "scope": "pane:p999999"}]}
    )["token"]
    with Client(daemon.socket, other) as c:
        got = c.call("events.read", {"limit": 1, "timeout_ms": 0})
    assert got["events"] == [] and got["next"] >= newest
    page = daemon.call("events.read", {"limit": 1024, "after": newest - 2000})
    assert [e["seq"] for e in page["events"]] == list(range(newest - 1999, newest - 975))


@pytest.mark.timeout(120)
def test_a_replay_across_turns_meets_the_live_events_without_gap_or_duplicate(
    daemon: Daemon,
) -> None:
    many_events(daemon, 9000)
    with Client(daemon.socket, "@owner") as c:
        stream = c.stream("events.subscribe", {"after": 0, "snapshot": False})
        seqs = [next(stream)["event"]["seq"]]
        with Client(daemon.socket, "@owner") as live:  # while the replay goes out
            for _ in range(50):
                live.start("session.create", {})
            live.call("whoami")
        newest = last_seq(daemon)
        while seqs[-1] < newest:
            seqs.append(next(stream)["event"]["seq"])
    assert seqs == list(range(1, newest + 1))
