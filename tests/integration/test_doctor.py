"""Doctor (§11): sentinels, escapees, zombies, and what happens when a sentinel dies."""

from __future__ import annotations

import functools
import json
import os
import signal
from pathlib import Path
from typing import Any

import psutil

from tests.helpers import Daemon, wait_for


def test_healthy_report_and_exit_codes(daemon: Daemon) -> None:
    s = daemon.call("session.create")["session"]
    daemon.call("window.create", {"session": s, "argv": ["sleep", "60"]})
    doc = daemon.call("doctor")
    assert doc["status"] == "ok"
    assert {k: v for k, v in doc["sentinels"].items() if not k.startswith("spares")} == {
        "expected": 1,
        "alive": 1,
        "missing": 0,
        "missing_panes": [],
        "orphaned": 0,
        "orphaned_pids": [],
        "stopped": [],
        "unresponsive": [],
        "lost": {"count": 0, "recent": []},
    }
    assert {c["name"] for c in doc["checks"]} >= {
        "sentinels",
        "escapees",
        "zombies",
        "fds",
        "fork_server",
        "run.active",
        "run.stuck",
    }
    assert doc["counters"]["panes"]["running"] == 1 and doc["counters"]["sessions"] == 1
    r = daemon.cli("doctor")
    assert r.code == 0 and "sentinels" in r.out
    assert json.loads(daemon.cli("doctor", "--json").out)["status"] == "ok"


def test_sentinel_title_and_parent(daemon: Daemon) -> None:
    s = daemon.call("session.create")["session"]
    w = daemon.call("window.create", {"session": s, "argv": ["sleep", "60"]})
    leader = psutil.Process(w["pid"])
    sentinel = leader.parent()
    assert sentinel is not None
    # a spare is the daemon's child once the intermediate that forked it has exited
    wait_for(lambda: sentinel.ppid() == daemon.proc.pid, 10, "the sentinel re-parented")
    assert " ".join(sentinel.cmdline()).startswith(f"venomx-sentinel {w['pane']}")


def escapee(daemon: Daemon, pidfile: Path, program: str) -> tuple[dict[str, Any], int]:
    """A window whose shell starts ``program`` in a session of its own (so it escapes the
    pane) and exits once it wrote its pid: the window, and that pid."""
    s = daemon.call("session.create")["session"]
    w = daemon.call(
        "window.create",
        {
            "session": s,
            "argv": [
                "sh",
                "-c",
                f"setsid sh -c 'echo $$ > {pidfile}; exec {program}' & "
                f"while [ ! -s {pidfile} ]; do sleep 0.01; done",
            ],
        },
    )
    pid = int(wait_for(lambda: pidfile.exists() and pidfile.read_text().strip(), 10, "pid"))
    return w, pid


def test_escapee_counted_until_killed(daemon: Daemon, tmp_path: Path) -> None:
    w, pid = escapee(daemon, tmp_path / "p", "sleep 300")
    wait_for(lambda: daemon.call("pane.list")["panes"][0]["state"] == "exited", 10, "exit")
    doc = wait_for(
        lambda: (d := daemon.call("doctor"))["escapees"]["count"] == 1 and d, 10, "count"
    )
    assert doc["escapees"]["panes"] == {w["pane"]: 1} and doc["status"] == "warn"
    assert doc["escapees"]["pids"] == {w["pane"]: [pid]}
    assert daemon.cli("doctor").code == 0  # warn is still exit 0
    os.kill(pid, signal.SIGKILL)
    # killed, it is the daemon's zombie (not an escapee) until the daemon reaps it
    wait_for(
        lambda: (d := daemon.call("doctor"))["escapees"]["count"] == 0 and d["zombies"] == 0,
        10,
        "gone and reaped",
    )


def test_an_escapee_titled_as_a_spare_sentinel_is_still_an_escapee(
    daemon: Daemon, tmp_path: Path
) -> None:
    """A pane program's escapee that takes a spare sentinel's title (any program of our
    uid may) is not taken for one: spares live in the fork server's session, and no
    process can join a session it did not start."""
    disguise = "\\$0 = q(venomx-sentinel (spare)); sleep 300"  # perl's $0, not the shell's
    w, pid = escapee(daemon, tmp_path / "p", f'perl -e "{disguise}"')
    try:
        wait_for(lambda: pid in daemon.titled("venomx-sentinel (spare)"), 10, "the disguise")
        doc = wait_for(
            lambda: (d := daemon.call("doctor"))["escapees"]["count"] == 1 and d, 10, "count"
        )
        assert doc["escapees"]["pids"] == {w["pane"]: [pid]}
    finally:
        os.kill(pid, signal.SIGKILL)


