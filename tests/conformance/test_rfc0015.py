"""RFC-0015 §13: one test per conformance row, through the CLI and through MCP.

A marker file written by the command (``echo x >> "$F"``) counts executions independently
of the daemon. "No side effects" compares ``world()`` before and after.
"""

from __future__ import annotations

import base64
import os
import signal
import stat
from pathlib import Path
from typing import Any

import pytest

from tests.adapters import CliApi, McpApi, Outcome
from tests.conformance.conftest import world
from tests.helpers import Daemon, marker_count, start_daemon, stop_daemon, wait_for
from venomx.client import Client
from venomx.wire import VenomxError

Api = CliApi | McpApi


def session(d: Daemon) -> str:
    return str(d.call("session.create")["session"])


def start(api: Api, d: Daemon, key: str, **params: Any) -> Outcome:
    params.setdefault("session", session(d))
    return api.call("run", {"key": key, **params})


def ok(o: Outcome) -> dict[str, Any]:
    assert o.error is None, o.error
    assert o.ok is not None
    return o.ok


def waited(api: Api, run: str, **params: Any) -> Outcome:
    return api.call("run.wait", {"run": run, "timeout_ms": 20000, **params})


def parity(api: Api, d: Daemon, run: str) -> dict[str, Any]:
    """The record through this adapter equals the record through a raw client."""
    mine = ok(api.call("run.get", {"run": run}))
    assert mine == d.call("run.get", {"run": run})
    return mine


def marker_env(tmp_path: Path, name: str = "m") -> tuple[Path, dict[str, str]]:
    f = tmp_path / name
    return f, {"F": str(f)}


# -- rows 1-5: outcomes ----------------------------------------------------------------------


def test_row01_true_succeeds(api: Api, daemon: Daemon) -> None:
    r = ok(start(api, daemon, "k1", argv=["true"]))
    w = waited(api, r["run"])
    rec = ok(w)
    assert (rec["outcome"], rec["exit_code"], rec["status"], w.code) == ("succeeded", 0, 0, 0)
    assert "signal" not in rec and "cause" not in rec
    parity(api, daemon, r["run"])


@pytest.mark.parametrize(
    ("params", "code"),
    [({"shell": "exit 3"}, 3), ({"argv": ["false"]}, 1), ({"shell": "nosuchcmd"}, 127)],
)
def test_row02_failures(api: Api, daemon: Daemon, params: dict[str, Any], code: int) -> None:
    r = ok(start(api, daemon, "k2", **params))
    w = waited(api, r["run"])
    rec = ok(w)
    assert (rec["outcome"], rec["exit_code"], rec["status"], w.code) == ("failed", code, code, code)


def test_row03_exec_failure_has_no_side_effects(api: Api, daemon: Daemon, tmp_path: Path) -> None:
    f, env = marker_env(tmp_path)
    noexec = tmp_path / "noexec.sh"
    noexec.write_text('#!/bin/sh\necho x >> "$F"\n')
    noshebang = tmp_path / "noshebang"
    noshebang.write_text('echo x >> "$F"\n')
    noshebang.chmod(noshebang.stat().st_mode | stat.S_IXUSR)
    s = session(daemon)
    before = world(daemon)
    for argv, errno in (
        [["/nonexistent/prog"], "ENOENT"],
        [["no-such-program-xyz"], "ENOENT"],
        [[str(noexec)], "EACCES"],
        [[str(noshebang)], "ENOEXEC"],
    ):
        o = api.call("run", {"key": "k3", "session": s, "argv": argv, "env": env})
        assert o.err_code == "unavailable.spawn" and o.code == 6
        assert o.error is not None and o.error["data"] == {"errno": errno}
    assert world(daemon) == before
    assert marker_count(f) == 0
    # the key stayed free
    r = ok(api.call("run", {"key": "k3", "session": s, "argv": ["true"]}))
    assert r["reused"] is False


def test_row04_signaled(api: Api, daemon: Daemon) -> None:
    r = ok(start(api, daemon, "k4", shell="kill -SEGV $$"))
    w = waited(api, r["run"])
    rec = ok(w)
    assert (rec["outcome"], rec["signal"], rec["status"], w.code) == (
        "signaled",
        "SIGSEGV",
        139,
        139,
    )
    assert "exit_code" not in rec


