"""The quick parser (venomx.cli.quick) takes a command line only as click would: for
every line it accepts, click's own parse of it reaches the same call with the same
values. Lines it leaves to click are click's (help, usage errors, hand-written
commands); the hot commands' usual lines are taken, so they never load click."""

from __future__ import annotations

import shlex
from typing import Any

import click
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from venomx.cli import exec as exec_module
from venomx.cli import quick, tree
from venomx.cli.facts_data import VERBS

Parsed = tuple[Any, ...]


class Reached(Exception):
    def __init__(self, parsed: Parsed) -> None:
        self.parsed = parsed


def by_click(argv: list[str]) -> Parsed | None:
    """What the click tree's callback is given for ``argv`` (None: it never got there)."""

    def reached(verb: Any, raw: dict[str, Any], trailing: list[str], *rest: Any) -> None:
        given_raw = {k: v for k, v in raw.items() if v is not None}
        raise Reached((verb.name, given_raw, trailing, *rest))

    def exec_reached(**given: Any) -> None:
        raise Reached(("exec", given))

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(tree, "dispatch", reached)
        mp.setattr(exec_module, "exec_main", exec_reached)
        mp.delenv("_VENOMX_COMPLETE", raising=False)
        try:
            tree.build().main(argv, prog_name="venomx", standalone_mode=False)
        except Reached as r:
            return r.parsed
        except (click.ClickException, click.exceptions.Exit, click.Abort, SystemExit):
            return None
    return None


def by_quick(argv: list[str]) -> Parsed | None:
    q = quick.parse(argv)
    if q is None:
        return None
    if isinstance(q, quick.QuickExec):
        return ("exec", q.given)
    return (q.verb.name, q.raw, q.trailing, q.as_json, q.socket, q.token)


USUAL = [
    "whoami --json",
    "doctor",
    "run wait --run r0 --json",
    "run wait --run r0 --timeout-ms 60000 --output=false",
    "run wait --run r0 --no-output --socket /tmp/s.sock --token @owner",
    "run get --run r0 --output false --json",
    "run list --key build-1 --limit 2",
    "run cancel --run r0 --signal SIGTERM --grace-ms 0",
    "run --key k --session s0 --json -- make lint -k",
    "run --key k --session s0 --shell 'exit 3' --deadline-ms 100",
    "run --key k --pane p0 --axis cols --argv '[\"true\"]'",
    "pane capture-rows --pane p0 --start 0 --end 10",
    "session create --name ci --json",
    "window create --session s0 -- sh",
    "pane send --pane p0 --text hi",
    "exec -- make test",
    "exec make test --json",
    "exec --session ci --env A=1 --env B=2 --clean-env --deadline-ms 5 -- sh -c 'exit 3'",
    "exec --stdin --json --key k1 --cols 80 --rows 24 --cwd /tmp -- cat",
    "exec --keep-escapees --detach-on-interrupt --socket=/tmp/s --token=@owner - x",
]


@pytest.mark.parametrize("line", USUAL)
def test_the_usual_calls_are_taken_as_click_takes_them(line: str) -> None:
    argv = shlex.split(line)
    assert by_quick(argv) is not None
    assert by_quick(argv) == by_click(argv)


LEFT = [
    "",
    "--version",
    "run",
    "run --help",
    "run wait -h",
    "run log --run r0",
    "events read",
    "events --follow",
    "attach --pane p0",
    "exec",
    "exec --",
    "exec --json",
    "exec --help -- true",
    "exec -x true",
    "exec --stdin=1 true",
    "exec --key a --key b true",
    "pane",
    "pane capture_rows --pane p0",
    "run wait --run r0 --run r1",
    "run wait --run",
    "run wait r0",
    "whoami --json=true",
    "run get --run r0 --output=-x",
    "run wait --run r0 --nosuch 1",
    "run wait --run r0 -- x",
    "pane attach --pane p0",
]


@pytest.mark.parametrize("line", LEFT)
def test_everything_else_is_left_to_click(line: str) -> None:
    assert by_quick(shlex.split(line)) is None


def cli_paths() -> list[list[str]]:
    paths = []
    for name in VERBS:
        family, _, action = name.partition(".")
        paths.append([family, action.replace("_", "-")] if action else [family])
    return [*paths, ["run", "log"], ["events"], ["attach"], ["pane"], ["exec"], ["exec"]]


def options_of(path: list[str]) -> list[tuple[str, str]]:
    if path == ["exec"]:
        flags = [(opt, "flag") for opt in quick.EXEC_FLAGS]
        return [*((opt, "string") for opt in quick.EXEC_VALUES), ("--env", "string"), *flags]
    row = VERBS.get(".".join(path).replace("-", "_"))
    own = [("--" + p[0].replace("_", "-"), p[1]) for p in (row[6] if row else ())]
    return [*own, ("--socket", "string"), ("--token", "string")]


NOISE = ["--json=1", "--", "-", "-h", "--help", "--version", "--x", "wait", "--no-x"]
VALUES = ["", "-", "-5", "5", "true", "false", "--json", "-x", "a=b", "r0", "--"]


@st.composite
def command_lines(draw: st.DrawFn) -> list[str]:
    """Mostly options with values, as a caller writes them, now and then a stray word."""
    path = draw(st.sampled_from(cli_paths()))
    options = options_of(path)
    value = st.one_of(st.sampled_from(VALUES), st.text(max_size=4))
    line = list(path)
    for opt, kind in draw(st.lists(st.sampled_from(options), max_size=6, unique=True)):
        form = draw(st.sampled_from(["pair", "pair", "equals", "alone", "negated", "noise"]))
        if form == "pair":
            line += [opt, draw(value)]
        elif form == "equals":
            line.append(f"{opt}={draw(value)}")
        elif form == "alone":
            line.append(opt if kind in ("boolean", "flag") else "--json")
        elif form == "negated":
            line.append("--no-" + opt[2:])
        else:
            line.append(draw(st.one_of(st.sampled_from(NOISE), value)))
    if draw(st.booleans()):  # a program's argv (or, for most verbs, a usage error)
        line += ["--", *draw(st.lists(value, max_size=3))]
    return line


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(command_lines())
@example(["run", "get", "--run", "r0", "--output", "-x"])
@example(["run", "--key", "--json", "--session", "s0"])
@example(["run", "wait", "--run", "r0", "--output", ""])
def test_a_line_the_quick_parser_takes_click_takes_the_same_way(argv: list[str]) -> None:
    mine = by_quick(argv)
    if mine is not None:
        assert mine == by_click(argv)
