"""The click app, generated from the manifest (§4), plus the hand-written commands.

Verb ``a.b`` is ``venomx a b``; ``_`` becomes ``-``. Values are converted and checked
here with the daemon's own schema errors, so a bad ``--cols`` reads exactly like the
daemon's answer. Exit status: 0, the error class's code, 9 for transport, or (run.wait)
the result's ``status``. Imports nothing from the daemon.
"""

from __future__ import annotations

import io
import os
import sys
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, NoReturn

import click

from venomx.cli.errors import Asked, emit_error, program_of
from venomx.cli.facts import CliParam, CliVerb, cli_verb
from venomx.cli.facts_data import VERBS
from venomx.cli.options import (
    LazyGroup,
    VerbCommand,
    VerbGroup,
    cli_int,
    make_option,
    option_name,
    socket_option,
    version_option,
    with_version,
)
from venomx.cli.text import GROUP_HELP, ROOT_HELP
from venomx.visible import json_line
from venomx.wire import VALUE_MAX_DEPTH, VenomxError, loads

if TYPE_CHECKING:
    from venomx.cli.render import Panes
    from venomx.client import Client


def convert(p: CliParam, text: str) -> Any:
    if p.kind == "integer":
        return cli_int(p.name, text)
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


def type_error(param: str, expected: str) -> VenomxError:
    """The manifest schema's own error (imported only when a value is wrong)."""
    from venomx.manifest.schema import type_error

    return type_error(param, expected)


def first_error(name: str, params: dict[str, Any], fallback: VenomxError) -> VenomxError:
    """The error the daemon would give first for ``params`` (foundation §4: a value the
    CLI cannot convert is reported exactly as the daemon would), by its own schema check;
    loaded only when a value is wrong."""
    from venomx.manifest.schema import validate
    from venomx.manifest.verbs import verb_by_name

    verb = verb_by_name(name)
    if verb is not None:
        try:
            validate(verb, params)
        except VenomxError as err:
            return err
    return fallback


def renderer(verb: CliVerb) -> Callable[[dict[str, Any], Panes], str]:
    from venomx.cli.render import RENDERERS

    return RENDERERS[verb.render]


def pane_lookup(client: Client) -> Panes:
    """Pane records by ID, read once and only when a renderer asks (best effort: a
    renderer without them leaves the names out)."""
    cache: dict[str, dict[str, Any]] = {}
    done = False

    def panes() -> dict[str, dict[str, Any]]:
        nonlocal done
        if not done:
            done = True
            try:
                records = client.call("pane.list", {}).get("panes", [])
            except VenomxError:
                records = []
            cache.update({str(r.get("pane")): r for r in records if isinstance(r, dict)})
        return cache

    return panes


def readable(verb: CliVerb, result: dict[str, Any], panes: Panes | None = None) -> str:
    return renderer(verb)(result, panes or dict)


class Clock:
    """While a waiting verb blocks, the time waited on stderr, erased when it returns."""

    def __init__(self, on: bool, params: dict[str, Any]) -> None:
        self.on = on
        self.what = " ".join(str(v) for k, v in params.items() if k in ("run", "pane"))
        self.done = threading.Event()

    def tick(self) -> None:
        start = time.monotonic()
        while not self.done.wait(1.0):
            waited = int(time.monotonic() - start)
            sys.stderr.write(f"\r\x1b[Kvenomx: waiting for {self.what}: {waited} s")
            sys.stderr.flush()
        sys.stderr.write("\r\x1b[K")
        sys.stderr.flush()

    def __enter__(self) -> None:
        if self.on:
            self.thread = threading.Thread(target=self.tick, daemon=True)
            self.thread.start()

    def __exit__(self, *exc: object) -> None:
        if self.on:
            self.done.set()
            self.thread.join(1.0)


def call_verb(
    verb: CliVerb, params: dict[str, Any], sock: str | None, token: str | None, as_json: bool
) -> NoReturn:
    from venomx.client import Client

    asked = Asked(sock, token, program_of(verb.name, params))
    try:
        with Client(sock, token, pipelined=True) as client:
            if verb.streams:
                for item in client.stream(verb.name, params):
                    # the items, then the result as its own line (foundation §4)
                    last = item["result"] if item.keys() == {"result"} else item
                    click.echo(json_line(last).decode())
                sys.exit(0)
            with Clock(verb.clock and not as_json and sys.stderr.isatty(), params):
                result = client.call(verb.name, params)
            if as_json:
                text = json_line(result).decode()
            else:
                from venomx.visible import for_terminal, visible

                text = for_terminal(
                    visible(readable(verb, result, pane_lookup(client))), sys.stdout
                )
    except VenomxError as err:
        emit_error(err, as_json, asked)
    except KeyboardInterrupt:
        emit_error(VenomxError("cancelled", "interrupted", {}), as_json, asked)
    click.echo(text)
    if verb.exit_field is not None:
        sys.exit(int(result.get(verb.exit_field, 0)))
    if verb.fail_field is not None and result.get(verb.fail_field) == "fail":
        sys.exit(1)
    sys.exit(0)