def test_killed_sentinel(daemon: Daemon) -> None:
    """Killing a sentinel hangs up its PTY; a leader that ignores SIGHUP lives on, re-parented
    to the daemon, which reports the sentinel missing and reaps the leader itself."""
    s = daemon.call("session.create")["session"]
    r = daemon.call(
        "run", {"key": "k", "session": s, "shell": 'trap "" HUP; echo ready; exec sleep 60'}
    )
    wait_for(
        lambda: "ready" in daemon.call("pane.capture_rows", {"pane": r["pane"]})["lines"][0],
        10,
        "ready",
    )
    sentinel = psutil.Process(r["pid"]).parent()
    assert sentinel is not None
    sentinel.kill()
    doc = wait_for(lambda: (d := daemon.call("doctor"))["status"] == "fail" and d, 10, "missing")
    assert doc["sentinels"]["missing"] == 1
    assert doc["sentinels"]["missing_panes"] == [r["pane"]]
    assert daemon.cli("doctor").code == 1
    # the leader is now the daemon's child (subreaper): its real wait status ends the pane
    assert psutil.Process(r["pid"]).ppid() == daemon.proc.pid
    os.kill(r["pid"], signal.SIGTERM)
    rec = daemon.call("run.wait", {"run": r["run"], "timeout_ms": 10000})
    assert (rec["outcome"], rec["signal"], rec["status"]) == ("signaled", "SIGTERM", 143)
    doc = daemon.call("doctor")
    assert doc["status"] == "ok" and doc["zombies"] == 0


def test_exited_panes_are_counted_and_evicted_only_when_asked(daemon: Daemon) -> None:
    s = daemon.call("session.create")["session"]
    script = "seq 1 3000"
    panes = []

    def exited() -> dict[str, Any]:
        doc: dict[str, Any] = daemon.call("doctor")["exited_panes"]
        return doc

    def exited_count_is(n: int) -> bool:
        return bool(exited()["count"] == n)

    # one after another: "oldest" is the order they exited in, which concurrent panes
    # may not keep
    for i in range(3):
        w = daemon.call("window.create", {"session": s, "argv": ["sh", "-c", script]})
        panes.append(w["pane"])
        wait_for(functools.partial(exited_count_is, i + 1), 10, "the pane exited")
    r = daemon.call("run", {"key": "kept", "session": s, "shell": script})
    with_run = r["pane"]
    daemon.wait_exit(r["run"])

    wait_for(lambda: exited()["count"] == 4, 10, "four exited panes")
    held = exited()
    assert set(held["largest"]) == {*panes, with_run}
    one = held["largest"][panes[0]]
    # 3000 short rows: the compact form holds about their text (~14 KB), not ~200 B a row
    assert 10_000 < one < 40_000 and held["bytes"] == sum(held["largest"].values())
    assert held["max_bytes"] == 0 and held["evicted"] == 0  # off by default
    # and the last bytes each printed, for an attach resuming after an offset (\r\n each)
    assert held["replay_bytes"] == 4 * len("".join(f"{i}\r\n" for i in range(1, 3001)))
    check = next(c for c in daemon.call("doctor")["checks"] if c["name"] == "exited_panes")
    assert check["status"] == "ok"
    daemon.call("config.set", {"path": "panes.exited_warn_bytes", "value": str(one)})
    check = next(c for c in daemon.call("doctor")["checks"] if c["name"] == "exited_panes")
    assert check["status"] == "warn"
    # opt in: keep at most about two panes' worth; the run's pane is never evicted
    daemon.call("config.set", {"path": "panes.exited_max_bytes", "value": str(2 * one + 10)})
    held = exited()
    assert held["evicted"] == 2 and held["bytes"] <= 2 * one + 10
    assert with_run in held["largest"] and panes[2] in held["largest"]
    alive = {p["pane"] for p in daemon.call("pane.list")["panes"]}
    assert panes[0] not in alive and panes[1] not in alive and with_run in alive
    assert daemon.call("run.get", {"run": r["run"]})["pane"] == with_run
    assert exited()["replay_bytes"] == 2 * len("".join(f"{i}\r\n" for i in range(1, 3001)))


def test_dropped_vt_sequences_reach_doctor(daemon: Daemon) -> None:
    s = daemon.call("session.create")["session"]
    assert daemon.call("doctor")["counters"]["vt_dropped"] == 0
    # a zero-width space at column 0 that nothing is drawn after at that place is dropped
    r = daemon.call(
        "run", {"key": "zw", "session": s, "shell": "printf '\\342\\200\\213\\r\\nok\\n'"}
    )
    rec = daemon.wait_exit(r["run"])
    assert rec["outcome"] == "succeeded" and [ln.rstrip() for ln in rec["output"]["lines"]] == [
        "",
        "ok",
    ]
    assert daemon.call("doctor")["counters"]["vt_dropped"] == 1


def test_the_daemon_collects_garbage_once_requests_pause(daemon: Daemon) -> None:
    # Automatic collection is off in the daemon; it counts the requests it dispatches
    # and collects when a look (every second) finds none since the last, well before
    # the 10 s after which requests that never pause get one anyway.
    first = daemon.call("doctor")["collector"]
    assert first["automatic"] is False
    s = daemon.call("session.create")["session"]
    daemon.call("window.create", {"session": s, "argv": ["true"]})
    second = daemon.call("doctor")["collector"]
    assert second["requests"] >= first["requests"] + 3
    wait_for(
        lambda: daemon.call("doctor")["collector"]["collections"] > second["collections"],
        7,
        "a collection once requests paused",
        every=2.5,  # two looks between asks: a poll every 50 ms would keep it busy
    )


