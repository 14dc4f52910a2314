"""The tool list: one tool per non-streaming verb, shaped by who is asking.

Every tool carries a title, annotations from its verb's effect, and JSON Schema from the
manifest. ``listed`` leaves out the tools the configured principal can never call, judged
from ``whoami``'s grants the way the daemon's dispatcher judges a call (dispatch right,
fixed-scope resource check, anonymous caller), and the test-seam tools unless the daemon
runs with ``--test-seams``. Hiding is a courtesy to the model, never authorization: a
hidden tool called anyway goes to the daemon, which answers as it always does.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import mcp.types as types

from venomx.manifest.generate import (
    input_schema,
    mcp_name,
    output_schema,
    tool_annotations,
    tool_description,
)
from venomx.manifest.verbs import VERBS, Verb

TOOLS: dict[str, Verb] = {mcp_name(v.name): v for v in VERBS if not v.internal and not v.streams}


def is_seam(verb: Verb) -> bool:
    """A test-seam verb: it answers ``unsupported.seams`` without --test-seams."""
    return "unsupported.seams" in verb.errors


def make_tool(name: str, verb: Verb) -> types.Tool:
    hints = tool_annotations(verb)
    return types.Tool(
        name=name,
        title=verb.title,
        description=tool_description(verb),
        input_schema=input_schema(verb),
        output_schema=output_schema(verb),
        annotations=types.ToolAnnotations(
            title=verb.title,
            read_only_hint=hints["readOnlyHint"],
            destructive_hint=hints["destructiveHint"],
            idempotent_hint=hints["idempotentHint"],
            open_world_hint=hints["openWorldHint"],
        ),
    )


_BUILT: dict[str, types.Tool] = {name: make_tool(name, v) for name, v in TOOLS.items()}


def covers(scope: str, fixed: str) -> bool:
    """Does a grant on ``scope`` cover a fixed-scope check on ``fixed`` (``*`` or
    ``session:*``)? Only ``*`` covers ``*``; ``session:*`` also covers itself (§5)."""
    return scope == "*" or scope == fixed == "session:*"


def can_ever_call(verb: Verb, principal: str | None, grants: Iterable[Any]) -> bool:
    """Could a principal with these grants (``principal`` None: the anonymous caller)
    pass the daemon's authorization of ``verb`` on some resource?"""
    held = [(g.get("right"), g.get("scope")) for g in grants if isinstance(g, Mapping)]
    if principal is None:
        if "denied.anonymous" in verb.errors:
            return False
        held = [(r, s) for r, s in held if r == "read"]  # the anonymous caller only reads
    if verb.dispatch is not None and not any(r == verb.dispatch for r, _ in held):
        return False
    c = verb.check
    if c is not None and c.scope is not None:
        return any(r == c.right and isinstance(s, str) and covers(s, c.scope) for r, s in held)
    return True


def listed(
    principal: str | None, grants: Iterable[Any], *, seams: bool, all_tools: bool
) -> list[types.Tool]:
    """The tools to list: seam tools only with ``seams``; with ``all_tools`` every other
    tool, else only those the principal can ever call."""
    grants = list(grants)
    return [
        tool
        for name, tool in _BUILT.items()
        if (seams or not is_seam(TOOLS[name]))
        and (all_tools or can_ever_call(TOOLS[name], principal, grants))
    ]


def every_tool() -> list[types.Tool]:
    return list(_BUILT.values())


__all__ = ["TOOLS", "can_ever_call", "covers", "every_tool", "is_seam", "listed", "make_tool"]
