"""Authorization with real tokens (§5): anonymous, pane principals, minted, revoked, audit."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import PY, Daemon, wait_for
from venomx.client import Client
from venomx.daemon.auth import GRANTS_MAX
from venomx.daemon.registry import TREE_GRANTS_MAX, TREE_PRINCIPALS_MAX
from venomx.wire import VenomxError


def mint(d: Daemon, *grants: tuple[str, str]) -> dict[str, str]:
    return d.call("principal.create", {"grants": [{"right": r, "scope": s} for r, s in grants]})


def test_anonymous_reads_only(daemon: Daemon) -> None:
    s = daemon.call("session.create")["session"]
    assert daemon.call("whoami", token=None) == {
        "principal": None,
        "grants": [{"right": "read", "scope": "*"}],
        "source": daemon.call("whoami")["source"],
    }
    assert daemon.call("session.list", token=None)["sessions"][0]["session"] == s
    for verb, params, code in (
        ("session.create", {}, "denied.spawn"),
        ("window.create", {"session": s}, "denied.spawn"),
        ("pane.kill", {"pane": "p0"}, "denied.write"),
        ("shutdown", {}, "denied.admin"),
        ("principal.create", {"grants": []}, "denied.anonymous"),
    ):
        assert daemon.error(verb, params, token=None).code == code
    daemon.call(
        "config.set",
        {
            "path": "auth.default_grants",
            "value": '[{"right":"spawn","scope":"*"},{"right":"read","scope":"*"}]',
        },
    )
    assert daemon.error("session.create", token=None).code == "denied.spawn"


def test_default_grants_reach_open_anonymous_connections(daemon: Daemon) -> None:
    """foundation §11: a config change applies at once, to callers already connected too."""
    with daemon.client(token=None) as anon:
        assert anon.call("session.list", {})["sessions"] == []
        daemon.call("config.set", {"path": "auth.default_grants", "value": "[]"})
        assert anon.call("whoami", {})["grants"] == []
        with pytest.raises(VenomxError) as denied:
            anon.call("session.list", {})
        assert denied.value.code == "denied.read"
        daemon.call(
            "config.set", {"path": "auth.default_grants", "value": '[{"right":"read","scope":"*"}]'}
        )
        assert anon.call("session.list", {})["sessions"] == []


def test_bad_tokens(daemon: Daemon) -> None:
    for token in ("0" * 64, "zz", "A" * 64, "0" * 63, "@Owner"):
        assert daemon.error("whoami", token=token).code == "denied.token"


def test_pane_principal_acts_through_its_environment(daemon: Daemon, tmp_path: Path) -> None:
    out = tmp_path / "out"
    s = daemon.call("session.create")["session"]
    venomx = shutil.which("venomx") or f"{PY} -m venomx"
    script = (
        f"{venomx} whoami --json > {out}; "
        f"{venomx} run --key inner --session {s} --json -- true >> {out}; "
        f"{venomx} session create --json >> {out}; echo done >> {out}"
    )
    w = daemon.call("window.create", {"session": s, "argv": ["sh", "-c", script]})
    wait_for(lambda: out.exists() and "done" in out.read_text(), 20, "inner CLI")
    lines = [json.loads(x) for x in out.read_text().splitlines()[:-1]]
    assert lines[0]["principal"] == w["principal"]
    assert lines[0]["grants"] == [
        {"right": "read", "scope": "self"},
        {"right": "write", "scope": "self"},
        {"right": "spawn", "scope": "self"},
    ]
    assert lines[1]["error"]["code"] == "denied.spawn"  # self does not cover the session
    assert lines[2]["error"]["code"] == "denied.spawn"


def test_minted_principal_and_delegation(daemon: Daemon) -> None:
    s = daemon.call("session.create")["session"]
    other = daemon.call("session.create")["session"]
    p = mint(daemon, ("spawn", f"session:{s}"), ("read", f"session:{s}"), ("write", f"session:{s}"))
    assert len(p["token"]) == 64 and p["principal"].startswith("g")
    w = daemon.call("window.create", {"session": s, "argv": ["sleep", "60"]}, token=p["token"])
    assert (
        daemon.error("window.create", {"session": other}, token=p["token"]).code == "denied.spawn"
    )
    assert (
        daemon.error("window.create", {"session": "s999"}, token=p["token"]).code == "denied.spawn"
    )
    assert [x["pane"] for x in daemon.call("pane.list", token=p["token"])["panes"]] == [w["pane"]]
    e = daemon.error(
        "principal.create", {"grants": [{"right": "admin", "scope": "*"}]}, token=p["token"]
    )
    assert e.code == "denied.delegation" and e.data == {"grant": {"right": "admin", "scope": "*"}}
    sub = daemon.call(
        "principal.create",
        {"grants": [{"right": "read", "scope": f"pane:{w['pane']}"}]},
        token=p["token"],
    )
    assert daemon.call("pane.list", token=sub["token"])["panes"][0]["pane"] == w["pane"]
    # the window's default pane principal got read/write/spawn self, narrowed to p's grants
    r = daemon.call("principal.revoke", {"principal": p["principal"]})
    # descendants go with it: the principal p minted and the pane principal of p's window
    assert sorted(r["revoked"]) == sorted([p["principal"], sub["principal"], w["principal"]])
    for t in (p["token"], sub["token"]):
        assert daemon.error("whoami", token=t).code == "denied.token"
    assert (
        daemon.error("principal.revoke", {"principal": "g0"}, token=None).code == "denied.anonymous"
    )
    # forgotten once revoked, but remembered lately: revoking it again revokes nothing
    again = daemon.call("principal.revoke", {"principal": p["principal"]})
    assert again == {"principal": p["principal"], "revoked": []}
    assert daemon.error("principal.revoke", {"principal": "g999"}).code == "not_found.principal"
    parent = daemon.call("principal.create", {"grants": []})
    child = daemon.call("principal.create", {"grants": []}, token=parent["token"])
    for revoked in ([child["principal"]], []):
        r = daemon.call(
            "principal.revoke", {"principal": child["principal"]}, token=parent["token"]
        )
        assert r == {"principal": child["principal"], "revoked": revoked}
    # a start that failed consumed a principal ID, which never named a principal
    s = daemon.call("session.create")["session"]
    before = daemon.call("principal.create", {"grants": []})["principal"]
    failed = daemon.error("run", {"key": "enoent", "session": s, "argv": ["/nonexistent-x"]})
    assert failed.code == "unavailable.spawn"
    after = daemon.call("principal.create", {"grants": []})["principal"]
    assert int(after[1:]) > int(before[1:]) + 1
    for n in range(int(before[1:]) + 1, int(after[1:])):
        assert daemon.error("principal.revoke", {"principal": f"g{n}"}).code == (
            "not_found.principal"
        )


def test_what_a_revoked_principal_made_stays_its_ancestors(daemon: Daemon, tmp_path: Path) -> None:
    """A pane principal is revoked (and forgotten) with its pane; the run it started
    keeps its owner chain, so its parent still reads it by ``self`` (§5)."""
    s = daemon.call("session.create")["session"]
    own = [{"right": r, "scope": "self"} for r in ("read", "write", "spawn")]
    alice = daemon.call(
        "principal.create", {"grants": [*own, {"right": "spawn", "scope": f"session:{s}"}]}
    )
    stranger = daemon.call("principal.create", {"grants": own})
    token, gate = tmp_path / "token", tmp_path / "gate"
    a = daemon.call(
        "run",
        {
            "key": "a",
            "session": s,
            "shell": f'echo "$VENOMX_TOKEN" > {token}.new && mv {token}.new {token}; '
            f"while [ ! -e {gate} ]; do sleep 0.05; done",
        },
        token=alice["token"],
    )
    wait_for(token.exists, 10, "the pane's token")
    pane_token = token.read_text().strip()
    b = daemon.call(
        "run", {"key": "b", "pane": a["pane"], "axis": "cols", "argv": ["true"]}, token=pane_token
    )
    gate.touch()
    daemon.call("run.wait", {"run": a["run"]})
    daemon.call("run.wait", {"run": b["run"]})
    daemon.call("pane.remove", {"pane": a["pane"]})
    assert daemon.error("whoami", token=pane_token).code == "denied.token"
    assert daemon.call("run.get", {"run": b["run"]}, token=alice["token"])["outcome"] == "succeeded"
    assert daemon.error("run.get", {"run": b["run"]}, token=stranger["token"]).code == "denied.read"


def test_denied_identical_for_existing_and_missing(daemon: Daemon) -> None:
    s = daemon.call("session.create")["session"]
    w = daemon.call("window.create", {"session": s, "argv": ["sleep", "60"]})
    narrow = mint(daemon, ("read", "pane:p999"), ("write", "pane:p999"))["token"]
    for verb, right, kind, real, missing in (
        ("pane.kill", "write", "pane", w["pane"], "p998"),
        ("pane.capture_rows", "read", "pane", w["pane"], "p998"),
        ("window.get", "read", "window", w["window"], "w998"),
        ("session.get", "read", "session", s, "s998"),
    ):
        # the same answer, whatever the target, existing or not
        for target in (real, missing):
            assert daemon.error(verb, {kind: target}, token=narrow).to_dict() == {
                "code": f"denied.{right}",
                "message": f"{right} denied",
                "data": {},
            }
    # covered by ID: absent is not_found
    assert daemon.error("pane.kill", {"pane": "p999"}, token=narrow).code == "not_found.pane"
    audit = daemon.call("audit.list", {"limit": 10000})["records"]
    denials = [a for a in audit if a["code"].startswith("denied.")]
    assert {"resource"} <= set(denials[0]) and denials[0]["principal"].startswith("g")


def test_no_token_in_logs_events_audit_doctor(daemon: Daemon, tmp_path: Path) -> None:
    p = mint(daemon, ("read", "*"))
    s = daemon.call("session.create")["session"]
    tok = tmp_path / "t"
    daemon.call(
        "window.create", {"session": s, "argv": ["sh", "-c", f'echo "$VENOMX_TOKEN" > {tok}']}
    )
    wait_for(lambda: tok.exists() and len(tok.read_text().strip()) == 64, 10, "pane token")
    daemon.call("whoami", token=p["token"])
    daemon.error("whoami", token="f" * 64)
    blob = (
        json.dumps(
            [
                daemon.call("events.read", {"limit": 1024}),
                daemon.call("doctor"),
                daemon.call("audit.list", {"limit": 10000}),
            ]
        )
        + daemon.log.read_text()
    )
    for t in (p["token"], tok.read_text().strip(), "f" * 64):
        assert t not in blob


def test_owner_from_another_uid(daemon: Daemon) -> None:
    tool = shutil.which("setpriv") or shutil.which("runuser")
    if os.getuid() != 0 or tool is None:
        pytest.skip("needs root and setpriv or runuser")
    os.chmod(os.path.dirname(daemon.socket), 0o755)
    os.chmod(daemon.socket, 0o666)
    code = (
        "import json,socket;s=socket.socket(socket.AF_UNIX);s.connect(%r);"
        's.sendall(b\'{"id":0,"verb":"hello","params":{"protocol":1,'
        '"token":"@owner"}}\\n\');print(s.makefile().readline())' % daemon.socket
    )
    if tool.endswith("setpriv"):
        cmd = [tool, "--reuid=65534", "--regid=65534", "--clear-groups", PY, "-c", code]
    else:
        cmd = [tool, "-u", "nobody", "--", PY, "-c", code]
    ours = daemon.call("audit.list", {"limit": 10000})["records"]  # audit.list: admin, ok
    for _ in range(3):
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=20)
        assert json.loads(r.stdout)["error"]["code"] == "denied.owner", r.stderr
    # every refusal is a record, kept apart (a tenth of retain_count) so that another
    # user cannot push ours out
    daemon.call("config.set", {"path": "audit.retain_count", "value": "20"})
    records = daemon.call("audit.list", {"limit": 10000})["records"]
    theirs = [r for r in records if r["verb"] == "hello"]
    assert [r["code"] for r in theirs] == ["denied.owner"] * 2  # the last two of three
    assert len(records) - len(theirs) == min(20, len(ours) + 2)  # audit.list, config.set


def test_a_start_in_flight_when_its_principal_is_revoked_fails(daemon: Daemon) -> None:
    """foundation §5: a revoked token stops working at once, also for the start it asked
    for that had not committed yet (it committed, and its pane's token worked)."""
    s = daemon.call("session.create")["session"]
    p = mint(daemon, ("spawn", "*"), ("read", "*"))
    daemon.call("seam.set", {"name": "run.before_barrier", "state": "hold"})
    c = daemon.client(token=p["token"])
    rid = c.start("run", {"key": "revoked", "session": s, "argv": ["sleep", "60"]})
    daemon.call("seam.wait", {"name": "run.before_barrier", "timeout_ms": 10000})
    daemon.call("principal.revoke", {"principal": p["principal"]})
    daemon.call("seam.set", {"name": "run.before_barrier", "state": "release"})
    with pytest.raises(VenomxError) as e:
        c.response(rid)
    assert e.value.code == "denied.token"
    assert daemon.call("run.list")["runs"] == [] and daemon.call("pane.list")["panes"] == []


def test_a_start_past_its_barrier_when_its_principal_is_revoked_completes(
    daemon: Daemon, tmp_path: Path
) -> None:
    """RFC-0015 §8: past the barrier the program may be running, so the start completes
    normally. It was rolled back: the program had run (and been killed), and no record
    said so. Now the run is committed for those above the requester to read, the request
    ends denied.token, and the new pane's token, born under a revoked parent, is dead."""
    s = daemon.call("session.create")["session"]
    p = mint(daemon, ("spawn", "*"), ("read", "*"))
    token_file = tmp_path / "token"
    daemon.call("seam.set", {"name": "run.after_barrier", "state": "hold"})
    c = daemon.client(token=p["token"])
    script = f'printf %s "$VENOMX_TOKEN" > {token_file}; exec sleep 60'
    rid = c.start("run", {"key": "revoked-late", "session": s, "argv": ["sh", "-c", script]})
    daemon.call("seam.wait", {"name": "run.after_barrier", "timeout_ms": 10000})
    wait_for(lambda: len(token_file.read_bytes()) == 64 if token_file.exists() else False)
    daemon.call("principal.revoke", {"principal": p["principal"]})
    daemon.call("seam.set", {"name": "run.after_barrier", "state": "release"})
    with pytest.raises(VenomxError) as e:
        c.response(rid)
    assert e.value.code == "denied.token"
    [run] = daemon.call("run.list")["runs"]
    assert run["state"] == "running"
    refused = daemon.error("whoami", token=token_file.read_text())
    assert refused.code == "denied.token"
    daemon.call("run.cancel", {"run": run["run"]})
    assert daemon.wait_exit(run["run"])["signal"] == "SIGHUP"  # run.cancel's first signal


def test_a_pane_scope_delegated_under_pane_star_reaches_no_run(daemon: Daemon) -> None:
    """RFC-0015 §11: `pane:*` does not cover runs. Its holder minted `pane:<id>` (§5:
    `kind:*` ⊇ `kind:<id>`) and the child read the run's record, key and all, and
    cancelled it. The mint is still allowed, but what it hands down reaches the pane
    and not the run inside; a concrete scope held as such still does."""
    s = daemon.call("session.create")["session"]
    r = daemon.call("run", {"key": "secret-key", "session": s, "argv": ["sleep", "60"]})
    panes = mint(daemon, ("read", "pane:*"), ("write", "pane:*"))
    grants = [{"right": x, "scope": f"pane:{r['pane']}"} for x in ("read", "write")]
    child = daemon.call("principal.create", {"grants": grants}, token=panes["token"])
    assert daemon.call("whoami", token=child["token"])["grants"] == grants
    assert daemon.error("run.get", {"run": r["run"]}, token=child["token"]).code == "denied.read"
    assert daemon.call("run.list", token=child["token"])["runs"] == []
    cancel = daemon.error("run.cancel", {"run": r["run"]}, token=child["token"])
    assert cancel.code == "denied.write"
    [pane] = daemon.call("pane.list", token=child["token"])["panes"]
    assert pane["pane"] == r["pane"]
    in_session = mint(daemon, ("read", f"session:{s}"))
    narrowed = daemon.call(
        "principal.create",
        {"grants": [{"right": "read", "scope": f"pane:{r['pane']}"}]},
        token=in_session["token"],
    )
    assert daemon.call("run.get", {"run": r["run"]}, token=narrowed["token"])["key"] == "secret-key"
    assert daemon.call("run.get", {"run": r["run"]})["state"] == "running"
    os.kill(r["pid"], 9)


def mint_pipelined(c: Client, grants: list[list[dict[str, str]]]) -> list[dict[str, Any]]:
    """One principal.create per grants list, sent in one write; their answers, in order
    (an error as {"error": …})."""
    c.greeted()
    c.send_bytes(
        b"".join(
            json.dumps({"id": i + 1, "verb": "principal.create", "params": {"grants": g}}).encode()
            + b"\n"
            for i, g in enumerate(grants)
        )
    )
    answers: dict[int, dict[str, Any]] = {}
    while len(answers) < len(grants):
        frame = c.read()
        answers[frame["id"]] = frame.get("ok") or {"error": frame["error"]}
    return [answers[i + 1] for i in range(len(grants))]


def test_a_principal_tree_holds_a_bounded_number_of_principals(daemon: Daemon) -> None:
    """A program minted principals with its pane's token, ~150,000 a second at ~1 KiB
    each, until the daemon ran out of memory; now a tree (the owner's child and all
    under it, itself included) holds at most TREE_PRINCIPALS_MAX live ones."""
    root = mint(daemon, ("read", "*"))
    c = daemon.client(token=root["token"])
    one = [{"right": "read", "scope": "*"}]
    answers = mint_pipelined(c, [one] * TREE_PRINCIPALS_MAX)
    assert all("principal" in a for a in answers[:-1])
    assert answers[-1] == {
        "error": {
            "code": "unavailable.principal_limit",
            "message": f"this principal's tree holds {TREE_PRINCIPALS_MAX} live principals at most",
            "data": {"limit": TREE_PRINCIPALS_MAX},
        }
    }
    grandchild = daemon.client(token=answers[0]["token"])  # the same tree
    with pytest.raises(VenomxError) as e:
        grandchild.call("principal.create", {"grants": []})
    assert e.value.code == "unavailable.principal_limit"
    assert "principal" in daemon.call("principal.create", {"grants": one})  # the owner's
    assert "principal" in mint(daemon, ("read", "*"))  # another tree
    daemon.call("principal.revoke", {"principal": answers[0]["principal"]})
    assert "principal" in c.call("principal.create", {"grants": one})  # room for one
    with pytest.raises(VenomxError):
        c.call("principal.create", {"grants": one})


def test_a_principal_tree_holds_a_bounded_number_of_grants(daemon: Daemon) -> None:
    root = mint(daemon, ("read", "*"))  # its one grant counts
    c = daemon.client(token=root["token"])
    many = [{"right": "read", "scope": f"pane:p{i}"} for i in range(GRANTS_MAX)]
    err = daemon.error("principal.create", {"grants": [many[0]] * (GRANTS_MAX + 1)})
    assert (err.code, err.data) == ("invalid_params.grants", {"param": "grants", "reason": "size"})
    assert 1 + 255 * GRANTS_MAX + GRANTS_MAX - 1 == TREE_GRANTS_MAX  # the root's one, these
    for grants in [many] * 255 + [many[:-1]]:  # each answer echoes them: one at a time
        assert "principal" in c.call("principal.create", {"grants": grants})
    assert "principal" in c.call("principal.create", {"grants": []})  # at the bound, not over
    with pytest.raises(VenomxError) as e:
        c.call("principal.create", {"grants": many[:1]})
    assert (e.value.code, e.value.data) == (
        "unavailable.principal_limit",
        {"limit": TREE_GRANTS_MAX},
    )


def test_requests_in_flight_end_when_their_principal_is_revoked(daemon: Daemon) -> None:
    """A revoked token stops working at once: its attach and its wait end denied.token
    (the attach went on delivering the pane's output)."""
    s = daemon.call("session.create")["session"]
    r = daemon.call("run", {"key": "watched", "session": s, "argv": ["sleep", "60"]})
    p = mint(daemon, ("read", "*"))
    watcher, waiter = daemon.client(token=p["token"]), daemon.client(token=p["token"])
    stream = watcher.stream("pane.attach", {"pane": r["pane"]})
    assert "screen" in next(stream)
    rid = waiter.start("run.wait", {"run": r["run"], "timeout_ms": 60000})
    daemon.call("principal.revoke", {"principal": p["principal"]})
    with pytest.raises(VenomxError) as attach:
        next(stream)
    with pytest.raises(VenomxError) as wait:
        waiter.response(rid)
    assert attach.value.code == wait.value.code == "denied.token"
    assert daemon.call("run.get", {"run": r["run"], "output": False})["state"] == "running"
    os.kill(r["pid"], 9)


def test_a_removal_that_revokes_its_caller_answers_once(daemon: Daemon, tmp_path: Path) -> None:
    """An exited pane's principal, granted write on its session, removes its window,
    which revokes that principal: one answer, ok, then its token stops working (a second
    answer for the same request, cancelled, followed)."""
    token_file = tmp_path / "token"
    s = daemon.call("session.create")["session"]
    grants = [{"right": "write", "scope": f"session:{s}"}, {"right": "read", "scope": "self"}]
    w = daemon.call(
        "window.create",
        {
            "session": s,
            "grants": grants,
            "argv": ["sh", "-c", f'printf %s "$VENOMX_TOKEN" > {token_file}'],
        },
    )
    wait_for(
        lambda: daemon.call("pane.list")["panes"][0]["state"] == "exited", 10, "the pane's exit"
    )
    c = daemon.client(token=token_file.read_text())
    first = c.start("window.remove", {"window": w["window"]})
    answer = c.read()
    assert answer["id"] == first and "ok" in answer, answer
    second = c.start("whoami")
    answer = c.read()
    assert answer["id"] == second and answer["error"]["code"] == "denied.token", answer


def test_self_over_a_window_reaches_no_run_another_principal_started_there(
    daemon: Daemon, tmp_path: Path
) -> None:
    """RFC-0015 §11 gives `self` a run "for its owner and the owner's ancestors" (and the
    run's own pane principal). A principal owning the window another principal split a run
    into read its record, key and all, and cancelled it. The pane is still its own (§5:
    `self` covers what an owned window contains), as a pane had through `pane:*` is."""
    s = daemon.call("session.create")["session"]
    grants = [("read", "self"), ("write", "self"), ("spawn", "self"), ("spawn", f"session:{s}")]
    alice = mint(daemon, *grants)
    token = alice["token"]
    mine = daemon.call("run", {"key": "a", "session": s, "argv": ["sleep", "60"]}, token=token)
    token_file = tmp_path / "token"
    script = f'printf %s "$VENOMX_TOKEN" > {token_file}.new; mv {token_file}.new {token_file}'
    theirs = daemon.call(
        "run",
        {"key": "secret-key", "pane": mine["pane"], "axis": "cols", "shell": script + "; sleep 60"},
    )
    assert theirs["window"] == mine["window"]
    assert daemon.error("run.get", {"run": theirs["run"]}, token=token).code == "denied.read"
    assert daemon.error("run.wait", {"run": theirs["run"]}, token=token).code == "denied.read"
    assert [r["run"] for r in daemon.call("run.list", token=token)["runs"]] == [mine["run"]]
    cancel = daemon.error("run.cancel", {"run": theirs["run"]}, token=token)
    assert cancel.code == "denied.write"
    assert daemon.call("run.get", {"run": mine["run"]}, token=token)["key"] == "a"
    # the pane itself is in alice's window: hers to read, as before
    panes = {p["pane"] for p in daemon.call("pane.list", token=token)["panes"]}
    assert panes == {mine["pane"], theirs["pane"]}
    assert daemon.call("run.get", {"run": theirs["run"]})["state"] == "running"
    # and the run's own pane principal, a child of the owner, still reads its own run
    wait_for(token_file.exists, 10, "the run's program to write its token")
    own = daemon.call("run.get", {"run": theirs["run"]}, token=token_file.read_text())
    assert own["run"] == theirs["run"]
    for r in (mine, theirs):
        os.kill(r["pid"], 9)
