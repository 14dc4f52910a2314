"""The manifest, its handlers, its schema validation and its generated files agree."""

from __future__ import annotations

import subprocess
import sys

import pytest
from hypothesis import given
from hypothesis import strategies as st

import venomx.verbs  # noqa: F401  (registers handlers)
from tests.helpers import ROOT
from venomx.daemon.dispatch import ANSWERED_NOW, HANDLERS
from venomx.manifest.generate import input_schema, output_schema, skill_md, verbs_md
from venomx.manifest.schema import validate
from venomx.manifest.verbs import VERBS, verb_by_name
from venomx.wire import VenomxError

PROTOCOL_VERBS = {"hello", "cancel"}


def test_every_verb_has_a_handler_and_every_handler_a_verb() -> None:
    names = {v.name for v in VERBS} - PROTOCOL_VERBS
    assert names == set(HANDLERS)


def test_the_verbs_answered_as_they_are_read_are_the_documented_ones() -> None:
    # A plain handler runs inside a connection's read and cannot be cancelled: adding one
    # is a decision (docs/decisions.md, "A request that never waits ..."), not a slip.
    assert ANSWERED_NOW == {
        "whoami",
        "principal.create",
        "principal.revoke",
        "config.get",
        "config.set",
        "config.reload",
        "audit.list",
        "shutdown",
        "seam.set",
        "pane.list",
        "run.get",
        "run.list",
        "session.create",
        "session.list",
        "session.get",
        "window.get",
    }


def test_generated_docs_are_fresh() -> None:
    assert (ROOT / "docs" / "verbs.md").read_text() == verbs_md()
    assert (ROOT / "docs" / "skill.md").read_text() == skill_md()
    r = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "gen-docs"), "--check"],
        capture_output=True,
        text=True,
    )
    assert r.returncode == 0, r.stdout


def test_run_summaries_say_what_the_rfc_requires() -> None:
    run = verb_by_name("run")
    assert run is not None
    assert "Start a process" in run.summary and "key" in run.summary
    assert "no shell" in run.summary
    cancel = verb_by_name("run.cancel")
    assert cancel is not None and "Destructive" in cancel.summary
    wait = verb_by_name("run.wait")
    assert wait is not None and "blocks" in wait.mcp and "60000" in wait.mcp
    assert "timeout.wait" in wait.mcp and wait.exit_field == "status"
    required = {f.name for f in wait.result if f.required}
    assert {"state", "outcome", "status", "completed_at", "duration_ms"} <= required


def test_skill_has_the_rules() -> None:
    text = skill_md()
    for phrase in (
        "run --key",
        "run wait",
        "identical request",
        "--shell",
        "run cancel",
        "--deadline-ms",
        "outcome",
        "124",
        "125",
        "capture-rows",
        "pane remove",
        "--source",
        "Prefer `run` over `pane send`",
    ):
        assert phrase in text, phrase


def test_schemas_are_objects() -> None:
    for v in VERBS:
        assert input_schema(v)["type"] == "object"
        assert output_schema(v)["type"] == "object"


@pytest.mark.parametrize(
    ("params", "code", "data"),
    [
        ({"nope": 1}, "invalid_params.unknown", {"param": "nope"}),
        ({}, "invalid_params.missing", {"param": "session"}),
        ({"session": 1}, "invalid_params.type", {"param": "session", "expected": "string"}),
        (
            {"session": "s0", "cols": "80"},
            "invalid_params.type",
            {"param": "cols", "expected": "integer"},
        ),
        (
            {"session": "s0", "cols": True},
            "invalid_params.type",
            {"param": "cols", "expected": "integer"},
        ),
        (
            {"session": "s0", "cols": 0},
            "invalid_params.range",
            {"param": "cols", "min": 1, "max": 65535},
        ),
        (
            {"session": "s0", "cols": 65536},
            "invalid_params.range",
            {"param": "cols", "min": 1, "max": 65535},
        ),
        (
            {"session": "s0", "argv": ["a", 1]},
            "invalid_params.type",
            {"param": "argv", "expected": "array of string"},
        ),
    ],
)
def test_schema_errors(params: dict[str, object], code: str, data: dict[str, object]) -> None:
    v = verb_by_name("window.create")
    assert v is not None
    with pytest.raises(VenomxError) as e:
        validate(v, params)
    assert (e.value.code, e.value.data) == (code, data)


def test_choices_and_defaults() -> None:
    v = verb_by_name("pane.kill")
    assert v is not None
    assert validate(v, {"pane": "p0"}) == {"pane": "p0", "signal": "SIGHUP", "grace_ms": 2000}
    with pytest.raises(VenomxError) as e:
        validate(v, {"pane": "p0", "signal": "SIGFOO"})
    assert e.value.code == "invalid_params.choice" and e.value.data["param"] == "signal"


