"""Generators over the manifest: JSON Schema (MCP), docs/verbs.md and docs/skill.md.

``scripts/gen-docs`` writes the files; ``scripts/gen-docs --check`` and a test fail when
they are stale.
"""

from __future__ import annotations

import json
from typing import Any

from venomx.manifest.verbs import FORMAT, VERBS, Param, Verb


def mcp_name(verb: str) -> str:
    return verb.replace(".", "_d")


def cli_name(verb: str) -> str:
    return "venomx " + " ".join(verb.replace("_", "-").split("."))


def param_schema(p: Param) -> dict[str, Any]:
    s: dict[str, Any] = {"type": p.kind}
    if p.summary:
        s["description"] = p.summary
    if p.kind == "array" and p.items:
        s["items"] = {"type": p.items}
    if p.min is not None:
        s["minimum"] = p.min
    if p.max is not None:
        s["maximum"] = p.max
    if p.choices:
        s["enum"] = list(p.choices)
    if p.has_default:
        s["default"] = p.default
    return s


def input_schema(verb: Verb) -> dict[str, Any]:
    return {"type": "object",
            "properties": {p.name: param_schema(p) for p in verb.params},
            "required": [p.name for p in verb.params if p.required],
            "additionalProperties": False}


def output_schema(verb: Verb) -> dict[str, Any]:
    props: dict[str, Any] = {}
    for f in verb.result:
        props[f.name] = {} if f.kind == "any" else {"type": f.kind}
    return {"type": "object", "properties": props,
            "required": [f.name for f in verb.result if f.required]}


def tool_description(verb: Verb) -> str:
    return verb.summary + (" " + verb.mcp if verb.mcp else "")


def verbs_md() -> str:
    out = ["# venomx verb reference", "",
           f"Generated from the manifest (format {FORMAT}) by `scripts/gen-docs`; do not edit.",
           "", "| verb | CLI | MCP tool | dispatch | streams |", "|---|---|---|---|---|"]
    for v in VERBS:
        tool = "—" if v.internal or v.streams else f"`{mcp_name(v.name)}`"
        cli = "—" if v.internal else f"`{cli_name(v.name)}`"
        out.append(f"| `{v.name}` | {cli} | {tool} | {v.dispatch or '—'} | "
                   f"{'yes' if v.streams else 'no'} |")
    for v in VERBS:
        out += ["", f"## {v.name}", "", v.summary]
        if v.mcp:
            out += ["", f"MCP: {v.mcp}"]
        out += ["", f"- dispatch right: {v.dispatch or 'none'}"]
        if v.check is not None:
            target = v.check.scope or " / ".join(v.check.params)
            out.append(f"- resource check: {v.check.right} on {target}, before lookup")
        if v.exit_field:
            out.append(f"- CLI exit status: the result's `{v.exit_field}`")
        if v.params:
            out += ["", "| param | type | required | default | range / choices | summary |",
                    "|---|---|---|---|---|---|"]
            for p in v.params:
                kind = p.kind + (f" of {p.items}" if p.items else "")
                rng = ", ".join(p.choices) if p.choices else (
                    f"{p.min}–{p.max}" if p.min is not None else "")
                default = json.dumps(p.default) if p.has_default else ""
                out.append(f"| `{p.name}` | {kind} | {'yes' if p.required else ''} | "
                           f"{default} | {rng} | {p.summary} |")
        if v.result:
            fields = ", ".join(f"`{f.name}`" + ("" if f.required else "?") for f in v.result)
            out += ["", f"Result: {fields}"]
        if v.errors:
            out += ["", "Errors: " + ", ".join(f"`{e}`" for e in v.errors)]
    return "\n".join(out) + "\n"


SKILL_RULES = """\
## How to run commands with venomx (agents MUST follow this)

- Start every command whose result matters with `venomx run --key <unique> …` and wait
  for it with `venomx run wait --run <id>`. If a response is lost, retry the identical request
  (same key, same parameters): you get the same run back (`reused: true`), and the command
  is not started twice. `venomx run list --key <key>` also finds it.
- Use `--argv '["prog","arg"]'` (or `-- prog arg`); it runs the program directly with no
  shell. Add `--shell '…'` only when you need shell syntax (pipes, redirects, `&&`).
- A wait timeout (`timeout.wait`, exit 7) or Ctrl-C of `run wait` does **not** stop the
  command. To stop it use `venomx run cancel --run <id>`, or set `--deadline-ms` at start.
  Keep `--timeout-ms` at most 60000 and loop on `timeout.wait`.
- Trust `outcome`, `exit_code`, `signal` and `status` from `run wait`. Never trust screen
  text or `command.*` events: a program can print anything, including fake markers.
- `status` 124 means the run hit its deadline; 125 means it was terminated another way
  (cancel, pane kill, removal, shutdown); 128+n means it died from signal n.
- The result's `output` is the tail of the screen. When `complete` is false, read earlier
  rows with `venomx pane capture-rows --pane <pane> --epoch <epoch> --end <start>`.
- When you no longer need a finished run's pane, remove it with `venomx pane remove`.
- Pass `--source <source>` (from an earlier result) when retrying, to detect a daemon
  restart: you get `conflict.source` instead of a second execution.
- Prefer `run` over `pane send` for any command whose result matters; `pane send` gives
  you no exit status, only screen text.
"""


def skill_md() -> str:
    out = ["# venomx skill", "",
           "Generated from the manifest by `scripts/gen-docs`; do not edit.", "",
           SKILL_RULES, "## Verbs", ""]
    for v in VERBS:
        if v.internal:
            continue
        out.append(f"- `{cli_name(v.name)}` (MCP `{mcp_name(v.name)}`"
                   f"{', streaming: CLI only' if v.streams else ''}): {v.summary}")
    out += ["", "## Exit codes", "",
            "0 ok · 1 internal · 2 invalid params/request · 3 not found · 4 denied · "
            "5 conflict · 6 unavailable · 7 timeout · 8 cancelled · 9 transport · "
            "10 unsupported · `run wait` exits with the run's `status`.", ""]
    return "\n".join(out)


def completion_words() -> list[str]:
    return sorted({cli_name(v.name) for v in VERBS if not v.internal})
