"""A call's option texts as the values the daemon would be sent, checked with the
manifest's own schema errors (foundation §4: a bad ``--cols`` reads exactly like the
daemon's answer). Imports neither click nor the manifest: the schema is loaded only when
a value is wrong."""

from __future__ import annotations

import re
from typing import Any

from venomx.cli.facts import CliParam, CliVerb
from venomx.wire import VALUE_MAX_DEPTH, VenomxError, loads, parse_int

INT = re.compile(r"-?[0-9]+")


def cli_int(name: str, text: str) -> int:
    """An integer option's text as the daemon would take its value, or the daemon's
    ``invalid_params.type`` for it."""
    if not INT.fullmatch(text.strip()):
        raise type_error(name, "integer")
    return parse_int(text.strip())


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
    """The error the daemon would give first for ``params``, by its own schema check."""
    from venomx.manifest.schema import validate
    from venomx.manifest.verbs import verb_by_name

    verb = verb_by_name(name)
    if verb is not None:
        try:
            validate(verb, params)
        except VenomxError as err:
            return err
    return fallback


def params_of(verb: CliVerb, raw: dict[str, str | None], trailing: list[str]) -> dict[str, Any]:
    """The request's params from the options' texts (absent: None) and the words after
    ``--`` (the argv of a verb that takes one); raises the daemon's error for the first
    value it would refuse."""
    params: dict[str, Any] = {}
    unconverted: VenomxError | None = None
    for p in verb.params:
        text = raw.get(p.name)
        if text is not None:
            try:
                params[p.name] = convert(p, text)
            except VenomxError as err:
                unconverted = unconverted or err
                params[p.name] = text  # what the daemon would have been sent
    if verb.trailing_argv and trailing:
        if "argv" in params:
            raise VenomxError(
                "invalid_params.command",
                "give argv once",
                {"param": "argv", "reason": "exclusive"},
            )
        params["argv"] = list(trailing)
    if unconverted is not None:
        raise first_error(verb.name, params, unconverted)
    return params


__all__ = ["cli_int", "convert", "first_error", "params_of", "type_error"]
