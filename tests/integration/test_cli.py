"""The generated CLI (§4): forms of values, errors identical to the daemon's, exit codes."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.helpers import PY, Daemon


def test_exit_codes_per_error_class(shared_daemon: Daemon) -> None:
    d = shared_daemon
    s = d.call("session.create")["session"]
    cases = [
        (["session", "get", "--session", "s999"], 3, "not_found.session"),
        (["window", "create", "--session", s, "--cols", "0"], 2, "invalid_params.range"),
        (["window", "create", "--session", s, "--cols", "x"], 2, "invalid_params.type"),
        (["window", "create", "--session", s, "--argv", "[1"], 2, "invalid_params.type"),
        (["run", "--key", "k", "--session", s, "--argv", "NaN"], 2, "invalid_params.type"),
        (["pane", "send", "--pane", "p999", "--text", "x"], 3, "not_found.pane"),
        (["seam", "wait", "--name", "run.after_barrier", "--timeout-ms", "10"], 7, "timeout.seam"),
        (
            ["run", "--key", "k", "--session", s, "--argv", '["/nonexistent"]'],
            6,
            "unavailable.spawn",
        ),
    ]
    for args, code, err in cases:
        r = d.cli(*args, "--json")
        assert r.code == code, (args, r.out, r.err)
        assert json.loads(r.out)["error"]["code"] == err
        human = d.cli(*args)
        assert human.code == code and human.err.startswith(f"venomx: {err}: ")
    assert d.cli("config", "get", "--json", token=None).code == 4
    sock = d.socket + ".missing"
    p = subprocess.run(
        [PY, "-m", "venomx", "whoami", "--json", "--socket", sock], capture_output=True, text=True
    )
    assert p.returncode == 9 and json.loads(p.stdout)["error"]["code"] == "transport"
    r = d.cli("run", "get", "--run", "r1", "--json", env={})
    assert r.code in (3, 0)
    big = d.cli("window", "create", "--session", s, "--cols", "9" * 5000, "--json")
    assert big.code == 2 and json.loads(big.out)["error"]["code"] == "invalid_params.range"


def test_client_side_errors_equal_the_daemons(shared_daemon: Daemon) -> None:
    s = shared_daemon.call("session.create")["session"]
    from venomx.client import Client
    from venomx.wire import VenomxError

    with Client(shared_daemon.socket, "@owner") as c:
        with pytest.raises(VenomxError) as e:
            c.call("window.create", {"session": s, "cols": "x"})
    cli = shared_daemon.cli("window", "create", "--session", s, "--cols", "x", "--json")
    assert json.loads(cli.out)["error"] == e.value.to_dict()


def test_boolean_forms_and_argv_sugar(shared_daemon: Daemon) -> None:
    d = shared_daemon
    s = d.call("session.create")["session"]
    r = d.cli("run", "--key", "sugar", "--session", s, "--json", "--", "sh", "-c", "exit 4")
    run = json.loads(r.out)["run"]
    for form in (["--output=false"], ["--output", "false"]):
        w = d.cli("run", "wait", "--run", run, *form, "--json")
        assert w.code == 4 and "output" not in json.loads(w.out)
    w = d.cli("run", "wait", "--run", run, "--output", "--json")
    assert "output" in json.loads(w.out)
    bad = d.cli("run", "wait", "--run", run, "--output=maybe", "--json")
    assert bad.code == 2 and json.loads(bad.out)["error"]["data"] == {
        "param": "output",
        "expected": "boolean",
    }
    assert d.cli("pane", "list", "--bogus").code == 2  # a plain usage error


def test_readable_output(shared_daemon: Daemon) -> None:
    d = shared_daemon
    s = d.call("session.create", {"name": "readable"})["session"]
    d.call("window.create", {"session": s, "argv": ["true"]})
    r = d.cli("pane", "list", "--session", s)
    assert r.code == 0 and "PANE" in r.out.splitlines()[1] and "ARGV0" in r.out
    assert d.cli("session", "list").out.count("readable") == 1


@pytest.mark.parametrize("shell", ["bash", "zsh", "fish"])
def test_completion(shell: str) -> None:
    r = subprocess.run(
        [sys.executable, "-m", "venomx", "completion", shell], capture_output=True, text=True
    )
    assert r.returncode == 0 and "_VENOMX_COMPLETE" in r.stdout


def test_skill_command_prints_the_generated_skill() -> None:
    from tests.helpers import ROOT

    r = subprocess.run([sys.executable, "-m", "venomx", "skill"], capture_output=True, text=True)
    assert r.stdout == (ROOT / "docs" / "skill.md").read_text()


LONG_RUN = "r" + "9" * 4400


def test_no_input_reaches_internal(shared_daemon: Daemon) -> None:
    """Issue 15.2's inputs, through the CLI: each a specified error with its exit code."""
    d = shared_daemon
    s = d.call("session.create")["session"]
    cases: list[tuple[list[str], int, str, dict[str, object]]] = [
        (
            ["config", "set", "--path", "run.max_active", "--value", "[" * 5000],
            2,
            "invalid_params.config",
            {
                "path": "run.max_active",
                "reason": "value is nested deeper than 62 arrays and objects",
            },
        ),
        (
            ["config", "set", "--path", "run.max_active", "--value", "9" * 4400],
            2,
            "invalid_params.config",
            {"path": "run.max_active", "reason": "must be between 1 and 4096"},
        ),
        (
            ["window", "create", "--session", s, "--argv", "[" * 63 + "]" * 63],
            2,
            "invalid_params.type",
            {"param": "argv", "expected": "array"},
        ),
        (
            ["window", "create", "--session", s, "--argv", "[" * 62 + "]" * 62],
            2,
            "invalid_params.type",
            {"param": "argv", "expected": "array of string"},
        ),
        (
            ["window", "create", "--session", s, "--cols", "١٢"],
            2,
            "invalid_params.type",
            {"param": "cols", "expected": "integer"},
        ),
        (
            ["window", "create", "--session", s, "--cols", "9" * 4400],
            2,
            "invalid_params.range",
            {"param": "cols", "min": 1, "max": 65535},
        ),
    ]
    for verb in ("get", "wait", "cancel"):
        for run in (LONG_RUN, "r²"):
            cases.append((["run", verb, "--run", run], 3, "not_found.run", {"reason": "unknown"}))
    for args, code, err, data in cases:
        r = d.cli(*args, "--json")
        assert r.code == code, (args[:4], r.out, r.err)
        got = json.loads(r.out)["error"]
        assert (got["code"], got["data"]) == (err, data), got
        human = d.cli(*args)
        assert human.code == code and human.err.startswith(f"venomx: {err}: ")
    for after in (LONG_RUN, "r" + "9" * 21):
        r = d.cli("run", "list", "--after", after, "--json")
        assert r.code == 0 and r.json["runs"] == [], r.out
    r = d.cli("run", "list", "--after", "r²", "--json")  # no run ID: said so
    assert r.code == 2 and json.loads(r.out)["error"]["code"] == "invalid_params.after"


