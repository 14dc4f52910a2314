"""The click app, generated from the manifest (§4), plus the hand-written commands.

Verb ``a.b`` is ``venomx a b``; ``_`` becomes ``-``. Values are converted and checked
here with the daemon's own schema errors, so a bad ``--cols`` reads exactly like the
daemon's answer. Exit status: 0, the error class's code, 9 for transport, or (run.wait)
the result's ``status``. Imports nothing from the daemon.
"""

from __future__ import annotations

import json
import os
import re
import sys
from collections.abc import Callable
from typing import Any, NoReturn

import click

from venomx.manifest.generate import group_text, rule_text
from venomx.manifest.schema import type_error
from venomx.manifest.verbs import VERBS, Param, Verb, verb_by_name
from venomx.wire import VALUE_MAX_DEPTH, VenomxError, dumps, loads, parse_int

INT = re.compile(r"-?[0-9]+")


def option_name(param: str) -> str:
    return "--" + param.replace("_", "-")


def convert(p: Param, text: str) -> Any:
    if p.kind == "integer":
        if not INT.fullmatch(text.strip()):
            raise type_error(p.name, "integer")
        return parse_int(text.strip())
    if p.kind == "boolean":
        if text.lower() not in ("true", "false"):
            raise type_error(p.name, "boolean")
        return text.lower() == "true"
    if p.kind in ("array", "object"):
        try:
            value = loads(text.encode("utf-8", "surrogatepass"), VALUE_MAX_DEPTH)
        except ValueError:
            raise type_error(p.name, p.kind) from None
        return value
    return text


def emit_error(err: VenomxError, as_json: bool) -> NoReturn:
    if as_json:
        click.echo(dumps({"error": err.to_dict()}).decode())
    else:
        click.echo(f"venomx: {err.code}: {err.message}", err=True)
    sys.exit(err.exit_code)


def scalar(v: Any) -> str:
    if v is None:
        return ""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (dict, list)):
        return json.dumps(v, separators=(",", ":"))
    return str(v)


def table(rows: list[dict[str, Any]]) -> str:
    cols: list[str] = []
    for r in rows:
        for k, v in r.items():
            if k not in cols and not isinstance(v, (dict, list)):
                cols.append(k)
    if not cols:
        return "\n".join(json.dumps(r) for r in rows)
    cells = [[c.upper() for c in cols]] + [[scalar(r.get(c)) for c in cols] for r in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(cols))]
    return "\n".join("  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip()
                     for row in cells)


def render_doctor(result: dict[str, Any]) -> str:
    out = [f"venomx doctor: {result.get('status')} (pid {result.get('pid')}, "
           f"uptime {result.get('uptime_ms')} ms)"]
    out += [f"  {c['status']:<5} {c['name']:<12} {c['detail']}" for c in result["checks"]]
    return "\n".join(out)


def render_fields(result: dict[str, Any]) -> str:
    """Scalars as ``key: value``, lists of records as tables, rows and output as text."""
    if "lines" in result and isinstance(result["lines"], list):
        return "\n".join(result["lines"])
    lists = [(k, v) for k, v in result.items()
             if isinstance(v, list) and v and all(isinstance(x, dict) for x in v)]
    out = []
    for k, v in result.items():
        if isinstance(v, list) and v and all(isinstance(x, dict) for x in v):
            continue
        if k == "output" and isinstance(v, dict):
            continue
        out.append(f"{k}: {scalar(v)}")
    for _, v in lists:
        out.append(table(v))
    if isinstance(result.get("output"), dict):
        out.append("output:")
        out += ["  " + ln.rstrip() for ln in result["output"].get("lines", [])]
    return "\n".join(out)


RENDERERS: dict[str, Callable[[dict[str, Any]], str]] = {
    "fields": render_fields, "doctor": render_doctor}


def readable(verb: Verb, result: dict[str, Any]) -> str:
    return RENDERERS[verb.render](result)


def call_verb(verb: Verb, params: dict[str, Any], sock: str | None, token: str | None,
              as_json: bool) -> NoReturn:
    from venomx.client import Client

    try:
        with Client(sock, token) as client:
            if verb.streams:
                for item in client.stream(verb.name, params):
                    click.echo(dumps(item).decode())
                sys.exit(0)
            result = client.call(verb.name, params)
    except VenomxError as err:
        emit_error(err, as_json)
    except KeyboardInterrupt:
        emit_error(VenomxError("cancelled", "interrupted", {}), as_json)
    click.echo(dumps(result).decode() if as_json else readable(verb, result))
    if verb.exit_field is not None:
        sys.exit(int(result.get(verb.exit_field, 0)))
    if verb.fail_field is not None and result.get(verb.fail_field) == "fail":
        sys.exit(1)
    sys.exit(0)


