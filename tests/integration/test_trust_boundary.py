"""The trust boundary, tried as the program under a run would try it.

Nothing of venomx crosses exec but the PTY on fds 0-2; a forged EXIT has nowhere to go;
a program of the same uid cannot ptrace or take fds from the daemon, the fork server or
its sentinel; and when a sentinel is killed, stopped or lost, the run still completes
from the daemon's own wait status with a record that says venomx failed.
"""

from __future__ import annotations

import functools
import json
import os
import resource
import shutil
import signal
import socket
import subprocess
import sys
import sysconfig
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import psutil
import pytest

from tests.helpers import (
    PY,
    ROOT,
    Daemon,
    reserve_of,
    running,
    start_daemon,
    stop_daemon,
    wait_for,
)
from venomx.client import Client
from venomx.daemon.cgroups import locate
from venomx.wire import VenomxError, dumps
from workers import inherited
from workers import protocol as P
from workers.inherited import CHANGED
from workers.tracer import tracer_of

CENSUS = """
import os, sys
def fds():
    out = []
    for fd in range(1024):
        try:
            os.fstat(fd)
        except OSError:
            continue
        out.append(fd)
    return out
print("LEADER", fds())
r, w = os.pipe()
if os.fork() == 0:
    os.close(r)
    os.setsid()
    if os.fork() == 0:  # a background grandchild that left the group
        print("GRANDCHILD", [fd for fd in fds() if fd != w])
        sys.stdout.flush()
        os._exit(0)  # closes w: the leader stops waiting only then
    os._exit(0)
os.close(w)
os.read(r, 1)
os.wait()
"""


def session(d: Daemon) -> str:
    return str(d.call("session.create")["session"])


def lines_of(rec: dict[str, Any]) -> list[str]:
    return [ln.rstrip() for ln in rec["output"]["lines"]]


def run_and_wait(d: Daemon, argv: list[str], key: str, **extra: Any) -> dict[str, Any]:
    r = d.call("run", {"key": key, "session": session(d), "argv": argv, "cols": 120, **extra})
    with Client(d.socket, "@owner") as c:
        return c.call("run.wait", {"run": r["run"], "timeout_ms": 20000})


def census_lines(text: list[str]) -> dict[str, str]:
    out = {}
    for ln in text:
        for who in ("LEADER", "GRANDCHILD"):
            if ln.startswith(who):
                out[who] = ln[len(who) :].strip()
    return out


def test_run_leader_and_grandchild_hold_only_the_terminal(daemon: Daemon) -> None:
    rec = run_and_wait(daemon, [PY, "-c", CENSUS], "census")
    assert rec["outcome"] == "succeeded", rec
    got = census_lines(lines_of(rec))
    assert got.get("LEADER") == "[0, 1, 2]", rec
    assert got.get("GRANDCHILD") == "[0, 1, 2]", rec


IGNORING = (
    "import os, signal, sys; "
    "[signal.signal(n, signal.SIG_IGN) for n in (signal.SIGUSR2, signal.SIGRTMIN + 6)]; "
    "os.execv(sys.argv[1], sys.argv[1:])"
)
GLIBC_OWN = (1 << 31) | (1 << 32)  # signals 32 and 33, which posix_spawn sets to ignored


def test_the_leader_starts_with_every_signal_at_its_default() -> None:
    """Whatever the daemon inherited (a CI runner that ignores a real-time signal) or its
    workers set, the program starts with no signal ignored or blocked, as from a shell."""
    d = start_daemon(wrap=[PY, "-c", IGNORING])
    try:
        assert int(status_field(d.proc.pid, "SigIgn"), 16) & (1 << 39)  # 40 = SIGRTMIN+6
        rec = run_and_wait(d, ["grep", "-E", "^Sig(Ign|Blk)", "/proc/self/status"], "sigs")
        fields = dict(ln.split(":") for ln in lines_of(rec) if ln)
        assert int(fields["SigBlk"], 16) == 0, fields
        assert int(fields["SigIgn"], 16) & ~GLIBC_OWN == 0, fields
    finally:
        stop_daemon(d)


def status_field(pid: int, name: str) -> str:
    for ln in Path(f"/proc/{pid}/status").read_text().splitlines():
        if ln.startswith(name + ":"):
            return ln.split(":", 1)[1].strip()
    raise AssertionError(name)


def final_lines(d: Daemon, pane: str) -> list[str]:
    def exited() -> bool:
        return any(
            p["pane"] == pane and p["state"] == "exited" for p in d.call("pane.list")["panes"]
        )

    wait_for(exited, 20, "pane exit")
    return [ln.rstrip() for ln in d.call("pane.capture_rows", {"pane": pane})["lines"]]


def test_window_and_split_leaders_hold_only_the_terminal(daemon: Daemon) -> None:
    s = session(daemon)
    w = daemon.call("window.create", {"session": s, "argv": ["sleep", "30"], "cols": 120})
    split = daemon.call(
        "pane.split", {"pane": w["pane"], "argv": [PY, "-c", CENSUS], "axis": "cols", "cols": 120}
    )
    win = daemon.call("window.create", {"session": s, "argv": [PY, "-c", CENSUS], "cols": 120})
    for pane in (split["pane"], win["pane"]):
        got = census_lines(final_lines(daemon, pane))
        assert got.get("LEADER") == "[0, 1, 2]", got
        assert got.get("GRANDCHILD") == "[0, 1, 2]", got
    daemon.call("pane.kill", {"pane": w["pane"], "grace_ms": 0})


def test_forged_exit_frame_changes_nothing(daemon: Daemon) -> None:
    state = {
        "screen": "primary",
        "epoch": 1,
        "offset": 16,
        "cols": 80,
        "rows": 24,
        "oldest": 0,
        "history": [],
        "lines": ["ALL TESTS PASSED"],
        "cursor": [0, 0],
    }
    frame = P.encode(P.Exit(0, state))
    attack = (
        "import os\n"
        f"frame = bytes.fromhex({frame.hex()!r})\n"
        "hits = 0\n"
        "for fd in range(3, 1024):\n"
        "    for data in (frame, b'\\xc1' * 64):\n"
        "        try:\n"
        "            os.write(fd, data)\n"
        "            hits += 1\n"
        "        except OSError:\n"
        "            pass\n"
        "print('wrote', hits)\n"
        "raise SystemExit(1)\n"
    )
    rec = run_and_wait(daemon, [PY, "-c", attack], "forge")
    assert rec["outcome"] == "failed" and rec["exit_code"] == 1 and rec["status"] == 1, rec
    assert "fault" not in rec
    assert lines_of(rec) == ["wrote 0"]
    assert daemon.call("doctor")["sentinels"]["lost"]["count"] == 0


# -- sentinel loss -------------------------------------------------------------------------


def sentinel_of(leader: int) -> int:
    return int(psutil.Process(leader).ppid())


def events_of(d: Daemon, pane: str) -> list[str]:
    evs = d.call("events.read", {"after": 0, "limit": 1000})["events"]
    return [e["type"] for e in evs if e["data"].get("pane") == pane]


def start_run(d: Daemon, script: str, key: str, **extra: Any) -> dict[str, Any]:
    return d.call("run", {"key": key, "session": session(d), "shell": script, **extra})


def wait_run(d: Daemon, run: str) -> dict[str, Any]:
    with Client(d.socket, "@owner") as c:
        return c.call("run.wait", {"run": run, "timeout_ms": 20000})


def ready(d: Daemon, pane: str, text: str) -> None:
    wait_for(
        lambda: any(text in ln for ln in d.call("pane.capture_rows", {"pane": pane})["lines"]),
        10,
        f"{text!r} on screen",
    )


def assert_lost_record(rec: dict[str, Any]) -> None:
    assert rec["fault"] == "sentinel_lost", rec
    out = rec["output"]
    assert out["complete"] is False and out["lines"] == []
    assert out["oldest"] == out["start"] == out["end"]


def test_killed_sentinel_is_recorded_as_lost(daemon: Daemon) -> None:
    r = start_run(daemon, "echo ready; sleep 30", "lost")
    ready(daemon, r["pane"], "ready")
    os.kill(sentinel_of(r["pid"]), signal.SIGKILL)
    rec = wait_run(daemon, r["run"])
    # the leader really died of the terminal's hangup: RFC-0015 §5's table is unchanged
    assert rec["outcome"] == "signaled" and rec["signal"] == "SIGHUP", rec
    assert_lost_record(rec)
    assert rec["output"]["offset"] >= 0 and rec["output"]["epoch"] == 1
    types = events_of(daemon, r["pane"])
    assert types.index("pane.sentinel_lost") < types.index("pane.exited")
    lost = daemon.call("doctor")["sentinels"]["lost"]
    assert lost["count"] == 1 and lost["recent"][0]["pane"] == r["pane"]
    assert lost["recent"][0]["run"] == r["run"]
    with pytest.raises(Exception) as err:
        daemon.call("pane.capture_rows", {"pane": r["pane"]})
    assert getattr(err.value, "code", "") == "unavailable.sentinel"


def test_program_that_kills_its_sentinel_keeps_its_real_outcome(
    daemon: Daemon, tmp_path: Path
) -> None:
    go = tmp_path / "go"
    r = start_run(
        daemon,
        f"trap '' HUP; until [ -e {go} ]; do sleep 0.02; done; kill -9 $PPID; sleep 0.2; exit 3",
        "suicide",
    )
    go.touch()  # once the start has committed: the program now kills its own sentinel
    rec = wait_run(daemon, r["run"])
    assert rec["outcome"] == "failed" and rec["exit_code"] == 3, rec
    assert_lost_record(rec)


def test_lost_sentinel_with_hup_ignoring_leader_can_still_be_cancelled(daemon: Daemon) -> None:
    r = start_run(daemon, "trap '' HUP; echo ready; while :; do sleep 1; done", "ignore")
    ready(daemon, r["pane"], "ready")
    watching = daemon.client().stream("pane.attach", {"pane": r["pane"]})
    assert "screen" in next(watching)
    os.kill(sentinel_of(r["pid"]), signal.SIGKILL)
    with pytest.raises(VenomxError) as ended:  # at once, not when the leader ends
        next(watching)
    assert ended.value.code == "unavailable.sentinel"
    wait_for(lambda: "pane.sentinel_lost" in events_of(daemon, r["pane"]), 10, "loss seen")
    assert daemon.call("run.get", {"run": r["run"]})["state"] == "running"
    assert daemon.call("doctor")["status"] == "fail"
    lost = {"pane": r["pane"], "reason": "lost"}
    for verb in ("pane.attach", "pane.capture_rows"):  # its screen went with it
        e = daemon.error(verb, {"pane": r["pane"]})
        assert (e.code, e.data) == ("unavailable.sentinel", lost), verb
    rec = daemon.call("run.cancel", {"run": r["run"], "grace_ms": 200})
    assert rec["state"] == "completed" and rec["outcome"] == "terminated", rec
    assert_lost_record(daemon.call("run.get", {"run": r["run"]}))
    e = daemon.error("pane.attach", {"pane": r["pane"]})
    assert (e.code, e.data) == ("unavailable.sentinel", lost)


