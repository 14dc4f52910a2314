"""venomx benchmarks, each side by side with tmux (control mode) and a Python floor.

Usage: scripts/bench [--quick] [--only NAME,...]

Default: start, throughput, list, runs, vt, deadline. ``soak`` (issue 15's hardening
soak) runs only when named.
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import json
import os
import pty
import random
import resource
import select
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import psutil

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from venomx.client import Client
from workers.protocol import SENTINEL_TITLE, SPARE_TITLE

ROWS: list[tuple[str, str, str]] = []


def row(what: str, value: str, note: str = "") -> None:
    ROWS.append((what, value, note))
    print(f"  {what:<58} {value:>22}  {note}", flush=True)


def pct(xs: list[float], p: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, round(p / 100 * (len(xs) - 1)))]


def ms(xs: list[float]) -> str:
    return f"p50 {pct(xs, 50) * 1000:.2f} / p90 {pct(xs, 90) * 1000:.2f} ms"


class Daemon:
    """A real daemon on a temporary socket, for one benchmark."""

    def __init__(
        self, config: str = "", log_level: str = "warning", nofile: int | None = None
    ) -> None:
        self.dir = tempfile.mkdtemp(prefix="vxb", dir="/tmp")
        self.sock = os.path.join(self.dir, "s.sock")
        cfg = os.path.join(self.dir, "c.toml")
        Path(cfg).write_text(config)

        def limit() -> None:  # in the child, before exec: its hard and soft fd limit
            if nofile is not None:
                resource.setrlimit(resource.RLIMIT_NOFILE, (nofile, nofile))

        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "venomx",
                "serve",
                "--socket",
                self.sock,
                "--config",
                cfg,
                "--log-level",
                log_level,
            ],
            stderr=open(os.path.join(self.dir, "log"), "wb"),
            start_new_session=True,
            preexec_fn=limit,
            cwd=self.dir,
        )
        deadline = time.monotonic() + 15
        while True:
            try:
                Client(self.sock, "@owner").close()
                break
            except Exception:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.02)

    def client(self) -> Client:
        return Client(self.sock, "@owner")

    def log_bytes(self) -> int:
        return os.path.getsize(os.path.join(self.dir, "log"))

    def rss(self) -> int:
        return int(psutil.Process(self.proc.pid).memory_info().rss)

    def stop(self) -> None:
        try:
            with self.client() as c:
                c.call("shutdown")
            self.proc.wait(15)
        except Exception:
            self.proc.kill()
        log = Path(self.dir, "log").read_text()
        if "trace=" in log:
            print(log[-3000:])
        shutil.rmtree(self.dir, ignore_errors=True)


def end_tmux(sock: str) -> None:
    """Stop the tmux server on ``sock`` and remove the socket, which tmux leaves behind."""
    subprocess.run(["tmux", "-S", sock, "kill-server"], capture_output=True)
    with contextlib.suppress(FileNotFoundError):
        os.unlink(sock)


class Tmux:
    """A tmux server driven through one control-mode client."""

    def __init__(self) -> None:
        self.sock = tempfile.mktemp(prefix="vxbt", dir="/tmp")
        self.proc = subprocess.Popen(
            ["tmux", "-S", self.sock, "-C", "new-session", "-x", "80", "-y", "24"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            bufsize=0,
        )
        assert self.proc.stdin and self.proc.stdout
        self.out = self.proc.stdout
        while not self.readline().startswith(b"%end"):  # the new-session block itself
            pass
        self.command("set -g remain-on-exit off")

    def readline(self) -> bytes:
        return self.out.readline()

    def command(self, cmd: str) -> float:
        """Send a command, return when its %end arrives."""
        assert self.proc.stdin
        self.proc.stdin.write(cmd.encode() + b"\n")
        while True:
            line = self.readline()
            if line.startswith(b"%end") or line.startswith(b"%error"):
                return time.perf_counter()

    def wait_for(self, prefix: bytes) -> float:
        """Wait for a notification; a window may close as %window-close or
        %unlinked-window-close depending on how the control client is attached."""
        alt = b"%unlinked-" + prefix[1:]
        while True:
            line = self.readline()
            if line.startswith(prefix) or line.startswith(alt):
                return time.perf_counter()

    def stop(self) -> None:
        end_tmux(self.sock)
        self.proc.wait(10)


def events(c: Client) -> Iterator[tuple[str, dict[str, Any]]]:
    """(type, data) of each event from now on, read on the caller's thread (as the tmux
    control client is read) so that no thread hand-off is timed."""
    rid = c.start("events.subscribe", {"snapshot": True})
    while "snapshot" not in c.read().get("item", {}):
        pass  # live from here on

    def gen() -> Iterator[tuple[str, dict[str, Any]]]:
        while True:
            frame = c.read()
            ev = frame.get("item", {}).get("event", {}) if frame.get("id") == rid else {}
            if ev:
                yield ev["type"], ev["data"]

    return gen()


BLOCK = 25


def interleaved(n: int, *samplers: Callable[[], None]) -> None:
    """``n`` samples from each sampler, taken in alternating blocks of ``BLOCK``: this
    VM's speed drifts by tens of percent within a minute, and alternating lets venomx
    and tmux see the same machine instead of whichever minute each ran in."""
    for done in range(0, n, BLOCK):
        for sample in samplers:
            for _ in range(min(BLOCK, n - done)):
                sample()


def tmux_starts(t: Tmux | None, resp: list[float], done: list[float]) -> Callable[[], None]:
    def sample() -> None:
        if t is None:
            return
        t0 = time.perf_counter()
        t1 = t.command("new-window -d true")
        t2 = t.wait_for(b"%window-close")
        resp.append(t1 - t0)
        done.append(t2 - t0)

    return sample


def bench_start(n: int) -> None:
    print(
        f"\n== pane start: {n} x `true`, one persistent connection, "
        f"alternating with tmux every {BLOCK} =="
    )
    d = Daemon()
    t = Tmux() if shutil.which("tmux") else None
    try:
        c = d.client()
        evs = events(d.client())
        s = c.call("session.create")["session"]
        resp: list[float] = []
        done: list[float] = []
        t_resp: list[float] = []
        t_done: list[float] = []

        def venomx() -> None:
            t0 = time.perf_counter()
            pane = c.call("window.create", {"session": s, "argv": ["true"]})["pane"]
            t1 = time.perf_counter()
            while (ev := next(evs))[0] != "pane.exited" or ev[1]["pane"] != pane:
                pass
            resp.append(t1 - t0)
            done.append(time.perf_counter() - t0)

        interleaved(n, venomx, tmux_starts(t, t_resp, t_done))
        row("venomx window.create true -> response", ms(resp))
        row(
            "venomx window.create true -> pane exited",
            ms(done),
            f"{pct(done, 50) / pct(t_done, 50):.2f}x tmux" if t_done else "",
        )
        if t_done:
            row("tmux control mode new-window true -> %end", ms(t_resp))
            row("tmux control mode new-window true -> window closed", ms(t_done))
        # idle after showing something, so its terminal exists (it is built lazily)
        w = c.call(
            "window.create", {"session": s, "argv": ["sh", "-c", "echo ready; exec sleep 60"]}
        )
        deadline = time.monotonic() + 10
        while not any(
            "ready" in ln for ln in c.call("pane.capture_rows", {"pane": w["pane"]})["lines"]
        ):
            assert time.monotonic() < deadline, "the pane never showed its line"
            time.sleep(0.01)
        sen = psutil.Process(w["pid"]).parent()
        assert sen is not None
        uss = sen.memory_full_info().uss / 1048576
        row("idle sentinel USS (after one line of output)", f"{uss:.2f} MiB", "target <= 4 MiB")
    finally:
        d.stop()
        if t is not None:
            t.stop()
    floor = []
    for _ in range(n):
        t0 = time.perf_counter()
        pid, fd = pty.fork()
        if pid == 0:
            os.execvp("true", ["true"])
        os.waitpid(pid, 0)
        os.close(fd)
        floor.append(time.perf_counter() - t0)
    row("floor: python pty.fork + exec true + reap", ms(floor))


def make_seq(lines: int) -> Path:
    path = Path(tempfile.gettempdir()) / f"vxb-seq-{lines}.txt"
    if not path.exists():
        with open(path, "w") as f:
            subprocess.run(["seq", "1", str(lines)], stdout=f, check=True)
    return path


def bench_throughput(lines: int) -> None:
    path = make_seq(lines)
    size = path.stat().st_size
    print(f"\n== throughput: cat of {size / 1e6:.1f} MB (`seq 1 {lines}`) ==")
    d = Daemon()
    try:
        with d.client() as c:
            s = c.call("session.create")["session"]
            t0 = time.perf_counter()
            r = c.call("run", {"key": "cat", "session": s, "argv": ["cat", str(path)]})
            rec = c.call("run.wait", {"run": r["run"], "output": False})
            el = time.perf_counter() - t0
            venomx_rate = size / el
            cap = c.call("pane.capture_rows", {"pane": r["pane"], "limit": 3})
            last = [ln.strip() for ln in cap["lines"] if ln.strip()][-1:]
            ok = last == [str(lines)] and cap["offset"] >= size
            row(
                "venomx pane: cat -> run completed",
                f"{size / el / 1e6:.1f} MB/s",
                f"{el:.2f} s, status {rec['status']}, last row {'ok' if ok else 'WRONG'}",
            )
    finally:
        d.stop()
    if shutil.which("tmux"):
        # no client attached: a control client would receive every byte as %output
        sock = tempfile.mktemp(prefix="vxbt", dir="/tmp")
        tmux = ["tmux", "-S", sock]
        subprocess.run(
            [*tmux, "new-session", "-d", "-x", "80", "-y", "24", "sleep 600"], check=True
        )
        subprocess.run([*tmux, "set", "-g", "remain-on-exit", "on"], check=True)
        try:
            t0 = time.perf_counter()
            cmd = f"cat {path}; tmux -S {sock} wait-for -S done"
            subprocess.run([*tmux, "new-window", "-d", cmd], check=True)
            subprocess.run([*tmux, "wait-for", "done"], check=True)
            el = time.perf_counter() - t0
            shown = subprocess.run(
                [*tmux, "capture-pane", "-p", "-t", ":1"], capture_output=True, text=True
            ).stdout.splitlines()
            last = [
                ln.strip()
                for ln in shown  # skip tmux's own "Pane is dead" line
                if ln.strip() and not ln.startswith("Pane is dead")
            ][-1:]
            row(
                "tmux pane: cat -> done",
                f"{size / el / 1e6:.1f} MB/s",
                f"{el:.2f} s, last row {'ok' if last == [str(lines)] else 'WRONG ' + str(last)}",
            )
            row(
                "throughput ratio venomx / tmux",
                f"{venomx_rate / (size / el):.2f}x",
                "target >= 1.0",
            )
        finally:
            end_tmux(sock)
    t0 = time.perf_counter()
    pid, fd = pty.fork()
    if pid == 0:
        os.execvp("cat", ["cat", str(path)])
    got = 0
    while True:
        try:
            chunk = os.read(fd, 1 << 17)
        except OSError:
            break
        if not chunk:
            break
        got += len(chunk)
    os.waitpid(pid, 0)
    el = time.perf_counter() - t0
    row("floor: bare PTY drained by python", f"{size / el / 1e6:.1f} MB/s", f"{el:.2f} s")


def output_inputs(size: int) -> dict[str, Path]:
    """Files of about ``size`` bytes for the output bench: plain lines, random bytes, a
    flood of combining marks and SGR-heavy colour text."""
    rng = random.Random(19)
    out: dict[str, Path] = {}
    seq = "".join(f"{i}\n" for i in range(1, size // 6))
    combining = ("a" + "\u0301" * 200 + "\n") * (size // 402)
    colour = "".join(
        f"\x1b[38;5;{i % 256}m\x1b[48;5;{(i * 7) % 256}mword{i % 10}\x1b[0m "
        + ("\n" if i % 12 == 11 else "")
        for i in range(size // 30)
    )
    data = {
        "seq": seq.encode(),
        "random bytes": rng.randbytes(size),
        "combining marks": combining.encode(),
        "SGR colour": colour.encode(),
    }
    for name, blob in data.items():
        path = Path(tempfile.gettempdir()) / f"vxb-out-{name.replace(' ', '-')}-{size}.bin"
        if not path.exists():
            path.write_bytes(blob)
        out[name] = path
    return out


def venomx_cat(d: Daemon, path: Path) -> float:
    with d.client() as c:
        s = c.call("session.create")["session"]
        t0 = time.perf_counter()
        r = c.call("run", {"key": f"cat{t0}", "session": s, "argv": ["cat", str(path)]})
        c.call("run.wait", {"run": r["run"], "output": False})
        el = time.perf_counter() - t0
        c.call("session.remove", {"session": s, "recursive": True})
    return el


def tmux_cat(path: Path) -> float:
    sock = tempfile.mktemp(prefix="vxbt", dir="/tmp")
    tmux = ["tmux", "-S", sock]
    subprocess.run([*tmux, "new-session", "-d", "-x", "80", "-y", "24", "sleep 600"], check=True)
    try:
        t0 = time.perf_counter()
        cmd = f"cat '{path}'; tmux -S {sock} wait-for -S done"
        subprocess.run([*tmux, "new-window", "-d", cmd], check=True)
        subprocess.run([*tmux, "wait-for", "done"], check=True)
        return time.perf_counter() - t0
    finally:
        end_tmux(sock)


def bench_output(quick: bool) -> None:
    """Issue 19 §4: MB/s of worst-case and ordinary output through a venomx pane (until
    the run's outcome is known) beside a tmux pane (until the command is done), alternating."""
    size = 2_000_000 if quick else 8_000_000
    print(f"\n== output through a pane: {size / 1e6:.0f} MB of each kind ==")
    d = Daemon()
    try:
        for name, path in output_inputs(size).items():
            n = path.stat().st_size
            ours, theirs = [], []
            for _ in range(1 if quick else 2):
                ours.append(venomx_cat(d, path))
                theirs.append(tmux_cat(path))
            o, t = statistics.median(ours), statistics.median(theirs)
            row(
                f"{name}: venomx pane / tmux pane",
                f"{n / o / 1e6:.1f} / {n / t / 1e6:.1f} MB/s",
                f"{t / o:.2f}x tmux's rate",
            )
    finally:
        d.stop()


def bench_list_under_load(lines: int) -> None:
    path = make_seq(lines)
    print("\n== pane.list latency while 4 panes cat at once ==")
    d = Daemon()
    try:
        with d.client() as c:
            s = c.call("session.create")["session"]
            runs = [
                c.call("run", {"key": f"c{i}", "session": s, "argv": ["cat", str(path)]})
                for i in range(4)
            ]
            lat = []
            probe = d.client()
            while True:
                t0 = time.perf_counter()
                probe.call("pane.list")
                lat.append(time.perf_counter() - t0)
                done = [
                    c.call("run.get", {"run": r["run"], "output": False})["state"] for r in runs
                ]
                if all(x == "completed" for x in done):
                    break
            row(
                "pane.list during 4 x cat",
                f"p50 {pct(lat, 50) * 1e3:.2f} / p99 {pct(lat, 99) * 1e3:.2f} ms",
                f"{len(lat)} samples; target p99 <= 20 ms",
            )
    finally:
        d.stop()


def bench_runs(n: int) -> None:
    print(
        f"\n== run + run.wait of `true`: {n} times, one connection, "
        f"alternating with tmux every {BLOCK} =="
    )
    d = Daemon()
    t = Tmux() if shutil.which("tmux") else None
    try:
        with d.client() as c:
            s = c.call("session.create")["session"]
            lat: list[float] = []
            t_resp: list[float] = []
            t_done: list[float] = []

            def venomx() -> None:
                t0 = time.perf_counter()
                r = c.call("run", {"key": f"k{len(lat)}", "session": s, "argv": ["true"]})
                c.call("run.wait", {"run": r["run"], "output": False})
                lat.append(time.perf_counter() - t0)

            interleaved(n, venomx, tmux_starts(t, t_resp, t_done))
            row(
                "venomx run + run.wait true",
                ms(lat),
                f"{pct(lat, 50) / pct(t_done, 50):.2f}x tmux" if t_done else "",
            )
            if t_done:
                row("tmux control mode new-window true -> closed", ms(t_done))
            c.call("config.set", {"path": "run.max_active", "value": "64"})
            clients = [d.client() for _ in range(50)]
            t0 = time.perf_counter()
            rids = [
                (cl, cl.start("run", {"key": f"z{i}", "session": s, "argv": ["sleep", "0.2"]}))
                for i, cl in enumerate(clients)
            ]
            started = [cl.response(rid) for cl, rid in rids]
            for cl, r in zip(clients, started, strict=True):
                cl.call("run.wait", {"run": r["run"], "output": False})
            el = time.perf_counter() - t0
            row(
                "50 concurrent runs of sleep 0.2 (max_active 64)", f"{el:.2f} s wall", "ideal 0.2 s"
            )
            for cl in clients:
                cl.close()
            rss0 = psutil.Process(d.proc.pid).memory_info().rss
            for i in range(1000):
                r = c.call("run", {"key": f"m{i}", "session": s, "shell": f"seq 1 {i % 300}"})
                c.call("run.wait", {"run": r["run"], "output": False})
                if i % 50 == 49:  # keep the pane count bounded, as a long-lived agent would
                    for p in c.call("pane.list", {"session": s})["panes"]:
                        if p["state"] == "exited":
                            c.call("pane.remove", {"pane": p["pane"]})
            rss1 = psutil.Process(d.proc.pid).memory_info().rss
            doc = c.call("doctor")["run"]["retained"]
            row(
                "daemon RSS after 1000 completed runs",
                f"{rss1 / 1048576:.1f} MiB",
                f"from {rss0 / 1048576:.1f}; retained {doc['count']} runs, {doc['bytes']} bytes",
            )
    finally:
        d.stop()
        if t is not None:
            t.stop()


# -- issue 14: worst-case VT cost, deadline with a busy or stopped sentinel ---------------


def bench_vt(quick: bool) -> None:
    from workers.vtcost import vt_costs

    n, tries = (50_000, 1) if quick else (200_000, 3)
    print(
        f"\n== VT worst cases: CPU to feed ~{n} and ~{2 * n} bytes in 128 KiB reads, best of "
        f"{tries} (workers.vtcost.vt_costs) =="
    )
    for r in vt_costs(n=n, tries=tries):
        ratio = r["ratio"]
        verdict = "linear" if ratio < 2.6 else ("SUPERLINEAR" if ratio < 3.5 else "QUADRATIC")
        if r["seconds_n"] < 0.05:  # a few ms: scheduler noise, not the VT
            verdict = "too short to judge"
        row(
            f"vt {r['pattern']}",
            f"{r['mb_per_s']:.2f} MB/s",
            f"t(2N)/t(N) {ratio:.2f} ({verdict}); 2N = {r['bytes_2n']} B in "
            f"{r['seconds_2n']:.3f} s",
        )
    print("\n== VT on panes a program sized itself: KB per CPU second, 4 KiB reads ==")
    from workers.vtcost import wide_costs

    for w in wide_costs(seconds=0.3 if quick else 1.0):
        row(f"vt {w['pattern']}", f"{w['kb_per_s']:.1f} KB/s", f"{w['bytes']} B")


COMBINING_FLOOD = (
    "import sys\nw = sys.stdout.buffer\nchunk = ('a' + '\\u0301' * 80000)"
    ".encode()\nwhile True:\n    w.write(chunk)\n    w.flush()\n"
)


def _iso(ts: str) -> float:
    return datetime.fromisoformat(ts.replace("Z", "+00:00")).timestamp()


def _deadline_once(c: Client, s: str, key: str, stop_sentinel: bool) -> tuple[float, float, float]:
    """(leader's death - deadline, run completion - deadline, sentinel CPU seconds)."""
    r = c.call(
        "run",
        {
            "key": key,
            "session": s,
            "argv": [sys.executable, "-c", COMBINING_FLOOD],
            "deadline_ms": 1000,
        },
    )
    pidfd = os.pidfd_open(r["pid"])
    sentinel = psutil.Process(psutil.Process(r["pid"]).ppid())
    cpu0 = sum(sentinel.cpu_times()[:2])
    try:
        if stop_sentinel:
            sentinel.send_signal(signal.SIGSTOP)
        poller = select.poll()
        poller.register(pidfd, select.POLLIN)
        if not poller.poll(15000):
            raise AssertionError(f"run {r['run']}: the leader outlived its deadline by 14 s")
        died = time.time()  # a pidfd is readable once the process has exited
        try:
            cpu = sum(sentinel.cpu_times()[:2]) - cpu0
        except psutil.Error:
            cpu = float("nan")
    finally:
        os.close(pidfd)
    rec = c.call("run.wait", {"run": r["run"], "output": False, "timeout_ms": 30000})
    assert rec["cause"] == "deadline", rec
    due = _iso(rec["started_at"]) + 1.0
    c.call("pane.remove", {"pane": r["pane"]})
    return died - due, _iso(rec["completed_at"]) - due, cpu


def bench_deadline(quick: bool) -> None:
    n = 3 if quick else 10
    print(
        f"\n== deadline_ms 1000 -> leader's death, sentinel busy with combining marks or "
        f"SIGSTOPped, {n} runs each =="
    )
    d = Daemon()
    try:
        with d.client() as c:
            s = c.call("session.create")["session"]
            for stopped in (False, True):
                died, done, cpu = [], [], []
                for i in range(n):
                    a, b, u = _deadline_once(c, s, f"d{int(stopped)}-{i}", stopped)
                    died.append(a)
                    done.append(b)
                    cpu.append(u)
                what = "SIGSTOPped" if stopped else "busy (combining flood)"
                row(
                    f"deadline -> leader dead, sentinel {what}",
                    f"p50 {pct(died, 50) * 1e3:.0f} / max {max(died) * 1e3:.0f} ms",
                    f"target <= 50 ms; sentinel CPU in the run p50 {pct(cpu, 50):.2f} s",
                )
                row(
                    f"deadline -> run completed, sentinel {what}",
                    f"p50 {pct(done, 50) * 1e3:.0f} / max {max(done) * 1e3:.0f} ms",
                    "",
                )
    finally:
        d.stop()


# -- issue 15: soak ---------------------------------------------------------------------------


def raise_nofile() -> int:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    return hard


class Counts:
    """Replies seen on raw connections, by error code; ``internal`` must stay 0."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.replies = 0
        self.codes: dict[str, int] = {}

    def add(self, frame: dict[str, Any]) -> None:
        err = frame.get("error") or (frame.get("item") or {}).get("error")
        with self.lock:
            self.replies += 1
            if isinstance(err, dict):
                code = str(err.get("code"))
                self.codes[code] = self.codes.get(code, 0) + 1

    @property
    def internal(self) -> int:
        return self.codes.get("internal", 0)


def raw_conn(path: str, token: str | None, timeout: float = 10.0) -> socket.socket | None:
    """A connected socket after hello (None: the daemon did not answer in time)."""
    sk = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sk.settimeout(timeout)
    try:
        sk.connect(path)
        hello: dict[str, Any] = {"protocol": 1}
        if token is not None:
            hello["token"] = token
        sk.sendall(json.dumps({"id": 0, "verb": "hello", "params": hello}).encode() + b"\n")
        buf = b""
        while b"\n" not in buf:
            got = sk.recv(65536)
            if not got:
                raise OSError("closed")
            buf += got
        if b'"ok"' not in buf.split(b"\n")[0]:
            raise OSError(buf[:200].decode(errors="replace"))
    except OSError:
        sk.close()
        return None
    return sk


def _junk(rng: random.Random, depth: int = 0) -> Any:
    pick = rng.randrange(12 if depth < 4 else 7)
    if pick == 0:
        return rng.randrange(-(2**70), 2**70)
    if pick == 1:
        return rng.choice([0, -1, 1.5, 2**63, -(2**63) - 1, 1e300, True, False, None])
    if pick == 2:
        return "".join(chr(rng.randrange(1, 0x3000)) for _ in range(rng.randrange(20)))
    if pick == 3:
        return rng.choice(
            [
                "",
                "*",
                "p1",
                "w1",
                "s1",
                "r1",
                "r" + "9" * 4400,
                "r²",
                "SIGKILL",
                "@owner",
                "../../etc/passwd",
                "x" * 5000,
            ]
        )
    if pick in (4, 5, 6):
        return rng.choice(["a", "b", 7, None, [], {}])
    if pick in (7, 8, 9):
        return [_junk(rng, depth + 1) for _ in range(rng.randrange(4))]
    return {
        rng.choice(["pane", "run", "after", "limit", "path", "value", "id", "x"]): _junk(
            rng, depth + 1
        )
        for _ in range(rng.randrange(4))
    }


def fuzz_frame(rng: random.Random, verbs: list[str], rid: int) -> bytes:
    from venomx.manifest.verbs import verb_by_name

    kind = rng.randrange(4)
    if kind == 0:  # random bytes on one line
        return rng.randbytes(rng.randrange(1, 200)).replace(b"\n", b" ")
    if kind == 1:  # a JSON value that is not a request
        return json.dumps(_junk(rng)).encode()
    if kind == 2:  # odd ids, nesting and numbers, as raw text
        return rng.choice(
            [
                b'{"id":1e999,"verb":"whoami"}',
                b'{"id":"x","verb":"whoami"}',
                b'{"id":' + b"9" * 400 + b',"verb":"whoami"}',
                b'{"id":%d,"verb":"whoami","params":' % rid + b"[" * 5000 + b"]" * 5000 + b"}",
                b'{"id":%d}' % rid,
                b"[" * 100000,
                b"NaN",
            ]
        )
    name = rng.choice(verbs)
    verb = verb_by_name(name)
    params: dict[str, Any] = {}
    for p in verb.params if verb is not None else ():
        if rng.random() < 0.6:
            params[p.name] = _junk(rng)
    if rng.random() < 0.2:
        params[rng.choice(["zzz", "limit", "after"])] = _junk(rng)
    return json.dumps({"id": rid, "verb": name, "params": params}).encode()


def fuzz_conn(
    path: str,
    token: str | None,
    verbs: list[str],
    n: int,
    seed: int,
    counts: Counts,
    deadline: float,
) -> int:
    """Send ``n`` fuzzed frames on one connection, counting every reply; returns frames
    sent. Streams the frames open are left to the connection's close."""
    sk = raw_conn(path, token) if token is not None else socket.socket(socket.AF_UNIX)
    if sk is None:
        return 0
    if token is None:
        sk.settimeout(30)
        sk.connect(path)
    rng = random.Random(seed)
    done = threading.Event()
    last_id = 1 << 40

    def reader() -> None:
        buf = b""
        while time.monotonic() < deadline:
            try:
                if not select.select([sk], [], [], 0.5)[0]:
                    continue
                got = sk.recv(1 << 16)
            except (OSError, ValueError):  # closed under us
                break
            if not got:
                break
            buf += got
            *lines, buf = buf.split(b"\n")
            for ln in lines:
                try:
                    frame = json.loads(ln)
                except ValueError:
                    continue
                counts.add(frame)
                if frame.get("id") == last_id:
                    done.set()
                    return
        done.set()

    t = threading.Thread(target=reader, daemon=True)
    t.start()
    sent = 0
    try:
        for i in range(n):
            if time.monotonic() > deadline:
                break
            sk.sendall(fuzz_frame(rng, verbs, i + 1) + b"\n")
            sent += 1
        # whoami (hello before it on a connection that never said hello): the last reply
        sk.sendall(json.dumps({"id": last_id, "verb": "whoami", "params": {}}).encode() + b"\n")
        done.wait(max(0.0, deadline - time.monotonic()))
    except OSError:
        pass
    finally:
        sk.close()
        t.join(2)
    return sent


def pipeline(
    c: Client, reqs: list[tuple[str, dict[str, Any]]], timeout: float, counts: Counts
) -> list[dict[str, Any]]:
    """Send every request, then read every answer (by id, in request order)."""
    c.sock.settimeout(timeout)
    rids = [c.start(v, p) for v, p in reqs]
    want = set(rids)
    got: dict[int, dict[str, Any]] = {}
    while want:
        frame = c.read()
        rid = frame.get("id")
        if rid in want and "item" not in frame:
            counts.add(frame)
            got[rid] = frame
            want.discard(rid)
    c.sock.settimeout(None)
    return [got[r] for r in rids]


def held_bytes(doc: Any) -> str:
    """Doctor's bytes held by exited panes, under whatever key it has them (or n/a)."""
    found: list[str] = []

    def walk(node: Any, path: str) -> None:
        if isinstance(node, dict):
            for k, v in node.items():
                walk(v, f"{path}.{k}" if path else str(k))
        elif (
            isinstance(node, int)
            and "bytes" in path
            and any(w in path for w in ("exited", "held", "final", "panes"))
        ):
            found.append(f"{node} ({path})")

    walk(doc, "")
    return ", ".join(found) if found else "n/a"


# Each run blocks, without using CPU, on a shared lock of the gate file that the bench
# holds exclusively until every run is live (polling instead where flock(1) is missing).
GATE_RUN = (
    'flock -s "$1" true; echo "ran $2"; {end}'
    if shutil.which("flock")
    else 'while [ -e "$1" ]; do sleep 0.5; done; echo "ran $2"; {end}'
)
MARKER_FLOOD = (
    'while :; do printf "\\033]133;C\\007\\033]7501;state=busy\\007\\033]133;D;0\\007"; done'
)


def _expect(i: int) -> dict[str, Any]:
    if i % 10 == 9:
        return {"outcome": "signaled", "signal": "SIGKILL", "status": 137}
    k = i % 5
    return {"outcome": "succeeded" if k == 0 else "failed", "exit_code": k, "status": k}


def bench_soak(quick: bool) -> None:
    frames, idle, nruns = (2000, 100, 60) if quick else (10000, 500, 300)
    hard = raise_nofile()
    print(
        f"\n== soak: {frames} fuzzed frames, {idle} idle clients, {nruns} concurrent runs, "
        f"a pane flooding OSC markers (RLIMIT_NOFILE {hard}); then fds limited to 64 =="
    )
    counts = Counts()
    gate_fd, gate = tempfile.mkstemp(prefix="vxb-gate", dir="/tmp")
    fcntl.flock(gate_fd, fcntl.LOCK_EX)
    # max_active above the run count, so all of them are live at once (not in waves), and
    # retain_count too: a record evicted before its wait is read is not a lost outcome
    d = Daemon(config="[run]\nmax_active = 512\nretain_count = 1024\n", log_level="info")
    idlers: list[socket.socket] = []
    try:
        c = d.client()
        s = c.call("session.create")["session"]
        cursor = c.call("events.read", {"limit": 1024})["next"]
        rss0 = d.rss()
        flood = c.call("window.create", {"session": s, "argv": ["sh", "-c", MARKER_FLOOD]})
        t0 = time.monotonic()
        for _ in range(idle):
            sk = raw_conn(d.sock, "@owner")
            if sk is not None:
                idlers.append(sk)
        row(
            "soak: idle clients connected (hello answered)",
            f"{len(idlers)} of {idle}",
            f"{time.monotonic() - t0:.1f} s",
        )

        from venomx.manifest.verbs import VERBS

        reader = c.call("principal.create", {"grants": [{"right": "read", "scope": "*"}]})
        safe = [v.name for v in VERBS if v.dispatch in (None, "read") and v.name != "hello"]
        every = [v.name for v in VERBS]
        plan = [(None, every), ("@owner", safe), (reader["token"], every), ("@owner", safe)]
        per = frames // len(plan)
        deadline = time.monotonic() + 120
        sent: list[int] = []
        threads = [
            threading.Thread(
                target=lambda i=i, tok=tok, vs=vs: sent.append(
                    fuzz_conn(d.sock, tok, vs, per, 1000 + i, counts, deadline)
                )
            )
            for i, (tok, vs) in enumerate(plan)
        ]
        t0 = time.monotonic()
        for t in threads:
            t.start()
        for t in threads:
            t.join(130)
        row(
            "soak: fuzzed frames sent / replies read",
            f"{sum(sent)} / {counts.replies}",
            f"{time.monotonic() - t0:.1f} s over {len(plan)} connections",
        )

        t0 = time.monotonic()
        clients = [d.client() for _ in range(10)]
        reqs = [
            [
                (
                    "run",
                    {
                        "key": f"soak{i}",
                        "session": s,
                        "cols": 40,
                        "rows": 5,
                        "argv": [
                            "sh",
                            "-c",
                            GATE_RUN.format(
                                end="kill -KILL $$" if i % 10 == 9 else f"exit {i % 5}"
                            ),
                            "gate",
                            gate,
                            str(i),
                        ],
                    },
                )
                for i in range(j, nruns, len(clients))
            ]
            for j in range(len(clients))
        ]
        started: list[list[dict[str, Any]]] = [[] for _ in clients]

        def start_all(j: int) -> None:
            started[j] = pipeline(clients[j], reqs[j], 120, counts)

        starters = [threading.Thread(target=start_all, args=(j,)) for j in range(len(clients))]
        for t in starters:
            t.start()
        for t in starters:
            t.join(130)
        ok = {int(r["ok"]["key"][4:]): r["ok"] for frames_ in started for r in frames_ if "ok" in r}
        peak = 0
        wait_until = time.monotonic() + 60
        while time.monotonic() < wait_until:
            peak = max(peak, c.call("doctor")["run"]["active"]["count"])
            if peak >= len(ok):
                break
            time.sleep(0.2)
        row(
            "soak: runs started / live at once",
            f"{len(ok)} / {peak}",
            f"of {nruns}; {time.monotonic() - t0:.1f} s to start",
        )
        rss_peak = d.rss()
        fcntl.flock(gate_fd, fcntl.LOCK_UN)  # every run goes on at once
        os.unlink(gate)
        t1 = time.monotonic()
        waits: list[list[dict[str, Any]]] = [[] for _ in clients]

        def wait_all(j: int) -> None:
            waits[j] = pipeline(
                clients[j],
                [
                    ("run.wait", {"run": r["ok"]["run"], "timeout_ms": 60000})
                    for r in started[j]
                    if "ok" in r
                ],
                90,
                counts,
            )

        waiters = [threading.Thread(target=wait_all, args=(j,)) for j in range(len(clients))]
        for t in waiters:
            t.start()
        for t in waiters:
            t.join(100)
        lost = nruns - len(ok)
        bad_output = 0
        recs = [w["ok"] for ws in waits for w in ws if "ok" in w]
        lost += len(ok) - len(recs)
        for rec in recs:
            i = int(rec["key"][4:])
            want = _expect(i)
            if rec.get("fault") or any(rec.get(k) != v for k, v in want.items()):
                lost += 1
            if f"ran {i}" not in [ln.strip() for ln in rec.get("output", {}).get("lines", [])]:
                bad_output += 1
        row(
            "soak: lost outcomes (record differs from the program's exit)",
            str(lost),
            f"{len(recs)} completed in {time.monotonic() - t1:.1f} s after the gate; target 0",
        )
        row("soak: runs whose tail lacks their own line", str(bad_output), "target 0")
        for cl in clients:
            cl.close()

        evs: list[dict[str, Any]] = []
        after = cursor
        try:
            while True:
                got = c.call("events.read", {"after": after, "limit": 1024})
                if not got["events"]:
                    break
                evs += got["events"]
                after = got["next"]
            survived = "kept"
        except Exception as exc:  # not_found.cursor: the flood evicted the soak's start
            survived = f"LOST ({exc})"
        lifecycle = {e["resource"] for e in evs if e["type"] in ("run.started", "run.completed")}
        complete = sum(1 for r in ok.values() if f"run:{r['run']}" in lifecycle)
        flood_res = f"pane:{flood['pane']}"
        kept = sum(
            1
            for e in evs
            if e["resource"] == flood_res and e["type"] != "pane.observations_coalesced"
        )
        held = sum(
            e["data"]["count"]
            for e in evs
            if e["resource"] == flood_res and e["type"] == "pane.observations_coalesced"
        )
        row(
            "soak: cursor from before the soak",
            survived,
            f"{len(evs)} events since; run.* of {complete}/{len(ok)} runs readable",
        )
        row(
            "soak: flooding pane's observations kept / coalesced",
            f"{kept} / {held}",
            "budget 100/s, burst 200",
        )
        alive = pipeline_idle(idlers, counts)
        row("soak: idle clients still answering", f"{alive} of {len(idlers)}", "")
        c.call("pane.kill", {"pane": flood["pane"], "grace_ms": 0})
        doc = c.call("doctor")
        row(
            "soak: daemon RSS",
            f"{d.rss() / 1048576:.1f} MiB",
            f"from {rss0 / 1048576:.1f}; {rss_peak / 1048576:.1f} with {peak} runs live",
        )
        row("soak: daemon log bytes", str(d.log_bytes()), "log level info")
        row(
            "soak: exited-pane bytes held (doctor)",
            held_bytes(doc),
            f"{doc['counters']['panes']['exited']} exited panes",
        )
        row(
            "soak: doctor status",
            doc["status"],
            ", ".join(f"{ch['name']}={ch['status']}" for ch in doc["checks"]),
        )
        c.close()
    finally:
        for sk in idlers:
            sk.close()
        d.stop()
        os.close(gate_fd)
        if os.path.exists(gate):
            os.unlink(gate)
    soak_fds64(counts)
    row(
        "soak: internal responses",
        str(counts.internal),
        f"of {counts.replies} replies; target 0; codes "
        + ", ".join(f"{k}={v}" for k, v in sorted(counts.codes.items(), key=lambda kv: -kv[1])[:8]),
    )


def pipeline_idle(idlers: list[socket.socket], counts: Counts) -> int:
    """Ask every idle connection whoami once; how many answer within 10 s."""
    deadline = time.monotonic() + 10
    alive = 0
    for sk in idlers:
        try:
            sk.sendall(b'{"id":7,"verb":"whoami","params":{}}\n')
        except OSError:
            continue
    for sk in idlers:
        buf = b""
        try:
            while b"\n" not in buf and time.monotonic() < deadline:
                sk.settimeout(max(0.01, deadline - time.monotonic()))
                got = sk.recv(65536)
                if not got:
                    break
                buf += got
        except OSError:
            continue
        if b"\n" in buf:
            counts.add(json.loads(buf.split(b"\n")[0]))
            alive += 1
    return alive


def soak_fds64(counts: Counts) -> None:
    """A daemon whose descriptors are limited to 64: spawns fail with a clear error, and
    it recovers once connections go away."""
    d = Daemon(nofile=64, log_level="info")
    conns: list[socket.socket] = []
    try:
        c = d.client()
        s = c.call("session.create")["session"]
        for _ in range(100):  # until the daemon cannot accept (nor answer) another one
            sk = raw_conn(d.sock, "@owner", timeout=1.0)
            if sk is None:
                break
            conns.append(sk)
        # live runs hold descriptors in the daemon (channel, pidfd): some must fail
        res = pipeline(
            c,
            [("run", {"key": f"f{i}", "session": s, "argv": ["sleep", "30"]}) for i in range(20)],
            30,
            counts,
        )
        codes: dict[str, int] = {}
        for r in res:
            code = r["error"]["code"] if "error" in r else "ok"
            codes[code] = codes.get(code, 0) + 1
        doc = pipeline(c, [("doctor", {})], 30, counts)[0]
        fds = next(
            (ch for ch in doc.get("ok", {}).get("checks", []) if ch["name"] == "fds"),
            {"status": "?", "detail": str(doc.get("error"))},
        )
        errnos = {str(r["error"].get("data", {}).get("errno")) for r in res if "error" in r}
        row(
            "soak fds=64: clients accepted; 20 runs at the limit",
            f"{len(conns)}; " + ", ".join(f"{k} {v}" for k, v in sorted(codes.items())),
            f"errno {','.join(sorted(errnos)) or '-'}; doctor fds {fds['status']} "
            f"({fds['detail']})",
        )
        pipeline(
            c,
            [
                ("run.cancel", {"run": r["ok"]["run"], "signal": "SIGKILL", "grace_ms": 0})
                for r in res
                if "ok" in r
            ],
            30,
            counts,
        )
        for sk in conns:
            sk.close()
        conns.clear()
        t0 = time.monotonic()
        recovered = "no (30 s)"
        while time.monotonic() - t0 < 30:
            r = pipeline(
                c,
                [("run", {"key": f"g{time.monotonic()}", "session": s, "argv": ["true"]})],
                30,
                counts,
            )[0]
            if "ok" in r:
                w = pipeline(
                    c, [("run.wait", {"run": r["ok"]["run"], "timeout_ms": 10000})], 30, counts
                )[0]
                recovered = (
                    f"yes, {time.monotonic() - t0:.2f} s, outcome {w.get('ok', {}).get('outcome')}"
                )
                break
            time.sleep(0.1)
        row(
            "soak fds=64: a run after the clients left",
            recovered,
            f"log {d.log_bytes()} bytes, daemon {'alive' if d.proc.poll() is None else 'DEAD'}",
        )
        c.close()
    finally:
        for sk in conns:
            sk.close()
        d.stop()


def bench_cli(n: int) -> None:
    """Issue 19 §1: one cold CLI call beside ``python -c 'import click'``, alternating,
    with bytecode written (as an installed venomx has it)."""
    d = Daemon()
    env = {**os.environ, "VENOMX_SOCKET": d.sock, "VENOMX_TOKEN": "@owner"}
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    exe = str(Path(sys.executable).with_name("venomx"))
    times: dict[str, list[float]] = {"whoami": [], "wait": [], "click": []}
    try:
        with d.client() as c:
            s = c.call("session.create")["session"]
            run = c.call("run", {"key": "cli", "session": s, "argv": ["true"]})["run"]
            c.call("run.wait", {"run": run, "output": False})
        cmds = {
            "whoami": [exe, "whoami", "--json"],
            "wait": [exe, "run", "wait", "--run", run],
            "click": [sys.executable, "-c", "import click"],
        }
        for cmd in cmds.values():  # write the bytecode once
            subprocess.run(cmd, env=env, stdout=subprocess.DEVNULL, check=True)

        def sampler(name: str) -> Callable[[], None]:
            def sample() -> None:
                t0 = time.perf_counter()
                subprocess.run(cmds[name], env=env, stdout=subprocess.DEVNULL, check=True)
                times[name].append(time.perf_counter() - t0)

            return sample

        interleaved(n, *(sampler(k) for k in cmds))
    finally:
        d.stop()
    base = statistics.median(times["click"])
    for name, label in (
        ("whoami", "venomx whoami --json"),
        ("wait", "venomx run wait (completed run)"),
        ("click", "python -c 'import click'"),
    ):
        row(
            f"{label}, wall",
            ms(times[name]),
            f"{statistics.median(times[name]) / base:.2f}x import click, n={n}",
        )


def bench_exec(n: int) -> None:
    """Wall time of one whole command that runs `true` and reports its status, side by
    side in one run, alternating: `venomx exec`, `timeout 10 true` (no daemon at all) and
    the tmux CLI's new-window plus wait-for (a tmux server already running)."""
    d = Daemon()
    tsock = tempfile.mktemp(prefix="vxbt", dir="/tmp")
    subprocess.run(["tmux", "-S", tsock, "new-session", "-d", "-x", "80", "-y", "24"], check=True)
    env = {**os.environ, "VENOMX_SOCKET": d.sock}
    env.pop("VENOMX_TOKEN", None)
    times: dict[str, list[float]] = {"exec": [], "timeout": [], "tmux": []}
    counter = iter(range(10**9))

    def timed(name: str, *cmds: list[str]) -> Callable[[], None]:
        def sample() -> None:
            t0 = time.perf_counter()
            for cmd in cmds:  # exec's outcome line goes to stderr, not into the table
                subprocess.run(
                    cmd, check=True, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
                )
            times[name].append(time.perf_counter() - t0)

        return sample

    def tmux_sample() -> None:
        k = f"done{next(counter)}"
        timed(
            "tmux",
            ["tmux", "-S", tsock, "new-window", "-d", f"true; tmux -S {tsock} wait-for -S {k}"],
            ["tmux", "-S", tsock, "wait-for", k],
        )()

    try:
        interleaved(
            n,
            timed("exec", [sys.executable, "-m", "venomx", "exec", "--", "true"]),
            timed("timeout", ["timeout", "10", "true"]),
            tmux_sample,
        )
    finally:
        end_tmux(tsock)
        d.stop()
    base = statistics.median(times["tmux"])
    for name in ("exec", "timeout", "tmux"):
        row(
            f"`{'venomx exec -- true' if name == 'exec' else name}` wall, p50",
            ms(times[name]),
            f"{statistics.median(times[name]) / base:.2f}x tmux new-window+wait-for, n={n}",
        )


def answers(c: Client, rids: list[int]) -> list[dict[str, Any]]:
    """The results of pipelined requests, which the daemon may answer in any order."""
    got: dict[int, dict[str, Any]] = {}
    while len(got) < len(rids):
        frame = c.read()
        if "error" in frame:
            raise RuntimeError(frame["error"])
        if "ok" in frame:
            got[frame["id"]] = frame["ok"]
    return [got[r] for r in rids]


def venomx_burst(d: Daemon, n: int, secs: float, probe: list[float] | None) -> float:
    """n runs of ``sleep secs`` sent at once on one connection; seconds until every
    outcome is known. ``probe`` gets the latency of whoami calls made meanwhile, by a
    process of its own: a thread of this one would also time the GIL it shares with the
    burst's driver, which parses a thousand answers meanwhile. None: no probe."""
    prober = None
    if probe is not None:
        prober = subprocess.Popen(
            [
                sys.executable,
                "-c",
                "import json, select, sys, time\n"
                f"sys.path.insert(0, {str(Path(__file__).resolve().parent.parent)!r})\n"
                "from venomx.client import Client\n"
                f"c = Client({d.sock!r}, '@owner')\n"
                "print('ready', flush=True)\n"
                "lat = []\n"
                "while not select.select([sys.stdin], [], [], 0.01)[0]:\n"
                "    t0 = time.perf_counter()\n"
                "    c.call('whoami')\n"
                "    lat.append(time.perf_counter() - t0)\n"
                "print(json.dumps(lat), flush=True)\n",
            ],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
        )
        assert prober.stdin and prober.stdout
    try:
        if prober is not None:
            assert prober.stdout and prober.stdout.readline() == b"ready\n"
        with d.client() as c:
            s = c.call("session.create")["session"]
            t0 = time.perf_counter()
            rids = [
                c.start("run", {"key": f"b{i}-{t0}", "session": s, "argv": ["sleep", str(secs)]})
                for i in range(n)
            ]
            runs = [r["run"] for r in answers(c, rids)]
            waits = [c.start("run.wait", {"run": r, "output": False}) for r in runs]
            outcomes = [r["outcome"] for r in answers(c, waits)]
            el = time.perf_counter() - t0
            if prober is not None and probe is not None:
                assert prober.stdin and prober.stdout
                prober.stdin.write(b"stop\n")
                prober.stdin.flush()
                probe += json.loads(prober.stdout.readline())
            assert outcomes == ["succeeded"] * n, outcomes
            c.call("session.remove", {"session": s, "recursive": True})
    finally:
        if prober is not None:
            prober.kill()
            prober.wait()
    return el


FORKSERVER = "venomx-forkserver"


def _title(p: psutil.Process) -> str:
    """A process's title as ``ps`` shows it ('' once it is gone)."""
    try:
        return " ".join(x for x in p.cmdline() if x).strip()
    except psutil.Error:
        return ""


def cpu_ms(pid: int) -> tuple[float, float]:
    """(its own, its reaped children's) user + system CPU of ``pid``, in ms."""
    t = psutil.Process(pid).cpu_times()
    return (t.user + t.system) * 1000, (t.children_user + t.children_system) * 1000


def venomx_cpu(d: Daemon) -> dict[str, float]:
    """CPU so far, ms: the daemon's own, its reaped sentinels' (with the leaders they
    reaped), the fork server's own and its reaped intermediates'."""
    fs = next(p.pid for p in psutil.Process(d.proc.pid).children() if _title(p) == FORKSERVER)
    (daemon, sentinels), (server, intermediates) = cpu_ms(d.proc.pid), cpu_ms(fs)
    return {"daemon": daemon, "sentinels": sentinels, "fork server": server + intermediates}


def burst_gone(d: Daemon) -> None:
    """Wait until every pane sentinel has exited and been reaped (its CPU counted)."""
    deadline = time.monotonic() + 60
    while any(
        _title(p).startswith(SENTINEL_TITLE + "p") for p in psutil.Process(d.proc.pid).children()
    ):
        assert time.monotonic() < deadline, "sentinels outlived their panes"
        time.sleep(0.05)


def tmux_burst(t: Tmux, n: int, secs: float) -> float:
    """n windows running ``sleep secs`` sent at once to tmux control mode; seconds until
    every one has closed."""
    assert t.proc.stdin
    t0 = time.perf_counter()
    t.proc.stdin.write(
        b"".join(b"new-window -d 'sleep %s'\n" % str(secs).encode() for _ in range(n))
    )
    closed = 0
    while closed < n:
        line = t.readline()
        if line.startswith((b"%window-close", b"%unlinked-window-close")):
            closed += 1
    return time.perf_counter() - t0


def quiesce(d: Daemon) -> None:
    """Before a burst: the daemon's spare pool as full as it aims to be, and the machine's
    CPU idle (under 10% for 100 ms, 10 s at most), so neither side's burst runs beside
    the other's aftermath (the pool's refill after ours, a fresh tmux server's start)."""
    _spares(d)
    deadline = time.monotonic() + 10
    while psutil.cpu_percent(interval=0.1) > 10:
        if time.monotonic() > deadline:
            print("  (the machine stayed busy: this burst ran beside other work)")
            return


def bench_burst(quick: bool) -> None:
    """Issue 19 §2: overhead of a burst of starts until every outcome is known, beside
    tmux control mode starting the same windows, alternating; then the CPU every process
    took per run (a sentinel's whole life, its leader's, the daemon's and the fork
    server's), beside the tmux server and its windows' per window, from one more burst
    each. Wall-time ratios move with this VM's phases; the CPU ones move far less.

    The first burst of a fresh daemon (its spare pool at rest) is timed against a fresh
    tmux server's, several times, each pair alternating: one such pair moved by 1.4-1.8x
    between two runs of this bench an hour apart."""
    sizes = (50,) if quick else (50, 1000)
    for n in sizes:
        secs = 1.0 if n <= 50 else 3.0
        print(f"\n== {n} pipelined runs of sleep {secs:g}: overhead until every outcome ==")
        cold = 1 if quick else 5 if n <= 50 else 3
        warm = 0 if n > 50 else 1 if quick else 3
        firsts: list[float] = []
        their_firsts: list[float] = []
        ours: list[float] = []
        theirs: list[float] = []
        probe: list[float] = []
        for i in range(cold):
            d = Daemon(config=f"[run]\nmax_active = {n + 16}\nretain_count = {5 * n + 16}\n")
            t = Tmux()
            server = _quiet_server(t)
            try:
                with d.client() as c:  # what the latency rows were measured with
                    priority = c.call("doctor")["priority"]["detail"]
                ours_first, tmux_first = first_bursts(d, t, i, n, secs, probe)
                firsts.append(ours_first)
                their_firsts.append(tmux_first)
                if i < cold - 1:
                    continue
                for _ in range(warm):
                    quiesce(d)  # as many spares as the pool now aims for: a burst's gap
                    ours.append(venomx_burst(d, n, secs, probe) - secs)
                    quiesce(d)
                    theirs.append(tmux_burst(t, n, secs) - secs)
                # CPU, steadier than wall time on a VM whose speed drifts, from one more
                # burst each without the probe (whose calls the daemon would answer too)
                _spares(d)
                burst_gone(d)
                before = venomx_cpu(d)
                venomx_burst(d, n, secs, None)
                burst_gone(d)
                after = venomx_cpu(d)
                mine = {k: (after[k] - before[k]) / n for k in after}
                own, kids = cpu_ms(server)
                tmux_burst(t, n, secs)
                own2, kids2 = cpu_ms(server)
                tm = (own2 - own + kids2 - kids) / n
            finally:
                d.stop()
                t.stop()
        # The first burst meets the pool at rest (6 spares); it grows by one spare per
        # start that forked its own, so the bursts after it find their sentinels ready.
        o, th = statistics.median(firsts), statistics.median(their_firsts)
        spread = f" (of {len(firsts)}: {min(firsts) * 1000:.0f}-{max(firsts) * 1000:.0f} ms)"
        row(
            f"{n} runs of sleep {secs:g}: overhead, first",
            f"{o * 1000:.0f} ms",
            f"{o / th:.2f}x tmux" + (spread if len(firsts) > 1 else ""),
        )
        row(f"tmux control mode, {n} windows: overhead", f"{th * 1000:.0f} ms")
        if n <= 50:
            prewarmed_first_burst(n, secs, 1 if quick else 3)
        if ours:
            o, th = statistics.median(ours), statistics.median(theirs)
            row(
                f"{n} runs of sleep {secs:g}: overhead, repeated",
                f"{o * 1000:.0f} ms",
                f"{o / th:.2f}x tmux",
            )
            row(f"tmux control mode, {n} windows: overhead", f"{th * 1000:.0f} ms")
        row(
            f"daemon whoami latency during the {n}-burst",
            ms(probe),
            f"p99 {pct(probe, 99) * 1000:.1f} ms; daemon priority: {priority}",
        )
        # every process a run took (the burst's and its pool's refill), beside the tmux
        # server and its windows' (sh and sleep)
        total = sum(mine.values())
        row(
            f"CPU per run, {n}-burst: all venomx processes",
            f"{total:.2f} ms",
            f"{total / tm:.2f}x tmux; " + ", ".join(f"{k} {v:.2f}" for k, v in mine.items()),
        )
        row(f"CPU per window, {n}-burst: tmux server and windows", f"{tm:.2f} ms")


def first_bursts(
    d: Daemon,
    t: Tmux,
    i: int,
    n: int,
    secs: float,
    probe: list[float] | None,
    before_ours: Callable[[], None] | None = None,
) -> tuple[float, float]:
    """The overhead of one burst of ``n`` starts on each side, each side first in turn
    (by ``i``), the machine quiet and the pool as full as it aims to be before each."""
    ours = theirs = 0.0
    for side in (0, 1) if i % 2 == 0 else (1, 0):
        quiesce(d)
        if side == 0:
            if before_ours is not None:
                before_ours()
            ours = venomx_burst(d, n, secs, probe) - secs
        else:
            theirs = tmux_burst(t, n, secs) - secs
    return ours, theirs


def prewarmed_first_burst(n: int, secs: float, pairs: int) -> None:
    """The first burst of a daemon that keeps ``n`` spares at rest (``spawn.spares_min``,
    for a CI host that knows its first burst), beside a fresh tmux server's, alternating;
    and what those spares hold while idle."""
    firsts: list[float] = []
    theirs: list[float] = []
    held: list[int] = []
    for i in range(pairs):
        d = Daemon(
            config=f"[run]\nmax_active = {n + 16}\nretain_count = {5 * n + 16}\n"
            f"[spawn]\nspares_min = {n}\n"
        )
        t = Tmux()
        _quiet_server(t)

        def spares_held(daemon: Daemon = d) -> None:
            """What the idle spares hold, just before the burst takes them."""
            held.append(sum(psutil.Process(p).memory_full_info().uss for p in _spares(daemon)))

        try:
            ours_first, tmux_first = first_bursts(d, t, i, n, secs, None, spares_held)
            firsts.append(ours_first)
            theirs.append(tmux_first)
        finally:
            d.stop()
            t.stop()
    o, th = statistics.median(firsts), statistics.median(theirs)
    row(
        f"{n} runs of sleep {secs:g}: overhead, first, spares_min = {n}",
        f"{o * 1000:.0f} ms",
        f"{o / th:.2f}x tmux ({th * 1000:.0f} ms); its {n} idle spares hold "
        f"{statistics.median(held) / 2**20:.0f} MiB USS",
    )


def _descendants_uss(root: int, skip: set[int]) -> tuple[int, int]:
    """(USS of ``root`` and every descendant not in ``skip`` nor below one, count)."""
    total, count = 0, 0
    todo = [psutil.Process(root)]
    while todo:
        p = todo.pop()
        if p.pid in skip:
            continue
        try:
            total += p.memory_full_info().uss
            todo.extend(p.children())
        except psutil.NoSuchProcess:
            continue
        count += 1
    return total, count


IDLE = ["sh", "-c", "echo ready; exec sleep 3600"]


def _spares(d: Daemon) -> set[int]:
    """The daemon's spare sentinels, once the pool is as full as it aims to be."""
    deadline = time.monotonic() + 30
    with d.client() as c:
        while (s := c.call("doctor")["sentinels"])["spares"] != s["spares_target"]:
            assert time.monotonic() < deadline, "the spare pool never filled"
            time.sleep(0.05)
    return {p.pid for p in psutil.Process(d.proc.pid).children() if _title(p) == SPARE_TITLE}


def _venomx_idle(n: int) -> tuple[float, float]:
    """KiB of USS added per idle pane (daemon, fork server and sentinels; not the
    programs, nor the spare sentinels, whose pool grows with a burst of starts and shrinks
    again when idle), and the mean sentinel's USS."""
    d = Daemon(config=f"[vt]\nscrollback = 2000\n[run]\nmax_active = {n + 16}\n")
    try:
        c = d.client()
        s = c.call("session.create")["session"]
        base, _ = _descendants_uss(d.proc.pid, _spares(d))
        panes: list[dict[str, Any]] = []
        for i in range(0, n, 50):
            rids = [
                c.start("window.create", {"session": s, "argv": IDLE})
                for _ in range(min(50, n - i))
            ]
            panes += answers(c, rids)
        for w in panes:
            deadline = time.monotonic() + 30
            while not any(
                "ready" in ln for ln in c.call("pane.capture_rows", {"pane": w["pane"]})["lines"]
            ):
                assert time.monotonic() < deadline, "a pane never showed its line"
                time.sleep(0.01)
        leaders = {w["pid"] for w in panes}
        after, _ = _descendants_uss(d.proc.pid, leaders | _spares(d))
        sentinels = [psutil.Process(p).parent() for p in leaders]
        mean = statistics.mean(x.memory_full_info().uss for x in sentinels if x is not None)
        return (after - base) / n / 1024, mean / 1024
    finally:
        d.stop()


def _quiet_server(t: Tmux) -> int:
    """The pid of ``t``'s server, its control client told to send no %output (unread,
    it would stall the server while a window prints)."""
    t.command("refresh-client -f no-output")
    out = subprocess.run(
        ["tmux", "-S", t.sock, "display", "-p", "#{pid}"], capture_output=True, text=True
    )
    return int(out.stdout)


def _tmux_idle(n: int) -> float:
    """KiB of USS added to the tmux server per idle window."""
    t = Tmux()
    try:
        t.command("set -g history-limit 2000")
        server = _quiet_server(t)
        base = psutil.Process(server).memory_full_info().uss
        for _ in range(n):
            t.command("new-window -d 'echo ready; exec sleep 3600'")
        deadline = time.monotonic() + 30
        while True:  # every window has shown its line
            out = subprocess.run(
                ["tmux", "-S", t.sock, "list-panes", "-a", "-F", "#{cursor_y}"],
                capture_output=True,
                text=True,
            ).stdout.split()
            if out.count("1") >= n:
                break
            assert time.monotonic() < deadline, "tmux panes never showed their line"
            time.sleep(0.05)
        uss: int = psutil.Process(server).memory_full_info().uss
        return float(uss - base) / n / 1024
    finally:
        t.stop()


HISTORY_LINES = 10000  # 2000 lines are lost in the noise of what printing itself costs
LAST_LINE = f"{HISTORY_LINES:079d}"
SHOW_HISTORY = f"echo ready; read go; seq -f '%079g' 1 {HISTORY_LINES}; exec sleep 3600"


def _wait_text(read: Callable[[], str], text: str, what: str) -> None:
    deadline = time.monotonic() + 30
    while text not in read():
        assert time.monotonic() < deadline, f"never saw {what}"
        time.sleep(0.02)


def _venomx_history(scrollback: int) -> float:
    """KiB of sentinel USS added while an idle pane prints HISTORY_LINES lines of 80
    columns."""
    d = Daemon(config=f"[vt]\nscrollback = {scrollback}\n")
    try:
        c = d.client()
        s = c.call("session.create")["session"]
        w = c.call("window.create", {"session": s, "argv": ["sh", "-c", SHOW_HISTORY]})

        def screen() -> str:
            return "\n".join(c.call("pane.capture_rows", {"pane": w["pane"]})["lines"])

        _wait_text(screen, "ready", "the ready line")
        sentinel = psutil.Process(w["pid"]).parent()
        assert sentinel is not None
        before = sentinel.memory_full_info().uss
        c.call("pane.send", {"pane": w["pane"], "keys": ["Enter"]})
        _wait_text(screen, LAST_LINE, "the last line")
        after: int = sentinel.memory_full_info().uss
        return float(after - before) / 1024
    finally:
        d.stop()


def _tmux_history(limit: int) -> float:
    """KiB of tmux server USS added while a window prints the same lines."""
    t = Tmux()
    try:
        t.command(f"set -g history-limit {limit}")
        server = _quiet_server(t)
        t.command(f'new-window -d -n h "{SHOW_HISTORY}"')

        def screen() -> str:
            return subprocess.run(
                ["tmux", "-S", t.sock, "capture-pane", "-p", "-t", "h"],
                capture_output=True,
                text=True,
            ).stdout

        _wait_text(screen, "ready", "the ready line")
        before = psutil.Process(server).memory_full_info().uss
        t.command("send-keys -t h Enter")
        _wait_text(screen, LAST_LINE, "the last line")
        after_uss: int = psutil.Process(server).memory_full_info().uss
        return float(after_uss - before) / 1024
    finally:
        t.stop()


def bench_memory(quick: bool) -> None:
    """Issue 19 §3: USS added per idle pane (100 and 1000 of them) and per line of
    history, beside a tmux server doing the same."""
    print("\n== memory: USS per idle pane and per history line, beside tmux ==")
    for n in (100,) if quick else (100, 1000):
        ours, sentinel = _venomx_idle(n)
        theirs = _tmux_idle(n)
        row(f"USS added per idle pane, {n} panes", f"{ours:.0f} KiB", "target <= 1280 KiB")
        row(f"  mean sentinel USS, {n} idle panes", f"{sentinel:.0f} KiB")
        row(f"tmux server USS added per idle window, {n} windows", f"{theirs:.1f} KiB")
    # the same output with and without a history: the difference is what history holds
    # (the output itself, e.g. the replay buffer of the last 256 KiB, costs both alike)
    ours_full, ours_none = _venomx_history(HISTORY_LINES), _venomx_history(0)
    theirs_full, theirs_none = _tmux_history(HISTORY_LINES), _tmux_history(0)
    ours_h = (ours_full - ours_none) / HISTORY_LINES
    theirs_h = (theirs_full - theirs_none) / HISTORY_LINES
    row(
        f"history: USS per retained line ({HISTORY_LINES} x 80 columns)",
        f"{ours_h:.3f} KiB",
        f"{ours_h / theirs_h:.2f}x tmux (target <= 0.5x)",
    )
    row("tmux: USS per retained line", f"{theirs_h:.3f} KiB")
    row(
        f"  printing {HISTORY_LINES} lines with no history",
        f"{ours_none:.0f} KiB",
        f"tmux {theirs_none:.0f} KiB",
    )


BENCHES: dict[str, Callable[[bool], None]] = {
    "output": bench_output,
    "cli": lambda q: bench_cli(20 if q else 60),
    "burst": bench_burst,
    "exec": lambda q: bench_exec(10 if q else 30),
    "start": lambda q: bench_start(50 if q else 200),
    "throughput": lambda q: bench_throughput(500000 if q else 5000000),
    "list": lambda q: bench_list_under_load(300000 if q else 2000000),
    "runs": lambda q: bench_runs(50 if q else 200),
    "vt": bench_vt,
    "deadline": bench_deadline,
    "soak": bench_soak,
    "memory": bench_memory,
}
DEFAULT = (
    "cli",
    "memory",
    "exec",
    "burst",
    "output",
    "start",
    "throughput",
    "list",
    "runs",
    "vt",
    "deadline",
)  # soak, cgroups: when named


def bench_cgroups(quick: bool) -> None:
    """A run's start with a per-pane cgroup (made, joined by the sentinel around the
    leader's spawn, read and removed at exit) against one without, side by side."""
    n = 40 if quick else 200
    print(f"\n== start cost of a per-pane cgroup: {n} x run `true` each, alternating ==")
    on, off = Daemon(), Daemon('cgroups = "off"\n')
    try:
        info = on.client().call("doctor")["cgroups"]
        if not info["active"]:
            print(f"   no cgroups on this host ({info.get('why')}): both sides are without")
        samples: dict[str, tuple[list[float], list[float]]] = {"on": ([], []), "off": ([], [])}

        def sampler(name: str, d: Daemon) -> Callable[[], None]:
            c = d.client()
            s = c.call("session.create")["session"]
            resp, done = samples[name]
            count = iter(range(1 << 30))

            def go() -> None:
                t0 = time.perf_counter()
                r = c.call("run", {"key": f"b{next(count)}", "session": s, "argv": ["true"]})
                t1 = time.perf_counter()
                c.call("run.wait", {"run": r["run"], "output": False})
                resp.append(t1 - t0)
                done.append(time.perf_counter() - t0)

            return go

        interleaved(n, sampler("on", on), sampler("off", off))
        for name, label in (("on", "with a cgroup"), ("off", "cgroups = off")):
            resp, done = samples[name]
            row(f"run true {label} -> response", ms(resp))
            row(f"run true {label} -> completed", ms(done))
        extra = pct(samples["on"][1], 50) - pct(samples["off"][1], 50)
        row("per-pane cgroup, extra per start (p50, completed)", f"{extra * 1000:+.2f} ms")
    finally:
        on.stop()
        off.stop()


BENCHES["cgroups"] = bench_cgroups


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument(
        "--only", default=",".join(DEFAULT), help=f"comma-separated, of {', '.join(BENCHES)}"
    )
    args = ap.parse_args()
    print(
        f"venomx bench on {os.cpu_count()} cores, python {sys.version.split()[0]}, "
        f"tmux {subprocess.run(['tmux', '-V'], capture_output=True, text=True).stdout.strip()}"
    )
    names = args.only.split(",")
    unknown = [n for n in names if n not in BENCHES]
    if unknown:
        ap.error(f"unknown benchmark {', '.join(unknown)}; known: {', '.join(BENCHES)}")
    for name in names:
        BENCHES[name](args.quick)
    print("\n| measurement | value | note |\n|---|---|---|")
    for what, value, note in ROWS:
        print(f"| {what} | {value} | {note} |")


if __name__ == "__main__":
    main()