@given(
    st.dictionaries(
        st.text(max_size=8),
        st.recursive(
            st.none() | st.booleans() | st.integers() | st.text(max_size=8),
            lambda c: st.lists(c, max_size=3) | st.dictionaries(st.text(max_size=4), c, max_size=3),
            max_leaves=6,
        ),
        max_size=5,
    )
)
def test_validate_only_raises_schema_errors(params: dict[str, object]) -> None:
    for name in ("run", "pane.send", "events.read"):
        v = verb_by_name(name)
        assert v is not None
        try:
            validate(v, params)
        except VenomxError as exc:
            # §3's schema errors only, each naming its param; a success is fine too
            assert (
                exc.code
                in {
                    f"invalid_params.{x}" for x in ("unknown", "missing", "type", "range", "choice")
                }
                and "param" in exc.data
            ), exc


def test_every_handler_signature_matches_its_verbs_params() -> None:
    """Dispatch calls ``handler(ctx, **params)`` with defaults inserted: a param the
    manifest requires or defaults (or that a step always sets: delegation's ``grants``)
    must be a parameter without a default, any other a parameter defaulting to None, and
    nothing else. A target dispatch resolves arrives as the object, never its ID."""
    import inspect

    for name, fn in HANDLERS.items():
        v = verb_by_name(name)
        assert v is not None
        sig = list(inspect.signature(fn).parameters.values())
        assert sig[0].name == "ctx", name
        got = {p.name: p.default is inspect.Parameter.empty for p in sig[1:]}
        always = {"grants"} if "delegation" in v.order else set()
        want = {p.name: p.required or p.has_default or p.name in always for p in v.params}
        assert got == want, name
        if v.target is not None and "target" in v.order:
            for t in v.target.params:
                ann = str(inspect.signature(fn).parameters[t].annotation)
                assert "str" not in ann and ann.split(" ")[0] in (
                    "Session",
                    "Window",
                    "Pane",
                    "Run",
                    "Principal",
                ), (name, t, ann)
        for p in sig[1:]:
            assert p.kind is inspect.Parameter.POSITIONAL_OR_KEYWORD, (name, p.name)
            assert p.default in (inspect.Parameter.empty, None), (name, p.name)


def test_input_schemas_show_the_rules_without_top_level_unions() -> None:
    for v in VERBS:
        schema = input_schema(v)
        assert not {"oneOf", "anyOf", "allOf"} & set(schema), v.name
    run = verb_by_name("run")
    assert run is not None
    props = input_schema(run)["properties"]
    assert props["key"]["pattern"] == "^(?:[A-Za-z0-9._:-]{1,128})$"
    assert props["name"]["pattern"] == "^(?:[A-Za-z0-9._:-]{1,64})$"
    assert props["env"]["propertyNames"] == {"pattern": "^(?:[A-Za-z_][A-Za-z0-9_]*)$"}
    assert props["env_unset"]["items"]["pattern"] == "^(?:[A-Za-z_][A-Za-z0-9_]*)$"
    assert "65536 UTF-8 bytes" in props["shell"]["description"]
    from venomx.manifest.generate import tool_description

    assert "exactly one of session or pane (else invalid_params.target)" in tool_description(run)
    assert "exactly one of argv or shell" in tool_description(run)
    send = verb_by_name("pane.send")
    assert send is not None and "exactly one of text, keys or data" in tool_description(send)


def test_every_rule_names_a_param_with_rules() -> None:
    from venomx.manifest.verbs import Group

    for v in VERBS:
        names = {p.name for p in v.params}
        for r in v.rules:
            if isinstance(r, Group):
                assert set(r.params) <= names, (v.name, r)
            else:
                p = v.param(r)
                assert p is not None and p.has_rules, (v.name, r)
        for p in v.params:
            if p.has_rules:
                assert p.name in v.rules, (v.name, p.name)
                assert p.code in v.errors, (v.name, p.code)


def test_the_cli_reads_verb_facts_from_the_entry() -> None:
    from venomx.cli.render import RENDERERS

    trailing = {v.name for v in VERBS if v.trailing_argv}
    assert trailing == {"run", "window.create", "pane.split"}
    for v in VERBS:
        assert v.render in RENDERERS, v.name
        if v.trailing_argv:
            argv = v.param("argv")
            assert argv is not None and argv.kind == "array"
        if v.fail_field is not None:
            assert v.fail_field in {f.name for f in v.result}, v.name