def test_stopped_sentinel_does_not_stop_a_kill(daemon: Daemon) -> None:
    r = start_run(daemon, "echo ready; sleep 30", "stopped")
    ready(daemon, r["pane"], "ready")
    sentinel = sentinel_of(r["pid"])
    os.kill(sentinel, signal.SIGSTOP)
    wait_for(lambda: psutil.Process(sentinel).status() == psutil.STATUS_STOPPED, 5, "stop")
    doc = daemon.call("doctor")
    assert doc["status"] == "fail" and doc["sentinels"]["stopped"] == [r["pane"]]
    rec = daemon.call("run.cancel", {"run": r["run"], "signal": "SIGKILL", "grace_ms": 0})
    assert rec["state"] == "completed" and rec["outcome"] == "terminated", rec
    assert rec["signal"] == "SIGKILL"
    assert_lost_record(daemon.call("run.get", {"run": r["run"]}))
    wait_for(
        lambda: (
            not psutil.pid_exists(sentinel)
            or psutil.Process(sentinel).status() == psutil.STATUS_ZOMBIE
        ),
        5,
        "sentinel gone",
    )


def test_deadline_fires_with_the_sentinel_stopped(daemon: Daemon) -> None:
    r = start_run(daemon, "echo ready; sleep 30", "deadline", deadline_ms=4000)
    ready(daemon, r["pane"], "ready")
    os.kill(sentinel_of(r["pid"]), signal.SIGSTOP)
    rec = wait_run(daemon, r["run"])
    assert rec["outcome"] == "terminated" and rec["cause"] == "deadline", rec
    assert rec["signal"] == "SIGHUP"
    assert_lost_record(rec)


# -- another uid: ptrace and pidfd_getfd ---------------------------------------------------

NOBODY = 65534

PTRACE = """
import ctypes, errno, os, sys
libc = ctypes.CDLL(None, use_errno=True)
PTRACE_ATTACH, PTRACE_DETACH, SYS_pidfd_getfd = 16, 17, 438
results = []
for pid in [*map(int, sys.argv[1:]), os.getppid()]:
    ok = libc.ptrace(PTRACE_ATTACH, pid, 0, 0) == 0
    err = ctypes.get_errno()
    if ok:
        os.waitpid(pid, 0)
        libc.ptrace(PTRACE_DETACH, pid, 0, 0)
    got = -1
    try:
        pidfd = os.pidfd_open(pid)
        got = libc.syscall(SYS_pidfd_getfd, pidfd, 3, 0)
    except OSError:
        pass
    results.append(f"{pid}:{'ATTACHED' if ok else errno.errorcode.get(err, err)}:"
                   f"{'STOLE' if got >= 0 else 'nofd'}")
print(" ".join(results))
"""


AS_NOBODY = ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups"]


def nobody_python() -> str | None:
    """An interpreter of our version that uid 65534 can run (ours may live under /root)."""
    version = f"python{sys.version_info.major}.{sys.version_info.minor}"
    for candidate in (os.path.realpath(PY), f"/usr/bin/{version}", f"/usr/local/bin/{version}"):
        if (
            os.path.exists(candidate)
            and subprocess.run(
                [*AS_NOBODY, "sh", "-c", f'exec "{candidate}" -c pass'],
                capture_output=True,
                timeout=30,
            ).returncode
            == 0
        ):
            return candidate
    return None


DRIVER = """
import json, sys
from venomx.client import Client
sock, python, attack, forkserver, daemon = sys.argv[1:6]
with Client(sock, "@owner") as c:
    s = c.call("session.create", {})["session"]
    w = c.call("window.create", {"session": s, "argv": ["sleep", "30"]})
    with open(f"/proc/{w['pid']}/stat") as f:
        sentinel = int(f.read().rsplit(")", 1)[1].split()[1])
    r = c.call("run", {"key": "ptrace", "session": s, "cols": 200,
                       "argv": [python, "-c", attack, daemon, forkserver, str(sentinel)]})
    rec = c.call("run.wait", {"run": r["run"], "timeout_ms": 20000})
    c.call("pane.kill", {"pane": w["pane"], "grace_ms": 0})
print(json.dumps({"record": rec, "sentinel": sentinel}))
"""


@contextmanager
def nobody_daemon() -> Iterator[tuple[subprocess.Popen[bytes], str, str, int, dict[str, str]]]:
    """A daemon run as uid 65534 in a directory of its own: the process, its socket, an
    interpreter that uid may run, its fork server and the environment for its clients
    (clients refuse a server of another uid)."""
    if shutil.which("setpriv") is None or os.geteuid() != 0:
        pytest.skip("needs root and setpriv to run a daemon as another uid")
    python = nobody_python()
    if python is None:
        pytest.skip("no Python interpreter that uid 65534 may run")
    d = tempfile.mkdtemp(prefix="vxn", dir="/tmp")
    os.chown(d, NOBODY, NOBODY)
    sock = os.path.join(d, "s.sock")
    log = Path(d) / "daemon.log"
    env = {k: v for k, v in os.environ.items() if not k.startswith("VENOMX_")}
    env["HOME"] = d
    env["PYTHONPATH"] = ":".join(
        [str(ROOT), sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]]
    )
    with open(log, "wb") as logf:
        proc = subprocess.Popen(
            [*AS_NOBODY, python, "-m", "venomx", "serve", "--socket", sock],
            stdout=subprocess.DEVNULL,
            stderr=logf,
            env=env,
            cwd=d,
            start_new_session=True,
        )
    try:

        def forkserver() -> int | None:
            if proc.poll() is not None:
                raise AssertionError("daemon exited: " + log.read_text())
            if not os.path.exists(sock):
                return None
            return next(
                (
                    p.pid
                    for p in psutil.Process(proc.pid).children()
                    if p.cmdline()[:1] == ["venomx-forkserver"]
                ),
                None,
            )

        yield proc, sock, python, wait_for(forkserver, 15, "nobody daemon"), env
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(5)
        shutil.rmtree(d, ignore_errors=True)


def as_nobody(env: dict[str, str], *argv: str) -> Any:
    """Run ``argv`` as uid 65534 and return the JSON its last line printed."""
    out = subprocess.run(
        [*AS_NOBODY, *argv], capture_output=True, text=True, env=env, timeout=60, cwd="/"
    )
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_same_uid_program_cannot_ptrace_or_steal_fds() -> None:
    """A daemon run as uid 65534, driven by a client of that uid: a program in its run
    tries ptrace and pidfd_getfd on the daemon, the fork server, its own sentinel and
    another pane's sentinel. No Yama here to hide it."""
    with nobody_daemon() as (proc, sock, python, fs, env):
        got = as_nobody(env, python, "-c", DRIVER, sock, python, PTRACE, str(fs), str(proc.pid))
        line = " ".join(ln.rstrip() for ln in got["record"]["output"]["lines"])
        assert got["record"]["outcome"] == "succeeded", got
        assert "ATTACHED" not in line and "STOLE" not in line, line
        # the daemon, the fork server, another pane's sentinel and its own
        assert line.count(":EPERM:nofd") == 4, line
        # and a non-dumpable process's /proc entries belong to root
        for pid in (proc.pid, fs):
            assert os.stat(f"/proc/{pid}/environ").st_uid == 0


# -- requests to a sentinel have a bound ---------------------------------------------------


def test_requests_to_a_stopped_sentinel_fail_instead_of_hanging(daemon: Daemon) -> None:
    s = session(daemon)
    w = daemon.call("window.create", {"session": s, "argv": ["sh", "-c", "echo ready; sleep 60"]})
    ready(daemon, w["pane"], "ready")
    sentinel = sentinel_of(w["pid"])
    os.kill(sentinel, signal.SIGSTOP)
    try:
        doc = daemon.call("doctor")
        assert doc["status"] == "fail"
        assert doc["sentinels"]["unresponsive"] == [w["pane"]]
        for verb, params in (
            ("pane.capture_rows", {"pane": w["pane"]}),
            ("pane.resize", {"pane": w["pane"], "cols": 40, "rows": 10}),
        ):
            err = daemon.error(verb, params)
            assert err.code == "unavailable.sentinel" and err.data["reason"] == "timeout"
        pane = next(p for p in daemon.call("pane.list")["panes"] if p["pane"] == w["pane"])
        assert (pane["cols"], pane["rows"]) == (80, 24)  # not applied: not reported
    finally:
        os.kill(sentinel, signal.SIGCONT)
    # once it runs again it applies the resize it was sent, and says so
    wait_for(
        lambda: (
            next(p for p in daemon.call("pane.list")["panes"] if p["pane"] == w["pane"])["cols"]
            == 40
        ),
        10,
        "late resize",
    )
    assert daemon.call("doctor")["sentinels"]["unresponsive"] == []
    daemon.call("pane.kill", {"pane": w["pane"], "grace_ms": 0})


def test_send_reports_only_bytes_that_reached_the_terminal(daemon: Daemon) -> None:
    s = session(daemon)
    w = daemon.call("window.create", {"session": s, "argv": ["sh", "-c", "cat"]})
    assert daemon.call("pane.send", {"pane": w["pane"], "text": "hello\r"}) == {
        "pane": w["pane"],
        "bytes": 6,
    }
    ready(daemon, w["pane"], "hello")
    # a program that never reads its terminal: the PTY fills, the rest is dropped
    w2 = daemon.call(
        "window.create", {"session": s, "argv": ["sh", "-c", "stty raw -echo; echo raw; sleep 60"]}
    )
    ready(daemon, w2["pane"], "raw")
    big = "x" * 200_000
    err = daemon.error("pane.send", {"pane": w2["pane"], "text": big})
    assert err.code == "timeout.input" and 0 < err.data["bytes"] < len(big)
    for p in (w, w2):
        daemon.call("pane.kill", {"pane": p["pane"], "grace_ms": 0})


