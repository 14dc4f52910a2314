"""The generated CLI's help, for every command: typed, marked, written for a person; and
the human renderers' units at their edges."""

from __future__ import annotations

import re
from collections.abc import Iterator

import click
import pytest
from click.testing import CliRunner

from venomx.cli.render import human_bytes, human_duration, render_doctor
from venomx.cli.tree import build
from venomx.manifest.verbs import VERBS


def commands(
    group: click.Group, path: tuple[str, ...] = ()
) -> Iterator[tuple[tuple[str, ...], click.Command]]:
    ctx = click.Context(group)
    for name in group.list_commands(ctx):
        cmd = group.get_command(ctx, name)
        assert cmd is not None, name
        yield (*path, name), cmd
        if isinstance(cmd, click.Group):
            yield from commands(cmd, (*path, name))


def help_of(*args: str) -> str:
    r = CliRunner().invoke(build(), [*args, "-h"], prog_name="venomx")
    assert r.exit_code == 0, (args, r.output)
    return r.output


def option_line(text: str, opt: str) -> str:
    """An option's help entry, its wrapped lines joined."""
    lines = text.splitlines()
    i = next(i for i, ln in enumerate(lines) if ln.strip().startswith(opt + " "))
    out = [lines[i]]
    for ln in lines[i + 1 :]:
        if ln.strip().startswith("-") or not ln.startswith(" " * 8):
            break
        out.append(ln.strip())
    return " ".join(out)


def test_every_command_has_help_for_a_person() -> None:
    root = build()
    seen = 0
    for path, _cmd in commands(root):
        text = help_of(*path)
        seen += 1
        assert "tool call" not in text and "this tool" not in text, path
        assert not re.search(r"^  \w+ verbs$", text, re.M), (path, text[:200])
        assert "--version" in text and "-h, --help" in text, path
    assert seen > 30


def test_manifest_params_become_typed_marked_options() -> None:
    for verb in VERBS:
        if verb.internal:
            continue
        text = help_of(*verb.name.replace("_", "-").split("."))
        for p in verb.params:
            opt = "--" + p.name.replace("_", "-")
            line = option_line(text, opt)
            assert ("[required]" in line or "; required]" in line) == p.required, line
            if p.kind == "integer":
                assert "INTEGER RANGE" in line, line
                assert f"{p.min}<=x" in line or f"x>={p.min}" in line, line
            elif p.kind == "boolean":
                assert line.split()[:3] == [opt, "/", "--no-" + opt[2:]], line
            elif p.choices:
                assert "[" + "|".join(p.choices) + "]" in line, line
            else:
                assert " TEXT" not in line.split("  ")[0], line


def test_the_run_group_tells_how_to_give_the_program() -> None:
    text = help_of("run")
    assert text.startswith("Usage: venomx run [OPTIONS] -- PROGRAM [ARGS]... | COMMAND")
    assert "wait" in text and "cancel" in text
    assert "tool" not in help_of("run", "wait")


@pytest.mark.parametrize(
    ("ms", "shown"),
    [
        (0, "0ms"),
        (999, "999ms"),
        (1000, "1.0s"),
        (59_999, "60.0s"),
        (60_000, "1m 0s"),
        (3_599_999, "59m 59s"),
        (3_600_000, "1h 0m"),
        (86_399_999, "23h 59m"),
        (86_400_000, "1d 0h"),
        (431_841_000, "4d 23h"),
        (5 * 86_400_000 + 1, "5d 0h"),
    ],
)
def test_durations(ms: int, shown: str) -> None:
    assert human_duration(ms) == shown


def test_sizes() -> None:
    assert [human_bytes(n) for n in (0, 1023, 1024, 1366, 2**20, 2**40)] == [
        "0 B",
        "1023 B",
        "1.0 KiB",
        "1.3 KiB",
        "1.0 MiB",
        "1024.0 GiB",
    ]


def test_doctor_names_pids_when_the_report_carries_them() -> None:
    """Fields the daemon may add (escapee and orphaned-sentinel pids, a lost sentinel's
    pid) are shown when present; without them the report still names panes and runs."""
    report = {
        "status": "warn",
        "pid": 7,
        "uptime_ms": 431841,
        "version": "0.1.0",
        "checks": [
            {"name": "sentinels", "status": "warn", "detail": "d"},
            {"name": "escapees", "status": "warn", "detail": "d"},
        ],
        "sentinels": {
            "missing": 1,
            "missing_panes": ["p0"],
            "stopped": [],
            "unresponsive": [],
            "orphaned": 1,
            "orphaned_pids": [41],
            "lost": {
                "count": 1,
                "recent": [
                    {"pane": "p2", "run": "r1", "reason": "channel closed", "at": "T", "pid": 40}
                ],
            },
        },
        "escapees": {
            "count": 3,
            "panes": {"p0": 2, "unknown": 1},
            "pids": {"p0": [11, 12]},
            "reaped": 0,
        },
    }
    panes = {"p0": {"pane": "p0", "run": "r0"}}
    text = render_doctor(report, lambda: panes)
    assert text.splitlines()[0] == "venomx doctor: warn (daemon pid 7, up 7m 11s, version 0.1.0)"
    notes = [ln.strip() for ln in text.splitlines()]
    assert "orphaned: pid 41" in notes and "missing: pane p0 (run r0)" in notes
    assert "lost T: pane p2 (run r1), sentinel pid 40, channel closed" in notes
    assert "pane p0 (run r0): pid 11, 12" in notes and "outside any pane: 1 process" in notes
    assert any("3 processes left their pane's process group" in ln for ln in notes)
