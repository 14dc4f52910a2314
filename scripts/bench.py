"""venomx benchmarks, each side by side with tmux (control mode) and a Python floor.

Usage: scripts/bench [--quick] [--only NAME,...]
"""

from __future__ import annotations

import argparse
import os
import pty
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import psutil

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from venomx.client import Client

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
    def __init__(self, config: str = "") -> None:
        self.dir = tempfile.mkdtemp(prefix="vxb", dir="/tmp")
        self.sock = os.path.join(self.dir, "s.sock")
        cfg = os.path.join(self.dir, "c.toml")
        Path(cfg).write_text(config)
        self.proc = subprocess.Popen([sys.executable, "-m", "venomx", "serve", "--socket",
                                      self.sock, "--config", cfg, "--log-level", "warning"],
                                     stderr=open(os.path.join(self.dir, "log"), "wb"),
                                     start_new_session=True,
                                     cwd=self.dir)
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


class Tmux:
    """A tmux server driven through one control-mode client."""

    def __init__(self) -> None:
        self.sock = tempfile.mktemp(prefix="vxbt", dir="/tmp")
        self.proc = subprocess.Popen(["tmux", "-S", self.sock, "-C", "new-session", "-x", "80",
                                      "-y", "24"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.DEVNULL, bufsize=0)
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
        subprocess.run(["tmux", "-S", self.sock, "kill-server"], capture_output=True)
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
    print(f"\n== pane start: {n} x `true`, one persistent connection, "
          f"alternating with tmux every {BLOCK} ==")
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
        row("venomx window.create true -> pane exited", ms(done),
            f"{pct(done, 50) / pct(t_done, 50):.2f}x tmux" if t_done else "")
        if t_done:
            row("tmux control mode new-window true -> %end", ms(t_resp))
            row("tmux control mode new-window true -> window closed", ms(t_done))
        # idle after showing something, so its terminal exists (it is built lazily)
        w = c.call("window.create", {"session": s,
                                     "argv": ["sh", "-c", "echo ready; exec sleep 60"]})
        deadline = time.monotonic() + 10
        while not any("ready" in ln for ln in
                      c.call("pane.capture_rows", {"pane": w["pane"]})["lines"]):
            assert time.monotonic() < deadline, "the pane never showed its line"
            time.sleep(0.01)
        sen = psutil.Process(w["pid"]).parent()
        assert sen is not None
        uss = sen.memory_full_info().uss / 1048576
        row("idle sentinel USS (after one line of output)", f"{uss:.2f} MiB",
            "target <= 4 MiB")
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
            cap = c.call("pane.capture_rows", {"pane": r["pane"], "limit": 3})
            last = [ln.strip() for ln in cap["lines"] if ln.strip()][-1:]
            ok = last == [str(lines)] and cap["offset"] >= size
            row("venomx pane: cat -> run completed", f"{size / el / 1e6:.1f} MB/s",
                f"{el:.2f} s, status {rec['status']}, last row {'ok' if ok else 'WRONG'}")
    finally:
        d.stop()
    if shutil.which("tmux"):
        # no client attached: a control client would receive every byte as %output
        sock = tempfile.mktemp(prefix="vxbt", dir="/tmp")
        tmux = ["tmux", "-S", sock]
        subprocess.run([*tmux, "new-session", "-d", "-x", "80", "-y", "24", "sleep 600"],
                       check=True)
        subprocess.run([*tmux, "set", "-g", "remain-on-exit", "on"], check=True)
        try:
            t0 = time.perf_counter()
            cmd = f"cat {path}; tmux -S {sock} wait-for -S done"
            subprocess.run([*tmux, "new-window", "-d", cmd], check=True)
            subprocess.run([*tmux, "wait-for", "done"], check=True)
            el = time.perf_counter() - t0
            shown = subprocess.run([*tmux, "capture-pane", "-p", "-t", ":1"],
                                   capture_output=True, text=True).stdout.splitlines()
            last = [ln.strip() for ln in shown  # skip tmux's own "Pane is dead" line
                    if ln.strip() and not ln.startswith("Pane is dead")][-1:]
            row("tmux pane: cat -> done", f"{size / el / 1e6:.1f} MB/s",
                f"{el:.2f} s, last row {'ok' if last == [str(lines)] else 'WRONG ' + str(last)}")
        finally:
            subprocess.run([*tmux, "kill-server"], capture_output=True)
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


def bench_list_under_load(lines: int) -> None:
    path = make_seq(lines)
    print("\n== pane.list latency while 4 panes cat at once ==")
    d = Daemon()
    try:
        with d.client() as c:
            s = c.call("session.create")["session"]
            runs = [c.call("run", {"key": f"c{i}", "session": s, "argv": ["cat", str(path)]})
                    for i in range(4)]
            lat = []
            probe = d.client()
            while True:
                t0 = time.perf_counter()
                probe.call("pane.list")
                lat.append(time.perf_counter() - t0)
                done = [c.call("run.get", {"run": r["run"], "output": False})["state"]
                        for r in runs]
                if all(x == "completed" for x in done):
                    break
            row("pane.list during 4 x cat", f"p50 {pct(lat, 50) * 1e3:.2f} / p99 "
                f"{pct(lat, 99) * 1e3:.2f} ms", f"{len(lat)} samples; target p99 <= 20 ms")
    finally:
        d.stop()


def bench_runs(n: int) -> None:
    print(f"\n== run + run.wait of `true`: {n} times, one connection, "
          f"alternating with tmux every {BLOCK} ==")
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
            row("venomx run + run.wait true", ms(lat),
                f"{pct(lat, 50) / pct(t_done, 50):.2f}x tmux" if t_done else "")
            if t_done:
                row("tmux control mode new-window true -> closed", ms(t_done))
            c.call("config.set", {"path": "run.max_active", "value": "64"})
            clients = [d.client() for _ in range(50)]
            t0 = time.perf_counter()
            rids = [(cl, cl.start("run", {"key": f"z{i}", "session": s,
                                          "argv": ["sleep", "0.2"]}))
                    for i, cl in enumerate(clients)]
            started = [cl.response(rid) for cl, rid in rids]
            for cl, r in zip(clients, started, strict=True):
                cl.call("run.wait", {"run": r["run"], "output": False})
            el = time.perf_counter() - t0
            row("50 concurrent runs of sleep 0.2 (max_active 64)", f"{el:.2f} s wall",
                "ideal 0.2 s")
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
            row("daemon RSS after 1000 completed runs", f"{rss1 / 1048576:.1f} MiB",
                f"from {rss0 / 1048576:.1f}; retained {doc['count']} runs, {doc['bytes']} bytes")
    finally:
        d.stop()
        if t is not None:
            t.stop()


BENCHES: dict[str, Callable[[bool], None]] = {
    "start": lambda q: bench_start(50 if q else 200),
    "throughput": lambda q: bench_throughput(500000 if q else 5000000),
    "list": lambda q: bench_list_under_load(300000 if q else 2000000),
    "runs": lambda q: bench_runs(50 if q else 200),
}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--only", default=",".join(BENCHES))
    args = ap.parse_args()
    print(f"venomx bench on {os.cpu_count()} cores, python {sys.version.split()[0]}, "
          f"tmux {subprocess.run(['tmux', '-V'], capture_output=True, text=True).stdout.strip()}")
    for name in args.only.split(","):
        BENCHES[name](args.quick)
    print("\n| measurement | value | note |\n|---|---|---|")
    for what, value, note in ROWS:
        print(f"| {what} | {value} | {note} |")


if __name__ == "__main__":
    main()
