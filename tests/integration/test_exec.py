"""``venomx exec`` and the get-or-create session it starts in, against a real daemon."""

from __future__ import annotations

import contextlib
import json
import os
import pty
import re
import signal
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import PY, ROOT, Daemon, restart_at, start_daemon, stop_daemon, wait_for
from venomx.wire import exit_code_for


def test_session_reuse_is_get_or_create_in_one_step(daemon: Daemon) -> None:
    first = daemon.call("session.create", {"name": "ci", "reuse": True})
    assert first["created"] is True and first["name"] == "ci"
    again = daemon.call("session.create", {"name": "ci", "reuse": True})
    assert again == {"session": first["session"], "name": "ci", "created": False}
    plain = daemon.call("session.create", {"name": "ci"})
    assert plain["session"] != first["session"] and "created" not in plain
    results: list[str] = []

    def create() -> None:
        results.append(daemon.call("session.create", {"name": "race", "reuse": True})["session"])

    threads = [threading.Thread(target=create) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    assert len(results) == 8 and len(set(results)) == 1
    named = [s for s in daemon.call("session.list")["sessions"] if s.get("name") == "race"]
    assert len(named) == 1


def test_session_reuse_never_takes_another_principals_session(daemon: Daemon) -> None:
    """Else a principal that made a session named like exec's first would get read and
    write (self) over every run the owner's exec then started in it."""
    squatter = daemon.call(
        "principal.create",
        {"grants": [{"right": "spawn", "scope": "session:*"}, {"right": "read", "scope": "self"}]},
    )
    theirs = daemon.call("session.create", {"name": "default"}, token=squatter["token"])
    mine = daemon.call("session.create", {"name": "default", "reuse": True})
    assert mine["created"] is True and mine["session"] != theirs["session"]
    again = daemon.call("session.create", {"name": "default", "reuse": True})
    assert again["session"] == mine["session"]


def exec_env(d: Daemon, **extra: str) -> dict[str, str]:
    e = {k: v for k, v in os.environ.items() if not k.startswith("VENOMX_")}
    e["VENOMX_SOCKET"] = d.socket
    e.update(extra)
    return e


def exec_cli(
    d: Daemon, *args: str, stdin: bytes = b"", cwd: str | None = None, **env: str
) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [PY, "-m", "venomx", "exec", *args],
        input=stdin,
        capture_output=True,
        env=exec_env(d, **env),
        cwd=cwd,
        timeout=60,
    )


@pytest.mark.parametrize(
    ("command", "status"),
    [
        (["true"], 0),
        (["sh", "-c", "exit 3"], 3),
        (["/nonexistent/program"], 127),
        (["sh", "-c", "kill -TERM $$"], 128 + signal.SIGTERM),
    ],
)
def test_exit_status_is_the_runs(daemon: Daemon, command: list[str], status: int) -> None:
    p = exec_cli(daemon, "--", *command)
    assert p.returncode == status, p.stderr
    if status == 127:
        assert b"cannot start '/nonexistent/program': ENOENT" in p.stderr
    else:
        assert re.search(rb"venomx: r\d+ \w+, .*\(status %d\)" % status, p.stderr), p.stderr


def test_not_executable_is_126(daemon: Daemon, tmp: Path) -> None:
    script = tmp / "noexec"
    script.write_text("echo hi\n")
    p = exec_cli(daemon, "--", str(script))
    assert p.returncode == 126, p.stderr


def test_deadline_is_124(daemon: Daemon) -> None:
    p = exec_cli(daemon, "--deadline-ms", "300", "--", "sleep", "30")
    assert p.returncode == 124, p.stderr
    assert b"terminated" in p.stderr and b"cause deadline" in p.stderr


def test_output_lines_each_once_in_order_from_a_megabyte(daemon: Daemon, tmp_path: Path) -> None:
    # the megabyte starts once exec shows the first line: its attach is live by then, and
    # a loaded machine cannot let the sentinel's replay move past offset 0 first
    gate = tmp_path / "gate"
    line = f"echo ready; while [ ! -e {gate} ]; do sleep 0.01; done; seq 1 200000"
    p = start_exec(daemon, "--", "sh", "-c", line)
    assert p.stdout is not None and p.stdout.readline().rstrip() == b"ready"
    gate.touch()
    out, err = p.communicate(timeout=60)
    assert p.returncode == 0, err
    assert len(out) > 1_000_000
    assert out.decode().splitlines() == [str(i) for i in range(1, 200001)]


def test_output_that_ends_first_still_shows(daemon: Daemon) -> None:
    p = exec_cli(daemon, "--", "printf", "one\\ntwo\\r2\\n\\033[31mred\\033[0m")
    assert p.returncode == 0, p.stderr
    assert p.stdout.decode().splitlines() == ["one", "2wo", "red"]


