"""The MCP adapter (issue: MCP) through the SDK's own stdio client, plus bad input."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.adapters import CliApi, McpApi
from tests.helpers import PY, ROOT, Daemon, start_daemon, stop_daemon, wait_for
from venomx.manifest.verbs import VERBS


def test_tools_are_the_manifest(daemon: Daemon) -> None:
    api = McpApi(daemon)
    try:
        names = {t.name for t in api.tools.tools}
        want = {v.name.replace(".", "_d") for v in VERBS if not v.internal and not v.streams}
        assert names == want
        assert {"run", "run_dwait", "session_dcreate", "pane_dcapture_rows"} <= names
        wait = next(t for t in api.tools.tools if t.name == "run_dwait")
        assert "blocks" in (wait.description or "") and "25000" in (wait.description or "")
        assert wait.input_schema["required"] == ["run"]
        assert "status" in wait.output_schema["required"]
    finally:
        api.close()


def test_errors_and_schema_errors_match_the_cli(daemon: Daemon) -> None:
    api = McpApi(daemon)
    try:
        res = api.call_raw("window.create", {"session": "s0", "cols": "wide"})
        assert res.is_error and res.structured_content is None
        err = json.loads(res.content[0].text)["error"]
        cli = daemon.cli("window", "create", "--session", "s0", "--cols", "wide", "--json")
        assert json.loads(cli.out)["error"] == err
        o = api.call("run.get", {"run": "r404"})
        assert o.err_code == "not_found.run" and o.code == 3
        missing = api.call("run", {"session": "s0"})
        assert missing.err_code == "invalid_params.missing"
        deep: Any = []
        for _ in range(70):  # deeper than a request may nest: the CLI cannot read its text
            deep = [deep]
        res = api.call_raw("window.create", {"session": "s0", "grants": deep})
        args = ("window", "create", "--session", "s0", "--grants", json.dumps(deep), "--json")
        cli_error = json.loads(daemon.cli(*args).out)["error"]
        assert json.loads(res.content[0].text)["error"] == cli_error
        assert cli_error["code"] == "invalid_params.type"
        res = api.call_raw("session.create", {"name": deep})  # a string param: no stand-in
        assert json.loads(res.content[0].text)["error"]["code"] == "invalid_params.type"
    finally:
        api.close()


def test_unknown_tool(daemon: Daemon) -> None:
    api = McpApi(daemon)
    try:
        res = api.call_tool("no_dsuch", {})
        assert res.is_error
        assert json.loads(res.content[0].text)["error"]["code"] == "invalid_request.verb"
    finally:
        api.close()


def test_a_null_name_passes_the_tools_output_schema(daemon: Daemon) -> None:
    api = McpApi(daemon)
    try:
        s = api.call("session.create", {})
        assert s.ok is not None and s.ok["name"] is None
        got = api.call("session.get", {"session": s.ok["session"]})
        assert got.ok == {"session": s.ok["session"], "name": None, "windows": []}
    finally:
        api.close()


def test_the_anonymous_whoami_passes_its_output_schema(daemon: Daemon) -> None:
    """The SDK's client validates structured results: principal is null for the anonymous."""
    api = McpApi(daemon, token=None)
    try:
        got = api.call("whoami", {})
        assert got.ok is not None and got.ok["principal"] is None
        assert got.ok["grants"] == [{"right": "read", "scope": "*"}]
    finally:
        api.close()