def test_each_sentinel_holds_its_own_channel_and_no_other(daemon: Daemon) -> None:
    s = session(daemon)
    panes = [
        daemon.call("window.create", {"session": s, "argv": ["sleep", "60"]}) for _ in range(3)
    ]
    seen: set[str] = set()
    for w in panes:
        sentinel = sentinel_of(w["pid"])
        fd_dir = f"/proc/{sentinel}/fd"
        sockets = [os.readlink(f"{fd_dir}/{fd}") for fd in os.listdir(fd_dir)]
        sockets = [t for t in sockets if t.startswith("socket:")]
        assert len(sockets) == 1, sockets  # its channel: no spare's, no fork server's
        seen.add(sockets[0])
    assert len(seen) == 3
    for w in panes:
        daemon.call("pane.kill", {"pane": w["pane"], "grace_ms": 0})


def caught(pid: int) -> int:
    """The signals ``pid`` has a handler for, as the kernel's SigCgt mask."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("SigCgt:"):
            return int(line.split()[1], 16)
    raise AssertionError("no SigCgt")


def test_a_sentinel_leaves_its_leader_for_its_own_wait(daemon: Daemon) -> None:
    # The fork server reaps whatever exits (its intermediates); a sentinel that kept that
    # handler would reap its leader on SIGCHLD, unpinning the group ID while the daemon
    # may still signal it. The leader's exit reaches the sentinel through a pidfd.
    w = daemon.call("window.create", {"session": session(daemon), "argv": ["sleep", "60"]})
    sentinel = sentinel_of(w["pid"])
    forkserver = [p for p in daemon.children() if "forkserver" in psutil.Process(p).name()]
    chld = 1 << (signal.SIGCHLD - 1)
    assert caught(forkserver[0]) & chld
    assert not caught(sentinel) & chld
    links = [os.readlink(f"/proc/{sentinel}/fd/{fd}") for fd in os.listdir(f"/proc/{sentinel}/fd")]
    assert "anon_inode:[pidfd]" in links
    daemon.call("pane.kill", {"pane": w["pane"], "grace_ms": 0})
    wait_for(lambda: not psutil.pid_exists(sentinel), 10, "the sentinel to end")


IMPOSTOR = """
import json, os, socket, sys
path, go = os.environ["VENOMX_SOCKET"], sys.argv[1]
os.rename(path, path + ".real")  # we may: the directory is our uid's
fake = socket.socket(socket.AF_UNIX)
fake.bind(path)
fake.listen(16)
forged = {"run": os.environ["VENOMX_RUN"], "state": "completed", "outcome": "succeeded",
          "exit_code": 0, "status": 0, "output": {"lines": ["ALL TESTS PASSED"]}}
open(go + ".swapped", "w").close()
fake.settimeout(0.05)
while not os.path.exists(go):
    try:
        conn, _ = fake.accept()
    except socket.timeout:
        continue
    conn.recv(65536)
    conn.sendall(json.dumps({"id": 0, "ok": forged}).encode() + b"\\n")
    conn.close()
sys.exit(1)
"""


def test_a_run_that_swaps_the_socket_file_cannot_answer_for_the_daemon(
    daemon: Daemon, tmp_path: Path
) -> None:
    go = tmp_path / "go"
    r = daemon.call(
        "run",
        {"key": "impostor", "session": session(daemon), "argv": [PY, "-c", IMPOSTOR, str(go)]},
    )
    wait_for(lambda: (tmp_path / "go.swapped").exists(), 10, "the socket swapped")
    # clients reach the daemon at its abstract address, not the file the run put there
    doc = daemon.call("doctor")
    assert next(c for c in doc["checks"] if c["name"] == "socket")["status"] == "fail"
    go.touch()
    rec = wait_run(daemon, r["run"])
    assert rec["outcome"] == "failed" and rec["exit_code"] == 1, rec
    cli = daemon.cli("run", "wait", "--run", r["run"], "--json")
    assert cli.code == 1 and cli.json["outcome"] == "failed"
    os.replace(daemon.socket + ".real", daemon.socket)
    doc = daemon.call("doctor")
    assert next(c for c in doc["checks"] if c["name"] == "socket")["status"] == "ok"


OWNER_PROBE = """
import os, sys
from venomx.client import Client
from venomx.wire import VenomxError
out = []
for token in ("@owner", os.environ["VENOMX_TOKEN"], None):
    try:
        with Client(os.environ["VENOMX_SOCKET"], token) as c:
            if token is None:
                out.append(f"grants={c.call('whoami')['grants']}")
            c.call("run.get", {"run": sys.argv[1]})
            out.append("read")
    except VenomxError as exc:
        out.append(exc.code)
print(" ".join(out))
"""


def test_a_program_in_a_pane_cannot_claim_owner_or_read_as_anyone(daemon: Daemon) -> None:
    s = session(daemon)
    victim = daemon.call("run", {"key": "victim", "session": s, "shell": "echo SECRET; sleep 60"})
    r = daemon.call(
        "run",
        {
            "key": "probe",
            "session": s,
            "cols": 120,
            "env": {"PYTHONPATH": str(ROOT)},
            "argv": [PY, "-c", OWNER_PROBE, victim["run"]],
        },
    )
    rec = wait_run(daemon, r["run"])
    # @owner is refused; its own token (self) does not reach another principal's run, and
    # leaving the token out makes it the anonymous caller with no grants, not read *
    assert lines_of(rec) == ["denied.owner denied.read grants=[] denied.read"], rec
    anonymous = daemon.call("whoami", token=None)["grants"]
    assert anonymous == [{"right": "read", "scope": "*"}]
    daemon.call("run.cancel", {"run": victim["run"], "grace_ms": 0})


OTHER_DAEMON_PROBE = """
import os, shlex, subprocess, sys, time
from venomx.client import Client
from venomx.wire import VenomxError
other, *own = sys.argv[1:]
out = []
for token in ("@owner", None):
    try:
        with Client(other, token) as c:
            out.append(f"grants={c.call('whoami')['grants']}")
    except VenomxError as exc:
        out.append(exc.code)
env = {**os.environ, "VENOMX_TOKEN": ""}
for i, sock in enumerate(own):
    # a daemon this pane starts serves the pane as its owner: started detached, and
    # from a subshell's background job, re-parented to our daemon before it looks
    serve = [sys.executable, "-m", "venomx", "serve", "--socket", sock, "--detach"]
    if i == 0:
        subprocess.run(serve, check=True, stdout=subprocess.DEVNULL, env=env)
    else:
        subprocess.run(["sh", "-c", f"( {shlex.join(serve)} >/dev/null & )"], check=True, env=env)
    deadline = time.monotonic() + 20
    while True:
        try:
            with Client(sock, "@owner") as c:
                out.append(c.call("whoami")["principal"])
            break
        except VenomxError as exc:
            if exc.code == "denied.owner" or time.monotonic() > deadline:
                out.append(exc.code)
                break
            time.sleep(0.05)
print(" ".join(out))
"""


def test_a_program_in_a_pane_is_not_the_owner_of_another_daemon(
    daemon: Daemon, tmp_path: Path
) -> None:
    """Two daemons of one uid: a run with no grants asked the other for @owner and, from
    a run there, this one (an attack pass, session 24). A daemon refuses @owner to the
    panes of every venomx daemon, except the pane it was itself started from."""
    other = start_daemon()
    own = tmp_path / "own"
    own.mkdir(mode=0o700)
    own_sock, own_bg = str(own / "s.sock"), str(own / "bg.sock")
    try:
        s = session(daemon)

        def probe(key: str, *args: str) -> list[str]:
            argv = [PY, "-c", OTHER_DAEMON_PROBE, *args]
            env = {"PYTHONPATH": str(ROOT)}
            r = daemon.call(
                "run",
                {"key": key, "session": s, "cols": 200, "grants": [], "env": env, "argv": argv},
            )
            rec = wait_run(daemon, r["run"])
            assert rec["outcome"] == "succeeded", lines_of(rec)
            return lines_of(rec)[0].split()

        assert probe("hop", other.socket, own_sock, own_bg) == [
            "denied.owner",
            "grants=[]",
            "g0",
            "g0",
        ]
        # the daemon the first run started refuses every other pane of this daemon
        assert probe("next", own_sock) == ["denied.owner", "grants=[]"]
        assert probe("next-bg", own_bg) == ["denied.owner", "grants=[]"]
        with Client(own_sock, "@owner") as c:  # and serves a caller outside every pane
            assert c.call("whoami")["principal"] == "g0"
        assert other.call("whoami")["principal"] == "g0"
    finally:
        stop_daemon(other)
        for sock in (own_sock, own_bg):
            try:
                with Client(sock, "@owner") as c:
                    c.call("shutdown")
            except (OSError, VenomxError):
                pass


def test_a_program_that_closes_its_terminal_for_a_moment_is_still_seen(
    daemon: Daemon,
) -> None:
    """Closing fds 0-2 makes the master read EIO; the program may open /dev/tty again.
    The sentinel took the first EIO for the end of all output: the pane went blind, and a
    record said ``complete`` without the program's later lines (session 24)."""
    reopen = "exec 0<&- 1>&- 2>&-; sleep 0.05; exec 0<>/dev/tty 1>&0 2>&0"
    rec = run_and_wait(
        daemon, ["sh", "-c", f"echo start; {reopen}; seq 1 5000; echo DONE"], "reopen"
    )
    assert rec["outcome"] == "succeeded" and lines_of(rec)[-1] == "DONE", rec
    # while nothing has the terminal open the sentinel waits, it does not spin on EIO
    s = session(daemon)
    # and input typed meanwhile waits for it, as input a program has not read yet does
    closed = (
        "exec 0<&- 1>&- 2>&-; sleep 1; exec 0<>/dev/tty 1>&0 2>&0; read x; echo got:$x; sleep 60"
    )
    r = daemon.call("run", {"key": "closed", "session": s, "argv": ["sh", "-c", closed]})
    assert daemon.call("pane.send", {"pane": r["pane"], "text": "hi\r"})["bytes"] == 3
    ready(daemon, r["pane"], "got:hi")
    sentinel = psutil.Process(daemon.titled(f"venomx-sentinel {r['pane']}")[0])
    assert sum(sentinel.cpu_times()[:2]) < 0.5
    sent = daemon.call("pane.send", {"pane": r["pane"], "text": "x"})
    assert sent["bytes"] == 1  # input reaches it again
    daemon.call("run.cancel", {"run": r["run"], "grace_ms": 0})


