"""A well-formed call of a generated verb, or of ``venomx exec``, parsed without click.

Building click's command objects and importing click cost a CLI call more than the
interpreter's own start (issue 19 §1). A call such as ``venomx run wait --run r0 --json``
needs none of it: this parser takes exactly the command lines it understands (a
generated verb, its long options as click would read them, ``--`` before a program's
argv) and leaves everything else to click (``None``): help, ``--version``, completion,
short options, repeated or unknown options, stray words, the other hand-written
commands.
What it takes, click would have taken the same way; a test compares the two.
"""

from __future__ import annotations

import errno
import os
import sys
from typing import Any, NoReturn

from venomx.cli.call import dispatch
from venomx.cli.facts import CliVerb, cli_verb, negated_name, option_name
from venomx.cli.facts_data import VERBS

HAND_WRITTEN = ("serve", "attach", "skill", "mcp", "exec", "completion")
EXTENDED = ("run", "events")  # groups the hand-written side adds to
LEFT_TO_CLICK = ("events", "log")  # words that name a hand-written part of a group


class Quick:
    """A parsed call: what ``venomx.cli.tree``'s callback would have been given."""

    __slots__ = ("as_json", "raw", "socket", "token", "trailing", "verb")

    def __init__(self, verb: CliVerb) -> None:
        self.verb = verb
        self.raw: dict[str, str | None] = {}
        self.trailing: list[str] = []
        self.as_json = False
        self.socket: str | None = None
        self.token: str | None = None


def command_of(argv: list[str]) -> tuple[str, list[str]] | None:
    """The generated verb a command line names, and the words after its name."""
    if not argv or argv[0] in HAND_WRITTEN or argv[0] in LEFT_TO_CLICK:
        return None
    first = argv[0].replace("-", "_")
    if len(argv) > 1 and f"{first}.{argv[1].replace('-', '_')}" in VERBS:
        if argv[1] != argv[1].replace("_", "-"):
            return None  # click knows actions only by their dashed names
        return f"{first}.{argv[1].replace('-', '_')}", argv[2:]
    if first in VERBS and argv[0] == first.replace("_", "-"):
        if first in EXTENDED and (len(argv) == 1 or argv[1] in LEFT_TO_CLICK):
            return None  # a group's help, or its hand-written command
        return first, argv[1:]
    return None


def parse(argv: list[str]) -> Quick | QuickExec | None:
    """The call ``argv`` makes, or None to leave it to click."""
    if "_VENOMX_COMPLETE" in os.environ:  # shell completion: click's
        return None
    if argv[:1] == ["exec"]:
        return parse_exec(argv[1:])
    named = command_of(argv)
    if named is None:
        return None
    name, words = named
    verb = cli_verb(name)
    if verb.streams:
        return None
    call = Quick(verb)
    options = {option_name(p.name): p for p in verb.params}
    negated = {negated_name(p.name): p for p in verb.params if p.kind == "boolean"}
    seen: set[str] = set()
    i = 0
    while i < len(words):
        word = words[i]
        i += 1
        if word == "--":
            if not verb.trailing_argv:
                return None
            call.trailing = words[i:]
            return call
        if not word.startswith("--") or len(word) == 2:
            return None  # a short option, a stray word: click's usage errors
        opt, eq, explicit = word.partition("=")
        value: str | None
        if opt == "--json":
            if eq:
                return None
            call.as_json = True
            continue
        if opt in negated:
            if eq:
                return None
            dest, value = negated[opt].name, "false"
        elif opt in options and options[opt].kind == "boolean":
            dest, value = options[opt].name, explicit if eq else None
            if value is None and i < len(words) and not looks_like_option(words[i]):
                value = words[i]
                i += 1
            if value is not None and looks_like_option(value):
                return None  # click would take "true" and then parse the word as an option
            value = "true" if value is None else value
        elif opt in options or opt in ("--socket", "--token"):
            dest = options[opt].name if opt in options else opt
            value, i = option_value(words, i, explicit if eq else None)
            if value is None:
                return None  # click's "requires an argument"
        else:
            return None  # unknown, --help, --version
        if dest in seen:
            return None
        seen.add(dest)
        if dest == "--socket":
            call.socket = value
        elif dest == "--token":
            call.token = value
        else:
            call.raw[dest] = value
    return call


# ``venomx exec``'s options (venomx.cli.exec_command), by the name its function takes them
EXEC_VALUES = {
    "--session": "session",
    "--key": "key",
    "--cwd": "cwd",
    "--deadline-ms": "deadline_ms",
    "--cols": "cols",
    "--rows": "rows",
    "--socket": "socket_",
    "--token": "token",
}
EXEC_FLAGS = {
    "--clean-env": "clean_env",
    "--stdin": "send_stdin",
    "--detach-on-interrupt": "detach_on_interrupt",
    "--keep-escapees": "keep_escapees",
    "--json": "as_json",
}


class QuickExec:
    """A parsed ``venomx exec``: the keyword arguments of ``venomx.cli.exec.exec_main``."""

    __slots__ = ("given",)

    def __init__(self) -> None:
        self.given: dict[str, Any] = {name: None for name in EXEC_VALUES.values()}
        self.given.update({name: False for name in EXEC_FLAGS.values()})
        self.given["env"] = ()


def parse_exec(words: list[str]) -> QuickExec | None:
    """``venomx exec``'s options up to the command (after ``--``, or from its first word,
    as click reads it), or None to leave the line to click."""
    call = QuickExec()
    seen: set[str] = set()
    env: list[str] = []
    i = 0
    while i < len(words):
        word = words[i]
        i += 1
        if word == "--" or not looks_like_option(word):
            command = words[i:] if word == "--" else words[i - 1 :]
            if not command:
                return None  # click's "missing argument"
            call.given["command"] = tuple(command)
            call.given["env"] = tuple(env)
            return call
        opt, eq, explicit = word.partition("=")
        if opt in EXEC_FLAGS and not eq and opt not in seen:
            call.given[EXEC_FLAGS[opt]] = True
        elif opt in EXEC_VALUES or opt == "--env":
            value, i = option_value(words, i, explicit if eq else None)
            if value is None:
                return None
            if opt == "--env":
                env.append(value)
                continue
            if opt in seen:
                return None
            call.given[EXEC_VALUES[opt]] = value
        else:
            return None  # a short option, --help, an unknown one, a flag given a value
        seen.add(opt)
    return None  # no command


def option_value(words: list[str], i: int, explicit: str | None) -> tuple[str | None, int]:
    """An option's value, as click takes it: after ``=``, else the next word whatever it
    looks like; and where the words go on (None: there is no value)."""
    if explicit is not None:
        return explicit, i
    if i < len(words):
        return words[i], i + 1
    return None, i


def looks_like_option(word: str) -> bool:
    return word[:1] == "-" and len(word) > 1


def run(call: Quick | QuickExec) -> NoReturn:
    """Make the call, ending as click's standalone mode would on Ctrl-C or a closed pipe."""
    try:
        if isinstance(call, QuickExec):
            from venomx.cli.exec import exec_main

            exec_main(**call.given)
        dispatch(call.verb, call.raw, call.trailing, call.as_json, call.socket, call.token)
    except (EOFError, KeyboardInterrupt):
        sys.stderr.write("\nAborted!\n")
        sys.exit(1)
    except OSError as err:
        if err.errno != errno.EPIPE:
            raise
        # Python's own recipe: nothing more reaches the closed pipe, not even the flush
        # at exit, so no "Exception ignored" follows
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        sys.exit(1)


__all__ = ["Quick", "QuickExec", "parse", "run"]