def test_oversized_result_tells_the_agent_what_to_do(daemon: Daemon) -> None:
    s = daemon.call("session.create")["session"]
    r = daemon.call(
        "run",
        {
            "key": "big",
            "session": s,
            "output_bytes": 262144,
            "output_rows": 1000,
            "cols": 1000,
            "shell": "yes 0123456789 | head -c 400000 | tr -d '\\n'; "
            "for i in $(seq 1 1000); do printf '%0999d\\n' $i; done",
        },
    )
    daemon.wait_exit(r["run"], 30)
    daemon.call("config.set", {"path": "protocol.max_frame", "value": "65536"})
    api = McpApi(daemon)
    try:
        o = api.call("run.get", {"run": r["run"]})
        assert o.err_code == "unsupported.result_size" and o.error is not None
        assert "output=false" in o.error["message"] and "pane.capture_rows" in o.error["message"]
        # RFC-0015 §13: identical error objects through the CLI and MCP
        assert CliApi(daemon).call("run.get", {"run": r["run"]}).error == o.error
        assert api.call("run.get", {"run": r["run"], "output": False}).ok is not None
    finally:
        api.close()


def test_unreachable_daemon_then_reconnect(tmp_path: Path) -> None:
    d = start_daemon()
    sock = d.socket
    api = McpApi(d)
    try:
        assert api.call("whoami").ok is not None
        stop_daemon(d)
        o = api.call("whoami")
        assert o.err_code == "transport" and o.code == 9
        d2 = start_daemon()
        try:
            os.rename(d2.socket, sock)  # the same path the adapter knows
            d2.socket = sock
            ok = api.call("whoami").ok
            assert ok is not None and ok["principal"] == "g0"
        finally:
            stop_daemon(d2)
    finally:
        api.close()


def test_cancelled_tool_call_cancels_the_wait(daemon: Daemon) -> None:
    import anyio
    from mcp import ClientSession, StdioServerParameters, stdio_client

    s = daemon.call("session.create")["session"]
    run = daemon.call("run", {"key": "w", "session": s, "argv": ["sleep", "60"]})["run"]
    env = {**os.environ, "VENOMX_SOCKET": daemon.socket, "VENOMX_TOKEN": "@owner"}

    async def scenario() -> None:
        params = StdioServerParameters(
            command=sys.executable, args=["-m", "venomx", "mcp"], env=env
        )
        async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            with anyio.move_on_after(1.0):
                await session.call_tool("run_dwait", {"run": run})
            # the daemon saw the cancel while the adapter is still connected
            await anyio.to_thread.run_sync(
                lambda: wait_for(
                    lambda: daemon.call("doctor")["run"]["waiters"] == 0, 10, "wait cancelled"
                )
            )
            res = await session.call_tool("run_dget", {"run": run, "output": False})
            assert res.structured_content["state"] == "running"

    anyio.run(scenario)
    assert daemon.call("run.get", {"run": run})["state"] == "running"


INSPECTOR = "@modelcontextprotocol/inspector@2.12.0"


def inspector_bin() -> str | None:
    if shutil.which("npm") is None or shutil.which("node") is None:
        return None
    cache = ROOT / ".venv" / "inspector"
    binary = cache / "node_modules" / ".bin" / "mcp-inspector"
    if not binary.exists():
        cache.mkdir(parents=True, exist_ok=True)
        subprocess.run(
            [
                "npm",
                "install",
                "--prefix",
                str(cache),
                "--no-audit",
                "--no-fund",
                "--silent",
                INSPECTOR,
            ],
            check=True,
            timeout=600,
            capture_output=True,
        )
    return str(binary)


