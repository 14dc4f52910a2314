"""Termination and removal (§9) with real signals: HUP handling, escalation, joining."""

from __future__ import annotations

import base64
import functools
import os
import signal
import threading
import time
from pathlib import Path
from typing import Any

import psutil
import pytest

from tests.helpers import PY, Daemon, running, wait_for
from venomx.wire import VenomxError


def spawn(d: Daemon, argv: list[str], session: str | None = None) -> dict[str, Any]:
    s = session or d.call("session.create")["session"]
    return d.call("window.create", {"session": s, "argv": argv})


def ready(d: Daemon, pane: str, text: str) -> None:
    wait_for(
        lambda: any(text in ln for ln in d.call("pane.capture_rows", {"pane": pane})["lines"]),
        10,
        f"{text!r} on screen",
    )


def exited(d: Daemon, pane: str) -> bool:
    return any(p["pane"] == pane and p["state"] == "exited" for p in d.call("pane.list")["panes"])


def group_alive(pgid: int) -> list[int]:
    out = []
    for p in psutil.process_iter(["pid"]):
        try:
            if os.getpgid(p.pid) == pgid and p.status() != psutil.STATUS_ZOMBIE:
                out.append(p.pid)
        except (OSError, psutil.Error):
            pass
    return out


def no_leftovers(d: Daemon, pgid: int) -> None:
    wait_for(lambda: not group_alive(pgid), 10, "group gone")
    wait_for(lambda: d.call("doctor")["zombies"] == 0, 10, "no zombies")


def gone(pid: int) -> bool:
    return not running(pid)


@pytest.mark.parametrize(
    ("script", "signal", "exit_code"),
    [
        ("exec sleep 100", "SIGHUP", None),
        ('trap "exit 0" HUP; echo ready; sleep 100 & wait', None, 0),
    ],
)
def test_kill_hup(daemon: Daemon, script: str, signal: str | None, exit_code: int | None) -> None:
    w = spawn(daemon, ["sh", "-c", script])
    if "ready" in script:
        ready(daemon, w["pane"], "ready")
    rec = daemon.call("pane.kill", {"pane": w["pane"]})
    assert rec["state"] == "exited" and rec.get("signal") == signal
    assert rec.get("exit_code") == exit_code
    no_leftovers(daemon, w["pid"])


def test_ignored_hup_escalates_to_sigkill(daemon: Daemon) -> None:
    w = spawn(daemon, ["sh", "-c", 'trap "" HUP; echo ready; sleep 100'])
    ready(daemon, w["pane"], "ready")
    rec = daemon.call("pane.kill", {"pane": w["pane"], "grace_ms": 300})
    assert rec["signal"] == "SIGKILL"
    evs = daemon.call("events.read", {"limit": 1024})["events"]
    term = [e for e in evs if e["type"] == "pane.terminating"]
    assert term[0]["data"] == {"pane": w["pane"], "requested_signal": "SIGHUP", "grace_ms": 300}
    no_leftovers(daemon, w["pid"])


def test_stopped_leader_gets_sigcont(daemon: Daemon) -> None:
    w = spawn(daemon, ["sleep", "100"])
    os.kill(w["pid"], 19)  # SIGSTOP
    wait_for(lambda: psutil.Process(w["pid"]).status() == psutil.STATUS_STOPPED, 10, "stopped")
    rec = daemon.call("pane.kill", {"pane": w["pane"], "signal": "SIGTERM", "grace_ms": 5000})
    assert rec["signal"] == "SIGTERM"


def test_group_with_children_and_escapee(daemon: Daemon, tmp_path: Path) -> None:
    pidfile = tmp_path / "esc"
    w = spawn(
        daemon,
        [
            "sh",
            "-c",
            f"sleep 100 & sleep 100 & "
            f"setsid sh -c 'echo $$ > {pidfile}; exec sleep 100' & "
            f"while [ ! -s {pidfile} ]; do sleep 0.01; done; echo ready; wait",
        ],
    )
    ready(daemon, w["pane"], "ready")
    esc = int(pidfile.read_text())
    kids = group_alive(w["pid"])
    assert len(kids) >= 3
    daemon.call("pane.kill", {"pane": w["pane"], "grace_ms": 0})
    no_leftovers(daemon, w["pid"])
    assert psutil.pid_exists(esc)  # left the group: survives, and nobody waited for it
    assert daemon.call("doctor")["escapees"]["count"] == 1
    os.kill(esc, 9)
    wait_for(lambda: daemon.call("doctor")["escapees"]["count"] == 0, 10, "escapee reaped")