_HERE = locate()
WRITABLE_CGROUPS = _HERE.directory is not None and os.access(_HERE.directory, os.W_OK)
KILL_SENTINEL_C = r"""
#include <signal.h>
#include <unistd.h>
int main(void) {
    signal(SIGHUP, SIG_IGN);
    kill(getppid(), SIGKILL);  /* before the sentinel has said STARTED, now and then */
    for (;;) pause();
}
"""


def test_a_start_that_fails_after_its_program_started_leaves_it_not_running(
    daemon: Daemon, tmp_path: Path
) -> None:
    """A static program that kills its sentinel at once wins the race with STARTED about
    one start in four: the start fails ``unavailable.spawn`` (EIO). It ran on, out of
    reach of any deadline, cancel or cleanup, and a retry of the key ran it twice
    (session 24). Now the pane's cgroup is killed with the failed start."""
    if not WRITABLE_CGROUPS:
        pytest.skip("needs a writable cgroup v2 hierarchy")
    source, binary = tmp_path / "k.c", tmp_path / "k"
    source.write_text(KILL_SENTINEL_C)
    cc = shutil.which("gcc") or shutil.which("cc")
    if (
        cc is None
        or subprocess.run([cc, "-O2", "-static", "-o", str(binary), str(source)]).returncode
    ):
        pytest.skip("needs a C compiler with a static libc (a Python leader is never that fast)")
    s = session(daemon)
    failed = 0
    for i in range(60):
        try:
            daemon.call(
                "run",
                {"key": f"k{i}", "session": s, "deadline_ms": 1000, "argv": [str(binary)]},
            )
        except VenomxError as exc:
            assert exc.code == "unavailable.spawn", exc
            failed += 1
            if failed == 3:
                break
    assert failed, "no start lost the race in 60 tries"
    # the programs of the failed starts are gone; those of the runs end at their deadline
    wait_for(
        lambda: not [p for p in psutil.process_iter(["exe"]) if p.info["exe"] == str(binary)],
        15,
        "every copy of the program gone",
    )
    wait_for(lambda: daemon.call("doctor")["escapees"]["count"] == 0, 10, "no escapee left")


def test_a_module_planted_in_the_daemons_cwd_never_reaches_a_sentinel(daemon: Daemon) -> None:
    # The daemon's working directory is also panes' default cwd: a pane program may write
    # a msgpack.py there and kill the fork server. Its restart must not import it.
    home = daemon.log.parent
    marker = home / "planted"
    (home / "msgpack.py").write_text(f"open({str(marker)!r}, 'w').close()\nraise SystemExit\n")
    s = daemon.call("session.create")["session"]
    w = daemon.call("window.create", {"session": s, "argv": ["sh", "-c", "echo hi; exec sleep 60"]})
    assert psutil.Process(w["pid"]).cwd() == str(home)

    server = daemon.fork_server
    old = wait_for(server, 10, "the fork server")
    os.kill(old, signal.SIGKILL)
    daemon.call("pane.kill", {"pane": w["pane"], "grace_ms": 0})  # none starts while it lives
    new = wait_for(lambda: (pid := server()) not in (None, old) and pid, 10, "a new fork server")
    for spare in daemon.titled("venomx-sentinel (spare)"):  # spares of the old one
        try:
            os.kill(spare, signal.SIGKILL)
        except ProcessLookupError:
            pass
    r = daemon.call("run", {"key": "after-plant", "session": s, "argv": ["true"]})
    assert daemon.wait_exit(r["run"])["outcome"] == "succeeded"
    assert server() == new
    assert not marker.exists()


def test_no_new_fork_server_starts_while_a_pane_program_lives(daemon: Daemon) -> None:
    """A new fork server is dumpable from its exec until its imports are done: a program
    of our uid that killed the last one traced the next in that window and decided
    every later run (helper-139). Without a reserve to take over (killed here too),
    while any process a pane started is alive none is started: starts fail as venomx's
    own failure and doctor says why; once they have ended, one is."""
    s = daemon.call("session.create")["session"]
    w = daemon.call("window.create", {"session": s, "argv": ["sleep", "60"]})
    old = wait_for(daemon.fork_server, 10, "the fork server")
    os.kill(wait_for(daemon.reserve, 10, "the reserve"), signal.SIGKILL)  # see above
    os.kill(old, signal.SIGKILL)

    def waiting() -> dict[str, Any] | None:
        check = next(c for c in daemon.call("doctor")["checks"] if c["name"] == "fork_server")
        return check if "waits until" in check["detail"] else None

    check = wait_for(waiting, 10, "the restart to wait")
    assert check["status"] == "fail" and "1 live panes" in check["detail"], check

    def refused() -> VenomxError | None:
        for spare in daemon.titled(P.SPARE_TITLE):  # so that a start needs a fork server
            os.kill(spare, signal.SIGKILL)  # (one its last fork made may still come)
        try:
            r = daemon.call(
                "run", {"key": f"spare-{time.monotonic()}", "session": s, "argv": ["true"]}
            )
        except VenomxError as err:
            return err if err.data == {"errno": "EAGAIN"} else None
        daemon.wait_exit(r["run"])
        return None

    err = wait_for(refused, 10, "a start refused")
    assert err.code == "unavailable.spawn"
    assert daemon.fork_server() is None
    daemon.call("pane.kill", {"pane": w["pane"], "grace_ms": 0})
    wait_for(lambda: daemon.fork_server() not in (None, old), 10, "a new fork server")
    r = daemon.call("run", {"key": "meanwhile", "session": s, "argv": ["true"]})
    assert daemon.wait_exit(r["run"])["outcome"] == "succeeded"
    assert "not restarting the fork server yet" in daemon.log.read_text()


def replaced(daemon: Daemon, old: int) -> int | None:
    pid = daemon.fork_server()
    return None if pid in (None, old) else pid


def gone(pid: int) -> bool:
    return not running(pid)


def test_a_dead_fork_servers_reserve_takes_over_at_once(daemon: Daemon) -> None:
    """The reserve, a copy the fork server made of itself before it served (never
    exec'd, so never open to a tracer), becomes the next fork server at once, panes
    live or not, and keeps a reserve of its own; nothing is taken for an escapee."""
    daemon.call("config.set", {"path": "spawn.spares_max", "value": "0"})  # starts fork
    s = daemon.call("session.create")["session"]
    w = daemon.call("window.create", {"session": s, "argv": ["sleep", "60"]})
    for n in range(2):  # and the one that took over has a reserve that takes over too
        old = wait_for(daemon.fork_server, 10, "the fork server")
        reserve = wait_for(daemon.reserve, 10, "the reserve")
        os.kill(old, signal.SIGKILL)
        new = wait_for(functools.partial(replaced, daemon, old), 10, "a new fork server")
        assert new != reserve  # made by it, not it
        wait_for(functools.partial(gone, reserve), 10, "the reserve to have made it and gone")
        r = daemon.call("run", {"key": f"after-{n}", "session": s, "argv": ["true"]})
        assert daemon.wait_exit(r["run"])["outcome"] == "succeeded"
    doc = daemon.call("doctor")
    assert doc["fork_server"]["restarts"] == 2, doc["fork_server"]
    assert doc["escapees"]["count"] == 0 and doc["escapees"]["reaped"] == 0, doc["escapees"]
    assert "not restarting the fork server yet" not in daemon.log.read_text()
    daemon.call("pane.kill", {"pane": w["pane"], "grace_ms": 0})


def test_a_stopped_reserve_is_ended_and_a_fork_server_started_afresh(daemon: Daemon) -> None:
    """A reserve a program stopped cannot take over: after PROMOTE_WAIT it is killed
    (else it would count as a process a pane left behind, and no fork server would
    ever be started afresh) and, no pane program being alive, one is."""
    old = wait_for(daemon.fork_server, 10, "the fork server")
    reserve = wait_for(daemon.reserve, 10, "the reserve")
    os.kill(reserve, signal.SIGSTOP)
    os.kill(old, signal.SIGKILL)
    wait_for(functools.partial(replaced, daemon, old), 15, "a new fork server")
    wait_for(functools.partial(gone, reserve), 10, "the stopped reserve ended")
    s = daemon.call("session.create")["session"]
    r = daemon.call("run", {"key": "afresh", "session": s, "argv": ["true"]})
    assert daemon.wait_exit(r["run"])["outcome"] == "succeeded"
    assert "reserve cannot take over" in daemon.log.read_text()
    doc = daemon.call("doctor")
    assert doc["escapees"]["count"] == 0 and doc["escapees"]["reaped"] == 0, doc["escapees"]


def test_the_daemon_answers_while_a_stopped_reserve_has_its_time(daemon: Daemon) -> None:
    """Taking over is a few forks away and a program may stop the reserve: the reactor
    does not wait for it. Requests are answered meanwhile, and a start that needs a fork
    waits for the fork server then started afresh (no pane program being alive)."""
    daemon.call("config.set", {"path": "spawn.spares_max", "value": "0"})  # starts fork
    wait_for(lambda: not daemon.titled(P.SPARE_TITLE), 10, "no spare")
    old = wait_for(daemon.fork_server, 10, "the fork server")
    reserve = wait_for(daemon.reserve, 10, "the reserve")
    os.kill(reserve, signal.SIGSTOP)
    os.kill(old, signal.SIGKILL)
    doc = wait_for(
        lambda: (d := daemon.call("doctor"))["fork_server"]["restarts"] == 1 and d,
        10,
        "the death seen",
    )
    assert running(reserve)  # answered while the reserve still had its time
    check = next(c for c in doc["checks"] if c["name"] == "fork_server")
    assert check["status"] == "fail" and "reserve is taking over" in check["detail"], check
    assert doc["escapees"]["count"] == 0, doc["escapees"]  # the reserve is ours
    s = daemon.call("session.create")["session"]
    r = daemon.call("run", {"key": "waited", "session": s, "argv": ["true"]})
    assert daemon.wait_exit(r["run"])["outcome"] == "succeeded"
    assert gone(reserve) and daemon.fork_server() not in (None, old)
    assert "reserve cannot take over: no report" in daemon.log.read_text()
    doc = daemon.call("doctor")
    assert doc["escapees"]["count"] == 0 and doc["escapees"]["reaped"] == 0, doc["escapees"]


