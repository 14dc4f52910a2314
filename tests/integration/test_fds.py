"""Descriptor exhaustion (issue 15 §3): a start out of descriptors fails ``unavailable.spawn``
``{"errno": "EMFILE"}`` and leaves nothing behind, accept backs off instead of spinning,
doctor's ``fds`` check judges the count against the limit, and the daemon raises its own
soft limit while every pane's leader keeps the one the daemon was started with."""

from __future__ import annotations

import functools
import os
import re
import resource
import signal
import socket
import subprocess
import time
from pathlib import Path
from typing import Any

import psutil
import pytest

from tests.helpers import PY, Daemon, forkserver_pid, serves, stop_daemon, wait_for
from venomx.client import Client
from venomx.daemon import doctor
from venomx.wire import VenomxError


def limited_daemon(tmp: Path, soft: int, hard: int) -> Daemon:
    """A daemon started with RLIMIT_NOFILE (soft, hard), logging to tmp/d.log."""
    sock, log = str(tmp / "s.sock"), tmp / "d.log"

    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))

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

    def ready() -> bool:
        assert proc.poll() is None, log.read_text() if log.exists() else "no log"
        try:
            Client(sock, "@owner").close()
            return True
        except VenomxError:
            return False

    try:
        wait_for(ready, 15, "daemon socket")
    except BaseException:
        stop_daemon(d)
        raise
    return d


def settled(c: Client, d: Daemon) -> dict[str, Any] | None:
    """Doctor's report once the spare pool is full and every child is accounted for: the
    fork server, the spares and one sentinel per live pane (no spare still being made)."""
    doc = c.call("doctor", {})
    live = doc["counters"]["panes"]["running"] + doc["counters"]["panes"]["terminating"]
    spares = doc["sentinels"]["spares"]
    if spares == doc["sentinels"]["spares_target"] and len(d.children()) == 1 + spares + live:
        return doc
    return None


def world(c: Client, d: Daemon) -> dict[str, Any]:
    """What a failed start must not change, read over an already open connection."""
    doc = c.call("doctor", {})
    counters = doc["counters"]
    return {
        "panes": counters["panes"],
        "sessions": counters["sessions"],
        "windows": counters["windows"],
        "principals": counters["principals"],
        "events": counters["events"],
        "bindings": doc["run"]["key_bindings"],
        "runs": [r["run"] for r in c.call("run.list", {"limit": 1024})["runs"]],
        "sentinels": doc["sentinels"]["expected"],
        "spares": doc["sentinels"]["spares"],
        "children": len(d.children()),
    }


def holds_more_than(d: Daemon, n: int) -> bool:
    return d.fds() > n


def fill(d: Daemon, upto: int, held: list[socket.socket]) -> None:
    """Connect idle clients, one accepted at a time, until the daemon holds ``upto``
    descriptors (on a settled daemon: nothing else opens or closes one meanwhile)."""
    while (n := d.fds()) < upto:
        s = socket.socket(socket.AF_UNIX)
        s.connect(d.socket)
        held.append(s)
        wait_for(functools.partial(holds_more_than, d, n), 5, "the daemon to accept")


def attempt(c: Client, params: dict[str, Any]) -> dict[str, Any] | None:
    """A run, or None while it still fails for want of descriptors."""
    try:
        return c.call("run", params)
    except VenomxError as exc:
        if (exc.code, exc.data) == ("unavailable.spawn", {"errno": "EMFILE"}):
            return None
        raise


