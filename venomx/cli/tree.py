"""The click command tree, generated from the manifest (§4), plus the hand-written
commands: help, completion, usage errors, and every call the quick parser
(``venomx.cli.quick``) leaves to click.

Verb ``a.b`` is ``venomx a b``; ``_`` becomes ``-``. Each command is built when it is
invoked (or listed). Imports nothing from the daemon.
"""

from __future__ import annotations

from typing import Any

import click

from venomx.cli.call import dispatch
from venomx.cli.facts import CliVerb, cli_verb
from venomx.cli.facts_data import VERBS
from venomx.cli.options import (
    LazyGroup,
    VerbCommand,
    VerbGroup,
    make_option,
    socket_option,
    version_option,
    with_version,
)
from venomx.cli.quick import EXTENDED, HAND_WRITTEN
from venomx.cli.text import GROUP_HELP, ROOT_HELP


def verb_callback(verb: CliVerb) -> Any:
    @click.pass_context
    def callback(
        ctx: click.Context, /, as_json: bool, socket_: str | None, token: str | None, **raw: Any
    ) -> None:
        if getattr(ctx, "invoked_subcommand", None):
            return
        dispatch(verb, raw, list(ctx.args), as_json, socket_, token)

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


__all__ = ["build"]