def test_row05_deadline(api: Api, daemon: Daemon) -> None:
    s = session(daemon)
    # the shells get 3000 ms so that their trap is surely set when SIGHUP comes, even on
    # a loaded machine
    runs = [
        ok(api.call("run", {"key": f"k5{i}", "session": s, **p}))["run"]
        for i, p in enumerate(
            [
                {"argv": ["sleep", "100"], "deadline_ms": 300},
                {"shell": 'trap "exit 0" HUP; sleep 100 & wait', "deadline_ms": 3000},
                {"shell": 'trap "" HUP; sleep 100', "deadline_ms": 3000},
            ]
        )
    ]
    recs = [ok(waited(api, r)) for r in runs]
    for rec in recs:
        assert (rec["outcome"], rec["cause"], rec["status"]) == ("terminated", "deadline", 124)
    assert recs[0]["signal"] == "SIGHUP"
    assert recs[1]["exit_code"] == 0 and recs[1]["outcome"] != "succeeded"
    assert recs[2]["signal"] == "SIGKILL"
    assert recs[2]["duration_ms"] >= 3000 + 1000  # the deadline, then most of the grace


# -- rows 6-9: waiting and termination --------------------------------------------------------


def hung(api: Api, d: Daemon, tmp_path: Path, key: str = "hung") -> str:
    f, env = marker_env(tmp_path, key)
    r = ok(start(api, d, key, shell='echo x >> "$F"; exec sleep 100', env=env))
    wait_for(lambda: marker_count(f) == 1, 10, "marker")
    return str(r["run"])


def test_row06_wait_never_touches_the_run(api: Api, daemon: Daemon, tmp_path: Path) -> None:
    run = hung(api, daemon, tmp_path)
    for t in (100, 0):
        o = api.call("run.wait", {"run": run, "timeout_ms": t})
        assert o.err_code == "timeout.wait" and o.code == 7
        assert o.error is not None and o.error["data"] == {"run": run, "state": "running"}
    c = daemon.client()
    rid = c.start("run.wait", {"run": run})
    c.cancel(rid)
    with pytest.raises(VenomxError) as e:
        c.response(rid)
    assert e.value.code == "cancelled"
    c2 = daemon.client()
    c2.start("run.wait", {"run": run})
    c2.close()
    assert daemon.call("run.get", {"run": run})["state"] == "running"
    assert marker_count(tmp_path / "hung") == 1


def test_row07_cancel_then_again(api: Api, daemon: Daemon, tmp_path: Path) -> None:
    run = hung(api, daemon, tmp_path)
    first = ok(api.call("run.cancel", {"run": run, "signal": "SIGTERM"}))
    assert (first["outcome"], first["cause"], first["signal"]) == (
        "terminated",
        "cancel",
        "SIGTERM",
    )
    seq = daemon.call("events.read", {"limit": 1024})["next"]
    again = ok(api.call("run.cancel", {"run": run}))
    assert again == first
    assert daemon.call("events.read", {"after": seq})["events"] == []


def test_row08_unkillable(api: Api, daemon: Daemon, tmp_path: Path) -> None:
    run = hung(api, daemon, tmp_path)
    daemon.call("seam.set", {"name": "terminate.unkillable", "state": "hold"})
    o = api.call("run.cancel", {"run": run, "grace_ms": 0})
    assert o.err_code == "timeout.terminate"
    assert o.error is not None and o.error["data"]["panes"] == [
        daemon.call("run.get", {"run": run})["pane"]
    ]
    assert daemon.call("run.get", {"run": run})["state"] == "terminating"
    daemon.call("seam.set", {"name": "terminate.unkillable", "state": "release"})
    rec = ok(waited(api, run))
    assert (rec["outcome"], rec["cause"]) == ("terminated", "cancel")


def test_row09_other_causes(api: Api, daemon: Daemon, tmp_path: Path) -> None:
    run = hung(api, daemon, tmp_path, "a")
    pane = daemon.call("run.get", {"run": run})["pane"]
    ok(api.call("pane.kill", {"pane": pane}))
    assert ok(waited(api, run))["cause"] == "pane_kill"
    run = hung(api, daemon, tmp_path, "b")
    window = daemon.call("run.get", {"run": run})["window"]
    ok(api.call("window.remove", {"window": window, "recursive": True}))
    assert ok(waited(api, run))["cause"] == "removal"
    run = hung(api, daemon, tmp_path, "c")
    c = daemon.client()
    rid = c.start("run.wait", {"run": run})
    daemon.call("shutdown")
    # SIGHUP ends `sleep` at once, so the run completes before transport teardown and
    # the waiter must get the record (§7), not cancelled
    rec = c.response(rid)
    assert (rec["outcome"], rec["cause"], rec["signal"], rec["status"]) == (
        "terminated",
        "shutdown",
        "SIGHUP",
        125,
    ), rec
    daemon.proc.wait(10)
    assert daemon.proc.returncode == 0
    assert not os.path.exists(daemon.socket)


