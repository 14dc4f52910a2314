"""Click options and commands built from manifest params and verbs.

The click types (an integer range, a choice, a ``--x/--no-x`` flag) give help, metavars
and completion. They do not check values: the CLI checks every value with the manifest's
own schema errors (``venomx.cli.values.convert``), so a bad ``--cols`` reads exactly like the
daemon's answer (foundation §4); click's usage errors are kept for unknown options,
commands and stray words.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import click

from venomx import PROTOCOL, __version__
from venomx.cli.facts import CliParam, CliVerb, negated_name, option_name

if TYPE_CHECKING:
    from venomx.manifest.verbs import Param, Verb

# Past this a maximum says nothing to a person ("x<=4611686018427387904"): show only the min.
SHOWN_MAX = 2**53


class ManifestInt(click.IntRange):
    """An integer with the manifest's range, shown in help; checked by the manifest."""

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        return value


class ManifestChoice(click.Choice):  # type: ignore[type-arg]
    """One of the manifest's choices: shown in help and completed; checked by the manifest."""

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        return value


class ManifestText(click.ParamType):  # type: ignore[type-arg]
    """A string, or JSON text for an array or object, named after what it holds."""

    def __init__(self, metavar: str) -> None:
        self.name = metavar.lower()
        self.shown = metavar

    def get_metavar(self, param: click.Parameter, ctx: click.Context | None = None) -> str | None:
        return self.shown

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        return value


class VerbOption(click.Option):
    """A manifest param: help shows its default and whether it is required, but a missing
    required value is the daemon's ``invalid_params.missing``, not a click usage error; a
    default is never sent (the daemon applies it)."""

    def __init__(self, p: CliParam, negative: str | None = None, **kw: Any) -> None:
        super().__init__([option_name(p.name), p.name], default=None, **kw)
        self.manifest = p
        self.help = None  # written when help is shown: a call never needs it
        self.negative = negative
        if negative is not None:
            self.secondary_opts = [negative]  # listed by completion and help

    def get_help_extra(self, ctx: click.Context) -> Any:
        extra = super().get_help_extra(ctx)
        p = self.manifest.full()
        if p.has_default:
            d = p.default
            extra["default"] = d if isinstance(d, str) else json.dumps(d)
        if p.required:
            extra["required"] = "required"
        return extra

    def get_help_record(self, ctx: click.Context) -> tuple[str, str] | None:
        if self.help is None:
            self.help = param_help(self.manifest.full())
        rv = super().get_help_record(ctx)
        if rv is None or self.negative is None:
            return rv
        return f"{self.opts[0]} / {self.negative}", rv[1]

    def add_to_parser(self, parser: Any, ctx: click.Context) -> None:
        super().add_to_parser(parser, ctx)
        if self.negative is not None:  # --no-x stores "false", as --x=false does
            parser.add_option(
                obj=self, opts=[self.negative], dest=self.name, action="store_const", const="false"
            )


def param_help(p: Param) -> str:
    from venomx.manifest.generate import rule_text

    text = p.summary
    if p.has_rules and (rules := rule_text(p)):
        text += f" ({rules})"
    if p.kind in ("array", "object"):
        text += " (JSON text)"
    return text


def make_option(p: CliParam) -> click.Option:
    """The option of one param: INTEGER with its range, a choice, a ``--x/--no-x`` flag
    that also takes ``--x=false`` and ``--x false``, or text / JSON text."""
    help_text = None  # VerbOption writes it when help is shown
    if p.kind == "boolean":
        return VerbOption(
            p,
            negated_name(p.name),
            is_flag=False,
            flag_value="true",
            type=ManifestText("BOOLEAN"),
            help=help_text,
        )
    if p.kind == "integer":
        hi = p.max if p.max is not None and p.max < SHOWN_MAX else None
        return VerbOption(p, type=ManifestInt(p.min, hi), help=help_text)
    if p.choices:
        return VerbOption(p, type=ManifestChoice(p.choices), help=help_text)
    if p.kind in ("array", "object"):
        return VerbOption(p, type=ManifestText("JSON"), help=help_text)
    return VerbOption(p, type=ManifestText(p.name.upper()), help=help_text)


