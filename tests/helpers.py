"""Test helpers: a real daemon on a private socket, the CLI, and condition waits."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from venomx.client import Client
from venomx.wire import VenomxError
from workers.protocol import RESERVE_TITLE

PY = sys.executable
ROOT = Path(__file__).resolve().parent.parent


def wait_for(
    cond: Callable[[], Any],
    timeout: float = 10.0,
    what: str = "condition",
    every: float | None = None,
) -> Any:
    """Poll ``cond`` until truthy or the deadline passes (never a bare sleep), backing off
    to 50 ms; ``every`` spaces the polls evenly instead: widely, for a condition that
    asking too often would itself prevent, or finely, for one that should be seen at once."""
    deadline = time.monotonic() + timeout
    delay = 0.005 if every is None else every
    while True:
        value = cond()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(delay)
        if every is None:
            delay = min(delay * 2, 0.05)


@dataclass
class CliResult:
    code: int
    out: str
    err: str

    @property
    def json(self) -> Any:
        return json.loads(self.out.strip().splitlines()[-1])


@dataclass
class Daemon:
    socket: str
    proc: subprocess.Popen[bytes]
    log: Path
    clients: list[Client] = field(default_factory=list)

    def client(self, token: str | None = "@owner", max_frame: int | None = None) -> Client:
        c = Client(self.socket, token, max_frame)
        self.clients.append(c)
        return c

    def call(
        self, verb: str, params: dict[str, Any] | None = None, token: str | None = "@owner"
    ) -> dict[str, Any]:
        with Client(self.socket, token) as c:
            return c.call(verb, params or {})

    def error(
        self, verb: str, params: dict[str, Any] | None = None, token: str | None = "@owner"
    ) -> VenomxError:
        try:
            self.call(verb, params, token)
        except VenomxError as exc:
            return exc
        raise AssertionError(f"{verb} succeeded")

    def cli(
        self,
        *args: str,
        token: str | None = "@owner",
        env: dict[str, str] | None = None,
        timeout: float = 30,
    ) -> CliResult:
        e = {k: v for k, v in os.environ.items() if not k.startswith("VENOMX_")}
        e["VENOMX_SOCKET"] = self.socket
        if token is not None:
            e["VENOMX_TOKEN"] = token
        e.update(env or {})
        p = subprocess.run(
            [PY, "-m", "venomx", *args], capture_output=True, text=True, env=e, timeout=timeout
        )
        return CliResult(p.returncode, p.stdout, p.stderr)

    def children(self) -> list[int]:
        """The daemon's live children (one that ends while we look is not counted)."""
        return [c for c in child_pids(self.proc.pid) if running(c)]

    def start_runs(self, runs: list[dict[str, Any]]) -> list[str]:
        """Start ``runs`` (each a ``run`` request's params) at once, pipelined on one
        connection; their run IDs in the same order (the daemon answers in any order)."""
        with self.client() as c:
            rids = [c.start("run", params) for params in runs]
            got: dict[int, str] = {}
            while len(got) < len(rids):
                frame = c.read()
                assert "ok" in frame, frame
                got[frame["id"]] = frame["ok"]["run"]
        return [got[r] for r in rids]

    def titled(self, title: str) -> list[int]:
        """The daemon's children whose process title is ``title`` (one that ends while we
        look is not counted)."""
        import psutil

        found = []
        for pid in child_pids(self.proc.pid):
            try:
                if " ".join(x for x in psutil.Process(pid).cmdline() if x) == title:
                    found.append(pid)
            except (psutil.Error, OSError):
                continue
        return found

    def fork_server(self) -> int | None:
        """The daemon's fork server: titled so and the leader of its own session. (A child
        it forked carries its title for a moment, and becomes the daemon's child when the
        fork server is killed: it is not the leader of a session.)"""
        for pid in self.titled("venomx-forkserver"):
            try:
                stat = Path(f"/proc/{pid}/stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[3]) == pid:
                return pid
        return None

    def reserve(self) -> int | None:
        """The fork server's reserve (workers.forkserver.keep_reserve): its child."""
        return reserve_of(self.fork_server())

    def fds(self) -> int:
        return len(os.listdir(f"/proc/{self.proc.pid}/fd"))

    def wait_exit(self, run: str, timeout: float = 10) -> dict[str, Any]:
        with Client(self.socket, "@owner") as c:
            return c.call("run.wait", {"run": run, "timeout_ms": int(timeout * 1000)})


# Directories start_daemon made for daemons, removed when the test session ends (a test
# may read a daemon's log after stopping it).
MADE: list[str] = []


def reserve_of(forkserver: int | None) -> int | None:
    """The reserve a fork server keeps, found among its children by title."""
    import psutil

    if forkserver is None:
        return None
    try:
        kids = psutil.Process(forkserver).children()
    except psutil.Error:
        return None
    for p in kids:
        try:
            if " ".join(x for x in p.cmdline() if x) == RESERVE_TITLE:
                return int(p.pid)
        except psutil.Error:
            continue
    return None


def start_daemon(
    extra: list[str] | None = None,
    config: str | None = None,
    env: dict[str, str] | None = None,
    seams: bool = True,
    wrap: list[str] | None = None,
    directory: str | None = None,
) -> Daemon:
    """``wrap``: a command that execs the daemon in place (setpriv, prlimit); ``directory``:
    an empty one of ours for its socket and log (else a new one)."""
    d = directory
    if d is None:
        d = tempfile.mkdtemp(prefix="vx", dir="/tmp")
        MADE.append(d)
    sock = os.path.join(d, "s.sock")
    log = Path(d) / "daemon.log"
    args = [*(wrap or []), PY, "-m", "venomx", "serve", "--socket", sock, "--log-level", "debug"]
    if seams:
        args.append("--test-seams")
    if config is not None:
        cfg = Path(d) / "config.toml"
        cfg.write_text(config)
        args += ["--config", str(cfg)]
    e = {k: v for k, v in os.environ.items() if not k.startswith("VENOMX_")}
    e.update(env or {})
    with open(log, "wb") as logf:
        proc = subprocess.Popen(
            args + (extra or []),
            stdout=subprocess.DEVNULL,
            stderr=logf,
            start_new_session=True,
            env=e,
            cwd=d,
        )

    wait_listening(proc, sock, log)
    return Daemon(sock, proc, log)


def restart_at(sock: str, log: Path) -> Daemon:
    """A new daemon serving ``sock``, where another one was (a restart), logging to ``log``."""
    with open(log, "wb") as logf:
        proc = subprocess.Popen(
            [PY, "-m", "venomx", "serve", "--socket", sock, "--test-seams"],
            stdout=subprocess.DEVNULL,
            stderr=logf,
            start_new_session=True,
            env={k: v for k, v in os.environ.items() if not k.startswith("VENOMX_")},
        )
    wait_listening(proc, sock, log)
    return Daemon(sock, proc, log)


def wait_listening(proc: subprocess.Popen[bytes], sock: str, log: Path) -> None:
    """Until the daemon answers hello on ``sock``; fail with its log if it exits first."""

    def ready() -> bool:
        if proc.poll() is not None:
            raise AssertionError("daemon exited: " + log.read_text())
        try:
            Client(sock, "@owner").close()
            return True
        except VenomxError:
            return False

    # Finely: a daemon listens ~150 ms after it starts, and the backoff found it ~30 ms
    # late, for each of the suite's daemons.
    wait_for(ready, 15, "daemon socket", every=0.005)


def serves(d: Daemon) -> bool:
    """Whether the daemon answers a request now (for waits after it was starved)."""
    try:
        return bool(d.call("whoami")["principal"] == "g0")
    except VenomxError:
        return False


def stop_daemon(d: Daemon) -> None:
    for c in d.clients:
        c.close()
    if d.proc.poll() is None:
        try:
            d.call("shutdown")
        except VenomxError:
            pass
        try:
            d.proc.wait(10)
        except subprocess.TimeoutExpired:
            pass
    try:
        os.killpg(d.proc.pid, signal.SIGKILL)
    except OSError:
        pass
    if d.proc.poll() is None:
        d.proc.wait(5)
    if os.path.exists(d.socket):
        os.unlink(d.socket)


def spare_pool(d: Daemon) -> tuple[int, int]:
    """Doctor's spare sentinels now, and how many the pool aims to hold."""
    s = d.call("doctor")["sentinels"]
    return s["spares"], s["spares_target"]


def forkserver_pid(doc: dict[str, Any]) -> int:
    """The fork server's pid as a doctor report names it; 0 when its check fails."""
    check = next(c for c in doc["checks"] if c["name"] == "fork_server")
    return int(check["detail"].split()[1]) if check["status"] == "ok" else 0


def child_pids(pid: int) -> list[int]:
    import psutil

    try:
        return [c.pid for c in psutil.Process(pid).children()]
    except (psutil.Error, OSError):
        return []


def running(pid: int) -> bool:
    """Alive and not a zombie; a process that ends while we look is simply not running."""
    import psutil

    try:
        return bool(psutil.Process(pid).status() != psutil.STATUS_ZOMBIE)
    except (psutil.Error, OSError):  # gone while we looked
        return False


def marker_count(path: Path) -> int:
    return len(path.read_text().splitlines()) if path.exists() else 0