def test_a_streaming_verb_prints_its_items_then_its_result(shared_daemon: Daemon) -> None:
    """foundation §4: one JSON line per item; the result, as --json prints any, last."""
    d = shared_daemon
    s = d.call("session.create")["session"]
    w = d.call("window.create", {"session": s, "argv": ["sh", "-c", "echo hi; exit 4"]})
    d.cli("pane", "kill", "--pane", w["pane"])  # exited already or now: either is fine
    r = d.cli("pane", "attach", "--pane", w["pane"], "--json")
    lines = [json.loads(x) for x in r.out.splitlines()]
    assert r.code == 0 and set(lines[0]) == {"screen"}, r
    assert lines[-1]["exit"]["offset"] == lines[0]["screen"]["offset"]


def test_a_value_the_cli_cannot_convert_gives_the_daemons_first_error(
    shared_daemon: Daemon,
) -> None:
    """foundation §4: exactly as the daemon would, so the first error in its order (here
    the missing key comes before the bad cols)."""
    from venomx.client import Client
    from venomx.wire import VenomxError

    d = shared_daemon
    s = d.call("session.create")["session"]
    cases: list[tuple[list[str], str, dict[str, object]]] = [
        (
            ["run", "--session", s, "--cols", "abc", "--", "true"],
            "run",
            {"session": s, "cols": "abc", "argv": ["true"]},
        ),
        (
            ["window", "create", "--session", s, "--rows", "x", "--cols", "y"],
            "window.create",
            {"session": s, "rows": "x", "cols": "y"},
        ),
    ]
    for args, verb, params in cases:
        with Client(d.socket, "@owner") as c, pytest.raises(VenomxError) as e:
            c.call(verb, params)
        r = d.cli(*args[:-2], "--json", *args[-2:]) if verb == "run" else d.cli(*args, "--json")
        assert json.loads(r.out)["error"] == e.value.to_dict(), (args, r.out)


def test_a_number_too_large_for_a_float_is_the_daemons_to_judge(shared_daemon: Daemon) -> None:
    """1e400 reads as an infinite float; it is sent as such a number (JSON has no
    Infinity), and the daemon's error comes back, not a traceback."""
    from venomx.client import Client
    from venomx.wire import VenomxError

    d = shared_daemon
    s = d.call("session.create")["session"]
    with Client(d.socket, "@owner") as c, pytest.raises(VenomxError) as e:
        c.call("run", {"key": "inf", "session": s, "argv": ["true"], "env": {"A": float("inf")}})
    assert e.value.code == "invalid_params.env"
    r = d.cli("run", "--key", "inf", "--session", s, "--env", '{"A":1e400}', "--json", "--", "true")
    assert r.code == 2 and json.loads(r.out)["error"] == e.value.to_dict(), r
