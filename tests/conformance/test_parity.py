"""RFC-0015 §13's parity: the same request through the CLI (``--json``) and through MCP
gives identical records and error objects, and the CLI's exit status equals the
``status`` that run.wait returns.

The rows in ``test_rfc0015.py`` each run through one surface at a time; here one daemon's
fixed state is read through both, side by side, for the results and the errors that the
rows produce.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from tests.adapters import CliApi, McpApi
from tests.helpers import Daemon, start_daemon, stop_daemon


@dataclass
class Both:
    daemon: Daemon
    cli: CliApi
    mcp: McpApi
    narrow_cli: CliApi
    narrow_mcp: McpApi
    failed: dict[str, Any]  # a completed run that printed and exited 3
    running: dict[str, Any]  # a run still running
    killed: dict[str, Any]  # a run cancelled (terminated, SIGHUP)


@pytest.fixture(scope="module")
def both() -> Iterator[Both]:
    d = start_daemon()
    opened: list[McpApi] = []
    try:
        s = d.call("session.create", {"name": "parity"})["session"]
        failed = d.call(
            "run", {"key": "failed", "session": s, "shell": "printf 'a\\nb\\n'; exit 3"}
        )
        d.wait_exit(failed["run"])
        running = d.call("run", {"key": "running", "session": s, "argv": ["sleep", "300"]})
        killed = d.call("run", {"key": "killed", "session": s, "argv": ["sleep", "300"]})
        d.call("run.cancel", {"run": killed["run"], "grace_ms": 0})
        narrow = d.call(
            "principal.create", {"grants": [{"right": "read", "scope": f"run:{failed['run']}"}]}
        )["token"]
        mcp = McpApi(d)
        opened.append(mcp)
        narrow_mcp = McpApi(d, token=narrow)
        opened.append(narrow_mcp)
        yield Both(d, CliApi(d), mcp, CliApi(d, narrow), narrow_mcp, failed, running, killed)
    finally:
        for a in opened:
            a.close()
        stop_daemon(d)


def cases(b: Both) -> list[tuple[str, dict[str, Any]]]:
    failed, running, killed = b.failed["run"], b.running["run"], b.killed["run"]
    return [
        ("whoami", {}),
        ("run.get", {"run": failed}),
        ("run.get", {"run": failed, "output": False}),
        ("run.wait", {"run": failed}),
        ("run.wait", {"run": killed}),
        ("run.get", {"run": running, "output": False}),
        ("run.wait", {"run": running, "timeout_ms": 1}),
        ("run.get", {"run": "r999"}),
        ("run.get", {"run": "x"}),
        ("run.wait", {"run": failed, "timeout_ms": -1}),
        ("run.list", {}),
        ("run.list", {"key": "failed"}),
        ("run.list", {"limit": 1}),
        ("run.list", {"pane": "p999"}),
        ("run", {"key": "failed", "session": "s0", "shell": "printf 'a\\nb\\n'; exit 3"}),
        ("run", {"key": "failed", "session": "s0", "argv": ["true"]}),
        ("run.cancel", {"run": killed}),
        ("pane.capture_rows", {"pane": b.failed["pane"], "limit": 3}),
        ("session.get", {"session": "s0"}),
    ]


def test_every_case_is_the_same_object_through_cli_and_mcp(both: Both) -> None:
    codes = set()
    for verb, params in cases(both):
        cli, mcp = both.cli.call(verb, params), both.mcp.call(verb, params)
        assert (cli.ok, cli.error, cli.code) == (mcp.ok, mcp.error, mcp.code), (verb, params)
        if cli.error is not None:
            codes.add(cli.error["code"])
        if verb == "run.wait" and cli.ok is not None:
            assert cli.code == cli.ok["status"]
    # the cases reach the errors they are meant to
    assert {
        "timeout.wait",
        "not_found.run",
        "not_found.pane",
        "conflict.run_key",
        "invalid_params.range",
    } <= codes, codes


def test_denials_are_the_same_object_through_cli_and_mcp(both: Both) -> None:
    for verb, params in [
        ("run.get", {"run": both.failed["run"]}),
        ("run.get", {"run": both.running["run"]}),
        ("run.cancel", {"run": both.failed["run"]}),
        ("run.list", {}),
        ("run", {"key": "nope", "session": "s0", "argv": ["true"]}),
        ("pane.capture_rows", {"pane": both.running["pane"]}),
    ]:
        cli, mcp = both.narrow_cli.call(verb, params), both.narrow_mcp.call(verb, params)
        assert (cli.ok, cli.error, cli.code) == (mcp.ok, mcp.error, mcp.code), (verb, params)
    denied = both.narrow_cli.call("run.get", {"run": both.running["run"]})
    assert denied.error is not None and denied.error["code"] == "denied.read"
