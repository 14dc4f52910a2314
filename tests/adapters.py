"""Two ways to reach the daemon for conformance cases: the CLI and the MCP adapter.

Each returns an ``Outcome`` (result or error object, plus the CLI-equivalent exit
status) so the same case can run through both and the two can be compared for parity.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import threading
from dataclasses import dataclass
from typing import Any

from tests.helpers import Daemon
from venomx.manifest.generate import mcp_name
from venomx.manifest.verbs import verb_by_name
from venomx.wire import exit_code_for


@dataclass
class Outcome:
    ok: dict[str, Any] | None
    error: dict[str, Any] | None
    code: int

    @property
    def err_code(self) -> str | None:
        return self.error["code"] if self.error else None


def cli_args(verb: str, params: dict[str, Any]) -> list[str]:
    v = verb_by_name(verb)
    assert v is not None
    args = verb.replace("_", "-").split(".")
    for name, value in params.items():
        p = v.param(name)
        kind = p.kind if p else "string"
        opt = "--" + name.replace("_", "-")
        if kind == "boolean":
            args.append(f"{opt}={'true' if value else 'false'}")
        elif kind in ("array", "object"):
            args += [opt, json.dumps(value)]
        else:
            args += [opt, str(value)]
    return [*args, "--json"]


class CliApi:
    name = "cli"

    def __init__(self, d: Daemon, token: str | None = "@owner") -> None:
        self.d = d
        self.token = token

    def call(
        self, verb: str, params: dict[str, Any] | None = None, token: str | None = None
    ) -> Outcome:
        r = self.d.cli(*cli_args(verb, params or {}), token=token or self.token)
        obj = json.loads(r.out.strip().splitlines()[-1])
        if "error" in obj and set(obj) == {"error"}:
            return Outcome(None, obj["error"], r.code)
        return Outcome(obj, None, r.code)

    def close(self) -> None:
        pass


class McpApi:
    """The SDK's own stdio client talking to ``venomx mcp``, as a real MCP host would.

    ``d`` is the daemon, or only the socket path a daemon will listen on: the adapter
    reaches its daemon at the first tool call or listing, so it can start (and pay for its
    imports) before the daemon does; ``wait_ready`` then lists the tools."""

    name = "mcp"

    def __init__(self, d: Daemon | str, token: str | None = "@owner", wait: bool = True) -> None:
        self.loop = asyncio.new_event_loop()
        self.requests: asyncio.Queue[Any] = asyncio.Queue()
        self.started = threading.Event()
        self.error: BaseException | None = None
        self.tools: Any = None
        socket_path = d if isinstance(d, str) else d.socket
        self.thread = threading.Thread(target=self._thread, args=(socket_path, token), daemon=True)
        self.thread.start()
        if wait:
            self.wait_ready()

    def wait_ready(self) -> None:
        """Until the adapter has started, then list its tools (from the daemon)."""
        if not self.started.wait(30) or self.error:
            raise RuntimeError(f"MCP adapter did not start: {self.error}")
        if self.tools is None:
            self.tools = self._submit(lambda session: session.list_tools())

    def _thread(self, socket_path: str, token: str | None) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.run_until_complete(self._serve(socket_path, token))

    async def _serve(self, socket_path: str, token: str | None) -> None:
        from mcp import ClientSession, StdioServerParameters, stdio_client

        env = {k: v for k, v in os.environ.items() if not k.startswith("VENOMX_")}
        env["VENOMX_SOCKET"] = socket_path
        if token:
            env["VENOMX_TOKEN"] = token
        params = StdioServerParameters(
            command=sys.executable, args=["-m", "venomx", "mcp"], env=env
        )
        try:
            async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
                await session.initialize()
                self.started.set()
                while True:
                    item = await self.requests.get()
                    if item is None:
                        return
                    call, fut = item
                    try:
                        fut.set_result(await call(session))
                    except BaseException as exc:  # handed to the caller's thread
                        fut.set_exception(exc)
        except BaseException as exc:
            self.error = exc
            self.started.set()

    def _submit(self, call: Any) -> Any:
        """Run ``call(session)`` on the adapter's loop; its result, within 60 s."""
        import concurrent.futures

        fut: concurrent.futures.Future[Any] = concurrent.futures.Future()
        self.loop.call_soon_threadsafe(self.requests.put_nowait, (call, fut))
        return fut.result(60)

    def call_tool(self, name: str, args: dict[str, Any]) -> Any:
        """The tool result for ``name``, any name, as the SDK gives it."""
        return self._submit(lambda session: session.call_tool(name, args))

    def call_raw(self, verb: str, params: dict[str, Any]) -> Any:
        return self.call_tool(mcp_name(verb), params)

    def call(
        self, verb: str, params: dict[str, Any] | None = None, token: str | None = None
    ) -> Outcome:
        assert token is None, "the MCP adapter's token is fixed at start"
        res = self.call_raw(verb, params or {})
        if res.is_error:
            err = json.loads(res.content[0].text)["error"]
            return Outcome(None, err, exit_code_for(err["code"]))
        ok = res.structured_content
        assert json.loads(res.content[0].text) == ok
        v = verb_by_name(verb)
        code = int(ok.get(v.exit_field, 0)) if v and v.exit_field else 0
        return Outcome(ok, None, code)

    def close(self, wait: bool = True) -> None:
        """End the session, which stops the adapter; ``wait=False`` leaves ``join`` to
        wait for it (an adapter takes ~0.4 s to exit)."""
        self.started.wait(30)
        self.loop.call_soon_threadsafe(self.requests.put_nowait, None)
        if wait:
            self.join()

    def join(self) -> None:
        self.thread.join(15)
        if not self.thread.is_alive():
            self.loop.close()
