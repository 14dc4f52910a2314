"""What the CLI needs of a verb to parse a call and make it, precomputed from the manifest.

Importing ``venomx.manifest.verbs`` costs every CLI call ~4 ms (building the whole table
and its types), while a call needs a few facts of one verb. They are written out in
``venomx.cli.facts_data`` by ``python -m venomx.cli.facts`` (a test fails when it is
stale); help, which needs summaries, defaults and rules, reads the manifest itself
(``CliVerb.full``, ``CliParam.full``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from venomx.cli.facts_data import VERBS

if TYPE_CHECKING:
    from venomx.manifest.verbs import Param, Verb

    # One row per CLI verb (not internal), in manifest order:
    # (trailing_argv, streams, clock, render, exit_field, fail_field, params), each param
    # as (name, kind, min, max, choices).
    Row = tuple[bool, bool, bool, str, str | None, str | None, tuple[tuple[Any, ...], ...]]


class CliParam:
    """A param as the CLI parses it: its name, kind and what help and completion show of
    its type (range, choices); the value itself is checked by the manifest's schema."""

    __slots__ = ("choices", "kind", "max", "min", "name", "verb")

    def __init__(
        self,
        verb: str,
        name: str,
        kind: str,
        min: int | None,
        max: int | None,
        choices: tuple[str, ...] | None,
    ) -> None:
        self.verb = verb
        self.name = name
        self.kind = kind
        self.min = min
        self.max = max
        self.choices = choices

    def full(self) -> Param:
        """The manifest's param (imports the manifest: for help only)."""
        p = cli_full(self.verb).param(self.name)
        assert p is not None, (self.verb, self.name)
        return p


class CliVerb:
    """A verb as the CLI calls it and shows its result."""

    __slots__ = (
        "clock",
        "exit_field",
        "fail_field",
        "name",
        "params",
        "render",
        "streams",
        "trailing_argv",
    )

    def __init__(self, name: str, row: Row) -> None:
        self.name = name
        trailing, self.streams, self.clock, self.render, self.exit_field, self.fail_field, ps = row
        self.trailing_argv = trailing
        self.params = tuple(CliParam(name, *p) for p in ps)

    def full(self) -> Verb:
        """The manifest's verb (imports the manifest: for help only)."""
        return cli_full(self.name)


def option_name(param: str) -> str:
    """A param's long option: ``deadline_ms`` is ``--deadline-ms`` (foundation §4)."""
    return "--" + param.replace("_", "-")


def negated_name(param: str) -> str:
    """A boolean param's negative flag: ``output`` is ``--no-output``."""
    return "--no-" + param.replace("_", "-")


def cli_verb(name: str) -> CliVerb:
    return CliVerb(name, VERBS[name])


def cli_full(name: str) -> Verb:
    from venomx.manifest.verbs import verb_by_name

    verb = verb_by_name(name)
    assert verb is not None, name
    return verb


def row_of(verb: Verb) -> Row:
    params = tuple((p.name, p.kind, p.min, p.max, p.choices) for p in verb.params)
    return (
        verb.trailing_argv,
        verb.streams,
        verb.clock,
        verb.render,
        verb.exit_field,
        verb.fail_field,
        params,
    )


def source() -> str:
    """The text of ``venomx.cli.facts_data`` as the manifest has it now."""
    from venomx.manifest.verbs import ENV_NAME_PATTERN, MAX_ENV_VALUE
    from venomx.manifest.verbs import VERBS as MANIFEST

    lines = [
        '"""Generated from the manifest by ``python -m venomx.cli.facts``: do not edit.',
        "",
        "Each CLI verb's row, as ``venomx.cli.facts.Row`` describes it.",
        '"""',
        "",
        "# ruff: noqa: E501",
        "from typing import Any",
        "",
        "# fmt: off",
        "VERBS: dict[str, Any] = {",
    ]
    lines += [f"    {v.name!r}: {row_of(v)!r}," for v in MANIFEST if not v.internal]
    lines += ["}", "", "# what exec passes of the caller's environment (RFC-0013)"]
    lines += [f"ENV_NAME_PATTERN = {ENV_NAME_PATTERN!r}", f"MAX_ENV_VALUE = {MAX_ENV_VALUE!r}"]
    lines += ["# fmt: on"]
    return "\n".join(lines) + "\n"


def main() -> None:
    from pathlib import Path

    Path(__file__).with_name("facts_data.py").write_text(source())


if __name__ == "__main__":
    main()