def test_panes_that_start_or_end_while_doctor_looks_are_not_faults(
    daemon: Daemon, tmp_path: Path
) -> None:
    """Doctor reads /proc while it pings every sentinel, up to a second when one is
    stopped. A pane that ended in that time (its background job swept) is no escapee,
    and one that started is not missing its sentinel: the registry is judged as it was
    when /proc was read, not a second later."""
    s = daemon.call("session.create")["session"]
    wedged = daemon.call("run", {"key": "wedged", "session": s, "argv": ["sleep", "60"]})
    sentinel = psutil.Process(wedged["pid"]).parent()
    assert sentinel is not None
    pidfile, gate = tmp_path / "bg", tmp_path / "gate"
    ending = daemon.call(
        "run",
        {
            "key": "ending",
            "session": s,
            "shell": f"sleep 100 & echo $! > {pidfile}.new && mv {pidfile}.new {pidfile}; "
            f"while [ ! -e {gate} ]; do sleep 0.01; done",
        },
    )
    wait_for(pidfile.exists, 10, "the background job")
    sentinel.suspend()
    try:
        with daemon.client() as c:
            rid = c.start("doctor")
            gate.touch()
            assert daemon.call("run.wait", {"run": ending["run"]})["outcome"] == "succeeded"
            daemon.call("run", {"key": "new", "session": s, "argv": ["sleep", "60"]})
            doc = c.read()
            assert doc["id"] == rid
            report = doc["ok"]
    finally:
        sentinel.resume()
    assert report["sentinels"]["unresponsive"] == [wedged["pane"]]  # it did wait
    assert report["escapees"]["count"] == 0, report["escapees"]
    assert report["sentinels"]["missing"] == 0, report["sentinels"]


def test_doctor_names_only_the_panes_and_runs_its_caller_may_read(
    daemon: Daemon, tmp_path: Path
) -> None:
    s = daemon.call("session.create")["session"]
    grants = [
        {"right": "spawn", "scope": f"session:{s}"},
        {"right": "read", "scope": "self"},
        {"right": "write", "scope": "self"},
    ]
    a, b = (daemon.call("principal.create", {"grants": grants})["token"] for _ in "ab")
    pidfile = tmp_path / "p"
    shell = (
        f"setsid sh -c 'echo $$ > {pidfile}; exec sleep 300' & "
        f"while [ ! -s {pidfile} ]; do sleep 0.01; done"
    )
    run = daemon.call("run", {"key": "esc", "session": s, "shell": shell}, token=a)
    wait_for(lambda: daemon.call("run.wait", {"run": run["run"]})["state"] == "completed", 10, "")
    pid = int(pidfile.read_text())
    try:
        owners = wait_for(
            lambda: (d := daemon.call("doctor"))["escapees"]["count"] == 1 and d, 10, "count"
        )
        pane = run["pane"]
        assert owners["escapees"]["pids"] == {pane: [pid]}
        assert owners["escapees"]["runs"] == {pane: run["run"]}
        assert pane in owners["exited_panes"]["largest"]
        for token, sees in ((a, True), (b, False)):
            doc = daemon.call("doctor", token=token)
            assert doc["escapees"]["count"] == 1 and doc["exited_panes"]["count"] >= 1
            assert (pane in doc["escapees"]["pids"]) is sees, doc["escapees"]
            assert (pane in doc["escapees"]["panes"]) is sees
            assert (pane in doc["escapees"]["runs"]) is sees
            assert (pane in doc["exited_panes"]["largest"]) is sees
    finally:
        os.kill(pid, signal.SIGKILL)


def test_a_fork_server_that_died_is_remembered(daemon: Daemon) -> None:
    """The check shows the fork server now; the section also keeps how often one died
    and how the last one ended (systemd's NRestarts): the restart hid a death that had
    failed the starts it held."""
    from tests.helpers import forkserver_pid

    doc = daemon.call("doctor")
    first = forkserver_pid(doc)
    assert doc["fork_server"] == {"pid": first, "restarts": 0}
    assert "restarted" not in daemon.cli("doctor").out
    os.kill(first, signal.SIGKILL)

    def restarted() -> dict[str, Any] | None:
        d = daemon.call("doctor")  # a report may be read in the middle of the restart
        return d if d["fork_server"]["restarts"] == 1 and forkserver_pid(d) else None

    doc = wait_for(restarted, 10, "the restart")
    again = forkserver_pid(doc)
    assert again != first and doc["fork_server"]["pid"] == again
    last = doc["fork_server"]["last_exit"]
    assert last["signal"] == "SIGKILL" and set(last) == {"at", "signal"}, last
    text = daemon.cli("doctor").out
    assert f"restarted 1 time; last exit {last['at']}: killed by SIGKILL" in text, text
