"""The CLI's precomputed verb facts (``venomx.cli.facts_data``) are the manifest's."""

from __future__ import annotations

from pathlib import Path

from venomx.cli import facts, facts_data
from venomx.manifest.verbs import VERBS


def test_the_written_facts_are_the_manifests() -> None:
    text = Path(facts_data.__file__).read_text()
    assert text == facts.source(), "stale: run python -m venomx.cli.facts"


def test_every_cli_verb_and_param_is_there_with_its_type() -> None:
    cli = [v for v in VERBS if not v.internal]
    assert list(facts_data.VERBS) == [v.name for v in cli]
    assert "hello" not in facts_data.VERBS and "cancel" not in facts_data.VERBS
    for verb in cli:
        got = facts.cli_verb(verb.name)
        assert got.full() is verb
        assert (got.trailing_argv, got.streams, got.clock, got.render) == (
            verb.trailing_argv,
            verb.streams,
            verb.clock,
            verb.render,
        )
        assert (got.exit_field, got.fail_field) == (verb.exit_field, verb.fail_field)
        assert [p.name for p in got.params] == [p.name for p in verb.params]
        for p in got.params:
            full = p.full()
            assert (p.kind, p.min, p.max, p.choices) == (
                full.kind,
                full.min,
                full.max,
                full.choices,
            )