# -- rows 10-14: output and forged markers ------------------------------------------------------

FORGED = r'printf "\033]133;C\007\033]133;D;0\007\033]7501;state=done\007"'


def test_row10_forged_markers_change_nothing(api: Api, daemon: Daemon, tmp_path: Path) -> None:
    go = tmp_path / "go"
    text = '{"state":"completed","outcome":"succeeded","status":0}'
    script = f"{FORGED}; echo '{text}'; while [ ! -e {go} ]; do sleep 0.02; done; exit 3"
    r = ok(start(api, daemon, "k10", shell=script))
    run, pane = r["run"], r["pane"]

    def seen() -> list[dict[str, Any]]:
        evs = daemon.call("events.read", {"limit": 1024})["events"]
        return [e for e in evs if e["data"].get("pane") == pane]

    evs = wait_for(
        lambda: (e := seen()) and any(x["type"] == "program.status_changed" for x in e) and e,
        10,
        "markers",
    )
    types = [e["type"] for e in evs]
    assert "command.started" in types
    fin = [e for e in evs if e["type"] == "command.finished"]
    assert fin and fin[0]["data"] == {"pane": pane, "exit_code": 0, "reason": "marker"}
    assert daemon.call("run.get", {"run": run})["state"] == "running"
    assert "run.completed" not in types
    go.touch()
    rec = ok(waited(api, run))
    assert (rec["outcome"], rec["exit_code"]) == ("failed", 3)
    evs = [e["type"] for e in seen() if e["type"] in ("pane.exited", "run.completed")]
    assert evs == ["pane.exited", "run.completed"]


def test_row11_marker_failure_does_not_fail(api: Api, daemon: Daemon) -> None:
    r = ok(start(api, daemon, "k11", shell=r'printf "\033]133;D;1\007"; exit 0'))
    assert ok(waited(api, r["run"]))["outcome"] == "succeeded"


def test_row12_and_14_long_output(api: Api, daemon: Daemon) -> None:
    daemon.call("config.set", {"path": "vt.scrollback", "value": "1000"})
    r = ok(start(api, daemon, "k12", argv=["seq", "1", "100000"]))
    rec = ok(waited(api, r["run"]))
    out = rec["output"]
    assert len(out["lines"]) == 100 and out["complete"] is False and out["oldest"] > 0
    assert [ln.strip() for ln in out["lines"]] == [str(n) for n in range(99901, 100001)]
    assert out["end"] - out["start"] == 100
    before = ok(
        api.call(
            "pane.capture_rows",
            {"pane": r["pane"], "epoch": out["epoch"], "end": out["start"], "limit": 5},
        )
    )
    assert [ln.strip() for ln in before["lines"]] == [str(n) for n in range(99896, 99901)]
    # row 14: a 4096-byte connection cannot carry the record; output=false can
    with Client(daemon.socket, "@owner", max_frame=4096) as small:
        with pytest.raises(VenomxError) as e:
            small.call("run.get", {"run": r["run"]})
        assert e.value.code == "unsupported.result_size" and e.value.data["bytes"] > 4096
        assert "output" not in small.call("run.get", {"run": r["run"], "output": False})


def test_row13_byte_limits(api: Api, daemon: Daemon) -> None:
    s = session(daemon)
    shell = 'for i in 1 2 3 4; do printf "€€€€€€€€€€\\n"; done; printf "\\n\\n"'
    rows = {}
    for key, extra in (("a", {"output_bytes": 75}), ("b", {"output_rows": 0})):
        r = ok(
            api.call(
                "run",
                {"key": f"k13{key}", "session": s, "cols": 10, "rows": 10, "shell": shell, **extra},
            )
        )
        rows[key] = ok(waited(api, r["run"]))["output"]
    assert rows["a"]["lines"] == ["€" * 10] * 2
    assert rows["a"]["end"] == 4  # trailing blank rows are not output
    assert rows["b"]["lines"] == [] and rows["b"]["start"] == rows["b"]["end"] == 4


# -- rows 15-19: keys, retries, validation --------------------------------------------------------


