"""Generators over the manifest: JSON Schema (MCP), docs/verbs.md and docs/skill.md.

``scripts/gen-docs`` writes the files; ``scripts/gen-docs --check`` and a test fail when
they are stale.
"""

from __future__ import annotations

import json
from typing import Any

from venomx.manifest.verbs import FORMAT, VERBS, Group, Param, Verb


def mcp_name(verb: str) -> str:
    return verb.replace(".", "_d")


def cli_name(verb: str) -> str:
    return "venomx " + " ".join(verb.replace("_", "-").split("."))


def rule_text(p: Param) -> str:
    """A param's value rules in words (help, docs, and JSON Schema descriptions)."""
    out: list[str] = []
    if p.pattern is not None:
        what = p.hint or f"matching {p.pattern}"
        out.append({"array": f"items {what}", "object": f"names {what}"}.get(p.kind, what))
    if p.nonempty:
        out.append("a nonempty first item")
    if p.min_length is not None or p.max_length is not None:
        lo = "" if p.min_length is None else f"{p.min_length}-"
        hi = f"{lo}{p.max_length}" if p.max_length is not None else f"at least {p.min_length}"
        hi = hi if lo else f"at most {hi}"
        out.append({"array": f"{hi} bytes in all (each with its NUL)",
                    "object": f"values of {hi} UTF-8 bytes"}.get(p.kind, f"{hi} UTF-8 bytes"))
    if p.values:
        out.append(f"{p.values} values")
    if p.text:
        out.append("no NUL, valid UTF-8")
    if out and p.code:
        out.append(f"else {p.code}")
    return "; ".join(out)


def group_text(verb: Verb) -> str:
    """The verb's cross-param rules in words, each with its error."""
    return "; ".join(f"{g.describe()} (else {g.code})" for g in verb.groups())


def param_schema(p: Param) -> dict[str, Any]:
    s: dict[str, Any] = {"type": p.kind}
    rules = rule_text(p)
    if p.summary or rules:
        s["description"] = p.summary + (f" ({rules})" if rules and p.summary else rules)
    if p.kind == "array" and p.items:
        s["items"] = {"type": p.items}
    if p.pattern is not None:
        anchored = f"^(?:{p.pattern})$"
        if p.kind == "string":
            s["pattern"] = anchored
        elif p.kind == "array":
            s["items"] = {**s.get("items", {}), "pattern": anchored}
        elif p.kind == "object":
            s["propertyNames"] = {"pattern": anchored}
    if p.kind == "object" and p.values:
        s["additionalProperties"] = {"type": p.values}
    if p.nonempty:
        s["minItems"] = 1
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
    """The summary, the MCP note and the cross-param rules: format 1 (and many MCP hosts)
    have no top-level oneOf, so "exactly one of" is said in words."""
    groups = group_text(verb)
    return (verb.summary + (" " + verb.mcp if verb.mcp else "")
            + (f" Rules: {groups}." if groups else ""))


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
            if v.check.exactly_one is not None:
                out.append(f"- target form, before the resource check: exactly one of "
                           f"{' or '.join(v.check.params)} (`{v.check.exactly_one}`)")
        if v.exit_field:
            out.append(f"- CLI exit status: the result's `{v.exit_field}`")
        if v.rules:
            order = ", ".join(f"{r.describe()} (`{r.code}`)" if isinstance(r, Group)
                              else f"`{r}`" for r in v.rules)
            out.append(f"- value rules, after authorization, in this order: {order}")
        if v.params:
            out += ["", "| param | type | required | default | range / choices / rules | "
                    "summary |", "|---|---|---|---|---|---|"]
            for p in v.params:
                kind = p.kind + (f" of {p.items}" if p.items else "")
                rng = ", ".join(p.choices) if p.choices else (
                    f"{p.min}–{p.max}" if p.min is not None else "")
                rng = "; ".join(x for x in (rng, rule_text(p).replace("|", "\\|")) if x)
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
