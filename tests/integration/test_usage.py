"""Resource usage in completed run records (issue 17 §3), against a real daemon.

``cpu_ms`` and ``max_rss_kib`` are what the wait that gave the run's status says: the
leader and the descendants it waited for, never a process that escaped without being
waited for. They are fixed in the completing turn like every other field.
"""

from __future__ import annotations

import os
import signal
from pathlib import Path
from typing import Any

import psutil

from tests.helpers import PY, Daemon, wait_for
from venomx.client import Client
from venomx.manifest.verbs import VERBS

# Burns at least this much CPU time (user+system) in a busy loop.
BURN = "import time\nt = time.process_time()\nwhile time.process_time() - t < {s}: pass\n"


def session(d: Daemon) -> str:
    return str(d.call("session.create", {})["session"])


def run(d: Daemon, key: str, **params: Any) -> dict[str, Any]:
    r = d.call("run", {"key": key, "session": session(d), **params})
    with Client(d.socket, "@owner") as c:
        rec: dict[str, Any] = c.call("run.wait", {"run": r["run"], "timeout_ms": 30000})
    return rec


def test_busy_loop_reports_its_cpu(daemon: Daemon) -> None:
    rec = run(daemon, "burn", argv=[PY, "-c", BURN.format(s=0.3)])
    assert rec["outcome"] == "succeeded", rec
    # at least the loop; a single thread uses at most its wall time (a unit slip, µs or
    # ticks for ms, would land far outside)
    assert 300 <= rec["cpu_ms"] <= rec["duration_ms"] + 1000, rec
    assert type(rec["max_rss_kib"]) is int and rec["max_rss_kib"] > 0


def test_allocation_reports_its_peak_resident_set(daemon: Daemon) -> None:
    # bytes are written (a multiplied bytes object), so every page is resident
    big = run(daemon, "alloc", argv=[PY, "-c", "b = b'x' * 50_000_000\n"])
    small = run(daemon, "small", argv=["true"])
    assert big["outcome"] == small["outcome"] == "succeeded"
    assert big["max_rss_kib"] >= 40000, big
    assert small["max_rss_kib"] < big["max_rss_kib"] - 40000, small
    assert small["cpu_ms"] < 100, small


def test_a_child_the_leader_waited_for_counts(daemon: Daemon) -> None:
    """sh (the leader) forks python, which burns CPU and holds 50 MB, and waits for it."""
    child = BURN.format(s=0.4) + "b = b'x' * 50_000_000\n"
    rec = run(daemon, "waited", shell=f'{PY} -c "{child}"; exit 0')
    assert rec["outcome"] == "succeeded", rec
    assert rec["cpu_ms"] >= 400, rec
    assert rec["max_rss_kib"] >= 40000, rec


def test_a_child_the_leader_did_not_wait_for_does_not_count(daemon: Daemon, tmp: Path) -> None:
    """The leader starts a setsid'd, backgrounded grandchild that burns 1 s of CPU and
    holds 50 MB, waits (without waiting *for* it) until it is done, and exits: the
    grandchild was never its waited-for child, so neither figure includes it."""
    done = tmp / "done"
    escapee = BURN.format(s=1.0) + f"b = b'x' * 50_000_000\nopen({str(done)!r}, 'w').close()\n"
    leader = (
        "import os, time\n"
        "if os.fork() == 0:\n"
        "    os.setsid()\n"
        "    if os.fork() == 0:\n"
        f"        os.execv({PY!r}, [{PY!r}, '-c', {escapee!r}])\n"
        "    os._exit(0)\n"
        "os.wait()\n"  # the intermediate, which used next to nothing
        f"while not os.path.exists({str(done)!r}): time.sleep(0.02)\n"
    )
    rec = run(daemon, "escaped", argv=[PY, "-c", leader])
    assert rec["outcome"] == "succeeded", rec
    assert done.exists()
    assert rec["cpu_ms"] < 500, rec  # the leader's own start-up and polling only
    assert rec["max_rss_kib"] < 40000, rec


def test_a_record_is_identical_every_time_it_is_read(daemon: Daemon) -> None:
    rec = run(daemon, "twice", argv=[PY, "-c", BURN.format(s=0.05)])
    again = [daemon.call("run.get", {"run": rec["run"]}) for _ in range(2)]
    with Client(daemon.socket, "@owner") as c:
        waited = c.call("run.wait", {"run": rec["run"], "timeout_ms": 0})
    assert again[0] == again[1] == waited == rec
    assert rec["cpu_ms"] >= 50
    listed = daemon.call("run.list", {})["runs"]
    (entry,) = [r for r in listed if r["run"] == rec["run"]]
    assert (entry["cpu_ms"], entry["max_rss_kib"]) == (rec["cpu_ms"], rec["max_rss_kib"])


def test_a_running_record_has_no_usage(daemon: Daemon) -> None:
    r = daemon.call("run", {"key": "hang", "session": session(daemon), "argv": ["sleep", "30"]})
    rec = daemon.call("run.get", {"run": r["run"]})
    assert rec["state"] == "running" and "cpu_ms" not in rec and "max_rss_kib" not in rec
    done = daemon.call("run.cancel", {"run": r["run"], "grace_ms": 0})
    assert done["outcome"] == "terminated" and done["signal"] == "SIGHUP", done
    assert type(done["cpu_ms"]) is int and type(done["max_rss_kib"]) is int


def test_lost_sentinel_usage_comes_from_the_daemons_own_reap(daemon: Daemon) -> None:
    """With the sentinel killed, the leader re-parents to the daemon, whose wait4 gives
    its usage: the CPU it burnt before is still there."""
    script = BURN.format(s=0.3) + "print('ready', flush=True)\nimport time\ntime.sleep(30)\n"
    r = daemon.call("run", {"key": "lost", "session": session(daemon), "argv": [PY, "-c", script]})
    wait_for(
        lambda: any(
            "ready" in ln for ln in daemon.call("pane.capture_rows", {"pane": r["pane"]})["lines"]
        ),
        20,
        "ready",
    )
    os.kill(psutil.Process(r["pid"]).ppid(), signal.SIGKILL)
    with Client(daemon.socket, "@owner") as c:
        rec = c.call("run.wait", {"run": r["run"], "timeout_ms": 20000})
    assert rec["fault"] == "sentinel_lost" and rec["signal"] == "SIGHUP", rec
    assert 300 <= rec["cpu_ms"] <= rec["duration_ms"] + 1000, rec
    assert rec["max_rss_kib"] > 0


def test_cli_shows_usage_for_a_person(daemon: Daemon) -> None:
    rec = run(daemon, "cli", argv=[PY, "-c", "b = b'x' * 50_000_000\n"])
    out = daemon.cli("run", "get", "--run", rec["run"], "--output=false")
    assert out.code == 0, out
    line = [ln for ln in out.out.splitlines() if ln.startswith("usage: ")]
    assert line and line[0].startswith("usage: cpu ") and " MiB" in line[0], out.out
    assert "cpu_ms" not in out.out and "max_rss_kib" not in out.out
    js = daemon.cli("run", "get", "--run", rec["run"], "--output=false", "--json").json
    assert js["cpu_ms"] == rec["cpu_ms"] and js["max_rss_kib"] == rec["max_rss_kib"]


def test_manifest_declares_the_fields_optional() -> None:
    for verb in VERBS:
        if verb.name in ("run.wait", "run.get", "run.cancel"):
            fields = {f.name: f for f in verb.result}
            for name in ("cpu_ms", "max_rss_kib"):
                assert fields[name].kind == "integer" and not fields[name].required