@pytest.mark.parametrize("seam", ["run.before_barrier", "run.after_barrier"])
def test_row15_dropped_connection(api: Api, daemon: Daemon, tmp_path: Path, seam: str) -> None:
    f, env = marker_env(tmp_path)
    s = session(daemon)
    params = {"key": "k15", "session": s, "shell": 'echo x >> "$F"', "env": env}
    daemon.call("seam.set", {"name": seam, "state": "hold"})
    c = daemon.client()
    c.start("run", params)
    daemon.call("seam.wait", {"name": seam, "timeout_ms": 10000})
    c.close()
    daemon.call("seam.set", {"name": seam, "state": "release"})
    if seam == "run.before_barrier":
        wait_for(lambda: world(daemon)["panes"]["running"] == 0, 10, "rollback")
        assert marker_count(f) == 0
        assert daemon.call("run.list")["runs"] == []
        r = ok(api.call("run", params))
        assert r["reused"] is False
    else:
        wait_for(lambda: daemon.call("run.list")["runs"], 10, "commit")
        r = ok(api.call("run", params))
        assert r["reused"] is True
    ok(waited(api, r["run"]))
    assert marker_count(f) == 1


def test_row16_keys(api: Api, daemon: Daemon, tmp_path: Path) -> None:
    f, env = marker_env(tmp_path)
    s = session(daemon)
    params = {"key": "K", "session": s, "shell": 'echo x >> "$F"', "env": env}
    daemon.call("seam.set", {"name": "run.before_barrier", "state": "hold"})
    c = daemon.client()
    rid = c.start("run", params)
    daemon.call("seam.wait", {"name": "run.before_barrier", "timeout_ms": 10000})
    c2 = daemon.client()
    rid2 = c2.start("run", params)
    daemon.call("seam.set", {"name": "run.before_barrier", "state": "release"})
    first, joined = c.response(rid), c2.response(rid2)
    assert joined["run"] == first["run"] and joined["reused"] is True
    ok(waited(api, first["run"]))
    again = ok(api.call("run", params))
    assert again["run"] == first["run"] and again["reused"] is True
    # §8: the digest is taken after default insertion: the defaults given are no change
    defaults = {"cols": 80, "rows": 24, "output_rows": 100, "output_bytes": 65536}
    grants = [{"right": r, "scope": "self"} for r in ("read", "write", "spawn")]
    spelled = ok(api.call("run", {**params, **defaults, "grants": grants}))
    assert spelled["run"] == first["run"] and spelled["reused"] is True
    o = api.call("run", {**params, "shell": 'echo y >> "$F"'})
    assert o.err_code == "conflict.run_key" and o.code == 5
    assert o.error is not None and o.error["data"] == {"run": first["run"]}
    other = daemon.call(
        "principal.create",
        {"grants": [{"right": "spawn", "scope": "*"}, {"right": "read", "scope": "*"}]},
    )
    mine = daemon.call("run", params, token=other["token"])
    assert mine["run"] != first["run"] and mine["reused"] is False
    daemon.wait_exit(mine["run"])
    assert marker_count(f) == 2


def test_row17_restart_and_source(tmp_path: Path) -> None:
    f, env = marker_env(tmp_path)
    d = start_daemon()
    try:
        s = session(d)
        r = d.call("run", {"key": "K", "session": s, "shell": 'echo x >> "$F"', "env": env})
        d.wait_exit(r["run"])
    finally:
        stop_daemon(d)
    d2 = start_daemon()
    try:
        s = session(d2)
        api = CliApi(d2)
        o = api.call(
            "run",
            {
                "key": "K",
                "session": s,
                "shell": 'echo x >> "$F"',
                "env": env,
                "source": r["source"],
            },
        )
        assert o.err_code == "conflict.source" and o.code == 5
        assert o.error is not None and o.error["data"] == {"source": d2.call("whoami")["source"]}
        assert marker_count(f) == 1
    finally:
        stop_daemon(d2)


@pytest.mark.parametrize("key", ["bad key", "k" * 129, "", "ключ"])
def test_row18_bad_keys(api: Api, daemon: Daemon, key: str) -> None:
    s = session(daemon)
    before = world(daemon)
    o = api.call("run", {"key": key, "session": s, "argv": ["true"]})
    assert o.err_code == "invalid_params.key" and o.code == 2
    assert o.error is not None and o.error["data"] == {"param": "key", "reason": "syntax"}
    assert world(daemon) == before


