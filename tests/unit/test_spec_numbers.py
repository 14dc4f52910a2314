"""Every bound and default the spec states, written here as the spec's own numbers.

The other tests build their edge cases from the project's constants, so a constant that
drifted from the spec would move its test with it. These tables are copied from
foundation.md and RFC-0015 by hand: a failure here means the code and the spec disagree.
"""

from __future__ import annotations

import pytest

from venomx.daemon.config import SCHEMA
from venomx.manifest.schema import validate
from venomx.manifest.verbs import CELLS, KEY_PATTERN, NAME_PATTERN, verb_by_name
from venomx.wire import VenomxError

# (verb, param): (min, max, default); None where the spec states none
PARAM_BOUNDS: dict[tuple[str, str], tuple[int | None, int | None, object]] = {
    # foundation §2
    ("hello", "max_frame"): (4096, 16777216, None),
    # foundation §6 spawn params
    ("window.create", "cols"): (1, 65535, 80),
    ("window.create", "rows"): (1, 65535, 24),
    ("pane.split", "cols"): (1, 65535, 80),
    ("pane.split", "rows"): (1, 65535, 24),
    # foundation §7
    ("pane.capture_rows", "limit"): (1, 10000, 1000),
    # foundation §9
    ("pane.kill", "grace_ms"): (0, 3600000, 2000),
    ("pane.kill", "signal"): (None, None, "SIGHUP"),
    # foundation §10
    ("events.read", "limit"): (1, 1024, 256),
    ("events.read", "timeout_ms"): (0, 60000, 0),
    # RFC-0015 §3
    ("run", "cols"): (1, 65535, 80),
    ("run", "rows"): (1, 65535, 24),
    ("run", "deadline_ms"): (1, 86400000, None),
    ("run", "output_rows"): (0, 1000, 100),
    ("run", "output_bytes"): (0, 262144, 65536),
    ("run.wait", "timeout_ms"): (0, 86400000, None),
    ("run.wait", "output"): (None, None, True),
    ("run.get", "output"): (None, None, True),
    ("run.cancel", "grace_ms"): (0, 3600000, 2000),
    ("run.cancel", "signal"): (None, None, "SIGHUP"),
    ("run.list", "limit"): (1, 1024, 256),
}

# foundation §11 and RFC-0015 §12: key -> (min, max, default)
CONFIG_BOUNDS = {
    "run.max_active": (1, 4096, 64),
    "run.retain_count": (0, 65536, 256),
    "run.retain_ms": (0, 604800000, 3600000),
    "run.retain_bytes": (0, 1073741824, 16777216),
    "vt.scrollback": (0, 1000000, 10000),
    "events.retain_count": (1, 1048576, 65536),
    "audit.retain_count": (1, 1048576, 10000),
    "protocol.max_frame": (4096, 16777216, 1048576),
}


@pytest.mark.parametrize(("verb", "param"), sorted(PARAM_BOUNDS))
def test_param_bounds_and_defaults_are_the_specs(verb: str, param: str) -> None:
    lo, hi, default = PARAM_BOUNDS[verb, param]
    v = verb_by_name(verb)
    assert v is not None
    p = v.param(param)
    assert p is not None
    assert (p.min, p.max) == (lo, hi)
    assert (p.default if p.has_default else None) == default


@pytest.mark.parametrize(
    ("verb", "param"), [k for k, b in PARAM_BOUNDS.items() if b[0] is not None]
)
def test_schema_accepts_the_edges_and_refuses_one_past(verb: str, param: str) -> None:
    lo, hi, _ = PARAM_BOUNDS[verb, param]
    v = verb_by_name(verb)
    assert v is not None and lo is not None and hi is not None
    base: dict[str, object] = {
        p.name: p.min if p.kind == "integer" else p.choices[0] if p.choices else "x"
        for p in v.params
        if p.required
    }
    for ok in (lo, hi):
        validate(v, {**base, param: ok})
    for bad in (lo - 1, hi + 1):
        with pytest.raises(VenomxError) as e:
            validate(v, {**base, param: bad})
        assert e.value.code == "invalid_params.range"
        assert e.value.data == {"param": param, "min": lo, "max": hi}


@pytest.mark.parametrize("key", sorted(CONFIG_BOUNDS))
def test_config_bounds_and_defaults_are_the_specs(key: str) -> None:
    lo, hi, default = CONFIG_BOUNDS[key]
    k = SCHEMA[key]
    assert (k.param.min, k.param.max, k.default()) == (lo, hi, default)
    assert k.check(lo) is None and k.check(hi) is None
    assert k.check(lo - 1) is not None and k.check(hi + 1) is not None


def test_text_limits_are_the_specs() -> None:
    # foundation §6: names 1-64 of [A-Za-z0-9._:-], argv <= 262144 bytes in all, env
    # values <= 32768 bytes, cols x rows <= 1048576; RFC-0015 §4 and §8: shell 1-65536
    # bytes, key 1-128 of [A-Za-z0-9._:-]
    assert NAME_PATTERN == r"[A-Za-z0-9._:-]{1,64}"
    assert KEY_PATTERN == r"[A-Za-z0-9._:-]{1,128}"
    assert CELLS.limit == 1048576
    run = verb_by_name("run")
    assert run is not None
    argv, env, shell = (run.param(n) for n in ("argv", "env", "shell"))
    assert argv is not None and argv.max_length == 262144
    assert env is not None and env.max_length == 32768
    assert shell is not None and (shell.min_length, shell.max_length) == (1, 65536)
    for verb in ("window.create", "pane.split"):
        v = verb_by_name(verb)
        assert v is not None
        a, e = v.param("argv"), v.param("env")
        assert a is not None and a.max_length == 262144
        assert e is not None and e.max_length == 32768