def test_grace_zero_and_joining(daemon: Daemon) -> None:
    w = spawn(daemon, ["sh", "-c", 'trap "" HUP TERM; echo ready; sleep 100'])
    ready(daemon, w["pane"], "ready")
    results: list[Any] = []

    def kill(sig: str) -> None:
        try:
            results.append(
                daemon.call("pane.kill", {"pane": w["pane"], "signal": sig, "grace_ms": 1500})
            )
        except VenomxError as exc:
            results.append(exc)

    threads = [threading.Thread(target=kill, args=(s,)) for s in ("SIGTERM", "SIGHUP", "SIGINT")]
    for t in threads:
        t.start()
    for t in threads:
        t.join(20)
    assert len(results) == 3 and all(r == results[0] for r in results)
    evs = [
        e
        for e in daemon.call("events.read", {"limit": 1024})["events"]
        if e["type"] == "pane.terminating"
    ]
    assert len(evs) == 1  # joined: one termination, first signal kept
    again = daemon.call("pane.kill", {"pane": w["pane"]})
    assert again == results[0]  # exited: unchanged, nothing sent


def test_kill_wait_timeout(daemon: Daemon) -> None:
    w = spawn(daemon, ["sleep", "100"])
    daemon.call("seam.set", {"name": "terminate.unkillable", "state": "hold"})
    e = daemon.error("pane.kill", {"pane": w["pane"], "grace_ms": 0})
    assert e.code == "timeout.terminate" and e.data == {"panes": [w["pane"]]}
    assert daemon.call("pane.list")["panes"][0]["state"] == "terminating"
    assert (
        daemon.error("pane.send", {"pane": w["pane"], "text": "x"}).code
        == "conflict.pane_terminating"
    )
    doc = daemon.call("doctor")  # a pane (no run) stuck terminating is not a doctor warning
    assert doc["status"] == "ok", doc["checks"]
    daemon.call("seam.set", {"name": "terminate.unkillable", "state": "release"})
    wait_for(lambda: daemon.call("pane.list")["panes"][0]["state"] == "exited", 10, "exit")


def test_a_seam_can_be_held_again(daemon: Daemon) -> None:
    """§12 on one daemon, as a suite sharing it would: seam.wait answers only while
    something is held, a second hold keeps what the first holds, and a release frees it."""
    wait = {"name": "terminate.unkillable", "timeout_ms": 0}
    e = daemon.error("seam.wait", {"name": "terminate.unkillable"})  # §12: {name, timeout_ms}
    assert (e.code, e.data) == ("invalid_params.missing", {"param": "timeout_ms"})
    for _ in range(2):
        w = spawn(daemon, ["sleep", "100"])
        assert daemon.error("seam.wait", wait).code == "timeout.seam"
        daemon.call("seam.set", {"name": "terminate.unkillable", "state": "hold"})
        assert daemon.error("pane.kill", {"pane": w["pane"], "grace_ms": 0}).code == (
            "timeout.terminate"
        )
        assert daemon.call("seam.wait", wait)["held"] >= 1  # TERM, and KILL at once
        daemon.call("seam.set", {"name": "terminate.unkillable", "state": "hold"})
        daemon.call("seam.set", {"name": "terminate.unkillable", "state": "release"})
        wait_for(functools.partial(exited, daemon, w["pane"]), 10, "the signals delivered")
    assert daemon.error("seam.wait", wait).code == "timeout.seam"
    c = daemon.client()
    s = daemon.call("session.create")["session"]
    daemon.call("seam.set", {"name": "run.before_barrier", "state": "hold"})
    rid = c.start("run", {"key": "again", "session": s, "argv": ["true"]})
    daemon.call("seam.wait", {"name": "run.before_barrier", "timeout_ms": 10000})
    daemon.call("seam.set", {"name": "run.before_barrier", "state": "hold"})
    daemon.call("seam.set", {"name": "run.before_barrier", "state": "release"})
    assert c.response(rid)["run"].startswith("r")