def test_row19_command_and_target_rules(api: Api, daemon: Daemon) -> None:
    s = session(daemon)
    pane = daemon.call("window.create", {"session": s, "argv": ["sleep", "100"]})["pane"]
    before = world(daemon)
    cases: list[tuple[dict[str, Any], str, str]] = [
        ({"session": s}, "invalid_params.command", "missing"),
        ({"session": s, "argv": ["true"], "shell": "true"}, "invalid_params.command", "exclusive"),
        ({"argv": ["true"]}, "invalid_params.target", "missing"),
        ({"session": s, "pane": pane, "argv": ["true"]}, "invalid_params.target", "exclusive"),
        ({"session": s, "axis": "cols", "argv": ["true"]}, "invalid_params.target", "misplaced"),
        ({"pane": pane, "argv": ["true"]}, "invalid_params.target", "missing"),
        ({"session": s, "shell": "echo \0"}, "invalid_params.command", "nul"),
    ]
    for params, code, reason in cases:
        if api.name == "cli" and any("\0" in str(v) for v in params.values()):
            # no OS can put a NUL in a command line; the wire carries it
            e = daemon.error("run", {"key": "k19", **params})
            assert (e.code, e.data["reason"]) == (code, reason)
            continue
        o = api.call("run", {"key": "k19", **params})
        assert o.err_code == code and o.code == 2, (params, o.error)
        assert o.error is not None and o.error["data"]["reason"] == reason
    assert world(daemon) == before


# -- rows 20-22: authorization ---------------------------------------------------------------------


def test_row20_spawn_denied_identically(api: Api, daemon: Daemon) -> None:
    s = session(daemon)
    pane = daemon.call("window.create", {"session": s, "argv": ["sleep", "100"]})["pane"]
    reader = daemon.call("principal.create", {"grants": [{"right": "read", "scope": "*"}]})
    selfer = daemon.call("principal.create", {"grants": [{"right": "spawn", "scope": "self"}]})
    before = world(daemon)
    audit_before = daemon.call("audit.list", {"limit": 10000})["records"]
    errors = []
    for token in (None, reader["token"], selfer["token"]):
        seen = []
        for params in (
            {"session": s, "argv": ["true"]},
            {"session": "s999", "argv": ["true"]},
            {"pane": pane, "axis": "cols", "argv": ["true"]},
            {"session": s, "argv": [], "cols": 1},
        ):
            e = daemon.error("run", {"key": "k20", **params}, token=token).to_dict()
            errors.append(e)
            seen.append(e)
        assert [x for x in seen if x != seen[0]] == [], [e["message"] for e in errors[-4:]]
    # identical for all: every caller, every target, valid params or not
    assert [
        e for e in errors if e != {"code": "denied.spawn", "message": "spawn denied", "data": {}}
    ] == []
    cli = CliApi(daemon, token=reader["token"]).call(
        "run", {"key": "k", "session": s, "argv": ["true"]}
    )
    assert cli.err_code == "denied.spawn" and cli.code == 4
    assert world(daemon) == before
    audit = daemon.call("audit.list", {"limit": 10000})["records"][len(audit_before) :]
    # one record per denial (RFC-0005 §10), after audit.list's own record for `audit_before`;
    # the resource is recorded only where the resource check ran (the caller holds spawn)
    denied: list[tuple[str | None, str, str, str | None]] = [
        (p, "run", "denied.spawn", None)
        for p in (None, reader["principal"])  # the anonymous caller has no principal
        for _ in range(4)
    ]
    denied += [
        (selfer["principal"], "run", "denied.spawn", r)
        for r in (f"session:{s}", "session:s999", f"pane:{pane}", f"session:{s}")
    ]
    denied.append((reader["principal"], "run", "denied.spawn", None))  # the CLI's
    assert [(a["principal"], a["verb"], a["code"], a.get("resource")) for a in audit] == [
        ("g0", "audit.list", "ok", "*"),
        *denied,
    ]
    assert all(set(a) <= {"seq", "ts", "principal", "verb", "code", "resource"} for a in audit)


def test_row21_delegation(api: Api, daemon: Daemon) -> None:
    s = session(daemon)
    narrow = daemon.call(
        "principal.create",
        {"grants": [{"right": "spawn", "scope": f"session:{s}"}, {"right": "read", "scope": "*"}]},
    )
    before = world(daemon)
    e = daemon.error(
        "run",
        {
            "key": "k21",
            "session": s,
            "argv": ["true"],
            "grants": [{"right": "spawn", "scope": "*"}],
        },
        token=narrow["token"],
    )
    assert e.code == "denied.delegation"
    assert e.data == {"grant": {"right": "spawn", "scope": "*"}}
    assert world(daemon) == before


