"""MCP for agents (issue 18): progress while waiting, a tool list shaped by grants,
annotations and instructions, all through the SDK's own stdio client against a real
daemon."""

from __future__ import annotations

import functools
import json
import os
import re
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

import anyio
import pytest
from mcp import ClientSession, StdioServerParameters, stdio_client
from mcp.types import CallToolResult, InitializeResult, TextContent, ToolAnnotations

from tests.helpers import Daemon, start_daemon, stop_daemon, wait_for
from venomx.manifest.generate import instructions, mcp_name
from venomx.manifest.verbs import GRANT_RIGHTS, GRANT_SCOPE_PATTERN, VERBS
from venomx.mcp.tools import can_ever_call
from venomx.wire import exit_code_for

ALL = {mcp_name(v.name) for v in VERBS if not v.internal and not v.streams}
SEAM_TOOLS = {"seam_dset", "seam_dwait"}
ADMIN_TOOLS = {"config_dget", "config_dset", "config_dreload", "audit_dlist", "shutdown"}


def text_of(res: CallToolResult) -> str:
    """The text of a tool result's first content block (venomx answers with text)."""
    block = res.content[0]
    assert isinstance(block, TextContent), block
    return block.text


@asynccontextmanager
async def mcp_session(
    d: Daemon, token: str | None = "@owner", *extra: str
) -> AsyncIterator[tuple[ClientSession, InitializeResult]]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("VENOMX_")}
    env["VENOMX_SOCKET"] = d.socket
    if token is not None:
        env["VENOMX_TOKEN"] = token
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "venomx.mcp", *extra], env=env
    )
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        init = await session.initialize()
        yield session, init


def run_async(fn: Callable[[], Awaitable[None]]) -> None:
    anyio.run(fn)


async def tool_names(d: Daemon, token: str | None = "@owner", *extra: str) -> set[str]:
    async with mcp_session(d, token, *extra) as (session, _):
        return {t.name for t in (await session.list_tools()).tools}


def narrow_token(d: Daemon, session: str) -> str:
    grants = [{"right": r, "scope": f"session:{session}"} for r in ("read", "write", "spawn")]
    token: str = d.call("principal.create", {"grants": grants})["token"]
    return token


# -- progress ------------------------------------------------------------------------


@pytest.mark.timeout(90)
def test_run_wait_reports_progress(daemon: Daemon) -> None:
    s = daemon.call("session.create")["session"]
    marker = "ROW-TEXT-MUST-NOT-LEAK"
    run = daemon.call(
        "run", {"key": "p", "session": s, "shell": f"echo {marker}; echo {marker}; sleep 60"}
    )["run"]
    seen: list[tuple[float, str | None]] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append((progress, message))

    async def scenario() -> None:
        async with mcp_session(daemon) as (session, _):
            res = await session.call_tool(
                "run_dwait", {"run": run, "timeout_ms": 12000}, progress_callback=on_progress
            )
            assert res.is_error
            assert json.loads(text_of(res))["error"]["code"] == "timeout.wait"

    run_async(scenario)
    assert len(seen) >= 2, seen
    progress = [p for p, _ in seen]
    assert progress == sorted(progress) and len(set(progress)) == len(progress)
    assert 0 < progress[0] <= 5000 and progress[-1] <= 12000 + 1000
    for _, message in seen:
        assert message is not None and marker not in message and run in message
    # a describe step slower than DESCRIBE_WITHIN (a loaded machine) sends the short form
    full = [m for _, m in seen if m is not None and "output offset" in m]
    assert full, seen
    for message in full:
        assert f"run {run} running" in message, message
        m = re.search(r"output offset (\d+), cursor row (\d+) of (\d+) \(epoch 1\)", message)
        assert m is not None, message
        assert int(m.group(1)) >= 2 * len(marker) and int(m.group(2)) == 2
        assert int(m.group(3)) == 24


def test_no_progress_without_a_token(daemon: Daemon) -> None:
    """Without a progress token the wait is the plain request, with its plain answer."""
    s = daemon.call("session.create")["session"]
    run = daemon.call("run", {"key": "q", "session": s, "argv": ["true"]})["run"]

    async def scenario() -> None:
        async with mcp_session(daemon) as (session, _):
            res = await session.call_tool("run_dwait", {"run": run, "timeout_ms": 20000})
            assert not res.is_error and res.structured_content is not None
            assert res.structured_content["outcome"] == "succeeded"

    run_async(scenario)