def caught_forking(daemon: Daemon, stop_mid: bool = True) -> tuple[int, int, int] | None:
    """Stop the reserve, kill the fork server, and once the reserve has been told to take
    over, continue it and stop what it forks as soon as that appears (unless not
    ``stop_mid``), and the reserve again: the fork server, the reserve and its
    intermediate, or None where the reserve reported the next fork server first."""
    old = wait_for(daemon.fork_server, 10, "the fork server")
    reserve = wait_for(daemon.reserve, 10, "the reserve")
    os.kill(reserve, signal.SIGSTOP)
    os.kill(old, signal.SIGKILL)

    def taking_over() -> bool:
        check = next(c for c in daemon.call("doctor")["checks"] if c["name"] == "fork_server")
        return "reserve is taking over" in check["detail"]

    wait_for(taking_over, 10, "the reserve told to take over")
    kids = Path(f"/proc/{reserve}/task/{reserve}/children")
    os.kill(reserve, signal.SIGCONT)
    try:
        while not (found := kids.read_text().split()):
            pass  # a busy look: the intermediate forks the next fork server within 1 ms
    except FileNotFoundError:  # made it and was ended: the next one is ours to try
        wait_for(functools.partial(replaced, daemon, old), 10, "a new fork server")
        return None
    if stop_mid:
        os.kill(int(found[0]), signal.SIGSTOP)
    os.kill(reserve, signal.SIGSTOP)
    return old, reserve, int(found[0])


def caught_at_last(daemon: Daemon, stop_mid: bool) -> tuple[int, int, int]:
    """``caught_forking``, tried until the reserve is caught before it reported (most
    tries): each try that lost leaves the next fork server to try with."""
    for _ in range(20):
        if (caught := caught_forking(daemon, stop_mid)) is not None:
            return caught
    raise AssertionError("the reserve always reported first")


def starts_with_nothing_left_behind(daemon: Daemon) -> None:
    """A start succeeds, and doctor counts no escapee, now or reaped."""
    s = daemon.call("session.create")["session"]
    r = daemon.call("run", {"key": "afresh", "session": s, "argv": ["true"]})
    assert daemon.wait_exit(r["run"])["outcome"] == "succeeded"
    doc = daemon.call("doctor")
    assert doc["escapees"]["count"] == 0 and doc["escapees"]["reaped"] == 0, doc["escapees"]


def test_what_a_stopped_reserve_had_forked_is_ended_with_it(daemon: Daemon) -> None:
    """A program stops what the reserve forks while taking over, and the reserve too
    (helper-140): nothing reports, and the intermediate, left stopped, would outlive
    the reserve and count as a process a pane left behind, so that no fork server would
    be started afresh. Both are ended; one is started."""
    old, reserve, mid = caught_at_last(daemon, stop_mid=True)
    wait_for(functools.partial(replaced, daemon, old), 15, "a new fork server")
    wait_for(lambda: gone(reserve) and gone(mid), 10, "the reserve and what it forked ended")
    starts_with_nothing_left_behind(daemon)


def test_a_fork_server_the_daemon_was_not_told_of_is_ended(daemon: Daemon) -> None:
    """The reserve stopped before it reports; the fork server it made stopped too and
    its intermediate killed, so that the new one is the daemon's child, a process it was
    never told of (helper-141). Until the daemon, having read the report, tells it to
    take over, it stays in the dead fork server's session under the reserve's title:
    ended with the reserve, and one is started afresh."""
    old, reserve, mid = caught_at_last(daemon, stop_mid=False)
    kids = Path(f"/proc/{mid}/task/{mid}/children")
    new = int(wait_for(lambda: kids.read_text().split(), 10, "the new fork server")[0])
    os.kill(new, signal.SIGSTOP)
    os.kill(mid, signal.SIGKILL)
    wait_for(functools.partial(replaced, daemon, old), 15, "a fork server started afresh")
    assert daemon.fork_server() != new
    wait_for(lambda: gone(reserve) and gone(new), 10, "the reserve and the one it made ended")
    starts_with_nothing_left_behind(daemon)


def test_a_stopped_fork_server_does_not_outlive_the_daemon() -> None:
    """Each would exit once its socket closes, but a program may have stopped it. (With
    cgroups, ending the daemon's subtree kills them too: without.)"""
    d = start_daemon(config='cgroups = "off"\n')
    try:
        server = wait_for(d.fork_server, 10, "the fork server")
        reserve = wait_for(d.reserve, 10, "the reserve")
        for pid in (server, reserve):
            os.kill(pid, signal.SIGSTOP)
        d.call("shutdown")
        assert d.proc.wait(20) == 0
        wait_for(lambda: gone(server) and gone(reserve), 10, "both ended")
    finally:
        stop_daemon(d)


# Seize a process (root may, non-dumpable or not) and stay its tracer until stdin closes.
SEIZE = """
import ctypes, sys
libc = ctypes.CDLL(None, use_errno=True)
assert libc.ptrace(0x4206, int(sys.argv[1]), 0, 0) == 0, ctypes.get_errno()  # PTRACE_SEIZE
print("seized", flush=True)
sys.stdin.read()
"""


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to trace a non-dumpable process")
def test_doctor_says_when_the_fork_server_is_traced(daemon: Daemon) -> None:
    """Whoever traces the fork server decides every later run: a way in that the checks
    elsewhere missed (helper-142 traced one from a process taken for ours) is shown."""
    server = wait_for(daemon.fork_server, 10, "the fork server")

    def fork_server_check() -> dict[str, str]:
        checks = daemon.call("doctor")["checks"]
        return next(c for c in checks if c["name"] == "fork_server")

    tracer = subprocess.Popen(
        [PY, "-c", SEIZE, str(server)], stdin=subprocess.PIPE, stdout=subprocess.PIPE
    )
    try:
        assert tracer.stdout is not None and tracer.stdout.readline() == b"seized\n"
        check = fork_server_check()
        assert check["status"] == "fail", check
        assert check["detail"] == f"pid {server} is traced by pid {tracer.pid}", check
    finally:
        tracer.communicate(timeout=10)
    assert fork_server_check()["status"] == "ok"


REUSE_PROBE = """
import json, os, socket, sys, time
work = sys.argv[2]
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
child = os.fork()
if child == 0:  # the connector: SO_PEERCRED names this pid, which then goes away
    s.connect(os.environ["VENOMX_SOCKET"])
    os._exit(0)
os.waitpid(child, 0)
with open(work + "/pid", "w") as f:
    f.write(str(child))
while not os.path.exists(work + "/go"):
    time.sleep(0.01)
f = s.makefile("rwb")
out = []
for verb, params in (("hello", {"protocol": 1}), ("whoami", {}), ("run.get", {"run": sys.argv[1]})):
    f.write(json.dumps({"id": len(out), "verb": verb, "params": params}).encode() + b"\\n")
    f.flush()
    reply = json.loads(f.readline())
    out.append(reply["ok"]["grants"] if verb == "whoami" else ("error" in reply and reply["error"]["code"]))
print(json.dumps(out))
"""


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to place a pid (ns_last_pid)")
def test_a_pane_cannot_borrow_an_outsiders_pid_to_read_as_anyone(
    daemon: Daemon, tmp_path: Path
) -> None:
    """A program connects from a child that then exits, and sends hello once the child's
    pid names a process outside the daemon's tree: it is still a pane's program."""
    tmp_path.chmod(0o777)
    s = session(daemon)
    victim = daemon.call("run", {"key": "victim", "session": s, "argv": ["sleep", "60"]})
    r = daemon.call(
        "run",
        {
            "key": "reuse",
            "session": s,
            "cols": 200,
            "argv": [PY, "-c", REUSE_PROBE, victim["run"], str(tmp_path)],
        },
    )
    pid_file = tmp_path / "pid"
    wait_for(lambda: pid_file.exists() and pid_file.read_text(), 10, "connector pid")
    pid = int(pid_file.read_text())
    outsider = None
    for _ in range(50):  # another process may take the pid first: try again
        with open("/proc/sys/kernel/ns_last_pid", "w") as f:
            f.write(str(pid - 1))
        p = subprocess.Popen(["sleep", "60"], start_new_session=True)
        if p.pid == pid:
            outsider = p
            break
        p.kill()
        p.wait()
    assert outsider is not None, "could not place a process at the connector's pid"
    try:
        (tmp_path / "go").touch()
        rec = wait_run(daemon, r["run"])
        assert lines_of(rec) == ['[false, [], "denied.read"]'], rec
    finally:
        outsider.kill()
        outsider.wait()
        daemon.call("run.cancel", {"run": victim["run"], "grace_ms": 0})


def test_a_wide_panes_history_reaches_the_record(daemon: Daemon) -> None:
    """6000 empty lines in a 65535-column pane: 12 KB of output, whose EXIT once padded
    every row to 393 MB, past the channel's limit, and the output was lost with it."""
    s = session(daemon)
    r = daemon.call(
        "run",
        {
            "key": "wide",
            "session": s,
            "cols": 65535,
            "rows": 16,
            "shell": "i=0; while [ $i -lt 6000 ]; do echo; i=$((i+1)); done; echo last",
        },
    )
    rec = wait_run(daemon, r["run"])
    assert rec["outcome"] == "succeeded" and "fault" not in rec, rec
    assert rec["output"]["lines"][-1].rstrip() == "last"


