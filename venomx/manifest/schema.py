"""Schema validation of params against the manifest: one implementation for daemon and CLI.

Errors are §3's: ``invalid_params.unknown|missing|type|range|choice``, data naming the
param. Defaults are inserted after validation.
"""

from __future__ import annotations

import re
from typing import Any

from venomx.manifest.verbs import Param, Verb
from venomx.wire import VenomxError

KIND_TYPES: dict[str, tuple[type, ...]] = {
    "string": (str,),
    "integer": (int,),
    "boolean": (bool,),
    "array": (list,),
    "object": (dict,),
}


def type_error(param: str, expected: str) -> VenomxError:
    return VenomxError(
        "invalid_params.type", f"{param} must be {expected}", {"param": param, "expected": expected}
    )


def is_kind(value: Any, kind: str) -> bool:
    if kind == "integer":
        return isinstance(value, int) and not isinstance(value, bool)
    if kind == "any":
        return True
    return isinstance(value, KIND_TYPES[kind])


def problem(p: Param, value: Any, *, pattern: bool = False) -> str | None:
    """The first of ``p``'s schema rules ``value`` breaks: ``type``, ``items``, ``range``
    or ``choice`` (and ``pattern`` when asked: config keys check theirs at once)."""
    if not is_kind(value, p.kind):
        return "type"
    if p.kind == "array" and p.items and not all(is_kind(i, p.items) for i in value):
        return "items"
    if p.kind == "integer" and (
        (p.min is not None and value < p.min) or (p.max is not None and value > p.max)
    ):
        return "range"
    if p.choices is not None and value not in p.choices:
        return "choice"
    if (
        pattern
        and p.pattern is not None
        and isinstance(value, str)
        and not re.fullmatch(p.pattern, value)
    ):
        return "pattern"
    return None


def check_param(p: Param, value: Any) -> None:
    found = problem(p, value)
    if found == "type":
        raise type_error(p.name, p.kind)
    if found == "items":
        raise type_error(p.name, f"array of {p.items}")
    if found == "range":
        raise VenomxError(
            "invalid_params.range",
            f"{p.name} must be between {p.min} and {p.max}",
            {"param": p.name, "min": p.min, "max": p.max},
        )
    if found == "choice":
        assert p.choices is not None
        raise VenomxError(
            "invalid_params.choice",
            f"{p.name} must be one of {', '.join(p.choices)}",
            {"param": p.name, "choices": list(p.choices)},
        )


def validate(verb: Verb, params: Any) -> dict[str, Any]:
    """Return params with defaults inserted, or raise the first schema error."""
    if params is None:
        params = {}
    if not isinstance(params, dict):
        raise type_error("params", "object")
    known = {p.name for p in verb.params}
    for name in params:
        if name not in known:
            raise VenomxError(
                "invalid_params.unknown", f"unknown parameter {name[:64]}", {"param": name[:256]}
            )
    out: dict[str, Any] = {}
    for p in verb.params:
        if p.name in params:
            check_param(p, params[p.name])
            out[p.name] = params[p.name]
        elif p.required:
            raise VenomxError("invalid_params.missing", f"{p.name} is required", {"param": p.name})
        elif p.has_default:
            out[p.name] = p.default
    return out
