"""The manifest's value rules at their edges, with the errors their RFCs give them."""

from __future__ import annotations

from typing import Any

import pytest

from venomx.manifest.rules import check_rules
from venomx.manifest.verbs import (
    MAX_ARGV,
    MAX_CELLS,
    MAX_ENV_VALUE,
    MAX_SHELL,
    Verb,
    verb_by_name,
)
from venomx.wire import VenomxError


def verb(name: str) -> Verb:
    v = verb_by_name(name)
    assert v is not None
    return v


RUN_OK: dict[str, Any] = {"key": "k", "session": "s0", "argv": ["true"], "cols": 80, "rows": 24}


def error(name: str, params: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    with pytest.raises(VenomxError) as e:
        check_rules(verb(name), params)
    return e.value.code, e.value.data


@pytest.mark.parametrize(
    ("change", "code", "data"),
    [
        ({"axis": "cols"}, "invalid_params.target", {"param": "axis", "reason": "misplaced"}),
        (
            {"session": None, "pane": "p0"},
            "invalid_params.target",
            {"param": "axis", "reason": "missing"},
        ),
        (
            {"session": None, "pane": "p0", "axis": "rows", "name": "n"},
            "invalid_params.target",
            {"param": "name", "reason": "misplaced"},
        ),
        ({"argv": None}, "invalid_params.command", {"param": "argv", "reason": "missing"}),
        ({"shell": "true"}, "invalid_params.command", {"param": "shell", "reason": "exclusive"}),
        (
            {"argv": None, "shell": ""},
            "invalid_params.command",
            {"param": "shell", "reason": "size"},
        ),
        (
            {"argv": None, "shell": "x" * (MAX_SHELL + 1)},
            "invalid_params.command",
            {"param": "shell", "reason": "size"},
        ),
        (
            {"argv": None, "shell": "a\0"},
            "invalid_params.command",
            {"param": "shell", "reason": "nul"},
        ),
        (
            {"argv": None, "shell": "\ud800"},
            "invalid_params.command",
            {"param": "shell", "reason": "encoding"},
        ),
        ({"key": "k" * 129}, "invalid_params.key", {"param": "key", "reason": "syntax"}),
        ({"key": "a b"}, "invalid_params.key", {"param": "key", "reason": "syntax"}),
        ({"argv": []}, "invalid_params.argv", {"param": "argv", "reason": "empty"}),
        ({"argv": ["", "x"]}, "invalid_params.argv", {"param": "argv", "reason": "empty"}),
        (
            {"argv": ["a", "\ud800", "b\0"]},
            "invalid_params.argv",
            {"param": "argv", "reason": "nul"},
        ),
        ({"argv": ["a", "\ud800"]}, "invalid_params.argv", {"param": "argv", "reason": "encoding"}),
        (
            {"argv": ["x" * (MAX_ARGV // 2), "y" * (MAX_ARGV // 2 - 1), "€"]},
            "invalid_params.argv",
            {"param": "argv", "reason": "size"},
        ),
        ({"name": "n" * 65}, "invalid_params.name", {"param": "name"}),
        (
            {"cols": 1025, "rows": 1024},
            "invalid_params.size",
            {"param": "cols", "cells": 1025 * 1024, "max": MAX_CELLS},
        ),
        (
            {"env": {"1A": "x"}},
            "invalid_params.env",
            {"reason": "name", "name": "1A"},
        ),
        ({"env": {"A": 1}}, "invalid_params.env", {"reason": "type", "name": "A"}),
        ({"env": {"A\0": "x"}}, "invalid_params.env", {"reason": "name"}),
        (
            {"env": {"A": "x" * (MAX_ENV_VALUE + 1)}},
            "invalid_params.env",
            {"reason": "size", "name": "A"},
        ),
        (
            {"env_unset": ["B-"]},
            "invalid_params.env",
            {"reason": "name", "name": "B-"},
        ),
        ({"cwd": "rel"}, "invalid_params.cwd", {"reason": "relative"}),
    ],
)
def test_run_rules(change: dict[str, Any], code: str, data: dict[str, Any]) -> None:
    assert error("run", {**RUN_OK, **change}) == (code, data)


@pytest.mark.parametrize(
    "change",
    [
        {"key": "k" * 128, "name": "n" * 64},
        {"argv": None, "shell": "x" * MAX_SHELL},
        {"argv": ["x" * (MAX_ARGV // 2 - 1), "y" * (MAX_ARGV // 2 - 2), "€"]},
        {"cols": 1024, "rows": 1024},
        {"env": {"_A1": "x" * MAX_ENV_VALUE}, "env_unset": ["B"], "cwd": "/"},
        {"cwd": "/a\0"},  # absolute: whether it names a directory is the daemon's check
        {"cwd": "/\udc80"},
        {"session": None, "pane": "p0", "axis": "cols"},
    ],
)
def test_run_rules_accept_their_edges(change: dict[str, Any]) -> None:
    check_rules(verb("run"), {**RUN_OK, **change})


def test_the_first_rule_in_the_spec_order_wins() -> None:
    # misplaced target before command, command before key, key before argv (RFC-0015 §11)
    bad = {**RUN_OK, "axis": "cols", "shell": "x", "key": " ", "argv": []}
    assert error("run", bad)[1]["param"] == "axis"
    assert error("run", {**bad, "axis": None})[1]["param"] == "shell"
    assert error("run", {**bad, "axis": None, "shell": None})[0] == "invalid_params.key"


@pytest.mark.parametrize(
    ("params", "data"),
    [
        ({}, {"param": "text", "reason": "missing"}),
        ({"keys": ["a"], "data": ""}, {"param": "data", "reason": "exclusive"}),
        ({"text": "", "keys": [], "data": ""}, {"param": "keys", "reason": "exclusive"}),
    ],
)
def test_send_takes_exactly_one_input(params: dict[str, Any], data: dict[str, Any]) -> None:
    assert error("pane.send", params) == ("invalid_params.input", data)


def test_names_of_sessions_and_principals() -> None:
    for name in ("session.create", "principal.create"):
        check_rules(verb(name), {"name": "a.b:c-d_" + "x" * 55})
        check_rules(verb(name), {"name": None})
        assert error(name, {"name": ""}) == ("invalid_params.name", {"param": "name"})


def test_config_keys_are_params_checked_at_their_edges() -> None:
    from venomx.daemon.auth import GRANTS_MAX
    from venomx.daemon.config import PATH_MAX, SCHEMA

    for name, key in SCHEMA.items():
        p = key.param
        assert p.name == name
        if p.kind != "integer":
            continue
        assert p.min is not None and p.max is not None
        assert key.check(p.max) is None and key.check(p.min) is None, name
        assert key.check(p.max + 1) == f"must be {p.hint or f'between {p.min} and {p.max}'}"
        assert key.check(str(p.min)) == "must be an integer"
        assert key.check(True) == "must be an integer"
    shell = SCHEMA["spawn.default_shell"]
    assert shell.check("/bin/sh") is None
    for bad in ("sh", "/a\0", 1):
        assert shell.check(bad) == "must be an absolute path"
    # a lone surrogate broke every start with no argv (msgpack cannot encode it)
    assert shell.check("/bin/\ud800") == "must be valid UTF-8"
    assert shell.check("/" + "a" * (PATH_MAX - 2)) is None  # with the NUL, PATH_MAX
    assert shell.check("/" + "a" * (PATH_MAX - 1)) == f"must be shorter than {PATH_MAX} bytes"
    grants = SCHEMA["auth.default_grants"]
    read_all = [{"right": "read", "scope": "*"}]
    assert grants.check(read_all * GRANTS_MAX) is None
    assert grants.check(read_all * (GRANTS_MAX + 1)) == (f"must hold at most {GRANTS_MAX} grants")
    log = SCHEMA["log.max_bytes"]
    assert (
        log.check(4095)
        == log.check(-1)
        == f"must be 0 (never rotate) or between 4096 and {1 << 40}"
    )
    assert log.check(4096) is None