def test_a_killed_leader_is_terminated_while_an_escapee_keeps_writing(
    daemon: Daemon, tmp_path: Path
) -> None:
    """The leader dies at SIGKILL; an escaped process that keeps the PTY busy makes the
    sentinel drain for up to a second, which is no reason to fail timeout.terminate."""
    pidfile = tmp_path / "escapee"
    s = daemon.call("session.create")["session"]
    script = (
        f"setsid sh -c 'echo $$ > {pidfile}; while :; do echo x; sleep 0.02; done' & "
        "echo ready; sleep 100"
    )
    r = daemon.call("run", {"key": "drain", "session": s, "shell": script})
    ready(daemon, r["pane"], "ready")
    wait_for(lambda: pidfile.exists() and pidfile.read_text().strip() != "", 10, "the escapee")
    try:
        rec = daemon.call("run.cancel", {"run": r["run"], "grace_ms": 0})
        # with no grace SIGKILL follows at once: a shell that had SIGHUP blocked at that
        # moment (dash does, around its waits) dies of SIGKILL instead
        assert rec["state"] == "completed" and rec["signal"] in ("SIGHUP", "SIGKILL"), rec
    finally:
        try:
            os.kill(int(pidfile.read_text()), signal.SIGKILL)
        except ProcessLookupError:
            pass


@pytest.mark.parametrize("verb", ["run.cancel", "pane.kill"])
def test_a_stop_after_the_leader_exited_leaves_its_outcome(
    daemon: Daemon, tmp_path: Path, verb: str
) -> None:
    """RFC-0015 §5: the outcome is what the run was when its exit was observed. A
    leader that exited 0 while an escaped process kept its PTY busy (the sentinel then
    drains for up to a second before it reports) was recorded terminated (status 125)
    by a cancel in that second, and a deadline there gave 124. A stop after the exit now
    has nothing to stop: the run succeeds, with no cause and no terminating event."""
    pidfile = tmp_path / "escapee"
    s = daemon.call("session.create")["session"]
    script = (
        f"setsid sh -c 'echo $$ > {pidfile}; while :; do echo x; sleep 0.005; done' & "
        f"until [ -s {pidfile} ]; do sleep 0.01; done; exit 0"  # out of the group first
    )
    r = daemon.call("run", {"key": "early", "session": s, "shell": script})
    wait_for(lambda: pidfile.exists() and pidfile.read_text().strip() != "", 10, "the escapee")
    escapee = int(pidfile.read_text())
    try:
        # the leader's zombie: the daemon's pidfd has seen the exit; the drain goes on
        wait_for(lambda: not running(r["pid"]), 10, "the leader exited")
        stopped = daemon.call(verb, {verb.split(".")[0]: r[verb.split(".")[0]], "grace_ms": 0})
        assert stopped["state"] in ("completed", "exited"), stopped
        rec = daemon.call("run.get", {"run": r["run"]})
        assert rec["outcome"] == "succeeded" and rec["status"] == 0 and "cause" not in rec, rec
        events = daemon.call("events.read", {"limit": 1024})["events"]
        assert not [e for e in events if e["type"] in ("pane.terminating", "run.terminating")]
    finally:
        try:
            os.kill(escapee, signal.SIGKILL)
        except ProcessLookupError:
            pass


def test_removal(daemon: Daemon) -> None:
    s = daemon.call("session.create")["session"]
    a = spawn(daemon, ["sleep", "100"], s)
    spawn(daemon, ["sleep", "100"], s)
    daemon.call("pane.split", {"pane": a["pane"], "axis": "rows", "argv": ["sleep", "100"]})
    e = daemon.error("session.remove", {"session": s})
    assert e.code == "conflict.live_panes" and len(e.data["panes"]) == 3
    assert daemon.error("pane.remove", {"pane": a["pane"]}).code == "conflict.pane_live"
    seq = daemon.call("events.read", {"limit": 1024})["next"]
    r = daemon.call("session.remove", {"session": s, "recursive": True})
    assert r["removed"][-1] == s
    types = [e["type"] for e in daemon.call("events.read", {"after": seq, "limit": 1024})["events"]]
    assert types.count("pane.terminating") == 3 and types.count("pane.removed") == 3
    assert types.count("window.removed") == 2 and types[-1] == "session.removed"
    assert types.index("pane.removed") > max(i for i, t in enumerate(types) if t == "pane.exited")
    assert daemon.call("session.list")["sessions"] == []
    assert daemon.call("pane.list")["panes"] == []