def test_row22_read_authority(api: Api, daemon: Daemon, tmp_path: Path) -> None:
    s = session(daemon)
    tok = tmp_path / "tok"
    r = daemon.call(
        "run",
        {
            "key": "k22",
            "session": s,
            "env": {"T": str(tok)},
            "shell": 'echo "$VENOMX_TOKEN" > "$T"; exec sleep 100',
        },
    )
    run = r["run"]
    wait_for(lambda: tok.exists() and len(tok.read_text().strip()) == 64, 10, "token")

    def mint(*grants: tuple[str, str]) -> str:
        g = [{"right": a, "scope": b} for a, b in grants]
        return str(daemon.call("principal.create", {"grants": g})["token"])

    panes_only = mint(("read", "pane:*"), ("write", "pane:*"))
    assert daemon.error("run.get", {"run": run}, token=panes_only).code == "denied.read"
    assert daemon.call("run.list", token=panes_only)["runs"] == []
    assert daemon.error("run.cancel", {"run": run}, token=panes_only).code == "denied.write"
    evs = daemon.call("events.read", {"limit": 1024}, token=panes_only)["events"]
    assert not any(e["type"].startswith("run.") for e in evs)
    in_session = mint(("read", f"session:{s}"))
    assert daemon.call("run.get", {"run": run}, token=in_session)["run"] == run
    assert [x["run"] for x in daemon.call("run.list", token=in_session)["runs"]] == [run]
    only_run = mint(("read", f"run:{run}"))
    assert daemon.call("run.get", {"run": run}, token=only_run)["run"] == run
    assert daemon.error("run.cancel", {"run": run}, token=only_run).code == "denied.write"
    own = tok.read_text().strip()
    assert daemon.call("run.get", {"run": run}, token=own)["run"] == run
    rec = daemon.call("run.cancel", {"run": run}, token=own)
    assert (rec["outcome"], rec["cause"]) == ("terminated", "cancel")
    parity(api, daemon, run)


# -- rows 23-25: limits, retention, events ------------------------------------------------------


def test_row23_max_active(api: Api, daemon: Daemon) -> None:
    daemon.call("config.set", {"path": "run.max_active", "value": "4"})
    s = session(daemon)
    clients = [daemon.client() for _ in range(50)]
    rids = [
        c.start("run", {"key": f"k23-{i}", "session": s, "argv": ["sleep", "100"]})
        for i, c in enumerate(clients)
    ]
    good, bad = [], []
    for c, rid in zip(clients, rids, strict=True):
        try:
            good.append(c.response(rid))
        except VenomxError as exc:
            bad.append(exc)
    assert len(good) == 4
    assert {e.code for e in bad} == {"unavailable.run_limit"}
    assert all(e.data == {"max_active": 4} for e in bad)
    assert len({g["pane"] for g in good}) == 4
    assert world(daemon)["panes"]["running"] == 4
    o = api.call("run", {"key": "one-more", "session": s, "argv": ["true"]})
    assert o.err_code == "unavailable.run_limit" and o.code == 6
    daemon.call("run.cancel", {"run": good[0]["run"], "grace_ms": 0})
    r = ok(api.call("run", {"key": "one-more", "session": s, "argv": ["true"]}))
    assert ok(waited(api, r["run"]))["outcome"] == "succeeded"


def test_row24_retention(api: Api, daemon: Daemon) -> None:
    s = session(daemon)

    # doctor's evictions by limit: each limit named, counted from zero
    def evictions() -> dict[str, int]:
        return dict(daemon.call("doctor")["run"]["retained"]["evictions"])

    assert evictions() == {"count": 0, "ms": 0, "bytes": 0}
    daemon.call("config.set", {"path": "run.retain_count", "value": "2"})
    hold = daemon.call("run", {"key": "running", "session": s, "argv": ["sleep", "100"]})["run"]
    done = []
    for i in range(3):
        r = ok(api.call("run", {"key": f"k24-{i}", "session": s, "argv": ["true"]}))
        ok(waited(api, r["run"]))
        done.append(r)
    o = api.call("run.get", {"run": done[0]["run"]})
    assert o.err_code == "not_found.run" and o.error is not None
    assert o.error["data"] == {"reason": "expired"}
    assert daemon.error("run.get", {"run": "r999"}).data == {"reason": "unknown"}
    pane_reader = daemon.call(
        "principal.create", {"grants": [{"right": "read", "scope": f"pane:{done[0]['pane']}"}]}
    )["token"]
    assert daemon.error("run.get", {"run": done[0]["run"]}, token=pane_reader).code == "denied.read"
    expired = [
        e
        for e in daemon.call("events.read", {"limit": 1024})["events"]
        if e["type"] == "run.expired"
    ]
    assert [e["data"]["run"] for e in expired] == [done[0]["run"]]
    again = ok(api.call("run", {"key": "k24-0", "session": s, "argv": ["true"]}))
    assert again["reused"] is False and again["run"] != done[0]["run"]
    ok(waited(api, again["run"]))
    # paging through what is retained: the running record plus two completed ones
    seen, after = [], None
    while True:
        params: dict[str, Any] = {"limit": 2}
        if after:
            params["after"] = after
        page = ok(api.call("run.list", params))
        seen += [x["run"] for x in page["runs"]]
        if "next" not in page:
            break
        after = page["next"]
    assert hold in seen and len(seen) == 3
    daemon.call("config.set", {"path": "run.retain_ms", "value": "100"})
    wait_for(
        lambda: [x["run"] for x in daemon.call("run.list")["runs"]] == [hold], 10, "age eviction"
    )
    daemon.call("config.set", {"path": "run.retain_ms", "value": "3600000"})
    daemon.call("config.set", {"path": "run.retain_bytes", "value": "10"})
    r = ok(api.call("run", {"key": "bytes", "session": s, "shell": "echo 0123456789abcdef"}))
    wait_for(
        lambda: any(
            e["type"] == "run.expired" and e["data"]["run"] == r["run"]
            for e in daemon.call("events.read", {"limit": 1024})["events"]
        ),
        10,
        "evicted",
    )
    assert [x["run"] for x in daemon.call("run.list")["runs"]] == [hold]
    assert daemon.call("run.get", {"run": hold})["state"] == "running"
    assert evictions() == {"count": 2, "ms": 2, "bytes": 1}