@pytest.mark.timeout(90)
def test_cancelling_a_progress_wait_leaves_the_run_running(daemon: Daemon) -> None:
    s = daemon.call("session.create")["session"]
    run = daemon.call("run", {"key": "c", "session": s, "argv": ["sleep", "60"]})["run"]
    got_progress = anyio.Event()

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        got_progress.set()

    async def scenario() -> None:
        async with mcp_session(daemon) as (session, _):
            async with anyio.create_task_group() as tg:

                async def wait() -> None:
                    await session.call_tool(
                        "run_dwait", {"run": run}, progress_callback=on_progress
                    )

                tg.start_soon(wait)
                with anyio.fail_after(20):
                    await got_progress.wait()
                tg.cancel_scope.cancel()  # the host gives up: notifications/cancelled
            await anyio.to_thread.run_sync(
                lambda: wait_for(
                    lambda: daemon.call("doctor")["run"]["waiters"] == 0, 10, "wait cancelled"
                )
            )
            res = await session.call_tool("run_dget", {"run": run, "output": False})
            assert res.structured_content is not None
            assert res.structured_content["state"] == "running"

    run_async(scenario)
    assert daemon.call("run.get", {"run": run})["state"] == "running"


# -- the tool list -------------------------------------------------------------------


def test_tool_list_follows_the_principal(daemon: Daemon) -> None:
    s = daemon.call("session.create")["session"]
    token = narrow_token(daemon, s)
    owner = anyio.run(tool_names, daemon)
    narrow = anyio.run(tool_names, daemon, token)
    assert owner == ALL  # the fixture's daemon runs with --test-seams
    assert narrow < owner
    assert not narrow & (ADMIN_TOOLS | SEAM_TOOLS)
    assert "session_dcreate" not in narrow  # spawn on session:s0 cannot create sessions
    assert {
        "run",
        "run_dwait",
        "run_dcancel",
        "pane_dcapture_rows",
        "whoami",
        "principal_dcreate",
        "doctor",
    } <= narrow
    every = anyio.run(tool_names, daemon, token, "--all-tools")
    assert every == ALL - SEAM_TOOLS  # only an admin can learn that seams are on


def test_anonymous_caller_sees_reads_only(daemon: Daemon) -> None:
    names = anyio.run(tool_names, daemon, None)
    assert "whoami" in names
    assert not names & {
        "run",
        "principal_dcreate",
        "principal_drevoke",
        "run_dcancel",
        "session_dcreate",
        *ADMIN_TOOLS,
        *SEAM_TOOLS,
    }


def test_hidden_tool_answers_as_the_daemon(daemon: Daemon) -> None:
    s = daemon.call("session.create")["session"]
    token = narrow_token(daemon, s)

    async def scenario() -> None:
        async with mcp_session(daemon, token) as (session, _):
            listed = {t.name for t in (await session.list_tools()).tools}
            assert "shutdown" not in listed and "config_dget" not in listed
            for tool, cli in (("shutdown", ["shutdown"]), ("config_dget", ["config", "get"])):
                res = await session.call_tool(tool, {})
                assert res.is_error and res.structured_content is None
                err = json.loads(text_of(res))["error"]
                out = await anyio.to_thread.run_sync(
                    functools.partial(daemon.cli, *cli, "--json", token=token)
                )
                assert json.loads(out.out)["error"] == err
                assert err["code"] == "denied.admin" and out.code == exit_code_for(err["code"])

    run_async(scenario)
    assert daemon.call("whoami")["principal"] == "g0"  # still up: shutdown was refused


def test_seam_tools_only_with_test_seams(daemon: Daemon) -> None:
    assert SEAM_TOOLS <= anyio.run(tool_names, daemon)
    plain = start_daemon(seams=False)
    try:

        async def scenario() -> None:
            async with mcp_session(plain) as (session, _):
                names = {t.name for t in (await session.list_tools()).tools}
                assert names == ALL - SEAM_TOOLS
                res = await session.call_tool(
                    "seam_dwait", {"name": "run.before_barrier", "timeout_ms": 0}
                )
                err = json.loads(text_of(res))["error"]
                assert res.is_error and err["code"] == "unsupported.seams"

        run_async(scenario)
        assert anyio.run(tool_names, plain, "@owner", "--all-tools") == ALL - SEAM_TOOLS
    finally:
        stop_daemon(plain)


def test_unreachable_daemon_lists_every_tool_but_the_seams(daemon: Daemon) -> None:
    gone = Daemon(daemon.socket + ".absent", daemon.proc, daemon.log)
    assert anyio.run(tool_names, gone) == ALL - SEAM_TOOLS


# -- annotations, schemas, instructions ------------------------------------------------


