"""No output can kill a sentinel: random bytes, broken escapes, huge lines, odd sizes."""

from __future__ import annotations

from pathlib import Path

from tests.helpers import Daemon

NASTY = [
    b"\x1b[" + b"9" * 5000 + b"m",  # giant CSI parameter
    b"\x1b]0;" + b"t" * 100000,  # OSC without a terminator
    b"\x1b[?1049h\x1b[1;1H\x1b[2J" + b"alt" * 1000,
    b"\xff\xfe\xc3\x28\xe2\x82" * 1000,  # invalid UTF-8
    b"x" * (1 << 20),  # a 1 MB line
    b"\x1b[1;3r\x1b[99B\n\n\n\x1b[r",
    b"\x1bc\x1b[3J\x1b[2J",
    b"\x1b",  # a truncated escape at the very end
]


def test_sentinel_survives_any_output(daemon: Daemon, tmp_path: Path) -> None:
    """Random bytes and every nasty sequence, with resizes to 1x1 and the maximum while
    the output flows; the run must end from its own exit, not from a hung-up PTY."""
    blob = tmp_path / "blob"
    with open(blob, "wb") as f:
        f.write(Path("/dev/urandom").open("rb").read(300000))
        for chunk in NASTY:
            f.write(chunk)
    s = daemon.call("session.create")["session"]
    go = tmp_path / "go"
    cols, rows = 80, 24
    # the program stays until the test has resized it (a file, not a sleep that may end first)
    r = daemon.call(
        "run",
        {
            "key": "fuzz",
            "session": s,
            "cols": cols,
            "rows": rows,
            "shell": f"cat {blob}; printf '\\033[0m\\033[?1049l\\r\\nDONE'; "
            f"while [ ! -e {go} ]; do sleep 0.01; done",
        },
    )
    daemon.call("pane.resize", {"pane": r["pane"], "cols": 1, "rows": 1})
    daemon.call("pane.resize", {"pane": r["pane"], "cols": 65535, "rows": 16})
    daemon.call("pane.resize", {"pane": r["pane"], "cols": cols, "rows": rows})
    go.touch()
    rec = daemon.wait_exit(r["run"], 60)
    assert rec["outcome"] == "succeeded" and rec["exit_code"] == 0, rec.get("signal")
    cap = daemon.call("pane.capture_rows", {"pane": r["pane"], "limit": 10})
    assert cap["offset"] >= blob.stat().st_size
    doc = daemon.call("doctor")  # one exited pane is far below panes.exited_warn_bytes
    assert doc["status"] == "ok", [c for c in doc["checks"] if c["status"] != "ok"]


def test_crashers_and_zero_width_keep_the_real_outcome(daemon: Daemon) -> None:
    """Erase values pyte raised on, then a zero-width space before the text that matters:
    the run fails with its own exit code and the tail keeps every character."""
    s = daemon.call("session.create")["session"]
    r = daemon.call(
        "run",
        {
            "key": "zw",
            "session": s,
            "cols": 80,
            "rows": 24,
            "shell": "printf '\\033[3K\\033[4J'; "
            "printf 'summary: \\342\\200\\213FAIL: 3 tests failed\\n'; "
            "exit 3",
        },
    )
    rec = daemon.wait_exit(r["run"], 30)
    assert (rec["outcome"], rec["exit_code"]) == ("failed", 3), rec
    lines = [ln.rstrip() for ln in rec["output"]["lines"]]
    assert lines == ["summary: \u200bFAIL: 3 tests failed"], lines
    assert "FAIL: 3 tests failed" in lines[-1]
