"""Bounded logs (issue 15 §5): rotation by size, SIGHUP reopens and stops nothing, repeated
errors are counted instead of written, a traceback is written once per cause, and accept
out of descriptors writes at most one line per second."""

from __future__ import annotations

import functools
import io
import json
import logging
import os
import re
import resource
import signal
import socket
import subprocess
import time
from pathlib import Path

from tests.helpers import PY, Daemon, serves, start_daemon, stop_daemon, wait_for, wait_listening
from venomx.daemon.logs import KeyValueFormatter, Limiter


def lines(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


def test_sighup_reopens_the_log_and_the_daemon_keeps_its_runs(tmp: Path) -> None:
    log = tmp / "d.log"
    d = start_daemon(extra=["--log-file", str(log)])
    try:
        s = d.call("session.create")["session"]
        run = d.call("run", {"key": "hup", "session": s, "argv": ["sleep", "60"]})["run"]
        assert any("listening socket=" in line for line in lines(log))
        os.rename(log, tmp / "d.log.1")  # what logrotate does before postrotate
        os.kill(d.proc.pid, signal.SIGHUP)
        wait_for(
            lambda: any("SIGHUP: log file reopened" in line for line in lines(log)),
            10,
            "a new log file",
        )
        assert d.proc.poll() is None
        assert d.call("run.get", {"run": run})["state"] == "running"
        d.call("config.get", {"path": "log.keep"})
        wait_for(
            lambda: any("verb=config.get" in line for line in lines(log)),
            10,
            "the next line in the new file",
        )
        assert not any("verb=config.get" in line for line in lines(tmp / "d.log.1"))
        assert os.stat(log).st_mode & 0o777 == 0o600
        d.proc.send_signal(signal.SIGINT)  # SIGINT and SIGTERM still shut down in order
        assert d.proc.wait(10) == 0 and not os.path.exists(d.socket)
        assert any("stopped source=" in line for line in lines(log))
    finally:
        stop_daemon(d)


def reopens_refused(daemon: Daemon, n: int) -> bool:
    return daemon.log.read_text().count("no log file to reopen") == n


def test_sighup_while_logging_to_stderr_stops_nothing(daemon: Daemon) -> None:
    s = daemon.call("session.create")["session"]
    run = daemon.call("run", {"key": "hup", "session": s, "argv": ["sleep", "60"]})["run"]
    for n in range(1, 4):
        os.kill(daemon.proc.pid, signal.SIGHUP)
        wait_for(functools.partial(reopens_refused, daemon, n), 10, f"HUP {n} handled")
    assert daemon.proc.poll() is None and os.path.exists(daemon.socket)
    assert daemon.call("run.get", {"run": run})["state"] == "running"


def test_log_rotates_at_max_bytes_keeping_log_keep_files(tmp: Path) -> None:
    log = tmp / "d.log"
    d = start_daemon(extra=["--log-file", str(log)], config="[log]\nmax_bytes = 4096\nkeep = 2\n")
    try:
        with d.client() as c:
            for _ in range(150):  # one audit line (~100 bytes) each: about 4 files' worth
                c.call("config.get", {"path": "log.keep"})
        wait_for(lambda: "audit seq=150 " in log.read_text(), 10, "the last audit line")
        names = sorted(os.listdir(tmp))
        assert names == ["d.log", "d.log.1", "d.log.2"], names
        for name in names:
            st = os.lstat(tmp / name)
            assert st.st_size <= 4096 and st.st_mode & 0o777 == 0o600
        seqs = [
            int(m.group(1))
            for name in ("d.log.2", "d.log.1", "d.log")
            for m in re.finditer(r"audit seq=(\d+)", (tmp / name).read_text())
        ]
        assert seqs == list(range(seqs[0], 151))  # in order, the newest last
        (tmp / "d.log.9").mkdir()  # in the way of a drop: it raised, and logging stopped
        d.call("config.set", {"path": "log.keep", "value": "0"})  # .1 and .2 were left for ever
        with d.client() as c:
            for _ in range(60):
                c.call("config.get", {"path": "log.keep"})
        assert sorted(os.listdir(tmp)) == ["d.log", "d.log.9"]
        wait_for(lambda: "audit seq=211 " in log.read_text(), 10, "logging goes on")
        (tmp / "d.log.9").rmdir()
        d.call("config.set", {"path": "log.max_bytes", "value": "0"})  # 0: never rotate
        with d.client() as c:
            for _ in range(60):
                c.call("config.get", {"path": "log.keep"})
        assert os.path.getsize(log) > 4096
        e = d.error("config.set", {"path": "log.max_bytes", "value": "4095"})
        assert e.code == "invalid_params.config"
    finally:
        stop_daemon(d)


def test_accept_out_of_descriptors_logs_at_most_one_line_per_second(tmp: Path) -> None:
    sock = str(tmp / "s.sock")
    log = tmp / "d.log"

    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_NOFILE, (64, 64))

    env = {k: v for k, v in os.environ.items() if not k.startswith("VENOMX_")}
    proc = subprocess.Popen(
        [PY, "-m", "venomx", "serve", "--socket", sock, "--log-file", str(log)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=env,
        cwd="/tmp",
        start_new_session=True,
        preexec_fn=limit,
    )
    d = Daemon(sock, proc, log)
    held: list[socket.socket] = []
    try:
        wait_listening(proc, sock, log)
        for _ in range(90):  # more than its descriptors: the rest wait in the backlog
            s = socket.socket(socket.AF_UNIX)
            s.connect(sock)
            held.append(s)
        start = time.monotonic()

        def accept_lines() -> list[str]:
            return [line for line in lines(log) if "accept failed: EMFILE" in line]

        wait_for(
            lambda: any("suppressed=" in line for line in accept_lines()),
            15,
            "a counted accept line",
        )
        elapsed = time.monotonic() - start
        found = accept_lines()
        assert 1 < len(found) <= elapsed + 2, (elapsed, found)
        assert sum(int(m) for line in found for m in re.findall(r"suppressed=(\d+)", line)) > 0
        assert "trace=" not in log.read_text() and "Traceback" not in log.read_text()
        for s in held:
            s.close()
        held.clear()

        wait_for(lambda: serves(d), 15, "the daemon to accept again")
        stop_daemon(d)
        assert "trace=" not in log.read_text()
    finally:
        for s in held:
            s.close()
        stop_daemon(d)


def test_limiter_counts_repeats_and_writes_one_traceback_per_cause() -> None:
    now = [0.0]
    limiter = Limiter(interval=1.0, clock=lambda: now[0])
    out = io.StringIO()
    handler = logging.StreamHandler(out)
    handler.setFormatter(KeyValueFormatter())
    handler.addFilter(limiter)
    logger = logging.getLogger("venomx.test.limiter")
    logger.propagate = False
    logger.handlers[:] = [handler]
    logger.setLevel(logging.DEBUG)

    def fail(kind: type[Exception]) -> None:
        try:
            raise kind("boom")
        except Exception:
            logger.exception("frame handling failed")

    try:
        for _ in range(1000):  # a flood of one bad input from one call site
            fail(ValueError)
        assert out.getvalue().count("\n") == 1 and out.getvalue().count("trace=") == 1
        for _ in range(50):
            logger.info("audit line")  # info is never held back
        assert out.getvalue().count("audit line") == 50
        now[0] = 1.5
        fail(ValueError)  # the next second: one line carrying the count, no traceback
        last = out.getvalue().splitlines()[-1]
        assert "suppressed=999" in last and "trace=" not in last
        assert 'cause="ValueError@test_logs.py:' in last
        fail(KeyError)  # another cause at the same site: its own traceback
        assert out.getvalue().splitlines()[-1].count("trace=") == 1
        for _ in range(10):
            fail(ValueError)
        now[0] = 3.0
        for record in limiter.due():  # a quiet site still reports what it held back
            handler.handle(record)
        last = out.getvalue().splitlines()[-1]
        assert "suppressed=10" in last and "trace=" not in last
        assert limiter.due(force=True) == []
        assert out.getvalue().count("trace=") == 2
    finally:
        logger.handlers.clear()


def test_a_resource_a_caller_named_is_one_field_of_the_audit(daemon: Daemon) -> None:
    """A denied caller chooses the resource it names: in the log line's message it is
    one quoted logfmt value, and in ``audit list`` one line, not fields or rows of its own."""
    narrow = daemon.call("principal.create", {"grants": [{"right": "write", "scope": "pane:p9"}]})[
        "token"
    ]
    forged = "p0 verb=shutdown code=ok principal=g0\n2026-01-01T00:00:00.000Z level=info"
    assert daemon.error("pane.kill", {"pane": forged}, token=narrow).code.startswith("denied.")
    quoted = re.escape(json.dumps(json.dumps(f"pane:{forged}"))[1:-1])
    wait_for(lambda: re.search(f"resource={quoted}", daemon.log.read_text()), 10, "audit line")
    assert " resource=pane:p0 verb=" not in daemon.log.read_text()
    out = daemon.cli("audit", "list").out
    assert "\\x0a2026-01-01T00:00:00.000Z" in out, out
    assert not any(ln.startswith("2026-01-01T00:00:00.000Z") for ln in out.splitlines()), out