def test_removal_revokes_the_pane_principal(daemon: Daemon, tmp_path: Path) -> None:
    tok = tmp_path / "t"
    w = spawn(daemon, ["sh", "-c", f'echo "$VENOMX_TOKEN" > {tok}'])
    wait_for(lambda: tok.exists() and len(tok.read_text().strip()) == 64, 10, "token")
    token = tok.read_text().strip()
    assert daemon.call("whoami", token=token)["principal"] == w["principal"]
    wait_for(lambda: daemon.call("pane.list")["panes"][0]["state"] == "exited", 10, "exit")
    daemon.call("pane.remove", {"pane": w["pane"]})
    assert daemon.error("whoami", token=token).code == "denied.token"


def test_spawn_into_removing_session(daemon: Daemon) -> None:
    s = daemon.call("session.create")["session"]
    w = spawn(daemon, ["sh", "-c", 'trap "" HUP; echo ready; sleep 100'], s)
    ready(daemon, w["pane"], "ready")  # the trap is set: SIGHUP will not end it
    c = daemon.client()
    rid = c.start("session.remove", {"session": s, "recursive": True})
    wait_for(
        lambda: daemon.call("pane.list")["panes"][0]["state"] == "terminating", 10, "terminating"
    )
    assert daemon.error("window.create", {"session": s}).code == "conflict.removing"
    assert c.response(rid)["session"] == s


def test_shutdown_with_live_panes_and_a_waiter(daemon: Daemon) -> None:
    s = daemon.call("session.create")["session"]
    pids = [
        spawn(daemon, argv, s)["pid"]
        for argv in (["sleep", "100"], ["sh", "-c", 'trap "" HUP; sleep 100'])
    ]
    r = daemon.call("run", {"key": "w", "session": s, "argv": ["sleep", "100"]})
    c = daemon.client()
    rid = c.start("run.wait", {"run": r["run"]})
    daemon.call("shutdown")
    # the run's `sleep` dies of SIGHUP at once, long before the trapping pane's kill-wait
    # ends and the transport is torn down, so its waiter gets the record, not cancelled
    rec = c.response(rid)
    assert (rec["outcome"], rec["cause"], rec["signal"]) == ("terminated", "shutdown", "SIGHUP")
    assert daemon.proc.wait(2 + 1 + 1 + 2) == 0
    for pid in pids:
        wait_for(functools.partial(gone, pid), 5, "pane gone")


def test_seams_need_the_flag() -> None:
    from tests.helpers import start_daemon, stop_daemon

    d = start_daemon(seams=False)
    try:
        for verb, params in (
            ("seam.set", {"name": "terminate.unkillable", "state": "hold"}),
            ("seam.wait", {"name": "run.before_barrier", "timeout_ms": 0}),
        ):
            e = d.error(verb, params)
            assert e.code == "unsupported.seams"
            assert (
                d.cli(
                    *verb.split("."),
                    *[x for k, v in params.items() for x in (f"--{k.replace('_', '-')}", str(v))],
                ).code
                == 10
            )
        assert (
            d.error("seam.set", {"name": "run.before_barrier", "state": "hold"}, token=None).code
            == "denied.admin"
        )
    finally:
        stop_daemon(d)


def test_input_cut_short_by_the_panes_exit_says_so(daemon: Daemon) -> None:
    """The pane exited while taking the input: conflict.pane_exited, not a bound passed."""
    s = daemon.call("session.create")["session"]
    r = daemon.call("run", {"key": "cut", "session": s, "shell": "head -c 5000 >/dev/null; exit 7"})
    data = base64.b64encode((b"y" * 79 + b"\n") * 3000).decode()
    e = daemon.error("pane.send", {"pane": r["pane"], "data": data})
    assert (e.code, e.data) == ("conflict.pane_exited", {}), e
    assert daemon.wait_exit(r["run"])["exit_code"] == 7