@pytest.mark.timeout(600)
def test_mcp_inspector_interoperates(daemon: Daemon) -> None:
    binary = inspector_bin()
    if binary is None:
        pytest.skip("Node.js is not installed")
    s = daemon.call("session.create")["session"]
    env = {**os.environ, "VENOMX_SOCKET": daemon.socket, "VENOMX_TOKEN": "@owner"}
    # the Inspector gives the server a minimal environment: pass ours explicitly
    server = [
        "-e",
        f"VENOMX_SOCKET={daemon.socket}",
        "-e",
        "VENOMX_TOKEN=@owner",
        sys.executable,
        "-m",
        "venomx",
        "mcp",
    ]

    def inspect(*args: str) -> dict[str, Any]:
        r = subprocess.run(
            [binary, "--cli", *server, *args], capture_output=True, text=True, env=env, timeout=120
        )
        assert r.returncode == 0, r.stderr
        out: dict[str, Any] = json.loads(r.stdout)
        return out

    tools = inspect("--method", "tools/list")
    names = {t["name"] for t in tools["tools"]}
    assert {"run", "run_dwait"} <= names
    started = inspect(
        "--method",
        "tools/call",
        "--tool-name",
        "run",
        "--tool-arg",
        "key=insp",
        "--tool-arg",
        f"session={s}",
        "--tool-arg",
        'argv=["true"]',
    )
    rec = started["structuredContent"]
    assert isinstance(rec, dict) and rec["reused"] is False
    waited = inspect(
        "--method",
        "tools/call",
        "--tool-name",
        "run_dwait",
        "--tool-arg",
        f"run={rec['run']}",
        "--tool-arg",
        "timeout_ms=20000",
    )
    result = waited["structuredContent"]
    assert isinstance(result, dict) and result["outcome"] == "succeeded" and result["status"] == 0


def test_the_adapters_connection_survives_what_the_daemon_refuses(daemon: Daemon) -> None:
    """The adapter's one connection: a refused hello is tried afresh at the next call (it
    answered invalid_request.hello for ever), and a request over max_frame gets the
    daemon's error alone (sent without an id, it failed every call in flight)."""
    import asyncio

    from venomx.aclient import AsyncClient
    from venomx.wire import VenomxError

    async def scenario() -> None:
        bad = AsyncClient(daemon.socket, "0" * 64)
        for _ in range(2):
            with pytest.raises(VenomxError) as e:
                await bad.call("whoami")
            assert e.value.code == "denied.token"
        await bad.close()
        c = AsyncClient(daemon.socket, "@owner")
        s = (await c.call("session.create"))["session"]
        r = await c.call("run", {"key": "long", "session": s, "argv": ["sleep", "2"]})
        waiting = asyncio.ensure_future(c.call("run.wait", {"run": r["run"]}))
        with pytest.raises(VenomxError) as big:
            await c.call("pane.send", {"pane": r["pane"], "text": "x" * 1_500_000})
        assert big.value.code == "invalid_request.frame_size"
        assert big.value.data == {"max_frame": 1048576}
        assert (await waiting)["exit_code"] == 0
        await c.close()

    asyncio.run(scenario())


def test_concurrent_first_calls_share_one_greeted_connection(daemon: Daemon) -> None:
    """An agent's first calls may arrive together: each connected anew, and the second
    connection's reader replaced the first's under its pump, failing them all."""
    import asyncio

    from venomx.aclient import AsyncClient

    owner = daemon.call("whoami")["principal"]

    async def scenario() -> None:
        c = AsyncClient(daemon.socket, "@owner")
        for _ in range(2):  # on a fresh client, then after it closed
            whos = await asyncio.gather(*(c.call("whoami") for _ in range(5)))
            assert {w["principal"] for w in whos} == {owner}
            await c.close()

    asyncio.run(scenario())


def test_the_adapter_reads_replies_as_large_as_the_daemon_allows(daemon: Daemon) -> None:
    import asyncio

    from venomx.aclient import AsyncClient

    daemon.call("config.set", {"path": "protocol.max_frame", "value": "8388608"})
    s = daemon.call("session.create")["session"]
    prog = "import sys; [print('x' * 9000) for _ in range(300)]; sys.stdin.readline()"
    w = daemon.call("window.create", {"session": s, "argv": [PY, "-c", prog], "cols": 9000})

    async def capture() -> dict[str, Any]:
        c = AsyncClient(daemon.socket, "@owner")
        try:
            return await c.call("pane.capture_rows", {"pane": w["pane"], "limit": 300})
        finally:
            await c.close()

    wait_for(lambda: len(asyncio.run(capture())["lines"]) == 300, 20, "3 MB of rows")