def test_a_fast_command_is_shown_from_its_bytes_not_its_rows(daemon: Daemon, tmp: Path) -> None:
    """A command that ends before exec's attach arrives (a few milliseconds) is still
    shown from its output bytes: a 1,700-column JSON line stays one line (the log pane's
    rows are 200 columns), and a line the program erased with cursor moves is not lost
    (its rows would show only the final screen)."""
    doc = json.dumps({f"k{i}": i for i in range(150)})
    (tmp / "one.json").write_text(doc + "\n")
    for _ in range(3):
        p = exec_cli(daemon, "--", "cat", str(tmp / "one.json"))
        assert p.returncode == 0, p.stderr
        assert p.stdout.decode().splitlines() == [doc]
    p = exec_cli(daemon, "--", "printf", "a\\nb\\nc\\n\\033[2A\\033[2Kx\\n")
    assert p.stdout.decode().splitlines() == ["a", "b", "c", "x"], p.stdout


def test_output_streams_before_the_command_ends(daemon: Daemon, tmp: Path) -> None:
    gate = tmp / "gate"
    proc = subprocess.Popen(
        [
            PY,
            "-m",
            "venomx",
            "exec",
            "--",
            "sh",
            "-c",
            f"echo first; while [ ! -e {gate} ]; do sleep 0.05; done; echo second",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        env=exec_env(daemon),
    )
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline() == b"first\n"
        assert proc.poll() is None  # still running, waiting for the gate
        gate.touch()
        assert proc.stdout.readline() == b"second\n"
        assert proc.wait(30) == 0
    finally:
        proc.kill()
        proc.wait()


def test_stdin_is_end_of_file_by_default_and_forwarded_with_stdin(daemon: Daemon) -> None:
    p = exec_cli(daemon, "--", "cat", stdin=b"never read\n")
    assert p.returncode == 0, p.stderr
    assert b"never read" not in p.stdout
    p = exec_cli(daemon, "--stdin", "--", "sh", "-c", "read a; echo got:$a", stdin=b"hi\n")
    assert p.returncode == 0, p.stderr
    assert b"got:hi" in p.stdout


def test_no_read_waits_for_input_that_will_never_come(daemon: Daemon) -> None:
    """Issue 17 §1: "no CI step hangs on a prompt such as sudo's". Every read gets end of
    file, as from /dev/null: a second read too, and a password prompt that flushes its
    terminal's input first (getpass, as sudo does) gets it as well."""
    p = exec_cli(daemon, "--", "sh", "-c", "read a; echo r1=$?; read b; echo r2=$?")
    assert p.returncode == 0 and p.stdout.split() == [b"r1=1", b"r2=1"], p.stdout
    p = exec_cli(daemon, "--", PY, "-c", "import getpass; getpass.getpass()")
    assert p.returncode == 1 and b"EOFError" in p.stdout, p.stdout
    twice = "import sys; print(repr(sys.stdin.read() + sys.stdin.read()))"
    assert exec_cli(daemon, "--", PY, "-c", twice).stdout.split() == [b"''"]


def test_stdin_without_a_last_newline_still_ends(daemon: Daemon) -> None:
    """With --stdin, input whose last line has no newline still ends in end of file: the
    first VEOF only hands that line to the reader."""
    p = exec_cli(daemon, "--stdin", "--", "sh", "-c", "cat; echo done", stdin=b"no newline")
    assert p.returncode == 0, p.stderr
    assert p.stdout.decode().rstrip().endswith("no newlinedone"), p.stdout  # echo, cat, sh


@pytest.mark.parametrize(
    ("args", "error"),
    [
        (["--cols", "abc"], ("invalid_params.type", {"param": "cols", "expected": "integer"})),
        (["--cols", "0"], ("invalid_params.range", {"param": "cols", "min": 1, "max": 65535})),
        (["--rows", "65536"], ("invalid_params.range", {"param": "rows", "min": 1, "max": 65535})),
        (
            ["--deadline-ms", "0"],
            ("invalid_params.range", {"param": "deadline_ms", "min": 1, "max": 86400000}),
        ),
    ],
)
def test_a_bad_option_value_reads_as_the_daemons_answer(
    daemon: Daemon, args: list[str], error: tuple[str, dict[str, Any]]
) -> None:
    """Foundation §4: a bad value the CLI catches itself is the daemon's invalid_params
    object and exit 2 (on stdout with --json), not a usage error; nothing starts."""
    p = exec_cli(daemon, *args, "--json", "--", "true")
    assert p.returncode == 2, p.stderr
    got = json.loads(p.stdout)["error"]
    assert (got["code"], got["data"]) == error
    assert daemon.call("run.list")["runs"] == []


def test_caller_cwd_and_environment(daemon: Daemon, tmp: Path) -> None:
    p = exec_cli(
        daemon,
        "--env",
        "EXTRA=2",
        "--",
        "sh",
        "-c",
        'echo "$PWD|$MINE|$EXTRA|${SHLVL-unset}|${VENOMX_SOCKET:+pane}"',
        cwd=str(tmp),
        MINE="1",
        SHLVL="7",
    )
    assert p.returncode == 0, p.stderr
    line = p.stdout.decode().strip().splitlines()[-1]
    pwd, mine, extra, shlvl, pane = line.split("|")
    assert os.path.realpath(pwd) == os.path.realpath(tmp)
    assert (mine, extra, pane) == ("1", "2", "pane")
    assert shlvl != "7"
    clean = exec_cli(daemon, "--clean-env", "--", "sh", "-c", 'echo "${MINE-unset}"', MINE="1")
    assert clean.stdout.decode().split() == ["unset"]


def test_the_daemons_shell_state_does_not_reach_the_command(tmp: Path) -> None:
    """Issue 17 §1: the caller's environment "minus volatile shell variables such as _,
    SHLVL, OLDPWD": not the caller's, and not the daemon's either (its PWD names the
    daemon's directory, not the command's)."""
    state = {"OLDPWD": "/daemon-old", "PWD": "/daemon-pwd", "SHLVL": "9", "_": "/daemon-underscore"}
    d = start_daemon(env=state)
    try:
        p = exec_cli(d, "--", "env", cwd=str(tmp), OLDPWD="/caller-old", SHLVL="3")
        assert p.returncode == 0, p.stderr
        names = {line.split("=", 1)[0] for line in p.stdout.decode().splitlines()}
        assert names & set(state) == set(), p.stdout
        given = exec_cli(d, "--env", "SHLVL=5", "--env", "PWD=/given", "--", "env")
        lines = given.stdout.decode().splitlines()
        assert "SHLVL=5" in lines and "PWD=/given" in lines, lines  # --env wins
    finally:
        stop_daemon(d)


def test_refused_names_are_noted_not_passed(daemon: Daemon) -> None:
    refused: dict[str, Any] = {"BASH_FUNC_f%%": "() { echo; }"}  # a name, not a keyword
    p = exec_cli(daemon, "--", "env", **refused)
    assert p.returncode == 0, p.stderr
    assert b"not passed to the command: BASH_FUNC_f%%" in p.stderr
    assert b"BASH_FUNC" not in p.stdout


def test_concurrent_execs_share_the_default_session(daemon: Daemon) -> None:
    procs = [
        subprocess.Popen(
            [PY, "-m", "venomx", "exec", "--json", "--", "true"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            stdin=subprocess.DEVNULL,
            env=exec_env(daemon),
        )
        for _ in range(4)
    ]
    records = [json.loads(p.communicate(timeout=60)[0]) for p in procs]
    assert {r["outcome"] for r in records} == {"succeeded"}
    assert len({r["session"] for r in records}) == 1
    sessions = daemon.call("session.list")["sessions"]
    assert [s["name"] for s in sessions if s.get("name") == "default"] == ["default"]


def test_json_puts_the_record_on_stdout_and_output_on_stderr(daemon: Daemon) -> None:
    p = exec_cli(daemon, "--json", "--session", "ci", "--", "echo", "hello")
    assert p.returncode == 0
    rec = json.loads(p.stdout)
    assert rec["outcome"] == "succeeded" and rec["status"] == 0
    assert b"hello" in p.stderr
    named = [s for s in daemon.call("session.list")["sessions"] if s.get("name") == "ci"]
    assert [s["session"] for s in named] == [rec["session"]]


def read_or_eof(fd: int) -> bytes:
    """The next bytes from a pty's main side; b"" once every other side is closed."""
    try:
        return os.read(fd, 65536)
    except OSError:  # EIO: nothing holds the other side any more
        return b""


class OnPty:
    """A ``venomx`` command with its stdout on a pty, and what it has shown there."""

    def __init__(self, main: int, proc: subprocess.Popen[bytes]) -> None:
        self.main, self.proc, self.shown = main, proc, b""

    def until(self, text: bytes) -> None:
        while text not in self.shown:
            self.shown += os.read(self.main, 65536)

    def rest(self) -> None:
        while chunk := read_or_eof(self.main):
            self.shown += chunk


@contextlib.contextmanager
def venomx_on_a_pty(env: dict[str, str], *args: str) -> Iterator[OnPty]:
    main, sub = os.openpty()
    try:
        proc = subprocess.Popen(
            [PY, "-m", "venomx", *args], stdout=sub, stderr=subprocess.PIPE, env=env
        )
    except BaseException:
        os.close(main)
        raise
    finally:
        os.close(sub)
    view = OnPty(main, proc)
    try:
        yield view
    finally:
        proc.kill()
        proc.wait()
        os.close(main)


def start_exec(d: Daemon, *args: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [PY, "-m", "venomx", "exec", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        env=exec_env(d),
    )


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGHUP])
def test_an_interrupt_cancels_the_run_with_its_signal(daemon: Daemon, sig: int) -> None:
    proc = start_exec(daemon, "--", "sh", "-c", "echo up; exec sleep 60")
    assert proc.stdout is not None and proc.stdout.readline() == b"up\n"
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 125, err
    runs = daemon.call("run.list")["runs"]
    assert [(r["outcome"], r["cause"], r["signal"]) for r in runs] == [
        ("terminated", "cancel", signal.Signals(sig).name)
    ]


@pytest.mark.parametrize("detach", [False, True])
def test_a_signal_while_the_start_is_in_flight_is_acted_on(daemon: Daemon, detach: bool) -> None:
    """A CI timeout's SIGTERM that came while exec's start was in flight killed exec (or,
    as SIGINT, gave up the request) after the daemon had started the command, which ran
    on unwatched. Now the run is cancelled with that signal (exit 125), or with
    --detach-on-interrupt left running and said so."""
    daemon.call("seam.set", {"name": "run.after_barrier", "state": "hold"})
    flags = ["--detach-on-interrupt"] if detach else []
    proc = start_exec(daemon, *flags, "--", "sleep", "60")
    daemon.call("seam.wait", {"name": "run.after_barrier", "timeout_ms": 20000})
    proc.send_signal(signal.SIGTERM)
    # exec is not gone: it handles the signal (the default action would end it at once)
    with pytest.raises(subprocess.TimeoutExpired):
        proc.wait(timeout=0.5)
    daemon.call("seam.set", {"name": "run.after_barrier", "state": "release"})
    _, err = proc.communicate(timeout=30)
    [run] = daemon.call("run.list")["runs"]
    if detach:
        assert proc.returncode == 128 + signal.SIGTERM, err
        assert run["state"] == "running" and b"left r0 running" in err
        daemon.call("run.cancel", {"run": run["run"]})
    else:
        assert proc.returncode == 125, err
        assert (run["outcome"], run["cause"], run["signal"]) == ("terminated", "cancel", "SIGTERM")


def test_input_is_typed_as_it_comes_and_an_open_pipe_does_not_hold_exec(daemon: Daemon) -> None:
    """--stdin read all of its input before typing any, so a program waiting for one
    line of a pipe that stays open never got it; and exec, exiting while its reader
    thread was blocked in the stdin buffer, aborted (exit 134) instead of giving the
    run's status."""
    proc = subprocess.Popen(
        [PY, "-m", "venomx", "exec", "--stdin", "--", "sh", "-c", "read a; echo got:$a; exit 4"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=exec_env(daemon),
    )
    assert proc.stdin is not None
    proc.stdin.write(b"hi\n")
    proc.stdin.flush()  # and kept open
    try:
        assert proc.stdout is not None and proc.stderr is not None
        out = proc.stdout.read()  # to its end: exec has exited
        err = proc.stderr.read()
        proc.wait(timeout=30)
    finally:
        proc.stdin.close()
    assert proc.returncode == 4, err
    assert b"got:hi" in out and b"Fatal Python error" not in err


def test_a_non_blocking_stdin_is_waited_on_not_taken_as_its_end(daemon: Daemon) -> None:
    """A parent may leave its pipe O_NONBLOCK; EAGAIN was read as end of file, and the
    program got no input at all."""
    r, w = os.pipe()
    os.set_blocking(r, False)
    script = "echo ready; read a; echo got:$a; exit 4"
    proc = subprocess.Popen(
        [PY, "-m", "venomx", "exec", "--stdin", "--", "sh", "-c", script],
        stdin=r,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=exec_env(daemon),
    )
    os.close(r)
    assert proc.stdout is not None
    assert b"ready" in proc.stdout.readline()
    os.write(w, b"hi\n")
    os.close(w)
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 4, err
    assert b"got:hi" in out


@pytest.mark.parametrize("closed", [1, 2])
def test_a_closed_stdout_or_stderr_keeps_the_runs_status(daemon: Daemon, closed: int) -> None:
    """With stdout closed exec failed with a traceback before it started anything; with
    stderr closed it ran the command and exited 1 instead of its status."""
    script = f'exec "$0" -m venomx exec -- sh -c "echo hi; exit 3" {closed}>&-'
    p = subprocess.run(
        ["sh", "-c", script, PY], capture_output=True, env=exec_env(daemon), timeout=60
    )
    assert p.returncode == 3, p.stderr
    assert daemon.call("run.list")["runs"][0]["exit_code"] == 3


def test_nohup_keeps_exec_watching_after_a_hangup(daemon: Daemon) -> None:
    proc = subprocess.Popen(
        ["nohup", PY, "-m", "venomx", "exec", "--", "sh", "-c", "echo up; sleep 1; exit 3"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=exec_env(daemon),
    )
    assert proc.stdout is not None and proc.stdout.readline() == b"up\n"
    proc.send_signal(signal.SIGHUP)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 3, err


def test_detach_on_interrupt_leaves_the_run_going(daemon: Daemon) -> None:
    proc = start_exec(daemon, "--detach-on-interrupt", "--", "sh", "-c", "echo up; exec sleep 60")
    assert proc.stdout is not None and proc.stdout.readline() == b"up\n"
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 128 + signal.SIGTERM, err
    run = re.search(rb"left (r\d+) running", err)
    assert run is not None, err
    assert daemon.call("run.get", {"run": run.group(1).decode()})["state"] == "running"


def test_a_restarted_daemon_refuses_the_retry(tmp: Path) -> None:
    """The start is lost (the daemon dies at the barrier); exec retries with the same key
    and the first daemon's source, and the new daemon answers conflict.source instead of
    running the command a second time."""
    first = start_daemon()
    marker = tmp / "ran"
    try:
        first.call("seam.set", {"name": "run.before_barrier", "state": "hold"})
        proc = start_exec(first, "--", "sh", "-c", f"echo x >> {marker}")
        first.call("seam.wait", {"name": "run.before_barrier", "timeout_ms": 20000})
        os.killpg(first.proc.pid, signal.SIGKILL)
        first.proc.wait(10)
        second = restart_at(first.socket, tmp / "second.log")
        try:
            _, err = proc.communicate(timeout=60)
            assert proc.returncode == exit_code_for("conflict.source"), err
            assert b"conflict.source" in err
            assert not marker.exists()
            assert second.call("run.list")["runs"] == []
        finally:
            stop_daemon(second)
    finally:
        stop_daemon(first)


def test_run_wait_shows_the_time_waited_on_a_terminal(daemon: Daemon, tmp_path: Path) -> None:
    s = daemon.call("session.create")["session"]
    gate = tmp_path / "gate"  # the run ends once the first tick is seen, however slow the CLI
    shell = f"while [ ! -e {gate} ]; do sleep 0.05; done"
    run = daemon.call("run", {"key": "k", "session": s, "shell": shell})["run"]
    master, slave = pty.openpty()
    proc = subprocess.Popen(
        [PY, "-m", "venomx", "run", "wait", "--run", run],
        stdout=subprocess.PIPE,
        stderr=slave,
        env={**exec_env(daemon), "VENOMX_TOKEN": "@owner"},
    )
    os.close(slave)
    seen = b""
    try:
        while b"waiting for" not in seen or not seen.endswith(b"\r\x1b[K"):
            chunk = os.read(master, 4096)
            if not chunk:
                break
            seen += chunk
            if re.search(rb"waiting for r\d+: \d+ s", seen):  # a late tick may say 2 s
                gate.touch()
    except OSError:
        pass
    finally:
        os.close(master)
        gate.touch()
    assert proc.wait(30) == 0
    assert re.search(rb"venomx: waiting for r\d+: [1-9]\d* s", seen), seen
    assert seen.endswith(b"\r\x1b[K")


def test_run_log_prints_every_row_from_the_first(daemon: Daemon) -> None:
    s = daemon.call("session.create")["session"]
    run = daemon.call("run", {"key": "log", "session": s, "argv": ["seq", "1", "300"]})["run"]
    daemon.wait_exit(run)
    r = daemon.cli("run", "log", "--run", run)
    assert r.code == 0, r.err
    assert r.out.splitlines() == [str(i) for i in range(1, 301)]


def test_run_log_follow_streams_rows_until_completion(daemon: Daemon, tmp: Path) -> None:
    gate = tmp / "gate"
    s = daemon.call("session.create")["session"]
    run = daemon.call(
        "run",
        {
            "key": "follow",
            "session": s,
            "shell": f"seq 1 50; while [ ! -e {gate} ]; do sleep 0.05; done; seq 51 80",
        },
    )["run"]
    proc = subprocess.Popen(
        [PY, "-m", "venomx", "run", "log", "--run", run, "--follow"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**exec_env(daemon), "VENOMX_TOKEN": "@owner"},
    )
    try:
        assert proc.stdout is not None
        first = [proc.stdout.readline() for _ in range(50)]
        assert first == [b"%d\n" % i for i in range(1, 51)]
        assert proc.poll() is None
        gate.touch()
        rest, _ = proc.communicate(timeout=30)
        assert proc.returncode == 0
        assert rest.decode().splitlines() == [str(i) for i in range(51, 81)]
    finally:
        proc.kill()
        proc.wait()


def test_run_log_resumes_on_a_new_connection_without_repeats(daemon: Daemon, tmp: Path) -> None:
    from venomx.cli.runlog import RowLog
    from venomx.client import Client

    gate = tmp / "gate"
    s = daemon.call("session.create")["session"]
    run = daemon.call(
        "run",
        {
            "key": "resume",
            "session": s,
            "shell": f"seq 1 30; while [ ! -e {gate} ]; do sleep 0.05; done; seq 31 60",
        },
    )["run"]
    printed: list[str] = []
    log = RowLog(run, printed.append)
    with Client(daemon.socket, "@owner") as c:
        wait_for(lambda: (log.once(c, follow=True) or True) and len(printed) >= 30, 10, "rows")
    assert printed == [str(i) for i in range(1, 31)]
    gate.touch()
    daemon.wait_exit(run)
    with Client(daemon.socket, "@owner") as c:  # the first connection is gone
        assert log.once(c, follow=True)
    assert printed == [str(i) for i in range(1, 61)]


def test_inside_a_pane_exec_splits_the_callers_pane(daemon: Daemon) -> None:
    """A program in a pane acts with its pane's token, which may start programs only in
    its own pane: exec's default there is a split of that pane."""
    s = daemon.call("session.create")["session"]
    outer = daemon.call(
        "run",
        {
            "key": "outer",
            "session": s,
            "argv": [PY, "-m", "venomx", "exec", "--json", "--", "echo", "inner"],
            "env": {"PYTHONPATH": str(ROOT)},
        },
    )
    rec = daemon.wait_exit(outer["run"], 30)
    assert rec["outcome"] == "succeeded", rec
    inner = [r for r in daemon.call("run.list")["runs"] if r["run"] != outer["run"]]
    assert len(inner) == 1 and inner[0]["outcome"] == "succeeded"
    assert inner[0]["window"] == outer["window"] and inner[0]["pane"] != outer["pane"]
    assert [x["name"] for x in daemon.call("session.list")["sessions"] if x.get("name")] == []


def test_a_bad_env_pair_is_refused_and_leaves_nothing(daemon: Daemon) -> None:
    p = exec_cli(daemon, "--env", "NOEQUALS", "--", "true")
    assert p.returncode == exit_code_for("invalid_params.env"), p.stderr
    assert b"invalid_params.env" in p.stderr and b"NAME=VALUE" in p.stderr
    assert daemon.call("session.list")["sessions"] == []
    assert daemon.call("run.list")["runs"] == []


def test_a_reader_that_stops_early_does_not_cut_the_run_short(daemon: Daemon) -> None:
    """`venomx exec ... | head -2`: the rest of the output is dropped, and exec still
    waits for the run and exits with its status (it exited 1, the command running on)."""
    p = start_exec(daemon, "--", "sh", "-c", "seq 1 20000; sleep 0.5; exit 7")
    assert p.stdout is not None and p.stdout.readline() == b"1\n"
    p.stdout.close()
    _, err = p.communicate(timeout=60)
    assert p.returncode == 7, err
    (run,) = daemon.call("run.list")["runs"]
    assert run["state"] == "completed" and run["exit_code"] == 7


def test_odd_surroundings_of_exec(daemon: Daemon, tmp_path: Path) -> None:
    """A closed stdin is end of file; a terminal of size 0x0 gets the default size; a
    deleted working directory is a clear error; --json puts a failed start's error on
    stdout, as every verb does."""
    closed = subprocess.run(
        [PY, "-m", "venomx", "exec", "--", "sh", "-c", "exit 3"],
        capture_output=True,
        env=exec_env(daemon),
        preexec_fn=lambda: os.close(0),
        timeout=60,
    )
    assert closed.returncode == 3, closed.stderr
    main, sub = os.openpty()  # a fresh pty says 0x0
    try:
        sized = subprocess.run(
            [PY, "-m", "venomx", "exec", "--", "sh", "-c", r"stty size; printf '\033]2;x'; exit 4"],
            stdout=sub,
            stderr=subprocess.PIPE,
            env=exec_env(daemon),
            timeout=60,
        )
        os.close(sub)
        sub = -1
        shown = b""
        while chunk := read_or_eof(main):  # a pty passes writes on asynchronously
            shown += chunk
    finally:
        if sub >= 0:
            os.close(sub)
        os.close(main)
    assert sized.returncode == 4, sized.stderr
    # the program's title never reaches the terminal, and colours and the cursor are
    # put back before exec's own line (on stderr) follows
    assert shown.startswith(b"50 200") and shown.endswith(b"\x1b[0m\x1b[?25h\r\x1b[J"), shown
    assert b"\x1b]" not in shown
    gone = tmp_path / "gone"
    gone.mkdir()
    deleted = subprocess.run(
        ["sh", "-c", f'cd {gone} && rmdir {gone} && exec "$0" -m venomx exec -- true', PY],
        capture_output=True,
        text=True,
        env=exec_env(daemon),
        timeout=60,
    )
    assert deleted.returncode == 2 and "invalid_params.cwd" in deleted.stderr, deleted
    failed = exec_cli(daemon, "--json", "--", "/nonexistent")
    assert failed.returncode == 127
    assert json.loads(failed.stdout)["error"]["code"] == "unavailable.spawn"


def test_exec_follows_its_run_to_the_end_when_the_sentinel_is_lost(daemon: Daemon) -> None:
    """The output stops (the screen went with the sentinel); exec still waits for the
    run, whose record comes from the daemon's own reap, and exits with its status."""
    import psutil

    p = start_exec(daemon, "--", "sh", "-c", "trap '' HUP; echo ready; sleep 100")
    assert p.stdout is not None and p.stdout.readline().rstrip() == b"ready"
    (run,) = daemon.call("run.list")["runs"]
    os.kill(psutil.Process(run["pid"]).ppid(), signal.SIGKILL)  # the sentinel
    wait_for(lambda: daemon.call("doctor")["sentinels"]["lost"]["count"] >= 1, 10, "the loss")
    os.killpg(run["pid"], signal.SIGKILL)
    out, err = p.communicate(timeout=60)
    assert p.returncode == 137, err
    assert b"lost the pane's sentinel" in out


HOSTILE_VIEW = (
    r"stty -echo; echo ready; while [ ! -e {gate} ]; do sleep 0.05; done; "
    r"printf 'shown\033]52;c;cm0gLXJmIH4K\007\033[21t\033[6n\033P+q544e\033\\"
    r"\033[?1000h\033[?1049h\033[?25l\033[8mstill'; exit 5"
)


def test_a_terminal_is_shown_only_what_draws(daemon: Daemon, tmp: Path) -> None:
    """exec on a terminal passes what draws and keeps the rest from the person's terminal:
    no clipboard write, no window report or DECRQSS whose answer it would type; and what
    the program turned on (mouse reports, its alternate screen, a hidden cursor,
    concealed text) is put back before exec's own line."""
    gate = tmp / "gate"
    program = HOSTILE_VIEW.format(gate=gate)
    with venomx_on_a_pty(exec_env(daemon), "exec", "--", "sh", "-c", program) as view:
        view.until(b"ready")  # streamed live, not a final screen
        gate.touch()
        view.rest()
        assert view.proc.wait(30) == 5
    shown = view.shown
    shown = shown[shown.index(b"ready") :]
    assert b"\nshown\x1b[?1000h\x1b[?1049h\x1b[?25l\x1b[8mstill" in shown, shown
    for kept_out in (b"\x1b]", b"\x1bP", b"\x1b[21t", b"\x1b[6n"):
        assert kept_out not in shown
    tail = shown[shown.index(b"still") :]
    for put_back in (b"\x1b[0m", b"\x1b[?1000l", b"\x1b[?1049l", b"\x1b[?25h"):
        assert put_back in tail, tail
    # the program's last line was left open: exec's own starts on a fresh one, with
    # whatever the program drew below it erased
    assert tail.endswith(b"\x1b[?25h\r\r\n\r\x1b[J"), tail  # the pty adds a CR to LF


def test_a_terminal_is_put_back_when_exec_leaves_the_run_going(daemon: Daemon) -> None:
    """--detach-on-interrupt ends exec while the program still has its modes on: they are
    put back before exec says it left the run, as at a normal end."""
    program = r"printf '\033[?1000h\033[?1049h\033(0up'; exec sleep 60"
    args = ("exec", "--detach-on-interrupt", "--", "sh", "-c", program)
    with venomx_on_a_pty(exec_env(daemon), *args) as view:
        view.until(b"up")
        view.proc.send_signal(signal.SIGINT)
        _, err = view.proc.communicate(timeout=30)
        view.rest()
    proc, shown = view.proc, view.shown
    assert proc.returncode == 128 + signal.SIGINT, err
    assert b"left r" in err
    tail = shown[shown.index(b"up") :]
    for put_back in (b"\x1b[?1000l", b"\x1b(B", b"\x1b[?1049l", b"\x1b[?25h"):
        assert put_back in tail, tail
    assert daemon.call("run.list")["runs"][0]["state"] == "running"
    daemon.call("run.cancel", {"run": daemon.call("run.list")["runs"][0]["run"]})


def on_a_terminal(d: Daemon, lang: str, *args: str) -> bytes:
    """What ``venomx ARGS`` shows on a terminal whose locale is ``lang``."""
    env = {k: v for k, v in exec_env(d).items() if not k.startswith("LC_")}
    with venomx_on_a_pty({**env, "LANG": lang, "VENOMX_TOKEN": "@owner"}, *args) as view:
        view.rest()
        _, err = view.proc.communicate(timeout=60)
    assert view.proc.returncode == 0, err
    return view.shown


def test_text_for_a_terminal_that_is_not_utf8_is_ascii(daemon: Daemon) -> None:
    """Rows and records printed for a person carry text the program chose; on a terminal
    that is not UTF-8, U+00DD (C3 9D) would be an OSC there. It is shown as tmux shows
    it, an underscore; on a UTF-8 terminal as it is."""
    s = daemon.call("session.create")["session"]
    started = daemon.call("run", {"session": s, "key": "k", "argv": ["printf", "\u00dd2;t\\n"]})
    daemon.call("run.wait", {"run": started["run"], "timeout_ms": 20000})
    for args in (("run", "log", "--run", started["run"]), ("run", "get", "--run", started["run"])):
        ascii_view = on_a_terminal(daemon, "C", *args)
        assert b"_2;t" in ascii_view and ascii_view.isascii(), ascii_view
        assert "\u00dd2;t".encode() in on_a_terminal(daemon, "C.UTF-8", *args)


def test_files_and_pipes_get_utf8_whatever_the_encoding(daemon: Daemon) -> None:
    """A locale whose charset lacks a character (here Latin-1, as PYTHONIOENCODING sets
    it) made a row with it a traceback; a pipe gets UTF-8."""
    s = daemon.call("session.create")["session"]
    started = daemon.call("run", {"session": s, "key": "k", "argv": ["printf", "\U0001d11e\\n"]})
    daemon.call("run.wait", {"run": started["run"], "timeout_ms": 20000})
    for args in (("run", "get", "--run", started["run"]), ("run", "log", "--run", started["run"])):
        done = subprocess.run(
            [PY, "-m", "venomx", *args],
            capture_output=True,
            env={**exec_env(daemon), "PYTHONIOENCODING": "latin-1", "VENOMX_TOKEN": "@owner"},
            timeout=60,
        )
        assert done.returncode == 0, done.stderr
        assert "\U0001d11e".encode() in done.stdout


def test_keys_go_on_after_a_send_the_run_did_not_take(daemon: Daemon) -> None:
    """exec on a terminal types the person's keys into the run. A program that does not
    read for a while (raw mode, its terminal's buffer full) makes a send wait and time
    out (timeout.input, 5 s): exec stopped forwarding for good, so nothing typed later
    reached the run, Ctrl-C included, and the person could not end it. Keys typed while
    such a send waits now go on after it."""
    prog = (
        "import select, sys, time, tty\n"
        "tty.setraw(0); print('ready', flush=True); time.sleep(7)\n"
        "end = time.monotonic() + 30\n"
        "while select.select([0], [], [], max(0, end - time.monotonic()))[0]:\n"
        "    if b'q' in sys.stdin.buffer.raw.read(65536): print('quit', flush=True); break\n"
        "else: sys.exit(3)"
    )
    main, sub = os.openpty()
    try:
        proc = subprocess.Popen(
            [PY, "-m", "venomx", "exec", "--", PY, "-c", prog],
            stdin=sub,
            stdout=sub,
            stderr=subprocess.PIPE,
            env=exec_env(daemon),
        )
    finally:
        os.close(sub)
    view = OnPty(main, proc)
    blocked = threading.Event()

    def type_keys() -> None:  # as a terminal takes them: a paste, then one key behind it
        with contextlib.suppress(OSError):
            # 48 KiB: more than the run's terminal holds unread, so a send waits, and
            # less than exec holds meanwhile (Typed.HELD_MAX), so the key behind it is
            # never dropped, however much of the paste that first send took
            for _ in range(96):
                os.write(main, b"y" * 512)
            blocked.wait(30)
            os.write(main, b"q")

    try:
        view.until(b"ready")
        waiting = daemon.call("doctor")["counters"]["requests_waiting"]
        threading.Thread(target=type_keys, daemon=True).start()
        wait_for(
            lambda: daemon.call("doctor")["counters"]["requests_waiting"] > waiting,
            30,
            "a send waiting for the sleeping run",
        )
        blocked.set()
        _, err = proc.communicate(timeout=60)
        assert proc.returncode == 0, err
        view.rest()
        assert b"quit" in view.shown
    finally:
        blocked.set()
        proc.kill()
        proc.wait()
        os.close(main)