def suggestion(word: str, names: list[str]) -> str:
    from difflib import get_close_matches

    close = get_close_matches(word, names, n=3)
    if not close:
        return ""
    if len(close) == 1:
        return f" Did you mean {close[0]!r}?"
    return " Did you mean one of: " + ", ".join(repr(c) for c in close) + "?"


def check_trailing(ctx: click.Context, raw: list[str], siblings: list[str]) -> None:
    """Words left after the options are argv only when they follow ``--``: a mistyped
    subcommand (``venomx run wiat``) must never become the program to run."""
    rest = ctx.args
    if not rest:
        return
    used = len(raw) - len(rest)
    if used > 0 and raw[used - 1] == "--":
        return
    word = rest[0]
    if word in siblings:
        raise click.UsageError(
            f"{word!r} is a command: {ctx.command_path} {word} [OPTIONS]. "
            "A program to run goes after --.",
            ctx,
        )
    hint = suggestion(word, siblings)
    if used == 0 and siblings:
        raise click.UsageError(f"No such command {word!r}.{hint}", ctx)
    raise click.UsageError(
        f"Unexpected argument {word!r}.{hint} A command to run goes after --: "
        f"{ctx.command_path} [OPTIONS] -- {word} ...",
        ctx,
    )


class LazyHelp:
    """Help text written (``write_help``) when it is shown: a call never needs it."""

    _help: str | None = None

    def write_help(self) -> str:
        raise NotImplementedError

    @property
    def help(self) -> str | None:
        if self._help is None:
            self._help = self.write_help()
        return self._help

    @help.setter
    def help(self, value: str | None) -> None:
        self._help = value


def verb_help(verb: Verb) -> str:
    """The summary, what the command does beyond it, and the cross-param rules."""
    from venomx.cli.text import VERB_NOTES
    from venomx.manifest.generate import group_text

    help_text = verb.summary
    if verb.name in VERB_NOTES:
        help_text += f"\n\n{VERB_NOTES[verb.name]}"
    if verb.groups():
        help_text += f"\n\nRules: {group_text(verb)}."
    return help_text


def show_help(ctx: click.Context, _param: click.Parameter, value: bool) -> None:
    if value and not ctx.resilient_parsing:
        click.echo(ctx.get_help(), color=ctx.color)
        ctx.exit()


class HelpOption(LazyHelp, click.Option):
    """``-h/--help`` as click's own, except that its text is looked up in the translations
    (click's gettext, which imports ``locale`` and stats catalogue files: ~3 ms) only when
    help is shown, not on every call."""

    def __init__(self, names: list[str]) -> None:
        super().__init__(
            [*names, "_click_default_help"],
            is_flag=True,
            expose_value=False,
            is_eager=True,
            callback=show_help,
        )

    def write_help(self) -> str:
        from gettext import gettext  # the function click translates its texts with

        return gettext("Show this message and exit.")


class LazyHelpOption:
    """A command whose ``--help`` is a ``HelpOption``; click does the rest."""

    add_help_option: bool
    _help_option: click.Option | None

    def get_help_option(self, ctx: click.Context) -> click.Option | None:
        if self._help_option is None and self.add_help_option:
            assert isinstance(self, click.Command)
            names = self.get_help_option_names(ctx)
            if names:
                self._help_option = HelpOption(names)
        option: click.Option | None = super().get_help_option(ctx)  # type: ignore[misc]
        return option


class VerbHelp(LazyHelp):
    """A verb command's help: the verb's summary, notes and rules."""

    verb: CliVerb

    def write_help(self) -> str:
        return verb_help(self.verb.full())