def verb_callback(verb: Verb) -> Any:
    @click.pass_context
    def callback(ctx: click.Context, /, as_json: bool, socket_: str | None, token: str | None,
                 **raw: Any) -> None:
        if getattr(ctx, "invoked_subcommand", None):
            return
        params: dict[str, Any] = {}
        try:
            for p in verb.params:
                text = raw.get(p.name)
                if text is not None:
                    params[p.name] = convert(p, text)
            if verb.trailing_argv and ctx.args:
                if "argv" in params:
                    raise VenomxError("invalid_params.command", "give argv once",
                                      {"param": "argv", "reason": "exclusive"})
                params["argv"] = list(ctx.args)
        except VenomxError as err:
            emit_error(err, as_json)
        call_verb(verb, params, socket_, token or os.environ.get("VENOMX_TOKEN") or None,
                  as_json)
    return callback


def add_params(cmd: click.Command, verb: Verb) -> None:
    for p in verb.params:
        help_text = p.summary + (f" [default: {json.dumps(p.default)}]" if p.has_default else "")
        if p.choices:
            help_text += f" [one of: {', '.join(p.choices)}]"
        if p.has_rules:
            help_text += f" [{rule_text(p)}]"
        if p.kind == "boolean":
            opt = click.Option([option_name(p.name), p.name], is_flag=False,
                               flag_value="true", default=None, help=help_text)
        else:
            opt = click.Option([option_name(p.name), p.name], default=None, help=help_text)
        cmd.params.append(opt)


class VerbGroup(click.Group):
    """A group that is also a verb: ``venomx run --key …`` and ``venomx run wait …``."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        if args and args[0] in self.commands:
            return super().parse_args(ctx, args)
        return click.Command.parse_args(self, ctx, args)


def make_command(verb: Verb, name: str, group: bool = False) -> click.Command:
    settings = {"allow_extra_args": verb.trailing_argv, "allow_interspersed_args": False}
    help_text = verb.summary + (f"\n\n{verb.mcp}" if verb.mcp else "")
    if verb.groups():
        help_text += f"\n\nRules: {group_text(verb)}."
    if verb.trailing_argv:
        help_text += "\n\nargv may also follow --: venomx ... -- prog arg"
    cmd: click.Command
    if group:
        cmd = VerbGroup(name, callback=verb_callback(verb), help=help_text,
                        invoke_without_command=True, context_settings=settings)
    else:
        cmd = click.Command(name, callback=verb_callback(verb), help=help_text,
                            context_settings=settings)
    add_params(cmd, verb)
    cmd.params.extend([
        click.Option(["--json", "as_json"], is_flag=True, help="Print one line of JSON"),
        click.Option(["--socket", "socket_"], default=None, help="Daemon socket path"),
        click.Option(["--token"], default=None,
                     help="Principal token or @owner (default $VENOMX_TOKEN)"),
    ])
    return cmd


def build() -> click.Group:
    from venomx.cli import commands

    root = click.Group("venomx", help="venomx: a headless terminal multiplexer daemon for "
                       "trusted command execution.")
    groups: dict[str, click.Group] = {}
    for verb in VERBS:
        if verb.internal:
            continue
        parts = verb.name.split(".")
        if len(parts) == 1:
            if any(v.name.startswith(verb.name + ".") for v in VERBS):  # run and run.*
                g = make_command(verb, verb.name, group=True)
                assert isinstance(g, click.Group)
                groups[verb.name] = g
                root.add_command(g)
            else:
                root.add_command(make_command(verb, verb.name.replace("_", "-")))
            continue
        family, action = parts[0], parts[1].replace("_", "-")
        if family not in groups:
            groups[family] = click.Group(family, help=f"{family} verbs")
            root.add_command(groups[family])
        groups[family].add_command(make_command(verb, action))
    commands.add_to(root, groups)
    return root


def main() -> None:
    build().main(prog_name="venomx")


__all__ = ["build", "main", "verb_by_name"]