def test_a_start_out_of_descriptors_fails_emfile_and_leaves_nothing(tmp: Path) -> None:
    d = limited_daemon(tmp, 64, 64)  # soft == hard: the daemon cannot raise it
    held: list[socket.socket] = []
    try:
        c = d.client()
        s = c.call("session.create", {})["session"]
        base = wait_for(lambda: settled(c, d), 15, "a full spare pool")
        base_fds = d.fds()
        assert base["fds"] == base_fds and base["fds_limit"] == 64
        assert next(x for x in base["checks"] if x["name"] == "fds") == {
            "name": "fds",
            "status": "ok",
            "detail": f"{base_fds} of 64 open",
        }
        # the warn edge: 80% of 64 is 51.2, so 51 is ok and 52 warns
        for n, status in ((51, "ok"), (52, "warn")):
            fill(d, n, held)
            doc = c.call("doctor", {})
            assert (doc["fds"], next(x for x in doc["checks"] if x["name"] == "fds")) == (
                n,
                {"name": "fds", "status": status, "detail": f"{n} of 64 open"},
            )
        fill(d, 64, held)
        for _ in range(5):  # clients still knocking, waiting in the backlog
            k = socket.socket(socket.AF_UNIX)
            k.connect(d.socket)
            held.append(k)
        doc = c.call("doctor", {})
        fds = next(x for x in doc["checks"] if x["name"] == "fds")
        assert fds["status"] == "fail" and doc["status"] == "fail", fds
        assert fds["detail"].startswith("64 of 64 open") and doc["fds"] == 64
        # Starts that take a spare need no new descriptor in the daemon and succeed (their
        # pidfd watch is skipped); once the pool is spent (it cannot refill), a start
        # needs a socketpair and fails cleanly.
        started: list[str] = []
        error: VenomxError | None = None
        for i in range(8):
            before = world(c, d)
            try:
                r = c.call("run", {"key": f"fd{i}", "session": s, "argv": ["sleep", "600"]})
            except VenomxError as exc:
                error = exc
                break
            started.append(r["run"])
        assert error is not None, "every start succeeded"
        assert (error.code, error.data) == ("unavailable.spawn", {"errno": "EMFILE"})
        assert 1 <= len(started) <= 6 and d.fds() == 64
        assert world(c, d) == before
        try:
            c.call("window.create", {"session": s, "argv": ["true"]})
            raise AssertionError("window.create started out of descriptors")
        except VenomxError as exc:
            assert (exc.code, exc.data) == ("unavailable.spawn", {"errno": "EMFILE"})
        assert world(c, d) == before
        # A fork server that dies now cannot be replaced (no socketpair): starts keep
        # failing EMFILE, and it is tried again until descriptors are back.
        forkserver = forkserver_pid(doc)
        assert forkserver, doc["checks"]
        os.kill(forkserver, signal.SIGKILL)
        wait_for(
            lambda: "cannot restart the fork server" in d.log.read_text(), 15, "the failed restart"
        )
        e = c.call("doctor", {})
        assert next(x for x in e["checks"] if x["name"] == "fork_server")["status"] == "fail"
        # the dead one's pid, free for any process now, is not taken for a fork server
        assert e["fork_server"]["pid"] == 0 and e["fork_server"]["restarts"] == 1, e
        try:
            c.call("run", {"key": "after-restart", "session": s, "argv": ["true"]})
            raise AssertionError("a run started without a fork server")
        except VenomxError as exc:
            assert (exc.code, exc.data) == ("unavailable.spawn", {"errno": "EMFILE"})
        assert "Traceback" not in d.log.read_text() and "trace=" not in d.log.read_text()
        for k in held:
            k.close()
        held.clear()
        # Descriptors are back, and once no pane program lives (a new fork server is
        # dumpable while it starts) the fork server is restarted, the same key starts
        # (it was never bound), the pool refills.
        for run in started:
            c.call("run.cancel", {"run": run})
        key = f"fd{len(started)}"
        r = wait_for(
            lambda: attempt(c, {"key": key, "session": s, "argv": ["true"]}), 15, "a start"
        )
        assert r["reused"] is False
        assert d.wait_exit(r["run"])["outcome"] == "succeeded"
        for run in started:
            assert d.wait_exit(run)["outcome"] == "terminated"
        end = wait_for(lambda: settled(c, d), 15, "the spare pool to refill")
        assert end["counters"]["connections"] == base["counters"]["connections"]
        assert d.fds() == base_fds  # nothing leaked on the way
    finally:
        for k in held:
            k.close()
        stop_daemon(d)


def accept_lines(d: Daemon) -> list[str]:
    return [ln for ln in d.log.read_text().splitlines() if "accept failed: EMFILE" in ln]