def test_rows_too_large_for_any_frame_are_counted_not_built(daemon: Daemon) -> None:
    """A wide pane's rows are refused with the size they would have had, found the same
    way live (where a frame over the channel's limit once killed the sentinel) and from
    the exited pane's final state (where building them stalled the daemon)."""
    s = session(daemon)
    script = "i=0; while [ $i -lt 400 ]; do echo $i; i=$((i+1)); done; echo ready; read x"
    r = daemon.call(
        "run", {"key": "counted", "session": s, "cols": 65535, "rows": 16, "shell": script}
    )

    def last() -> dict[str, Any]:
        return daemon.call("pane.capture_rows", {"pane": r["pane"], "limit": 3})

    wait_for(lambda: any(ln.startswith("ready ") for ln in last()["lines"]), 10, "ready")
    end = last()["end"]

    def refused(rows: int) -> int:
        with daemon.client() as c, pytest.raises(VenomxError) as e:
            c.call("pane.capture_rows", {"pane": r["pane"], "start": end - rows, "end": end})
        assert e.value.code == "unsupported.result_size"
        return int(e.value.data["bytes"])

    live = {n: refused(n) for n in (20, 300)}  # one built and refused, one only counted
    assert live[300] > 16 * 1024 * 1024
    daemon.call("pane.send", {"pane": r["pane"], "text": "\r"})
    assert wait_run(daemon, r["run"])["exit_code"] == 0
    assert {n: refused(n) for n in (20, 300)} == live  # the final state, counted alike
    daemon.call("config.set", {"path": "protocol.max_frame", "value": "16777216"})
    with daemon.client(max_frame=16777216) as c:
        got = c.call("pane.capture_rows", {"pane": r["pane"], "start": end - 20, "end": end})
    assert len(dumps({"id": 0, "ok": got})) == live[20]


def test_a_start_undone_after_exec_leaves_no_escapee(daemon: Daemon, tmp_path: Path) -> None:
    """A recursive removal of its session gives up on a run held past its barrier (the
    start stalled beyond the removal's wait): the start fails, the sentinel stops the
    leader and leaves it to the daemon, which reaps it as a start undone. (A change of
    the target, or a revoked requester, no longer undoes a start past its barrier.)"""
    pidfile = tmp_path / "leader"
    s = session(daemon)
    daemon.call("seam.set", {"name": "run.after_barrier", "state": "hold"})
    c = daemon.client()
    script = f"echo $$ > {pidfile}; exec sleep 100"
    rid = c.start("run", {"key": "undone", "session": s, "shell": script})
    daemon.call("seam.wait", {"name": "run.after_barrier", "timeout_ms": 10000})
    wait_for(lambda: pidfile.exists() and pidfile.read_text().strip() != "", 10, "the leader")
    leader = int(pidfile.read_text())
    removed = daemon.call("session.remove", {"session": s, "recursive": True})  # gives up
    assert s in removed["removed"]
    daemon.call("seam.set", {"name": "run.after_barrier", "state": "release"})
    with pytest.raises(VenomxError) as e:
        c.response(rid)
    assert e.value.code == "conflict.removing"
    wait_for(lambda: not psutil.pid_exists(leader), 10, "the leader reaped")
    assert daemon.call("run.list")["runs"] == []
    assert daemon.call("doctor")["escapees"]["reaped"] == 0


@pytest.mark.timeout(30)
def test_a_sentinel_stopped_before_it_reports_a_start_is_continued(daemon: Daemon) -> None:
    """Any program of our uid can SIGSTOP a sentinel while a start waits on it (the new
    leader itself, before STARTED): the start is never left waiting; the daemon continues
    the sentinel, and the run completes with the program's own status."""
    s = session(daemon)
    daemon.call("seam.set", {"name": "run.before_barrier", "state": "hold"})
    c = daemon.client()
    rid = c.start("run", {"key": "stopped", "session": s, "argv": ["sh", "-c", "exit 3"]})
    daemon.call("seam.wait", {"name": "run.before_barrier", "timeout_ms": 10000})

    def titled() -> list[int]:
        found = []
        for pid in daemon.children():
            try:
                if psutil.Process(pid).name().startswith("venomx-sentinel p"):
                    found.append(pid)
            except psutil.NoSuchProcess:
                pass  # a spare retired while we looked
        return found

    # A sentinel is the daemon's child only once the intermediate that forked it has
    # exited, which a loaded machine may delay past READY (a spare's runs at nice 19).
    preparing = wait_for(titled, 10, "the preparing sentinel, re-parented to the daemon")
    assert len(preparing) == 1
    os.kill(preparing[0], signal.SIGSTOP)
    wait_for(lambda: psutil.Process(preparing[0]).status() == psutil.STATUS_STOPPED, 10, "T")
    daemon.call("seam.set", {"name": "run.before_barrier", "state": "release"})
    run = c.response(rid)["run"]
    rec = daemon.wait_exit(run)
    assert (rec["outcome"], rec["exit_code"]) == ("failed", 3) and "fault" not in rec
    assert "was stopped: continued" in daemon.log.read_text()


# -- a leader held by a tracer ---------------------------------------------------------

# The program forks a tracer that leaves its session (so no killpg of the pane's group
# reaches it), attaches and never waits again: Linux then shows the leader's zombie to
# the tracer alone, and a traced zombie thread keeps the whole leader from its parent.
# argv: what the leader does once traced (exit 5, sleep, or kill its sentinel and exit
# 5), and how it is traced: its main thread from the tracer's main thread, from another
# thread of the tracer, or another thread of the leader. PR_SET_PTRACER lets the tracer
# attach under Yama's scope 1 too.
TRACED = """
import ctypes, os, signal, sys, threading, time
libc = ctypes.CDLL(None, use_errno=True)
libc.ptrace.argtypes = [ctypes.c_long, ctypes.c_long, ctypes.c_void_p, ctypes.c_void_p]
libc.prctl(0x59616D61, ctypes.c_ulong(2**64 - 1), 0, 0, 0)
mode, how = sys.argv[1:3]
leader = os.getpid()
target = leader
if how == "sub-thread":
    up = threading.Event()
    def worker():
        global target
        target = threading.get_native_id()
        up.set()
        time.sleep(3600)
    threading.Thread(target=worker, daemon=True).start()
    up.wait()
r, w = os.pipe()
go_r, go_w = os.pipe()

def trace():
    if libc.ptrace(16, target, None, None) != 0:  # PTRACE_ATTACH
        os.write(w, b"E")
        os._exit(1)
    os.waitpid(target, 0x40000000)  # its attach stop (__WALL)
    libc.ptrace(7, target, None, None)  # PTRACE_CONT
    os.write(w, b"T")
    time.sleep(3600)  # never waits again

first = os.fork()
if first == 0:
    os.setsid()
    if os.fork() == 0:
        os.read(go_r, 1)
        if how == "from-thread":
            threading.Thread(target=trace).start()
            time.sleep(3600)
        trace()
    os._exit(0)
os.waitpid(first, 0)  # before the attach: a signal after it (SIGCHLD) would stop us
os.write(go_w, b"g")
print("traced" if os.read(r, 1) == b"T" else "not-traced", flush=True)
if mode == "sleep":
    time.sleep(600)
if mode == "kill-sentinel":
    # the hangup (SIGHUP, SIGCONT) would stop a traced process at its delivery
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGHUP, signal.SIGCONT})
    os.kill(os.getppid(), 9)
os._exit(5)
"""


def traced_run(d: Daemon, mode: str, how: str = "main", **extra: Any) -> dict[str, Any]:
    """A run of TRACED, once its program is traced (skipped where ptrace is refused, as
    under Yama's scope 2: no program can then do this to its run)."""
    r = d.call(
        "run",
        {
            "key": f"traced-{mode}-{how}",
            "session": session(d),
            "argv": [PY, "-c", TRACED, mode, how],
            **extra,
        },
    )

    def shown() -> str:
        return "".join(d.call("pane.capture_rows", {"pane": r["pane"]})["lines"])

    wait_for(lambda: "traced" in shown(), 10, "the program traced, or refused")
    if "not-traced" in shown():
        pytest.skip("this host does not let a process trace another (Yama)")
    return r


@pytest.mark.parametrize("how", ["main", "from-thread"])
def test_a_tracer_cannot_hide_the_leaders_exit(daemon: Daemon, how: str) -> None:
    r = traced_run(daemon, "exit", how)
    rec = wait_run(daemon, r["run"])
    assert rec["state"] == "completed", rec
    assert rec["outcome"] == "failed" and rec["exit_code"] == 5, rec
    assert "fault" not in rec and lines_of(rec)[0] == "traced", rec


@pytest.mark.parametrize("how", ["main", "from-thread", "sub-thread"])
def test_a_tracer_cannot_keep_a_cancel_from_ending_the_run(daemon: Daemon, how: str) -> None:
    """A deadline ends a run the same way (termination.py)."""
    r = traced_run(daemon, "sleep", how)
    daemon.call("run.cancel", {"run": r["run"], "grace_ms": 100})
    rec = wait_run(daemon, r["run"])
    assert rec["outcome"] == "terminated" and rec["cause"] == "cancel", rec
    assert "fault" not in rec and lines_of(rec)[0] == "traced", rec


def test_a_tracer_cannot_hide_the_exit_from_the_daemon_either(daemon: Daemon) -> None:
    """The program kills its sentinel too: the daemon reaps the leader itself."""
    argv = [PY, "-c", TRACED, "kill-sentinel", "main"]
    r = daemon.call("run", {"key": "traced-lost", "session": session(daemon), "argv": argv})
    rec = wait_run(daemon, r["run"])
    assert rec["outcome"] == "failed" and rec["exit_code"] == 5, rec
    assert_lost_record(rec)


# helper-147: the tracer X is itself traced, by Z, which asked to be told of X's exit
# (PTRACE_O_TRACEEXIT) and never waits: X, killed, stays stopped at its exit, still
# tracing the leader, whose exit stays hidden. Z and X leave the leader's session; W
# stays in its process group, ignoring the hangup (the exit's sweep ends it).
CHAINED = """
import ctypes, os, signal, sys, time
libc = ctypes.CDLL(None, use_errno=True)
libc.ptrace.argtypes = [ctypes.c_long, ctypes.c_long, ctypes.c_void_p, ctypes.c_void_p]
libc.prctl(0x59616D61, ctypes.c_ulong(2**64 - 1), 0, 0, 0)
leader = os.getpid()
r, w = os.pipe()  # to the leader, from Z and X
go_r, go_w = os.pipe()  # from the leader, to X
if os.fork() == 0:
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    time.sleep(3600)
first = os.fork()
if first == 0:
    os.setsid()
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGCHLD})
    x = os.fork()
    if x == 0:  # X: seizes the leader, never waits
        libc.prctl(0x59616D61, ctypes.c_ulong(2**64 - 1), 0, 0, 0)
        os.read(go_r, 1)
        ok = libc.ptrace(0x4206, leader, None, None) == 0  # PTRACE_SEIZE
        os.write(w, b"T" if ok else b"E")
        time.sleep(3600)
    if os.fork() == 0:  # Z: seizes X, to be told of its exit, never waits
        ok = libc.ptrace(0x4206, x, None, ctypes.c_void_p(0x40)) == 0  # PTRACE_O_TRACEEXIT
        os.write(w, b"Z" if ok else b"E")
        time.sleep(3600)
    os._exit(0)
os.waitpid(first, 0)
got = os.read(r, 1)
if got == b"Z":
    os.write(go_w, b"g")  # X may seize us now (Z has it)
    got = os.read(r, 1)
print("traced" if got == b"T" else "not-traced", flush=True)
time.sleep(0.3)
os._exit(5)
"""


