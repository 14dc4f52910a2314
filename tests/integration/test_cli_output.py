"""Readable output (issue 17 §5): what a person sees without ``--json``, against a real
daemon; ``--json`` stays the result exactly as the daemon sent it."""

from __future__ import annotations

import json
import os
import re
import signal
from pathlib import Path

import psutil

from tests.helpers import Daemon, wait_for
from venomx.wire import dumps

RUN_HEADER = ["RUN", "KEY", "STATE", "OUTCOME", "STATUS", "DURATION", "ARGV0"]


def test_run_list_shows_the_columns_a_person_needs(shared_daemon: Daemon) -> None:
    d = shared_daemon
    s = d.call("session.create")["session"]
    done = d.call("run", {"key": "list-failed", "session": s, "argv": ["sh", "-c", "exit 3"]})
    d.wait_exit(done["run"])
    live = d.call("run", {"key": "list-live", "session": s, "argv": ["sleep", "60"]})
    r = d.cli("run", "list", "--pane", done["pane"])
    lines = r.out.splitlines()
    assert r.code == 0 and lines[0].split() == RUN_HEADER, r.out
    assert lines[1].split() == [
        done["run"],
        "list-failed",
        "completed",
        "failed",
        "3",
        lines[1].split()[5],
        "sh",
    ], r.out
    assert re.fullmatch(r"\d+ms|\d+\.\ds", lines[1].split()[5]), lines[1]
    assert "venomx/" not in r.out and len(lines) == 2  # no source column, one run
    row = d.cli("run", "list", "--pane", live["pane"]).out.splitlines()[1].split()
    assert row[:3] == [live["run"], "list-live", "running"] and row[-1] == "sleep", row
    page = d.cli("run", "list", "--limit", "1")
    assert page.out.splitlines()[-1].startswith("(more runs follow: venomx run list --after ")
    j = d.cli("run", "list", "--pane", done["pane"], "--json")
    assert j.out == dumps(d.call("run.list", {"pane": done["pane"]})).decode() + "\n"
    os.kill(live["pid"], signal.SIGKILL)
    d.wait_exit(live["run"])


def test_run_shows_what_its_help_says(shared_daemon: Daemon) -> None:
    """The help promises `run: r0, ...` from `venomx run` and `session: s0` from
    `venomx session create`: a person (or a script that reads the help) finds the ID on
    the first line, after its name."""
    d = shared_daemon
    help_text = d.cli("--help").out + d.cli("run", "--help").out
    assert "# run: r0, ..." in help_text and "# session: s0" in help_text
    assert "`run: r0`" in " ".join(help_text.split())
    made = d.cli("session", "create").out.splitlines()
    assert re.fullmatch(r"session: s\d+", made[0]), made
    s = made[0].split()[1]
    ran = d.cli("run", "--key", "help-says", "--session", s, "--", "true").out.splitlines()
    assert re.fullmatch(r"run: r\d+", ran[0]), ran
    assert d.wait_exit(ran[0].split()[1])["outcome"] == "succeeded"
    anonymous = d.cli("whoami", token=None).out.splitlines()
    assert anonymous[0] == "principal: (anonymous: no token)", anonymous


def test_wait_says_how_many_earlier_rows_it_omits(shared_daemon: Daemon) -> None:
    d = shared_daemon
    s = d.call("session.create")["session"]
    long = d.call("run", {"key": "tail-long", "session": s, "argv": ["seq", "300"]})
    r = d.cli("run", "wait", "--run", long["run"])
    lines = r.out.splitlines()
    head = next(ln for ln in lines if ln.startswith("output"))
    assert r.code == 0 and "200 earlier rows omitted" in head, r.out
    assert lines[lines.index(head) + 1 :] == [f"  {n}" for n in range(201, 301)]
    hint = head[head.index("venomx pane") :].rstrip("):")
    earlier = d.cli(*hint.split()[1:])  # the command it names prints the rows it left out
    assert earlier.out.splitlines() == [str(n) for n in range(1, 201)], earlier.out[-200:]
    got = d.cli("run", "get", "--run", long["run"])
    assert "200 earlier rows omitted" in got.out
    short = d.call("run", {"key": "tail-short", "session": s, "argv": ["seq", "3"]})
    r = d.cli("run", "wait", "--run", short["run"])
    assert r.out.splitlines()[-4:] == ["output:", "  1", "  2", "  3"], r.out
    j = d.cli("run", "wait", "--run", long["run"], "--json")
    assert j.out == dumps(d.call("run.wait", {"run": long["run"]})).decode() + "\n"


def test_capture_rows_trims_what_a_terminal_would_not_show(shared_daemon: Daemon) -> None:
    d = shared_daemon
    s = d.call("session.create")["session"]
    r = d.call("run", {"key": "rows", "session": s, "argv": ["printf", "one  \n\ntwo\n"]})
    d.wait_exit(r["run"])
    human = d.cli("pane", "capture-rows", "--pane", r["pane"])
    assert (human.code, human.out) == (0, "one\n\ntwo\n")
    j = d.cli("pane", "capture-rows", "--pane", r["pane"], "--json")
    assert len(j.json["lines"]) == 24 and j.json["lines"][0] == "one".ljust(80)


def doctor_lines(d: Daemon) -> list[str]:
    r = d.cli("doctor")
    assert r.code in (0, 1), r.err
    return r.out.splitlines()