def test_row25_event_order(api: Api, daemon: Daemon) -> None:
    s = session(daemon)
    sub = daemon.client()
    sub_rid = sub.start(
        "events.subscribe", {"after": daemon.call("events.read", {"limit": 1024})["next"]}
    )
    r = ok(api.call("run", {"key": "k25", "session": s, "argv": ["sleep", "100"]}))
    run, pane = r["run"], r["pane"]
    ok(api.call("run.cancel", {"run": run}))
    reader = daemon.call(
        "principal.create", {"grants": [{"right": "read", "scope": f"pane:{pane}"}]}
    )["token"]
    daemon.call("pane.remove", {"pane": pane})
    daemon.call("config.set", {"path": "run.retain_count", "value": "0"})
    want = [
        "window.created",
        "pane.created",
        "run.started",
        "pane.terminating",
        "run.terminating",
        "pane.exited",
        "run.completed",
        "pane.removed",
        "window.removed",
        "run.expired",
    ]
    got: list[str] = []
    while len([t for t in got if t in want]) < len(want):
        frame = sub.read()
        if frame.get("id") == sub_rid and "item" in frame:
            got.append(frame["item"]["event"]["type"])
    assert [t for t in got if t in want] == want
    # frozen grants: the pane is gone, its run's events stay readable to its readers
    evs = daemon.call("events.read", {"limit": 1024}, token=reader)["events"]
    assert {"run.started", "run.completed", "run.expired"} <= {e["type"] for e in evs}


def test_row25_snapshot_has_run_until_expiry(daemon: Daemon) -> None:
    s = session(daemon)
    r = daemon.call("run", {"key": "k", "session": s, "argv": ["true"]})
    daemon.wait_exit(r["run"])
    with Client(daemon.socket, "@owner") as c:
        snap = next(c.stream("events.subscribe", {}))["snapshot"]
    runs = [e for e in snap["entities"] if e["kind"] == "run"]
    assert runs == [
        {
            "kind": "run",
            "run": r["run"],
            "pane": r["pane"],
            "state": "completed",
            "outcome": "succeeded",
            "exit_code": 0,
        }
    ]
    daemon.call("config.set", {"path": "run.retain_count", "value": "0"})
    with Client(daemon.socket, "@owner") as c:
        snap = next(c.stream("events.subscribe", {}))["snapshot"]
    assert not [e for e in snap["entities"] if e["kind"] == "run"]


# -- rows 26-28 -------------------------------------------------------------------------------------


