"""``python -m venomx.mcp [--socket PATH] [--all-tools]``: the MCP server on stdio."""

from __future__ import annotations

import argparse

from venomx.mcp import main

parser = argparse.ArgumentParser(
    prog="python -m venomx.mcp", description="Serve the verbs as MCP tools on stdio."
)
parser.add_argument("--socket", default=None, help="the daemon's socket")
parser.add_argument(
    "--all-tools",
    action="store_true",
    help="list every tool, not only those the principal can ever call",
)
opts = parser.parse_args()
main(opts.socket, opts.all_tools)