def test_a_tracer_held_at_its_exit_by_another_cannot_hide_the_leaders_exit(
    daemon: Daemon,
) -> None:
    """The run completes with the leader's real status: the tracer's tracer is ended too
    (before, the run stayed running past its deadline, its group writing on, and neither
    a cancel nor run.cleanup could end it)."""
    r = daemon.call(
        "run",
        {
            "key": "chained",
            "session": session(daemon),
            "argv": [PY, "-c", CHAINED],
            "deadline_ms": 5000,
        },
    )
    rec = wait_run(daemon, r["run"])
    if "not-traced" in lines_of(rec):
        pytest.skip("this host does not let a process trace another (Yama)")
    assert rec["state"] == "completed" and rec["outcome"] == "failed", rec
    assert rec["exit_code"] == 5 and "traced" in lines_of(rec), rec


def test_shutdown_leaves_no_traced_leader_or_tracer_behind() -> None:
    """Without cgroups too, where only a killpg reaches a pane's processes."""
    d = start_daemon(config='cgroups = "off"\n')
    try:
        r = traced_run(d, "sleep")
        held = tracer_of(r["pid"])
        assert held > 0
        d.call("shutdown")
        assert d.proc.wait(20) == 0
        # the tracer ran in its own session, out of every killpg's reach
        wait_for(lambda: not running(r["pid"]) and not running(held), 10, "both gone")
    finally:
        stop_daemon(d)


# -- what a leader inherits ----------------------------------------------------------------

# ioprio_get and ioprio_set on this machine (workers/inherited.py knows more)
IOPRIO = (
    'import ctypes, platform; SYS = {"x86_64": (252, 251), "aarch64": (31, 30)}'
    "[platform.machine()]; call = ctypes.CDLL(None).syscall"
)
POISON = (
    IOPRIO
    + """
import os, resource, sys
for pid in map(int, sys.argv[1:]):
    assert call(SYS[1], 1, pid, 3 << 13) == 0  # the idle I/O class
    resource.prlimit(pid, resource.RLIMIT_FSIZE, (0, 0))  # hard too: never raised again
    resource.prlimit(pid, resource.RLIMIT_CPU, (5, 5))
    os.setpriority(os.PRIO_PROCESS, pid, 19)
    os.sched_setaffinity(pid, {min(os.sched_getaffinity(0))})
    os.sched_setscheduler(pid, os.SCHED_IDLE, os.sched_param(0))
print("poisoned", len(sys.argv) - 1)
"""
)
# What a leader runs with: its nice value, CPU time limit, policy, CPUs and I/O priority.
INHERITED = IOPRIO + (
    "; import os, resource; print(os.getpriority(os.PRIO_PROCESS, 0),"
    " resource.getrlimit(resource.RLIMIT_CPU), os.sched_getscheduler(0),"
    " sorted(os.sched_getaffinity(0)), call(SYS[0], 1, 0))"
)


def test_a_run_cannot_set_the_limits_later_runs_inherit(daemon: Daemon, tmp_path: Path) -> None:
    """prlimit(2) and setpriority are not held back by PR_SET_DUMPABLE: a program of our
    uid could lower the fork server's and the spares' limits, and every later run of
    every principal would inherit them. Nothing later runs with what it set."""
    wait_for(lambda: len(daemon.titled(P.SPARE_TITLE)) >= 2, 20, "spares at rest")
    server = daemon.fork_server()
    assert server is not None
    targets = [server, *daemon.titled(P.SPARE_TITLE)]
    poison = run_and_wait(daemon, [PY, "-c", POISON, *map(str, targets)], "poison")
    assert poison["exit_code"] == 0 and "poisoned" in lines_of(poison)[0], poison
    out = tmp_path / "written"
    probe = {
        "key": "victim",
        "session": session(daemon),
        "shell": f"echo data > {out}; {PY} -c '{INHERITED}'",
    }

    def started() -> dict[str, Any] | None:
        try:
            return daemon.call("run", probe)
        except VenomxError as err:  # the poisoned fork server's last request, at most
            assert err.code == "unavailable.spawn", err
            return None

    wait_for(lambda: started() is not None, 20, "the victim started")
    rec = wait_run(daemon, daemon.call("run", probe)["run"])
    assert rec["outcome"] == "succeeded", rec
    assert out.read_text() == "data\n"
    # what the daemon was started with: this process's own
    want = subprocess.run([PY, "-c", INHERITED], capture_output=True, text=True).stdout
    assert lines_of(rec)[0] == want.strip(), rec
    assert daemon.fork_server() not in (None, server)  # replaced: its hard limit was lowered
    assert "were changed by another process past repair" in daemon.log.read_text()
    doc = daemon.call("doctor")  # retired spares and a replaced fork server, not escapees
    assert doc["escapees"]["count"] == 0 and doc["escapees"]["reaped"] == 0, doc["escapees"]
    assert doc["fork_server"]["last_exit"]["exit_code"] == CHANGED, doc["fork_server"]


# A program of the daemon's uid lowers the daemon's own file size limit (with "1", the
# hard one too) and the fork server's: the fork server exits at its next fork, past
# repair, and the daemon starts another, which inherited the daemon's (helper-138).
POISON_DAEMON = """
import os, resource, signal, sys
daemon, forkserver, hard, reserve = map(int, sys.argv[1:])
keep = resource.prlimit(daemon, resource.RLIMIT_FSIZE)[1]
resource.prlimit(daemon, resource.RLIMIT_FSIZE, (0, 0 if hard else keep))
resource.prlimit(forkserver, resource.RLIMIT_FSIZE, (0, 0))
os.kill(reserve, signal.SIGKILL)  # so that the next fork server is started afresh
print("poisoned")
"""
LIMITS_DRIVER = """
import json, sys
from venomx.client import Client
from venomx.wire import VenomxError
sock, python, poison, daemon, forkserver, out, reserve = sys.argv[1:8]
with Client(sock, "@owner") as c:
    s = c.call("session.create", {})["session"]
    r = c.call("run", {"key": "poison", "session": s,
                       "argv": [python, "-c", poison, daemon, forkserver, "1", reserve]})
    rec = c.call("run.wait", {"run": r["run"], "timeout_ms": 20000})
    victims = []
    for n in range(12):  # past the spares at rest, into forks on demand
        try:
            v = c.call("run", {"key": f"victim-{n}", "session": s,
                               "shell": f"printf data > {out}{n}"})
        except VenomxError as err:
            victims.append(err.code)
            continue
        victims.append(c.call("run.wait", {"run": v["run"], "timeout_ms": 20000})["outcome"])
    checks = {ck["name"]: ck for ck in c.call("doctor")["checks"]}
print(json.dumps({"poison": rec, "victims": victims, "fork_server": checks["fork_server"]}))
"""


def test_a_run_cannot_hand_later_runs_the_daemons_own_lowered_limits() -> None:
    """A fork server started after a program lowered the daemon's own limits would have
    inherited them: every later run of every principal ended SIGXFSZ at its first write,
    no fault said so, and doctor was all ok. The daemon puts its own values back before
    it starts a fork server; what only privilege could put back (a lowered hard limit,
    as uid 65534) it refuses, and the starts fail as venomx's own failure."""
    with nobody_daemon() as (proc, sock, python, fs, env):
        out = os.path.join(os.path.dirname(sock), "out")
        got = as_nobody(
            env,
            python,
            "-c",
            LIMITS_DRIVER,
            sock,
            python,
            POISON_DAEMON,
            str(proc.pid),
            str(fs),
            out,
            str(wait_for(lambda: reserve_of(fs), 10, "the reserve")),
        )
        assert got["poison"]["outcome"] == "succeeded", got["poison"]
        victims = got["victims"]
        assert set(victims) <= {"succeeded", "unavailable.spawn"}, victims  # never SIGXFSZ
        assert victims[-1] == "unavailable.spawn", victims  # the new fork server refused
        check = got["fork_server"]
        assert check["status"] == "fail" and "past repair" in check["detail"], check


def test_the_daemons_own_limits_are_put_back_for_a_new_fork_server(
    daemon: Daemon, tmp_path: Path
) -> None:
    """What the daemon may put back itself (a soft limit lowered under its hard one) it
    puts back before the next fork server starts: later runs write as before."""
    server = wait_for(daemon.fork_server, 10, "the fork server")
    reserve = wait_for(daemon.reserve, 10, "the reserve")
    poison = run_and_wait(
        daemon,
        [PY, "-c", POISON_DAEMON, str(daemon.proc.pid), str(server), "0", str(reserve)],
        "poison",
    )
    assert lines_of(poison)[0] == "poisoned", poison
    for n in range(12):  # past the spares at rest, into forks on demand
        try:
            rec = run_and_wait(daemon, ["sh", "-c", f"printf data > {tmp_path}/{n}"], f"v{n}")
        except VenomxError as err:  # the poisoned fork server's last request, at most
            assert err.code == "unavailable.spawn", err
            continue
        assert rec["outcome"] == "succeeded", rec
    wait_for(lambda: daemon.fork_server() not in (None, server), 10, "a new fork server")
    ours = resource.getrlimit(resource.RLIMIT_FSIZE)  # what the daemon was started with
    assert resource.prlimit(daemon.proc.pid, resource.RLIMIT_FSIZE) == ours


