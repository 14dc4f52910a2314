"""``venomx mcp``: a stdio MCP server whose tools are generated from the manifest.

One tool per non-streaming verb (``.`` -> ``_d``), built on the official SDK's low-level
server so the tool list is data, not hand-written functions. Success: structuredContent
plus the same JSON as text. Error: isError with ``{"error": …}`` as text and no
structuredContent. A cancelled tool call cancels its request on the daemon. An
unreachable daemon is a tool error; the next call reconnects, to a restarted daemon too,
never to another process claiming the first one's source (``AsyncClient``).

For agents: the server's ``instructions`` are the skill's core rules; tools carry titles
and annotations; ``tools/list`` shows only what the configured principal can ever call
(``all_tools`` shows every tool); ``run_dwait`` reports progress when asked.
"""

from __future__ import annotations

import json
import logging
import os
import sys
from typing import Any

import anyio
import mcp.types as types
from mcp.server import ServerRequestContext
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server

from venomx import __version__
from venomx.aclient import AsyncClient
from venomx.manifest.generate import instructions
from venomx.manifest.schema import validate
from venomx.manifest.verbs import SEAMS, verb_by_name
from venomx.mcp.progress import wait_with_progress
from venomx.mcp.refused import Answering
from venomx.mcp.tools import TOOLS, can_ever_call, every_tool, is_seam, listed
from venomx.visible import json_controls
from venomx.wire import VenomxError, unsendable

log = logging.getLogger(__name__)


def tools() -> list[types.Tool]:
    """Every tool, seam tools included (what ``--all-tools`` lists against a daemon
    with --test-seams)."""
    return every_tool()


def error_result(err: VenomxError) -> types.CallToolResult:
    text = json_controls(
        json.dumps({"error": err.to_dict()}, separators=(",", ":"), ensure_ascii=False)
    )
    return types.CallToolResult(content=[types.TextContent(type="text", text=text)], is_error=True)


def progress_token(ctx: ServerRequestContext) -> Any:
    return (ctx.meta or {}).get("progress_token")


class Adapter:
    """The MCP server's side of the daemon: one connection, the tool list for its principal,
    and calls turned into requests."""

    def __init__(self, socket_path: str | None, token: str | None, all_tools: bool = False) -> None:
        self.client = AsyncClient(socket_path, token)
        self.all_tools = all_tools
        self.seams: tuple[str, bool] | None = None  # (daemon source, seams enabled)

    async def seams_enabled(self, principal: str | None, grants: list[Any], source: str) -> bool:
        """Does this daemon run with --test-seams? Asked once per daemon source, and only
        when the principal could call a seam verb at all: ``seam.wait`` with timeout 0
        changes nothing and answers ``unsupported.seams`` without the flag."""
        if self.seams is not None and self.seams[0] == source:
            return self.seams[1]
        probe = verb_by_name("seam.wait")
        assert probe is not None and is_seam(probe)
        enabled = False
        if can_ever_call(probe, principal, grants):
            try:
                await self.client.call("seam.wait", {"name": SEAMS[0], "timeout_ms": 0})
                enabled = True
            except VenomxError as err:
                if err.code == "transport":
                    raise
                enabled = err.code == "timeout.seam"
        self.seams = (source, enabled)
        return enabled

    async def list_tools(
        self, ctx: ServerRequestContext, params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        try:
            who = await self.client.call("whoami")
            principal, grants = who.get("principal"), list(who.get("grants") or [])
            seams = await self.seams_enabled(principal, grants, str(who.get("source")))
        except VenomxError as err:
            # Cannot judge: list every tool but the seams; calls answer for themselves.
            log.warning(
                "venomx mcp: cannot ask the daemon who we are (%s); listing every tool", err.code
            )
            return types.ListToolsResult(tools=listed(None, [], seams=False, all_tools=True))
        return types.ListToolsResult(
            tools=listed(principal, grants, seams=seams, all_tools=self.all_tools)
        )

    async def call_tool(
        self, ctx: ServerRequestContext, params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        verb = TOOLS.get(params.name)
        if verb is None:
            return error_result(
                VenomxError(
                    "invalid_request.verb",
                    f"unknown tool {params.name[:64]}",
                    {"verb": params.name[:64]},
                )
            )
        args = dict(params.arguments or {})
        try:
            checked = dict(args)
            for p in verb.params:
                # (a string param fails validation with any nested value as it is)
                if p.kind != "string" and unsendable(args.get(p.name)):
                    # the CLI cannot read such a value's JSON text and keeps the text, of
                    # the wrong type: the same first error, and nothing is sent
                    checked[p.name] = ""
            validate(verb, checked)  # same schema errors as the daemon, before any I/O
            if verb.name == "run.wait" and progress_token(ctx) is not None:

                async def notify(ms: int, message: str) -> None:
                    await ctx.session.report_progress(ms, None, message)

                result = await wait_with_progress(self.client, args, notify)
            else:
                result = await self.client.call(verb.name, args)
        except VenomxError as err:
            return error_result(err)
        # a host may show the text on a terminal: a program's strings (the argv of a split
        # it started) must not carry C1 controls there
        text = json_controls(json.dumps(result, separators=(",", ":"), ensure_ascii=False))
        return types.CallToolResult(
            content=[types.TextContent(type="text", text=text)],
            structured_content=result,
            is_error=False,
        )


def main(socket_path: str | None = None, all_tools: bool = False) -> None:
    logging.basicConfig(stream=sys.stderr, level=logging.WARNING)
    adapter = Adapter(socket_path, os.environ.get("VENOMX_TOKEN") or None, all_tools)
    server = Server(
        "venomx",
        version=__version__,
        instructions=instructions(),
        on_list_tools=adapter.list_tools,
        on_call_tool=adapter.call_tool,
    )

    async def serve() -> None:
        async with stdio_server() as (read, write):
            await server.run(Answering(read, write), write, server.create_initialization_options())

    anyio.run(serve)


__all__ = ["Adapter", "main", "tools"]