class VerbCommand(VerbHelp, LazyHelpOption, click.Command):
    """A verb's command; with trailing argv, words count as argv only after ``--``."""

    def __init__(self, name: str, verb: CliVerb, **kw: Any) -> None:
        super().__init__(name, **kw)
        self.verb = verb

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        raw = list(args)
        rest = super().parse_args(ctx, args)
        if self.verb.trailing_argv and not ctx.resilient_parsing:
            check_trailing(ctx, raw, [])
        return rest


class LazyGroup(LazyHelpOption, click.Group):
    """A group whose commands are built when first asked for: one CLI call builds the one
    command it runs, not the whole tree (``venomx -h`` and completion build them all)."""

    def __init__(self, name: str | None = None, **kw: Any) -> None:
        super().__init__(name, **kw)
        self.factories: dict[str, Callable[[], click.Command]] = {}
        self.finishers: list[Callable[[click.Command], None]] = []

    def lazy(self, name: str, factory: Callable[[], click.Command]) -> None:
        self.factories[name] = factory

    def names(self) -> list[str]:
        return sorted({*self.commands, *self.factories})

    def list_commands(self, ctx: click.Context) -> list[str]:
        return self.names()

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        factory = self.factories.pop(cmd_name, None)
        if factory is not None:
            cmd = factory()
            for finish in self.finishers:
                finish(cmd)
            self.add_command(cmd, cmd_name)
        return self.commands.get(cmd_name)


class VerbGroup(VerbHelp, LazyGroup):
    """A group that is also a verb: ``venomx run --key …`` and ``venomx run wait …``.

    The verb's own options are made when the group parses a call of its own (or its help,
    or completion), not for a call of a subcommand: ``run wait`` needs none of ``run``'s
    two dozen options."""

    def __init__(self, name: str, verb: CliVerb, **kw: Any) -> None:
        super().__init__(name, **kw)
        self.verb = verb
        self.own_options = False

    def add_own_options(self) -> None:
        if not self.own_options:
            self.own_options = True
            self.params[:0] = [make_option(p) for p in self.verb.params]

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        if args and args[0] in self.names():
            return super().parse_args(ctx, args)
        self.add_own_options()
        if not args and self.no_args_is_help and not ctx.resilient_parsing:
            return super().parse_args(ctx, args)
        raw = list(args)
        rest = click.Command.parse_args(self, ctx, args)
        if not ctx.resilient_parsing:
            check_trailing(ctx, raw, self.names())
        return rest


def show_version(ctx: click.Context, _param: click.Parameter, value: bool) -> None:
    if value and not ctx.resilient_parsing:
        click.echo(f"venomx {__version__} (protocol {PROTOCOL})")
        ctx.exit()


def version_option() -> click.Option:
    return click.Option(
        ["--version"],
        is_flag=True,
        expose_value=False,
        is_eager=True,
        callback=show_version,
        help="Show the version and exit.",
    )


def with_version(cmd: click.Command) -> None:
    """Every command answers --version, the hand-written ones too."""
    if not any(p.name == "version" for p in cmd.params):
        cmd.params.append(version_option())


SOCKET_HELP = (
    "The daemon's socket [default: $VENOMX_SOCKET, else $XDG_RUNTIME_DIR/venomx/default.sock]"
)


def socket_option() -> click.Option:
    """``--socket PATH``: which daemon a client command talks to (every one has it)."""
    return click.Option(["--socket", "socket_"], default=None, metavar="PATH", help=SOCKET_HELP)


def with_socket(f: Any) -> Any:
    """``socket_option`` as a decorator, for the hand-written commands."""
    return click.option("--socket", "socket_", default=None, metavar="PATH", help=SOCKET_HELP)(f)


__all__ = [
    "LazyGroup",
    "ManifestChoice",
    "ManifestInt",
    "VerbCommand",
    "VerbGroup",
    "VerbOption",
    "make_option",
    "option_name",
    "suggestion",
]