@pytest.mark.parametrize("hard", [False, True])
def test_a_fork_server_hands_on_what_the_daemon_says_not_what_it_inherited(hard: bool) -> None:
    """A program of our uid may change a new fork server's limits while it imports,
    before it could take them as its baseline: it applies the daemon's instead, and
    exits past repair (status 3) when it cannot."""
    fsize = resource.getrlimit(resource.RLIMIT_FSIZE)
    want = inherited.encode(inherited.now())

    def lowered() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (0, 0 if hard else fsize[1]))

    ours, theirs = socket.socketpair()
    proc = subprocess.Popen(
        [PY, "-P", "-m", "workers.forkserver", str(theirs.fileno()), want],
        pass_fds=[theirs.fileno()],
        preexec_fn=lowered,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    theirs.close()
    try:
        if hard:
            assert proc.wait(20) == CHANGED
            return

        def titled() -> bool:
            return bool(psutil.Process(proc.pid).cmdline()[:1] == ["venomx-forkserver"])

        wait_for(titled, 20, "the fork server")
        assert resource.prlimit(proc.pid, resource.RLIMIT_FSIZE) == fsize
    finally:
        ours.close()
        if proc.poll() is None:
            proc.kill()
        proc.wait(10)


PINNED = "import os, sys; os.sched_setaffinity(0, {int(sys.argv[1])}); os.execv(sys.argv[2], sys.argv[2:])"
WIDEN = """
import os, sys
for pid in map(int, sys.argv[1:]):
    os.sched_setaffinity(pid, os.sched_getaffinity(1) | os.sched_getaffinity(pid))
print("widened", len(sys.argv) - 1)
"""
CPUS = "import os; print(sorted(os.sched_getaffinity(0)))"


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="one CPU cannot be widened")
def test_a_run_cannot_widen_the_cpus_later_runs_inherit() -> None:
    """An operator pins the daemon to one CPU (``taskset``); a program of our uid may give
    the fork server and its spares every CPU with ``sched_setaffinity``, which
    PR_SET_DUMPABLE does not hold back. Later runs still get only the daemon's CPU."""
    cpu = min(os.sched_getaffinity(0))
    d = start_daemon(wrap=[PY, "-c", PINNED, str(cpu)])
    try:
        wait_for(lambda: len(d.titled(P.SPARE_TITLE)) >= 2, 20, "spares at rest")
        server = wait_for(d.fork_server, 10, "the fork server")
        targets = [server, *d.titled(P.SPARE_TITLE)]
        assert os.sched_getaffinity(server) == {cpu}
        widen = run_and_wait(d, [PY, "-c", WIDEN, *map(str, targets)], "widen")
        assert lines_of(widen)[0].startswith("widened"), widen
        assert os.sched_getaffinity(server) != {cpu}  # the program could
        for n in range(10):  # past the spares at rest, into forks on demand
            rec = run_and_wait(d, [PY, "-c", CPUS], f"victim-{n}")
            assert lines_of(rec)[0] == f"[{cpu}]", rec
        assert d.fork_server() == server  # put back, not replaced
    finally:
        stop_daemon(d)


def test_what_can_be_put_back_is_put_back_without_a_new_fork_server(
    daemon: Daemon,
) -> None:
    """A change the fork server can undo (here the I/O priority, which ``ioprio_set``
    lets any process of our uid lower to the idle class) is undone before the next
    fork and in each spare: no start fails and the fork server stays."""
    wait_for(lambda: len(daemon.titled(P.SPARE_TITLE)) >= 2, 20, "spares at rest")
    server = daemon.fork_server()
    targets = [server, *daemon.titled(P.SPARE_TITLE)]
    idle = (
        IOPRIO + "\nimport sys\nfor p in sys.argv[1:]: assert call(SYS[1], 1, int(p), 3 << 13) == 0"
    )
    assert run_and_wait(daemon, [PY, "-c", idle, *map(str, targets)], "idle")["exit_code"] == 0
    want = subprocess.run([PY, "-c", INHERITED], capture_output=True, text=True).stdout.strip()
    for n in range(10):  # past the spares at rest, into forks on demand
        rec = run_and_wait(daemon, [PY, "-c", INHERITED], f"victim-{n}")
        assert lines_of(rec)[0] == want, rec
    assert daemon.fork_server() == server
    assert "past repair" not in daemon.log.read_text()


# PTRACE_TRACEME makes the caller's parent its tracer: a signal then stops it, and a
# tracer's wait reports the stop as if it were an end.
TRACEME = """
import ctypes, os, signal, sys
libc = ctypes.CDLL(None, use_errno=True)
libc.ptrace.argtypes = [ctypes.c_long, ctypes.c_long, ctypes.c_void_p, ctypes.c_void_p]
signal.signal(signal.SIGUSR2, lambda *_: print("handled", flush=True))
assert libc.ptrace(0, 0, None, None) == 0  # PTRACE_TRACEME
os.kill(os.getpid(), signal.SIGUSR2)
print("after", flush=True)
os._exit(7)
"""


def test_a_stop_of_a_leader_that_made_its_sentinel_its_tracer_is_not_its_end(
    daemon: Daemon,
) -> None:
    """The sentinel lets such a leader go at its next wake-up (here, captures)."""
    r = daemon.call(
        "run", {"key": "traceme", "session": session(daemon), "argv": [PY, "-c", TRACEME]}
    )

    def ended() -> bool:
        try:
            daemon.call("pane.capture_rows", {"pane": r["pane"]})
        except VenomxError:
            pass  # exited meanwhile
        return bool(daemon.call("run.get", {"run": r["run"]})["state"] == "completed")

    wait_for(ended, 20, "the run to complete")
    rec = wait_run(daemon, r["run"])
    assert rec["outcome"] == "failed" and rec["exit_code"] == 7, rec
    assert lines_of(rec)[:2] == ["handled", "after"], rec


# An orphan re-parented to the daemon (a subreaper) makes the daemon its tracer, stops,
# and (with a second argument) does it again and again, writing how many stops it passed.
ORPHAN_TRACEME = """
import ctypes, os, signal, sys, time
libc = ctypes.CDLL(None, use_errno=True)
libc.ptrace.argtypes = [ctypes.c_long, ctypes.c_long, ctypes.c_void_p, ctypes.c_void_p]
marker, again = sys.argv[1], len(sys.argv) > 2
child = os.fork()
if child == 0:
    parent = os.getppid()
    if os.fork() == 0:
        os.setsid()  # out of reach of the leader's group: an escapee
        while os.getppid() == parent:  # until the child below has gone
            time.sleep(0.01)
        signal.signal(signal.SIGUSR2, lambda *_: None)
        open(marker + ".pid", "w").write(str(os.getpid()))
        stops = 0
        while True:
            assert libc.ptrace(0, 0, None, None) == 0  # PTRACE_TRACEME: the daemon traces us
            os.kill(os.getpid(), signal.SIGUSR2)
            stops += 1
            open(marker, "w").write(str(stops))
            if not again:
                os._exit(0)
    os._exit(0)
os.waitpid(child, 0)
"""


def test_an_orphan_that_made_the_daemon_its_tracer_goes_on(daemon: Daemon, tmp_path: Path) -> None:
    marker = tmp_path / "went-on"
    rec = run_and_wait(daemon, [PY, "-c", ORPHAN_TRACEME, str(marker)], "orphan-traceme")
    assert rec["exit_code"] == 0, rec
    wait_for(marker.exists, 10, "the orphan to go on past its stop")
    wait_for(lambda: daemon.call("doctor")["escapees"]["count"] == 0, 10, "it is reaped")
    assert daemon.call("doctor")["escapees"]["reaped"] == 1


# An orphan whose threads make the daemon their tracer and return: each leaves a zombie
# only its tracer may reap.
TRACED_THREADS = """
import ctypes, os, sys, threading, time
libc = ctypes.CDLL(None, use_errno=True)
libc.ptrace.argtypes = [ctypes.c_long, ctypes.c_long, ctypes.c_void_p, ctypes.c_void_p]
marker = sys.argv[1]
if os.fork() == 0:
    os.setsid()
    parent = os.getppid()
    if os.fork() == 0:
        while os.getppid() == parent:
            time.sleep(0.01)
        for _ in range(50):
            t = threading.Thread(target=lambda: libc.ptrace(0, 0, None, None))
            t.start()
            t.join()
        open(marker, "w").write(str(os.getpid()))
        os._exit(0)
    os._exit(0)
os.wait()
"""


def test_threads_that_make_the_daemon_their_tracer_are_reaped(
    daemon: Daemon, tmp_path: Path
) -> None:
    """Reaped without ``rusage``, which Linux sums over every thread of the process: a
    backlog of thousands of them cost 0.36 ms a reap and kept the reactor 28 s."""
    marker = tmp_path / "done"
    before = daemon.call("doctor")["escapees"]["reaped"]
    rec = run_and_wait(daemon, [PY, "-c", TRACED_THREADS, str(marker)], "traced-threads")
    assert rec["exit_code"] == 0, rec
    wait_for(marker.exists, 20, "the threads to end")
    pid = int(marker.read_text())
    wait_for(lambda: not Path(f"/proc/{pid}").exists(), 10, "the orphan reaped")
    wait_for(lambda: daemon.call("doctor")["escapees"]["count"] == 0, 10, "nothing left")
    # its 50 traced threads and itself: the daemon reaped each
    assert daemon.call("doctor")["escapees"]["reaped"] - before == 51


def test_an_orphan_that_makes_the_daemon_its_tracer_again_is_held(
    daemon: Daemon, tmp_path: Path
) -> None:
    """The same orphan, stopping for the daemon again and again: each stop was let go,
    and a few threads doing this kept the reactor at it (a start took 24 s, a deadline
    fired 7 s late) until CPython deadlocked in its signal handler (session 24)."""
    marker = tmp_path / "stops"
    rec = run_and_wait(daemon, [PY, "-c", ORPHAN_TRACEME, str(marker), "again"], "traceme-again")
    assert rec["exit_code"] == 0, rec
    pid = int(
        wait_for(
            lambda: (tmp_path / "stops.pid").exists() and (tmp_path / "stops.pid").read_text(),
            10,
            "its pid",
        )
    )
    try:
        wait_for(lambda: f"holding pid {pid} stopped" in daemon.log.read_text(), 10, "held")

        def status(name: str) -> str:
            text = Path(f"/proc/{pid}/status").read_text()
            return next(
                ln.split(":", 1)[1].strip() for ln in text.splitlines() if ln.startswith(name + ":")
            )

        assert status("State").startswith("t") and status("TracerPid") == str(daemon.proc.pid)
        assert marker.read_text() == "1"  # let go once, then held at its next stop
        again = run_and_wait(daemon, ["true"], "after-held")
        assert again["outcome"] == "succeeded"
    finally:
        os.kill(pid, signal.SIGKILL)
    wait_for(lambda: daemon.call("doctor")["escapees"]["count"] == 0, 10, "it is reaped")