def test_row26_escaped_writer(api: Api, daemon: Daemon, tmp_path: Path) -> None:
    pidfile, go, wrote = tmp_path / "pid", tmp_path / "go", tmp_path / "wrote"
    # the escaped writer prints LATE only when the test says so, after the run completed
    shell = (
        f"setsid sh -c 'echo $$ > {pidfile}; while [ ! -e {go} ]; do sleep 0.01; done; "
        f"echo LATE; touch {wrote}; exec sleep 300' & "
        f"while [ ! -s {pidfile} ]; do sleep 0.01; done; echo early; exit 0"
    )
    r = ok(start(api, daemon, "k26", shell=shell))
    rec = ok(waited(api, r["run"]))
    # completed at the leader's reap, long before the escaped writer (alive 300 s) ends
    assert rec["outcome"] == "succeeded" and rec["duration_ms"] < 5000
    assert any("early" in ln for ln in rec["output"]["lines"])
    pid = int(wait_for(lambda: pidfile.exists() and pidfile.read_text().strip(), 5, "pid"))
    doc = wait_for(
        lambda: (x := daemon.call("doctor"))["escapees"]["count"] == 1 and x, 10, "escapee counted"
    )
    assert doc["escapees"]["panes"] == {r["pane"]: 1}
    go.touch()
    wait_for(wrote.exists, 10, "the escaped writer's LATE")
    final = daemon.call("run.get", {"run": r["run"]})
    assert not any("LATE" in ln for ln in final["output"]["lines"])
    os.kill(pid, signal.SIGKILL)
    wait_for(
        lambda: (x := daemon.call("doctor"))["escapees"]["count"] == 0 and x["zombies"] == 0,
        10,
        "escapee gone and reaped",
    )


def test_row27_interactive_split(api: Api, daemon: Daemon) -> None:
    s = session(daemon)
    base = daemon.call("window.create", {"session": s, "argv": ["sleep", "100"]})["pane"]
    r = ok(
        api.call(
            "run",
            {
                "key": "k27",
                "pane": base,
                "axis": "rows",
                "shell": 'printf "name? "; read x; echo "hi $x"; exit 0',
            },
        )
    )
    watch = daemon.client()
    rid = watch.start("pane.attach", {"pane": r["pane"]})
    wait_for(
        lambda: "name?" in "".join(daemon.call("pane.capture_rows", {"pane": r["pane"]})["lines"]),
        10,
        "prompt",
    )
    ok(api.call("pane.send", {"pane": r["pane"], "text": "bob\r"}))
    rec = ok(waited(api, r["run"]))
    assert rec["outcome"] == "succeeded" and any("hi bob" in ln for ln in rec["output"]["lines"])
    data = b""
    while True:
        frame = watch.read()
        if frame.get("id") != rid:
            continue
        if "item" in frame:
            item = frame["item"]
            data += base64.b64decode(item.get("data") or item["screen"]["data"])
            continue
        assert frame["ok"]["exit"]["exit_code"] == 0
        break
    assert b"hi bob" in data


def test_row28_canaries(api: Api, daemon: Daemon, tmp_path: Path) -> None:
    cwd = tmp_path / "CANARYCWD"
    cwd.mkdir()
    s = session(daemon)
    (tmp_path / "CANARYDIR").mkdir()
    (tmp_path / "CANARYDIR" / "echo").symlink_to("/bin/echo")
    r1 = ok(
        api.call(
            "run",
            {
                "key": "CANARYKEY",
                "session": s,
                "argv": [str(tmp_path / "CANARYDIR" / "echo"), "CANARYARG"],
                "env": {"X": "CANARYENV"},
                "cwd": str(cwd),
            },
        )
    )
    r2 = ok(
        api.call("run", {"key": "k28b", "session": s, "shell": "echo CANARYSHELL; echo CANARYOUT"})
    )
    link = tmp_path / "CANARYBASE"
    link.symlink_to("/bin/true")
    r3 = ok(api.call("run", {"key": "k28c", "session": s, "argv": [str(link)]}))
    for r in (r1, r2, r3):
        ok(waited(api, r["run"]))
    everything = [
        daemon.call("events.read", {"limit": 1024}),
        daemon.call("doctor"),
        daemon.call("audit.list"),
        daemon.call("events.read", {"limit": 1024}, token=None),
    ]
    text = repr(everything) + daemon.log.read_text()
    for canary in (
        "CANARYKEY",
        "CANARYDIR",
        "CANARYARG",
        "CANARYENV",
        "CANARYCWD",
        "CANARYSHELL",
        "CANARYOUT",
    ):
        assert canary not in text, canary
    assert text.count("CANARYBASE") > 0
    created = [e for e in everything[0]["events"] if e["type"] == "pane.created"]
    argv0 = {e["data"]["pane"]: e["data"]["argv0"] for e in created}
    assert argv0[r2["pane"]] == "sh" and argv0[r3["pane"]] == "CANARYBASE"
    assert argv0[r1["pane"]] == "echo"
    rec = daemon.call("run.wait", {"run": r2["run"]})
    assert any("CANARYOUT" in ln for ln in rec["output"]["lines"])
