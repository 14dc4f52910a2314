"""The manifest's value rules, enforced: patterns, lengths, text and groups of params.

Schema validation (``schema.validate``) runs before authorization and checks only types,
ranges and choices. The rules here are the spec's "remaining parameter rules" (RFC-0015
§11 step 6; RFC-0007 §5): a handler calls ``check_rules`` after authorization, source,
shutdown and grants, so a caller without the right gets ``denied.*``, never
``invalid_params.*``. Every error keeps the shape its RFC gives it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from functools import cache
from typing import Any

from venomx.manifest.verbs import CELLS, CWD, Group, Param, Verb
from venomx.wire import VenomxError

# Codes named for their subject (RFC-0007 argv, RFC-0013 env and cwd), whose data
# foundation §6 spells out: argv's names its param, env's and cwd's do not, and env's
# names the variable (so env_unset's errors are env's too).
SUBJECT_CODES = frozenset({"invalid_params.argv", "invalid_params.env", "invalid_params.cwd"})
NAMES_PARAM = frozenset({"invalid_params.argv"})
# foundation §4's invalid_params.name carries only the param
PARAM_ONLY = frozenset({"invalid_params.name"})


def utf8_ok(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def nbytes(text: str) -> int:
    return len(text.encode("utf-8", "surrogatepass"))


@cache
def _compiled(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern)


def matches(pattern: str, text: str) -> bool:
    return _compiled(pattern).fullmatch(text) is not None


def value_error(p: Param, reason: str, name: str | None = None) -> VenomxError:
    """The error of ``p``'s value rule that failed with ``reason``."""
    code = p.code or "invalid_params.type"
    if code in SUBJECT_CODES:
        subject = code.split(".", 1)[1]
        data: dict[str, Any] = {"reason": reason}
        if code in NAMES_PARAM:
            data = {"param": subject, **data}
        if name is not None and "\0" not in name and len(name) <= 256:
            data["name"] = name
        return VenomxError(code, f"{subject} is invalid: {reason}", data)
    if reason == "syntax" and p.hint:
        data = {"param": p.name} if code in PARAM_ONLY else {"param": p.name, "reason": reason}
        return VenomxError(code, f"{p.name} must be {p.hint}", data)
    return VenomxError(code, f"{p.name}: {reason}", {"param": p.name, "reason": reason})


def _fail(p: Param, reason: str, name: str | None = None) -> VenomxError:
    """A value rule's error: the param's one reason when it has one (cwd: relative)."""
    return value_error(p, p.reason or reason, name)


def _text(p: Param, texts: list[str], name_of: list[str | None]) -> None:
    """NUL first, then encoding, over all of ``texts`` (argv's order)."""
    for t, n in zip(texts, name_of, strict=True):
        if "\0" in t:
            raise _fail(p, "nul", n)
    for t, n in zip(texts, name_of, strict=True):
        if not utf8_ok(t):
            raise _fail(p, "encoding", n)


def _length(p: Param, size: int, name: str | None = None) -> None:
    if (p.min_length is not None and size < p.min_length) or (
        p.max_length is not None and size > p.max_length
    ):
        raise _fail(p, "size", name)


def check_string(p: Param, value: str) -> None:
    if p.text:
        _text(p, [value], [None])
    _length(p, nbytes(value))
    if p.pattern is not None and not matches(p.pattern, value):
        raise _fail(p, "syntax")


def check_array(p: Param, value: list[Any]) -> None:
    if p.nonempty and (not value or not value[0]):
        raise _fail(p, "empty")
    if p.pattern is not None:
        for item in value:
            if not matches(p.pattern, item):
                raise _fail(p, "name", item)
    if p.text:
        _text(p, value, [None] * len(value))
    if p.max_length is not None:
        _length(p, sum(map(nbytes, value)))


def check_object(p: Param, value: dict[str, Any]) -> None:
    for name, v in value.items():
        if p.pattern is not None and not matches(p.pattern, name):
            raise _fail(p, "name", name)
        if p.values == "string" and not isinstance(v, str):
            raise _fail(p, "type", name)
        if isinstance(v, str):
            if p.text:
                _text(p, [v], [name])
            _length(p, nbytes(v), name)


def check_value(p: Param, value: Any) -> None:
    """``p``'s value rules on a value that passed schema validation; absent is fine."""
    if value is None:
        return
    if isinstance(value, str):
        check_string(p, value)
    elif isinstance(value, list):
        check_array(p, value)
    elif isinstance(value, dict):
        check_object(p, value)


def check_group(g: Group, params: Mapping[str, Any]) -> None:
    given = [n for n in g.params if params.get(n) is not None]
    if g.kind == "exactly_one":
        if len(given) == 1:
            return
        param, reason = (given[1], "exclusive") if given else (g.params[0], "missing")
        raise VenomxError(g.code, f"give {g.describe()}", {"param": param, "reason": reason})
    first, second = g.params[0] in given, g.params[-1] in given
    if g.kind == "requires" and first and not second:
        raise VenomxError(g.code, g.describe(), {"param": g.params[1], "reason": "missing"})
    if g.kind == "forbids" and first and second:
        raise VenomxError(g.code, g.describe(), {"param": g.params[1], "reason": "misplaced"})
    if g.kind == "max_product" and len(given) == len(g.params):
        product = 1
        for n in g.params:
            product *= params[n]
        if g.limit is not None and product > g.limit:
            raise VenomxError(
                g.code,
                f"{' x '.join(g.params)} must be at most {g.limit}",
                {"param": g.params[0], "cells": product, "max": g.limit},
            )


def check_rules(verb: Verb, params: Mapping[str, Any]) -> None:
    """Run ``verb.rules`` in order on validated params; raise the first error."""
    for rule in verb.rules:
        if isinstance(rule, Group):
            check_group(rule, params)
            continue
        p = verb.param(rule)
        assert p is not None, f"{verb.name}: rule for unknown param {rule}"
        check_value(p, params.get(rule))


def check_size(cols: int, rows: int) -> None:
    """The cell limit of a pane (spawn and pane.resize)."""
    check_group(CELLS, {"cols": cols, "rows": rows})


def check_cwd_form(cwd: str | None) -> None:
    """cwd's syntax: an absolute path (run checks it before the key lookup)."""
    check_value(CWD, cwd)


__all__ = [
    "check_cwd_form",
    "check_group",
    "check_rules",
    "check_size",
    "check_value",
    "utf8_ok",
    "value_error",
]
