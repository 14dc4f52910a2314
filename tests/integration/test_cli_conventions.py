"""CLI conventions (issue 17 §4): flags, stray words, and errors that say what to do next.

Every case runs the real CLI against a real daemon; each checks what a person sees and
that ``--json`` still prints exactly the daemon's error object.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

from tests.helpers import PY, Daemon
from venomx.client import Client
from venomx.wire import VenomxError


def runs_with_key(d: Daemon, key: str) -> list[dict[str, object]]:
    runs: list[dict[str, object]] = d.call("run.list", {"key": key})["runs"]
    return runs


def test_version_and_short_help_everywhere(shared_daemon: Daemon) -> None:
    d = shared_daemon
    for args in (["--version"], ["run", "--version"], ["pane", "capture-rows", "--version"]):
        r = d.cli(*args)
        assert (r.code, r.out.split()[:2]) == (0, ["venomx", "0.1.0"]), (args, r.out, r.err)
    for args in (
        ["-h"],
        ["run", "-h"],
        ["run", "wait", "-h"],
        ["serve", "-h"],
        ["events", "-h"],
        ["session", "-h"],
    ):
        r = d.cli(*args)
        assert r.code == 0 and r.out.startswith("Usage: venomx"), (args, r.out, r.err)


def test_boolean_flags_and_their_value_forms(shared_daemon: Daemon) -> None:
    d = shared_daemon
    s = d.call("session.create")["session"]
    run = d.call("run", {"key": "flags", "session": s, "argv": ["true"]})["run"]
    d.wait_exit(run)
    for form, has_output in (
        (["--no-output"], False),
        (["--output=false"], False),
        (["--output", "false"], False),
        (["--output=TRUE"], True),
        (["--output", "true"], True),
        (["--output"], True),
        (["--no-output", "--output"], True),
        (["--output", "--no-output"], False),
        ([], True),
    ):
        r = d.cli("run", "get", "--run", run, *form, "--json")
        assert r.code == 0 and ("output" in r.json) == has_output, (form, r.out, r.err)
    r = d.cli("run", "get", "--run", run, "--output=maybe", "--json")
    assert (r.code, r.json["error"]["code"]) == (2, "invalid_params.type")


def test_a_mistyped_verb_never_becomes_the_program(shared_daemon: Daemon, tmp: Path) -> None:
    d = shared_daemon
    s = d.call("session.create")["session"]
    r = d.cli("run", "wiat", "--run", "r0")
    assert r.code == 2 and "No such command 'wiat'. Did you mean 'wait'?" in r.err, r.err
    marker = tmp / "made"
    for args in (
        ["run", "--key", "stray", "--session", s, "touch", str(marker)],
        ["run", "--key", "stray", "--session", s, "make"],
        ["window", "create", "--session", s, "touch", str(marker)],
    ):
        r = d.cli(*args)
        assert r.code == 2 and "goes after --" in r.err, (args, r.err)
    r = d.cli("run", "--key", "stray", "--session", s, "wiat")
    assert "Did you mean 'wait'?" in r.err
    r = d.cli("run", "--json", "wait", "--run", "r0")
    assert r.code == 2 and "'wait' is a command: venomx run wait [OPTIONS]" in r.err, r.err
    assert runs_with_key(d, "stray") == [] and not marker.exists()
    assert len(d.call("session.get", {"session": s})["windows"]) == 0
    r = d.cli("run", "--key", "stray", "--session", s, "--json", "--", "touch", str(marker))
    assert r.code == 0, r.err
    d.wait_exit(r.json["run"])
    assert marker.exists()


def test_no_daemon_says_how_to_start_one(tmp: Path) -> None:
    sock = str(tmp / "none.sock")
    e = {k: v for k, v in os.environ.items() if not k.startswith("VENOMX_")}
    r = subprocess.run(
        [PY, "-m", "venomx", "whoami", "--socket", sock], capture_output=True, text=True, env=e
    )
    assert r.returncode == 9
    assert r.stderr.splitlines() == [
        f"venomx: transport: cannot reach the daemon at {sock}: No such file or directory",
        f"hint: no daemon is listening at {sock}; start one with: venomx serve --detach "
        f"--socket {sock}",
    ]
    r = subprocess.run(
        [PY, "-m", "venomx", "whoami", "--json"],
        capture_output=True,
        text=True,
        env={**e, "VENOMX_SOCKET": sock},
    )
    assert (
        r.returncode == 9
        and r.stdout
        == json.dumps(
            {
                "error": {
                    "code": "transport",
                    "message": f"cannot reach the daemon at {sock}: No such file or directory",
                    "data": {},
                }
            },
            separators=(",", ":"),
        )
        + "\n"
    )
    r = subprocess.run(
        [PY, "-m", "venomx", "whoami"],
        capture_output=True,
        text=True,
        env={**e, "VENOMX_SOCKET": sock},
    )  # serve reads $VENOMX_SOCKET too
    assert r.stderr.splitlines()[-1].endswith("start one with: venomx serve --detach")


def test_anonymous_denial_suggests_owner_only_to_the_owner(shared_daemon: Daemon) -> None:
    d = shared_daemon
    s = d.call("session.create")["session"]
    args = ["run", "--key", "anon", "--session", s, "--", "true"]
    r = d.cli(*args, token=None)
    lines = r.err.splitlines()
    assert r.code == 4 and lines[0] == "venomx: denied.spawn: spawn denied"
    assert len(lines) == 2 and "--token @owner" in lines[1], r.err
    with Client(d.socket, None) as c:
        try:
            c.call("run", {"key": "anon", "session": s, "argv": ["true"]})
        except VenomxError as err:
            expected = err.to_dict()
    assert d.cli(*args[:-2], "--json", "--", "true", token=None).json == {"error": expected}
    inside = d.cli(*args, token=None, env={"VENOMX_PANE": "p0"})  # @owner is refused there
    assert inside.code == 4 and "@owner" not in inside.err
    narrow = d.call("principal.create", {"grants": [{"right": "read", "scope": "*"}]})
    r = d.cli(*args, token=narrow["token"])
    assert r.code == 4 and r.err.splitlines() == ["venomx: denied.spawn: spawn denied"]
    assert runs_with_key(d, "anon") == []


def test_spawn_failure_names_the_program(shared_daemon: Daemon) -> None:
    d = shared_daemon
    s = d.call("session.create")["session"]
    r = d.cli("run", "--key", "enoent", "--session", s, "--", "/nonexistent/prog", "-x")
    assert r.code == 6 and r.err.splitlines() == [
        "venomx: unavailable.spawn: cannot start the program: ENOENT",
        "hint: cannot start '/nonexistent/prog': ENOENT (No such file or directory)",
    ], r.err
    r = d.cli("window", "create", "--session", s, "--argv", '["/nonexistent/win"]')
    assert r.code == 6 and "cannot start '/nonexistent/win': ENOENT" in r.err, r.err
    j = d.cli("run", "--key", "enoent2", "--session", s, "--json", "--", "/nonexistent/prog")
    assert j.code == 6 and j.json["error"] == {
        "code": "unavailable.spawn",
        "message": "cannot start the program: ENOENT",
        "data": {"errno": "ENOENT"},
    }