def test_accept_out_of_descriptors_backs_off_without_spinning(tmp: Path) -> None:
    d = limited_daemon(tmp, 64, 64)
    held: list[socket.socket] = []
    try:
        c = d.client()
        wait_for(lambda: settled(c, d), 15, "a full spare pool")  # no descriptor in flux
        fill(d, 64, held)
        for _ in range(20):  # clients knocking: the listening socket stays readable
            k = socket.socket(socket.AF_UNIX)
            k.connect(d.socket)
            held.append(k)
        proc = psutil.Process(d.proc.pid)
        wait_for(lambda: len(accept_lines(d)) >= 2, 15, "the back-off to start")
        first = len(accept_lines(d))
        t0, cpu0 = time.monotonic(), sum(proc.cpu_times()[:2])
        # a window of about 3 s, measured by the daemon's own retries (one line a second)
        wait_for(lambda: len(accept_lines(d)) >= first + 3, 15, "three more retries")
        wall, cpu = time.monotonic() - t0, sum(proc.cpu_times()[:2]) - cpu0
        # A loop that retried on every readiness would burn about a core: > 10x this.
        assert cpu <= 0.1 * wall, (cpu, wall)
        window = accept_lines(d)[first:]
        tries = len(window) + sum(
            int(n) for ln in window for n in re.findall(r"suppressed=(\d+)", ln)
        )
        assert tries <= 2 * wall + 2, (tries, wall, window)  # asyncio's server: ~100 a second
        assert "trace=" not in d.log.read_text()
        for k in held:
            k.close()
        held.clear()

        wait_for(lambda: serves(d), 15, "the daemon to accept again")
    finally:
        for k in held:
            k.close()
        stop_daemon(d)


def nofile(pid: int) -> tuple[int, int]:
    with open(f"/proc/{pid}/limits") as f:
        line = next(ln for ln in f if ln.startswith("Max open files"))
    soft, hard = line.split()[3:5]
    return int(soft), int(hard)


def test_the_daemon_raises_its_limit_and_every_leader_keeps_the_original(tmp: Path) -> None:
    d = limited_daemon(tmp, 256, 4096)
    try:
        assert nofile(d.proc.pid) == (4096, 4096)
        c = d.client()
        s = c.call("session.create", {})["session"]
        wait_for(lambda: settled(c, d), 15, "a full spare pool")  # the fork server is up

        def forkserver() -> int:
            doc = c.call("doctor", {})
            assert doc["fds_limit"] == 4096
            return forkserver_pid(doc)

        def limits(key: str) -> list[str]:
            r = c.call(
                "run", {"key": key, "session": s, "argv": ["sh", "-c", "ulimit -Sn; ulimit -Hn"]}
            )
            rec = d.wait_exit(r["run"])
            assert rec["outcome"] == "succeeded", rec
            return [ln.strip() for ln in rec["output"]["lines"] if ln.strip()]

        old = forkserver()
        assert nofile(old) == (256, 4096)
        assert limits("before") == ["256", "4096"]
        os.kill(old, signal.SIGKILL)
        new = wait_for(
            lambda: (pid := forkserver()) not in (0, old) and pid, 15, "a new fork server"
        )
        # (it gives the limit back before it forks anything; it may still be importing)
        wait_for(lambda: nofile(new) == (256, 4096), 15, "the new fork server's limit")
        for i in range(9):  # past the old spares: sentinels of the new fork server too
            assert limits(f"after{i}") == ["256", "4096"], i
    finally:
        stop_daemon(d)


@pytest.mark.parametrize(
    ("n", "status"), [(79, "ok"), (80, "warn"), (94, "warn"), (95, "fail"), (100, "fail")]
)
def test_fds_check_warns_at_80_and_fails_at_95_percent(n: int, status: str) -> None:
    assert doctor.fds_check(doctor.ProcFacts(fds=n), 100) == (
        {"name": "fds", "status": status, "detail": f"{n} of 100 open"},
        n,
    )


def test_fds_check_when_proc_cannot_be_read() -> None:
    check, n = doctor.fds_check(doctor.ProcFacts(short="EMFILE"), 64)
    assert n == 64 and check == {
        "name": "fds",
        "status": "fail",
        "detail": "64 of 64 open; out of descriptors (EMFILE), process checks incomplete",
    }
    check, n = doctor.fds_check(doctor.ProcFacts(fds=40, short="EMFILE"), 64)
    assert (n, check["status"]) == (40, "fail")  # counted, but the rest could not be read
    check, n = doctor.fds_check(doctor.ProcFacts(short="ENFILE"), 64)
    assert (n, check["status"]) == (-1, "fail") and "ENFILE" in check["detail"]
