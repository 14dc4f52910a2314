"""``venomx mcp``: a stdio MCP server whose tools are generated from the manifest.

One tool per non-streaming verb (``.`` -> ``_d``), built on the official SDK's low-level
server so the tool list is data, not hand-written functions. Success: structuredContent
plus the same JSON as text. Error: isError with ``{"error": …}`` as text and no
structuredContent. A cancelled tool call cancels its request on the daemon. An
unreachable daemon is a tool error; the next call reconnects.
"""

from __future__ import annotations

import json
import logging
import os
import sys

import anyio
import mcp.types as types
from mcp.server import ServerRequestContext
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server

from venomx import __version__
from venomx.client import AsyncClient
from venomx.manifest.generate import input_schema, mcp_name, output_schema, tool_description
from venomx.manifest.schema import validate
from venomx.manifest.verbs import VERBS, Verb
from venomx.wire import VenomxError

log = logging.getLogger(__name__)
TOOLS: dict[str, Verb] = {mcp_name(v.name): v for v in VERBS if not v.internal and not v.streams}


def tools() -> list[types.Tool]:
    return [types.Tool(name=name, description=tool_description(v),
                       input_schema=input_schema(v), output_schema=output_schema(v))
            for name, v in TOOLS.items()]


def error_result(err: VenomxError) -> types.CallToolResult:
    text = json.dumps({"error": err.to_dict()}, separators=(",", ":"), ensure_ascii=False)
    return types.CallToolResult(content=[types.TextContent(type="text", text=text)],
                                is_error=True)


class Adapter:
    def __init__(self, socket_path: str | None, token: str | None) -> None:
        self.client = AsyncClient(socket_path, token)

    async def list_tools(self, ctx: ServerRequestContext,
                         params: types.PaginatedRequestParams | None) -> types.ListToolsResult:
        return types.ListToolsResult(tools=tools())

    async def call_tool(self, ctx: ServerRequestContext,
                        params: types.CallToolRequestParams) -> types.CallToolResult:
        verb = TOOLS.get(params.name)
        if verb is None:
            return error_result(VenomxError("invalid_request.verb",
                                            f"unknown tool {params.name[:64]}",
                                            {"verb": params.name[:64]}))
        args = dict(params.arguments or {})
        try:
            validate(verb, args)  # same schema errors as the daemon, before any I/O
            result = await self.client.call(verb.name, args)
        except VenomxError as err:
            if err.code == "unsupported.result_size":
                err.message += ("; call again with output=false and read rows with "
                                "pane_dcapture_rows")
            return error_result(err)
        text = json.dumps(result, separators=(",", ":"), ensure_ascii=False)
        return types.CallToolResult(content=[types.TextContent(type="text", text=text)],
                                    structured_content=result, is_error=False)


def main(socket_path: str | None = None) -> None:
    logging.basicConfig(stream=sys.stderr, level=logging.WARNING)
    adapter = Adapter(socket_path, os.environ.get("VENOMX_TOKEN") or None)
    server = Server("venomx", version=__version__, on_list_tools=adapter.list_tools,
                    on_call_tool=adapter.call_tool)

    async def serve() -> None:
        async with stdio_server() as (read, write):
            await server.run(read, write, server.create_initialization_options())

    anyio.run(serve)


__all__ = ["Adapter", "main", "tools"]