def test_a_programs_strings_reach_the_host_without_c1_controls(
    daemon: Daemon, tmp_path: Path
) -> None:
    """A host may print a tool's text on a terminal, where U+009B is CSI: the argv0 of a
    split (which a pane's program may start) comes back escaped, with the same value."""
    odd = tmp_path / "\u009b2;x\u007f"
    odd.symlink_to(shutil.which("sleep") or "/bin/sleep")
    api = McpApi(daemon)
    try:
        s = api.call("session.create", {}).ok
        assert s is not None
        w = api.call("window.create", {"session": s["session"], "argv": [str(odd), "60"]}).ok
        assert w is not None
        res = api.call_raw("pane.list", {})
        text = res.content[0].text
        assert "\u009b" not in text and "\u007f" not in text
        assert "\\u009b2;x\\u007f" in text
        assert json.loads(text) == res.structured_content
        assert res.structured_content["panes"][0]["argv0"] == odd.name
        api.call("pane.kill", {"pane": w["pane"], "grace_ms": 0})
    finally:
        api.close()


def raw_adapter(daemon: Daemon) -> subprocess.Popen[bytes]:
    """``venomx mcp`` for the owner of ``daemon``, talked to line by line by the test."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("VENOMX_")}
    env.update(VENOMX_SOCKET=daemon.socket, VENOMX_TOKEN="@owner")
    return subprocess.Popen(
        [PY, "-m", "venomx", "mcp"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
    )


def raw_tool_calls(daemon: Daemon, calls: list[bytes]) -> tuple[list[dict[str, Any]], str]:
    """``tools/call`` lines written as given to ``venomx mcp`` (JSON the SDK's own client
    would never send, such as a bare NaN); each call's response, and the adapter's stderr."""
    init = {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "raw", "version": "1"},
    }
    lines = [
        json.dumps({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": init}).encode(),
        b'{"jsonrpc":"2.0","method":"notifications/initialized"}',
        *(
            b'{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":%s}' % (i, call)
            for i, call in enumerate(calls, 1)
        ),
    ]
    adapter = raw_adapter(daemon)
    assert adapter.stdin is not None and adapter.stdout is not None
    adapter.stdin.write(b"\n".join(lines) + b"\n")
    adapter.stdin.flush()
    answers: dict[int, dict[str, Any]] = {}
    while len(answers) < len(calls) + 1:  # the test's timeout bounds a silent adapter
        line = adapter.stdout.readline()
        assert line, "the adapter ended before it answered every call"
        msg = json.loads(line)
        if "id" in msg:
            answers[msg["id"]] = msg
    _, stderr = adapter.communicate(timeout=30)
    return [answers[i] for i in range(1, len(calls) + 1)], stderr.decode()


@pytest.mark.timeout(60)
def test_a_nan_the_agent_sends_is_the_clis_error_for_its_text(daemon: Daemon) -> None:
    # The SDK reads a bare NaN into a float that no request can carry: it was a
    # ValueError out of the tool handler (a JSON-RPC error, code 0, and a traceback).
    cases = [
        (
            b'{"name":"principal_dcreate","arguments":{"grants":[{"right":"read","scope":NaN}]}}',
            ("principal", "create", "--grants", '[{"right":"read","scope":NaN}]', "--json"),
        ),
        (
            b'{"name":"run","arguments":{"key":"k","argv":["true"],"env":{"A":NaN}}}',
            ("run", "--key", "k", "--env", '{"A":NaN}', "--json", "--", "true"),
        ),
        (
            b'{"name":"window_dcreate","arguments":{"session":"s0","cols":NaN}}',
            ("window", "create", "--session", "s0", "--cols", "NaN", "--json"),
        ),
    ]
    answers, stderr = raw_tool_calls(daemon, [raw for raw, _ in cases])
    for answer, (_, args) in zip(answers, cases, strict=True):
        assert "result" in answer, answer  # a tool's error, not the protocol's
        result = answer["result"]
        assert result["isError"] is True, answer
        cli_error = json.loads(daemon.cli(*args).out)["error"]
        assert cli_error["code"] == "invalid_params.type"
        assert json.loads(result["content"][0]["text"])["error"] == cli_error
    assert "Traceback" not in stderr
    assert daemon.call("run.list")["runs"] == []


@pytest.mark.timeout(90)
def test_a_stopped_daemon_with_a_full_queue_does_not_freeze_the_adapter(
    daemon: Daemon,
) -> None:
    """The adapter connected with a blocking connect on its event loop: with the daemon
    stopped and its address's queue full (ours, so it waits for the daemon to accept),
    the whole adapter stopped answering, ping, cancellation and its host's end of input
    included, until the daemon ran again (helper-123). The call waits; the rest goes on."""
    import signal
    import socket

    from venomx.paths import abstract_address

    adapter = raw_adapter(daemon)
    assert adapter.stdin is not None and adapter.stdout is not None
    held: list[socket.socket] = []

    def send(msg: dict[str, Any]) -> None:
        assert adapter.stdin is not None
        adapter.stdin.write(json.dumps(msg).encode() + b"\n")
        adapter.stdin.flush()

    def answer(i: int) -> dict[str, Any]:  # the test's timeout bounds a silent adapter
        assert adapter.stdout is not None
        while True:
            msg = json.loads(adapter.stdout.readline())
            if msg.get("id") == i:
                return dict(msg)

    try:
        init = {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t"}}
        send({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": init})
        answer(0)
        send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        os.kill(daemon.proc.pid, signal.SIGSTOP)
        name = abstract_address(daemon.socket)
        while True:  # fill the stopped daemon's queue
            s = socket.socket(socket.AF_UNIX)
            s.setblocking(False)
            try:
                s.connect(name)
            except BlockingIOError:
                s.close()
                break
            held.append(s)
        call = {"name": "whoami", "arguments": {}}
        send({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": call})
        send({"jsonrpc": "2.0", "id": 2, "method": "ping"})
        assert answer(2)["result"] == {}  # before: never, while the call waited
        adapter.stdin.close()
        assert adapter.wait(30) == 0
    finally:
        for s in held:
            s.close()
        os.kill(daemon.proc.pid, signal.SIGCONT)
        adapter.kill()
        adapter.wait()


@pytest.mark.timeout(60)
def test_a_line_the_sdk_cannot_read_is_answered_not_dropped(daemon: Daemon) -> None:
    # Valid JSON the SDK's reader refuses: the request was never answered, and the
    # agent's call waited for ever. Each now gets JSON-RPC's invalid request, with its id.
    call = (
        b'{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"whoami","arguments":%s}}'
    )
    lines = [
        call % (1, b'{"x":"\\ud800"}'),
        call % (2, b'{"x":' + b"9" * 5000 + b"}"),
        call % (3, b'{"x":' + b"[" * 300 + b"]" * 300 + b"}"),
        b'{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"x":"\\udc00"}}',
        b"",
        b"{not json",
        call % (4, b"{}"),
    ]
    init = {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "raw", "version": "1"},
    }
    adapter = raw_adapter(daemon)
    assert adapter.stdin is not None and adapter.stdout is not None
    head = json.dumps({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": init})
    adapter.stdin.write(head.encode() + b"\n")
    adapter.stdin.write(b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n')
    adapter.stdin.write(b"\n".join(lines) + b"\n")
    adapter.stdin.flush()
    answers: list[dict[str, Any]] = []
    while not answers or answers[-1].get("id") != 4:  # answered in order; the timeout bounds it
        line = adapter.stdout.readline()
        assert line, "the adapter ended before it answered"
        answers.append(json.loads(line))
    _, stderr = adapter.communicate(timeout=30)
    assert adapter.returncode == 0
    assert "Traceback" not in stderr.decode()
    assert [a.get("id") for a in answers] == [0, 1, 2, 3, None, 4]
    for a in answers[1:4]:
        assert a["error"]["code"] == -32600, a
        assert "lone surrogate" in a["error"]["message"]
    assert answers[4]["error"]["code"] == -32700
    assert answers[5]["result"]["isError"] is False