FROZEN = r"""
import fcntl, os, signal, sys, termios, time, tty
tty.setraw(0)
out = sys.argv[1]
hup = []
signal.signal(signal.SIGHUP, lambda *_: hup.append(1))
print("raw", flush=True)
buf = bytearray(4)
while True:  # the line discipline full: the rest of the input waits in the sentinel
    fcntl.ioctl(0, termios.FIONREAD, buf)
    if int.from_bytes(buf, sys.byteorder) >= 4095:
        open(out + ".full", "w").close()
        break
    time.sleep(0.01)
while not hup:  # output all the while: the sentinel finds its terminal and channel ready
    os.write(1, b"z" * 2000 + b"\r\n")
    time.sleep(0.001)
got, idle = 0, 0
os.set_blocking(0, False)
while idle < 5:  # what the terminal holds, then a quarter second of nothing
    try:
        got += len(os.read(0, 65536))
        idle = 0
    except BlockingIOError:
        idle += 1
        time.sleep(0.05)
with open(out + ".part", "w") as f:
    f.write(str(got))
os.rename(out + ".part", out)
"""


def test_termination_freezes_input_already_queued(daemon: Daemon, tmp_path: Path) -> None:
    """foundation §6/§9: once a pane is terminating its input is frozen. Input queued in
    the sentinel behind a full terminal is dropped, not typed into the terminating pane
    during its grace, and its pane.send fails conflict.pane_terminating. (The program
    prints all the while, so the sentinel finds its terminal and its channel ready at
    once: FREEZE is handled first.)"""
    import sys

    got = tmp_path / "got"
    w = spawn(daemon, [sys.executable, "-c", FROZEN, str(got)])
    ready(daemon, w["pane"], "raw")
    text = "x" * 1_000_000  # far more than a pty holds
    result: dict[str, Any] = {}

    def send() -> None:
        with daemon.client() as c:
            try:
                result["ok"] = c.call("pane.send", {"pane": w["pane"], "text": text})
            except VenomxError as e:
                result["error"] = e

    sender = threading.Thread(target=send)
    sender.start()
    wait_for(lambda: Path(f"{got}.full").exists(), 10, "the terminal full")
    daemon.call("pane.kill", {"pane": w["pane"], "grace_ms": 5000})
    sender.join(10)
    assert not sender.is_alive()
    err = result.get("error")
    assert err is not None, result
    assert err.code == "conflict.pane_terminating" and err.data == {}
    took = int(err.message.split(" took ")[1].split(" of ")[0])
    assert 4095 <= took < len(text)
    wait_for(lambda: exited(daemon, w["pane"]), 10, "the pane exited")
    assert 4095 <= int(got.read_text()) <= took


SELF_CANCEL = """
import os, time
from venomx.client import Client
c = Client(os.environ["VENOMX_SOCKET"], os.environ["VENOMX_TOKEN"])
c.start("run.cancel", {"run": os.environ["VENOMX_RUN"], "signal": "SIGWINCH", "grace_ms": 3600000})
print("cancelled", flush=True)
time.sleep(600)
"""


def test_a_program_cannot_put_off_its_deadline_by_cancelling_itself(daemon: Daemon) -> None:
    """A run's own pane principal may cancel it (RFC-0015 §11), here with a harmless
    signal and an hour's grace; the caller's deadline still ends it within the deadline's
    own grace. The first cause stays, and the deadline adds no signal of its own."""
    s = daemon.call("session.create")["session"]
    r = daemon.call(
        "run",
        {"key": "self", "session": s, "argv": [PY, "-c", SELF_CANCEL], "deadline_ms": 500},
    )
    rec = daemon.call("run.wait", {"run": r["run"], "timeout_ms": 20000})
    assert (rec["outcome"], rec["cause"], rec["signal"], rec["status"]) == (
        "terminated",
        "cancel",
        "SIGKILL",
        125,
    )
    types = [
        e["type"]
        for e in daemon.call("events.read", {"limit": 1024})["events"]
        if e["resource"] in (f"run:{r['run']}", f"pane:{r['pane']}")
    ]
    assert types.count("pane.terminating") == 1 and types.count("run.terminating") == 1