def test_annotations_and_instructions(daemon: Daemon) -> None:
    async def scenario() -> None:
        async with mcp_session(daemon) as (session, init):
            assert init.instructions == instructions()
            assert len(init.instructions) < 1500
            for phrase in (
                "`run`",
                "unique `key`",
                "`run_dwait`",
                "25000",
                "timeout.wait",
                "`outcome`",
                "`status`",
                "`pane_dcapture_rows`",
                "`run_dcancel`",
            ):
                assert phrase in init.instructions, phrase
            tools = {t.name: t for t in (await session.list_tools()).tools}
            for name, t in tools.items():
                assert t.title and t.annotations is not None, name
                assert t.annotations.title == t.title
                for p, schema in t.input_schema["properties"].items():
                    assert schema.get("description"), f"{name}.{p}"
                a: ToolAnnotations | None = t.annotations
                assert a is not None and a.idempotent_hint == a.read_only_hint, name  # reads only
            for name in (
                "run_dwait",
                "run_dget",
                "run_dlist",
                "pane_dcapture_rows",
                "whoami",
                "doctor",
                "session_dlist",
                "events_dread",
            ):
                a = tools[name].annotations
                assert a is not None and a.read_only_hint and a.idempotent_hint, name
                assert not a.destructive_hint and not a.open_world_hint, name
            for name in (
                "run_dcancel",
                "pane_dkill",
                "pane_dremove",
                "window_dremove",
                "session_dremove",
                "principal_drevoke",
                "shutdown",
            ):
                a = tools[name].annotations
                assert a is not None and a.destructive_hint and not a.read_only_hint, name
                assert not a.open_world_hint, name
            for name in ("run", "window_dcreate", "pane_dsplit"):
                a = tools[name].annotations
                assert a is not None and a.destructive_hint and a.open_world_hint, name
                assert not a.idempotent_hint and not a.read_only_hint, name
            a = tools["session_dcreate"].annotations
            assert a is not None and a.destructive_hint is False and not a.read_only_hint
            props = tools["run"].input_schema["properties"]
            grant = props["grants"]["items"]
            assert grant["required"] == ["right", "scope"]
            assert grant["properties"]["right"]["enum"] == list(GRANT_RIGHTS)
            assert grant["additionalProperties"] is False
            assert props["env"]["additionalProperties"] == {"type": "string", "maxLength": 32768}
            assert props["argv"]["items"]["type"] == "string" and props["argv"]["minItems"] == 1
            assert "maxItems" in props["argv"]
            wait = tools["run_dwait"]
            assert "25000" in (wait.description or "")
            assert wait.input_schema["properties"]["run"]["description"]

    run_async(scenario)


def test_grant_schema_is_the_daemons() -> None:
    """The schema's rights and scope syntax are what the daemon parses."""
    from venomx.daemon.auth import RIGHTS, parse_grants
    from venomx.wire import VenomxError

    assert tuple(RIGHTS) == GRANT_RIGHTS
    pattern = re.compile(GRANT_SCOPE_PATTERN)
    for scope in (
        "*",
        "self",
        "session:*",
        "run:r1",
        "pane:p-1.x",
        "session:",
        "window:" + "a" * 65,
        "host:*",
        "self ",
        "*x",
    ):
        try:
            parse_grants([{"right": "read", "scope": scope}])
            daemon_ok = True
        except VenomxError:
            daemon_ok = False
        assert (pattern.fullmatch(scope) is not None) == daemon_ok, scope


@pytest.mark.parametrize(
    ("grants", "principal", "tool", "expected"),
    [
        ([{"right": "admin", "scope": "*"}], "g1", "config.get", True),
        ([{"right": "admin", "scope": "session:s0"}], "g1", "config.get", False),
        ([{"right": "spawn", "scope": "session:*"}], "g1", "session.create", True),
        ([{"right": "spawn", "scope": "session:s0"}], "g1", "session.create", False),
        ([{"right": "spawn", "scope": "session:s0"}], "g1", "run", True),
        ([{"right": "read", "scope": "run:r1"}], "g1", "run.wait", True),
        ([{"right": "read", "scope": "run:r1"}], "g1", "run.cancel", False),
        ([], "g1", "principal.create", True),
        ([{"right": "spawn", "scope": "*"}], None, "run", False),
        ([{"right": "read", "scope": "*"}], None, "principal.create", False),
        ([{"right": "read", "scope": "*"}], None, "run.get", True),
        ([], "g1", "whoami", True),
    ],
)
def test_can_ever_call(
    grants: list[dict[str, Any]], principal: str | None, tool: str, expected: bool
) -> None:
    verb = next(v for v in VERBS if v.name == tool)
    assert can_ever_call(verb, principal, grants) is expected