def test_doctor_speaks_in_durations_and_names_what_it_found(daemon: Daemon, tmp: Path) -> None:
    d = daemon
    head = doctor_lines(d)[0]
    assert re.fullmatch(
        r"venomx doctor: ok \(daemon pid \d+, up (\d+ms|\d+\.\ds), "
        r"version \S+\)",
        head,
    ), head
    s = d.call("session.create")["session"]
    pidfile = tmp / "p"
    esc = d.call(
        "run",
        {
            "key": "escape",
            "session": s,
            "argv": [
                "sh",
                "-c",
                f"setsid sh -c 'echo $$ > {pidfile}; exec sleep 300' & "
                f"while [ ! -s {pidfile} ]; do sleep 0.01; done",
            ],
        },
    )
    d.wait_exit(esc["run"])
    pid = int(wait_for(lambda: pidfile.exists() and pidfile.read_text().strip(), 10, "pid"))
    wait_for(lambda: d.call("doctor")["escapees"]["count"] == 1, 10, "escapee")
    lines = doctor_lines(d)
    row = next(ln for ln in lines if ln.split()[1:2] == ["escapees"])
    assert row.split()[0] == "warn" and "1 process left its pane's process group" in row
    assert (
        lines[lines.index(row) + 1].strip() == f"pane {esc['pane']} (run {esc['run']}): pid {pid}"
    ), lines
    os.kill(pid, signal.SIGKILL)

    lost = d.call(
        "run", {"key": "lost", "session": s, "shell": 'trap "" HUP; echo ready; exec sleep 60'}
    )
    wait_for(
        lambda: "ready" in d.call("pane.capture_rows", {"pane": lost["pane"]})["lines"][0],
        10,
        "ready",
    )
    sentinel = psutil.Process(lost["pid"]).parent()
    assert sentinel is not None
    sentinel.kill()
    wait_for(lambda: d.call("doctor")["sentinels"]["lost"]["count"] == 1, 10, "lost")
    lines = doctor_lines(d)
    named = [ln.strip() for ln in lines if ln.strip().startswith("lost ")]
    assert len(named) == 1 and f"pane {lost['pane']} (run {lost['run']})" in named[0], lines
    os.kill(lost["pid"], signal.SIGKILL)
    d.wait_exit(lost["run"])


def test_a_programs_escape_sequences_are_shown_not_obeyed(
    shared_daemon: Daemon, tmp_path: Path
) -> None:
    """argv0 is the program's choice (it may start a split of its own): written raw to a
    person's terminal, an OSC 52 in it would set their clipboard."""
    d = shared_daemon
    evil = tmp_path / "x\x1b]52;c;cHduZWQ=\x07\x1b[31mred\x9b0m"
    evil.symlink_to("/bin/sleep")
    s = d.call("session.create")["session"]
    r = d.call("run", {"key": "evil-argv0", "session": s, "argv": [str(evil), "60"]})
    try:
        for args in (("pane", "list"), ("run", "list", "--pane", r["pane"])):
            out = d.cli(*args).out
            assert "x\\x1b]52;c;cHduZWQ=\\x07\\x1b[31mred\\x9b0m" in out, out
            assert not any(c in out for c in "\x1b\x07\x9b"), out
        j = d.cli("pane", "list", "--json").out  # JSON leaves DEL and C1 raw; the CLI does not
        assert "\\u009b0m" in j and "\x9b" not in j
        assert json.loads(j) == d.call("pane.list")
    finally:
        os.kill(r["pid"], signal.SIGKILL)
        d.wait_exit(r["run"])


def test_a_newline_a_program_chose_forges_no_row(shared_daemon: Daemon, tmp_path: Path) -> None:
    """A table row is one line: a newline in argv0 (the program may name its split so)
    is shown as ``\\x0a``, not as the start of a row the owner would read as real."""
    d = shared_daemon
    forged = "r99  evil-key  completed  succeeded  0  1ms  rm"
    evil = tmp_path / f"x\n{forged}"
    evil.symlink_to("/bin/sleep")
    s = d.call("session.create")["session"]
    r = d.call("run", {"key": "newline-argv0", "session": s, "argv": [str(evil), "60"]})
    try:
        for args, rows in (
            (("pane", "list", "--session", s), 3),  # source:, the header, the pane
            (("run", "list", "--pane", r["pane"]), 2),
            (("window", "get", "--window", r["window"]), None),
        ):
            out = d.cli(*args).out
            assert f"x\\x0a{forged}" in out, out
            assert not any(ln.startswith(forged) for ln in out.splitlines()), out
            if rows is not None:
                assert len(out.splitlines()) == rows, out
    finally:
        os.kill(r["pid"], signal.SIGKILL)
        d.wait_exit(r["run"])


def test_a_runs_bidirectional_overrides_are_shown_not_obeyed(shared_daemon: Daemon) -> None:
    """An override would show the rest of a line of the record in another order on a
    terminal that reorders text; right-to-left text and its marks are left alone."""
    d = shared_daemon
    s = d.call("session.create")["session"]
    text = "A \u202eevil\u202c \u2067iso\u2069 \u05e9\u05dc\u05d5\u05dd\u200f B"
    r = d.call("run", {"key": "bidi", "session": s, "argv": ["printf", text]})
    out = d.cli("run", "wait", "--run", r["run"]).out
    assert "A \\u202eevil\\u202c \\u2067iso\\u2069 \u05e9\u05dc\u05d5\u05dd\u200f B" in out, out
    assert not any(c in out for c in "\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")
    rec = json.loads(d.cli("run", "get", "--run", r["run"], "--json").out)
    assert text in rec["output"]["lines"][0]  # --json keeps the value as it is