def verb_callback(verb: CliVerb) -> Any:
    @click.pass_context
    def callback(
        ctx: click.Context, /, as_json: bool, socket_: str | None, token: str | None, **raw: Any
    ) -> None:
        if getattr(ctx, "invoked_subcommand", None):
            return
        params: dict[str, Any] = {}
        unconverted: VenomxError | None = None
        try:
            for p in verb.params:
                text = raw.get(p.name)
                if text is not None:
                    try:
                        params[p.name] = convert(p, text)
                    except VenomxError as err:
                        unconverted = unconverted or err
                        params[p.name] = text  # what the daemon would have been sent
            if verb.trailing_argv and ctx.args:
                if "argv" in params:
                    raise VenomxError(
                        "invalid_params.command",
                        "give argv once",
                        {"param": "argv", "reason": "exclusive"},
                    )
                params["argv"] = list(ctx.args)
            if unconverted is not None:
                raise first_error(verb.name, params, unconverted)
        except VenomxError as err:
            emit_error(err, as_json)
        call_verb(verb, params, socket_, token or os.environ.get("VENOMX_TOKEN") or None, as_json)

    return callback


def common_options() -> list[click.Option]:
    return [
        click.Option(
            ["--json", "as_json"],
            is_flag=True,
            help="Print the result (or the error) as one line of JSON on stdout",
        ),
        socket_option(),
        click.Option(
            ["--token"],
            default=None,
            metavar="TOKEN",
            help="A principal token, or @owner for the daemon's owner "
            "[default: $VENOMX_TOKEN; none: the anonymous caller, read only]",
        ),
    ]


def make_command(verb: CliVerb, name: str, group: bool = False) -> click.Command:
    settings = {"allow_extra_args": verb.trailing_argv, "allow_interspersed_args": False}
    usage = "[OPTIONS] -- PROGRAM [ARGS]..." if verb.trailing_argv else None
    cmd: click.Command
    if group:
        cmd = VerbGroup(
            name,
            verb,
            callback=verb_callback(verb),
            invoke_without_command=True,
            no_args_is_help=True,
            context_settings=settings,
            subcommand_metavar="-- PROGRAM [ARGS]... | COMMAND [ARGS]...",
        )  # it adds the verb's options when it parses a call of its own
    else:
        cmd = VerbCommand(
            name,
            verb,
            callback=verb_callback(verb),
            context_settings=settings,
            options_metavar=usage or "[OPTIONS]",
        )
        cmd.params.extend(make_option(p) for p in verb.params)
    cmd.params.extend(common_options())
    cmd.params.append(version_option())
    return cmd


def group(name: str, verbs: list[str]) -> click.Group:
    g = LazyGroup(name, help=GROUP_HELP.get(name, f"{name} verbs"))
    g.params.append(version_option())
    add_verbs(g, verbs)
    return g


def add_verbs(g: LazyGroup, verbs: list[str]) -> None:
    for verb in verbs:
        action = verb.split(".", 1)[1].replace("_", "-")
        g.lazy(action, lambda v=verb, a=action: make_command(cli_verb(v), a))  # type: ignore[misc]


def build() -> click.Group:
    """The root group; each command is built when it is invoked (or listed)."""
    root = LazyGroup(
        "venomx", help=ROOT_HELP, context_settings={"help_option_names": ["-h", "--help"]}
    )
    root.params.append(version_option())
    root.finishers.append(finish)
    families: dict[str, list[str]] = {}
    singles: list[str] = []
    for verb in VERBS:  # the CLI's verbs, in manifest order
        if "." in verb:
            families.setdefault(verb.split(".", 1)[0], []).append(verb)
        else:
            singles.append(verb)
    for verb in singles:
        if verb in families:  # run and run.*

            def verb_group(v: str = verb) -> click.Command:
                g = make_command(cli_verb(v), v, group=True)
                assert isinstance(g, LazyGroup)
                add_verbs(g, families.pop(v))
                return g

            root.lazy(verb, verb_group)
        else:
            name = verb.replace("_", "-")
            root.lazy(name, lambda v=verb, n=name: make_command(cli_verb(v), n))  # type: ignore[misc]
    for family in families:
        if family not in root.factories:
            root.lazy(family, lambda f=family: group(f, families[f]))  # type: ignore[misc]
    for name in HAND_WRITTEN:
        root.lazy(name, lambda n=name: hand_written(n, root))  # type: ignore[misc]
    return root


HAND_WRITTEN = ("serve", "attach", "skill", "mcp", "exec", "completion")
EXTENDED = ("run", "events")  # groups the hand-written side adds to


def hand_written(name: str, root: click.Group) -> click.Command:
    from venomx.cli import commands

    return commands.command(name, root)


def finish(cmd: click.Command) -> None:
    with_version(cmd)
    if cmd.name == "run" and isinstance(cmd, LazyGroup):
        cmd.lazy("log", run_log)
        cmd.finishers.append(with_version)
    elif cmd.name in EXTENDED:
        from venomx.cli import commands

        commands.extend(cmd)


def run_log() -> click.Command:
    from venomx.cli.exec_command import run_log

    return run_log


def main() -> None:
    utf8_streams()
    build().main(prog_name="venomx")


def utf8_streams() -> None:
    """Write UTF-8 to files and pipes whatever the locale (a log keeps every character;
    a Latin-1 locale made an astral character in a row a traceback), and never fail on
    a terminal whose charset lacks one (what goes there is made ASCII where it matters)."""
    for stream in (sys.stdout, sys.stderr):
        if not isinstance(stream, io.TextIOWrapper) or stream.encoding.lower() in UTF8_NAMES:
            continue
        try:
            if stream.isatty():
                stream.reconfigure(errors="replace")
            else:
                stream.reconfigure(encoding="utf-8", errors=stream.errors)
        except (OSError, ValueError):
            pass


UTF8_NAMES = ("utf-8", "utf8")


__all__ = ["build", "main", "option_name"]