def late_turn(
    daemon: Daemon, argv: list[str], deadline_ms: int, held_s: float, lose: bool = False
) -> dict[str, Any]:
    """Run ``argv`` with ``deadline_ms``, and hold the daemon (SIGSTOP) from just after
    the commit until ``held_s`` later and the leader has exited: its exit and its due
    deadline then reach the reactor in one late turn. ``lose``: once the program says
    "ready", kill the sentinel, and hold the daemon once it knows, so that nobody says
    when the leader exited. The completed record."""
    s = daemon.call("session.create")["session"]
    r = daemon.call("run", {"key": "late", "session": s, "argv": argv, "deadline_ms": deadline_ms})
    until = time.monotonic() + held_s
    if lose:
        ready(daemon, r["pane"], "ready")
        os.kill(psutil.Process(r["pid"]).ppid(), signal.SIGKILL)
        wait_for(
            lambda: (
                "pane.sentinel_lost"
                in [e["type"] for e in daemon.call("events.read", {"limit": 1024})["events"]]
            ),
            10,
            "the sentinel's loss",
        )
    os.kill(daemon.proc.pid, signal.SIGSTOP)
    try:
        wait_for(lambda: psutil.Process(r["pid"]).status() == "zombie", 10, "the leader exited")
        wait_for(lambda: time.monotonic() >= until, held_s + 1, "the deadline's time")
    finally:
        os.kill(daemon.proc.pid, signal.SIGCONT)
    return daemon.call("run.wait", {"run": r["run"], "timeout_ms": 20000})


def test_a_late_turn_does_not_time_out_an_exit_before_the_deadline(daemon: Daemon) -> None:
    """The leader exits at 0.3 s, the deadline is at 1 s, and the reactor gets to either
    at 1.3 s: the sentinel's time of the exit decides, and the run succeeded. (It was
    recorded terminated by its deadline, status 124: the turn's I/O runs first.)"""
    rec = late_turn(daemon, ["sleep", "0.3"], 1000, 1.3)
    assert (rec["outcome"], rec["status"], rec.get("cause")) == ("succeeded", 0, None), rec
    types = [e["type"] for e in daemon.call("events.read", {"limit": 1024})["events"]]
    assert "run.terminating" not in types and "pane.terminating" not in types


def test_a_late_turn_still_times_out_an_exit_after_the_deadline(daemon: Daemon) -> None:
    """The deadline (0.1 s) came before the exit (0.3 s); the reactor saw both late. The
    termination is recorded as a deadline's, with both events, and nothing signalled:
    the leader's own status stays in the record."""
    rec = late_turn(daemon, ["sleep", "0.3"], 100, 0.6)
    assert (rec["outcome"], rec["cause"], rec["status"], rec["exit_code"]) == (
        "terminated",
        "deadline",
        124,
        0,
    ), rec
    types = [e["type"] for e in daemon.call("events.read", {"limit": 1024})["events"]]
    assert types.count("pane.terminating") == 1 and types.count("run.terminating") == 1


def test_a_late_turn_with_no_time_for_the_exit_decides_for_the_deadline(daemon: Daemon) -> None:
    """The sentinel is killed and the daemon has seen it; the leader, which ignores the
    hang-up, exits at 0.5 s, before its deadline at 1 s, but the reactor sees the exit,
    or reaps the leader, after the deadline's time: nobody can say the exit was before
    the deadline, so the deadline applies, beside the fault. venomx's failure is not
    the program's success."""
    argv = ["sh", "-c", "trap '' HUP; echo ready; sleep 0.5"]
    rec = late_turn(daemon, argv, 1000, 1.3, lose=True)
    assert (rec["outcome"], rec.get("cause"), rec.get("fault"), rec.get("exit_code")) == (
        "terminated",
        "deadline",
        "sentinel_lost",
        0,
    ), rec
