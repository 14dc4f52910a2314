"""The spare sentinel pool grows with a burst of starts and shrinks after a quiet spell
(issue 19 §2): a CI runner's next burst finds its sentinels ready, and an idle daemon
gives their memory back. Real daemons, real spares."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers import Daemon, start_daemon, stop_daemon, wait_for
from tests.helpers import spare_pool as pool
from venomx.daemon.panes.sentinels import SPARES
from workers.protocol import SPARE_TITLE


def spare_pids(d: Daemon) -> set[int]:
    return set(d.titled(SPARE_TITLE))


def stopped(pid: int) -> bool:
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "T"


def burst(d: Daemon, n: int, key: str) -> None:
    """``n`` runs of ``true`` started at once on one connection; all succeed."""
    s = d.call("session.create")["session"]
    runs = d.start_runs([{"key": f"{key}{i}", "session": s, "argv": ["true"]} for i in range(n)])
    for r in runs:
        assert d.wait_exit(r)["outcome"] == "succeeded"


@pytest.mark.timeout(120)
def test_a_burst_grows_the_pool_and_a_quiet_spell_shrinks_it() -> None:
    d = start_daemon(config="[spawn]\nspares_idle_ms = 3000\n[run]\nmax_active = 128\n")
    try:
        wait_for(lambda: pool(d) == (SPARES, SPARES), 10, "the pool at rest")
        burst(d, 3 * SPARES, "a")
        _, target = wait_for(lambda: (p := pool(d))[0] == p[1] and p, 20, "a refill")
        assert SPARES < target <= 3 * SPARES  # one more per start that forked on demand
        # a quiet spell may already halve the target: compare with the pool's own
        wait_for(lambda: (p := pool(d))[1] == len(spare_pids(d)) == p[0], 10, "as processes")
        # the next burst of the same size forks (almost) nothing on demand
        burst(d, 3 * SPARES, "b")
        # quiet: the growth halves each spell and the surplus spares exit, reaped as
        # spares (never counted as escapees, never reported as lost)
        wait_for(lambda: pool(d) == (SPARES, SPARES), 45, "the pool back at rest")
        wait_for(lambda: len(spare_pids(d)) == SPARES, 10, "the surplus gone")
        doc = d.call("doctor")
        assert doc["escapees"]["count"] == 0 and doc["escapees"]["reaped"] == 0
        assert doc["sentinels"]["lost"]["count"] == 0
        assert doc["status"] == "ok"
        assert "spare sentinel exited" not in d.log.read_text()
    finally:
        stop_daemon(d)


@pytest.mark.parametrize("most", [0, 4, 8])
def test_spares_max_bounds_the_pool_at_its_edge(most: int) -> None:
    d = start_daemon(config=f"[spawn]\nspares_max = {most}\n[run]\nmax_active = 128\n")
    try:
        rest = min(SPARES, most)
        wait_for(lambda: pool(d) == (rest, rest), 10, "the pool at rest")
        burst(d, 3 * SPARES, "m")
        wait_for(lambda: pool(d) == (most, most), 20, "the pool at its most")
        wait_for(lambda: len(spare_pids(d)) == most, 10, "the spares, as processes")
    finally:
        stop_daemon(d)


def test_lowering_spares_max_stops_the_surplus_at_once(daemon: Daemon) -> None:
    burst(daemon, 3 * SPARES, "l")
    wait_for(lambda: (p := pool(daemon))[0] == p[1] > SPARES, 20, "a grown pool")
    daemon.call("config.set", {"path": "spawn.spares_max", "value": "2"})
    wait_for(lambda: pool(daemon) == (2, 2), 10, "the pool cut to its new most")
    wait_for(lambda: len(spare_pids(daemon)) == 2, 10, "the surplus gone")
    assert daemon.call("doctor")["escapees"]["reaped"] == 0
    daemon.call("config.set", {"path": "spawn.spares_max", "value": "64"})
    wait_for(lambda: pool(daemon) == (SPARES, SPARES), 10, "back at rest")


@pytest.mark.timeout(120)
def test_spares_min_sets_the_pool_at_rest_and_a_burst_of_that_size_forks_nothing() -> None:
    """A CI host that knows its first burst keeps that many spares ready from the start
    (``spawn.spares_min``), bounded by ``spares_max``; a lower rest stops the surplus."""
    d = start_daemon(config="[spawn]\nspares_min = 12\n[run]\nmax_active = 128\n")
    try:
        wait_for(lambda: pool(d) == (12, 12), 20, "twelve spares at rest")
        wait_for(lambda: len(spare_pids(d)) == 12, 10, "twelve spares, as processes")
        before = spare_pids(d)
        s = d.call("session.create")["session"]
        runs = d.start_runs(
            [{"key": f"w{i}", "session": s, "argv": ["sleep", "60"]} for i in range(12)]
        )
        leaders = {d.call("run.get", {"run": r, "output": False})["pid"] for r in runs}
        parents = {
            int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
            for pid in leaders
        }
        assert parents <= before  # every start took a spare: none forked on demand
        assert pool(d)[1] == 12  # and none grew the pool
        d.call("config.set", {"path": "spawn.spares_max", "value": "8"})
        wait_for(lambda: pool(d) == (8, 8), 10, "the rest held to spares_max")
        d.call("config.set", {"path": "spawn.spares_max", "value": "64"})
        d.call("config.set", {"path": "spawn.spares_min", "value": "2"})
        wait_for(lambda: pool(d) == (2, 2), 10, "a lower rest")
        wait_for(lambda: len(spare_pids(d)) == 2, 10, "the surplus gone")
        assert d.call("doctor")["escapees"]["reaped"] == 0
    finally:
        stop_daemon(d)


def test_the_pool_settings_are_checked_at_their_edges(shared_daemon: Daemon) -> None:
    d = shared_daemon
    for path, good, bad in (
        ("spawn.spares_max", ("0", "1024"), ("-1", "1025")),
        ("spawn.spares_idle_ms", ("100", "86400000"), ("99", "86400001")),
    ):
        for value in bad:
            e = d.error("config.set", {"path": path, "value": value})
            assert e.code == "invalid_params.config", (path, value)
        for value in good:
            d.call("config.set", {"path": path, "value": value})
            assert d.call("config.get", {"path": path})["config"] == {path: int(value)}
    d.call("config.set", {"path": "spawn.spares_max", "value": "0"})  # so 1024 forks nothing
    for value in ("-1", "1025"):
        e = d.error("config.set", {"path": "spawn.spares_min", "value": value})
        assert e.code == "invalid_params.config", value
    for value in ("0", "1024"):
        d.call("config.set", {"path": "spawn.spares_min", "value": value})
        assert d.call("config.get", {"path": "spawn.spares_min"})["config"] == {
            "spawn.spares_min": int(value)
        }
    d.call("config.set", {"path": "spawn.spares_min", "value": "6"})
    d.call("config.set", {"path": "spawn.spares_max", "value": "64"})
    d.call("config.set", {"path": "spawn.spares_idle_ms", "value": "30000"})
    wait_for(lambda: pool(d) == (SPARES, SPARES), 10, "the pool at rest again")


def test_a_pool_left_short_is_topped_up(daemon: Daemon) -> None:
    # one start takes a spare and leaves the pool above its low-water mark: it is
    # filled back to its size shortly, not left one short until the next burst
    wait_for(lambda: pool(daemon) == (SPARES, SPARES), 10, "the pool at rest")
    s = daemon.call("session.create")["session"]
    daemon.call("window.create", {"session": s, "argv": ["sleep", "60"]})
    wait_for(lambda: pool(daemon) == (SPARES, SPARES), 10, "the pool topped up")


def test_stopped_spares_and_fork_server_fail_doctor_and_no_start_waits_on_them(
    daemon: Daemon,
) -> None:
    """A program of our uid can SIGSTOP them: doctor says so, and a start ends the
    stopped spares it meets and uses a live sentinel (it waited on them for ever)."""
    import os
    import signal

    from tests.helpers import forkserver_pid

    wait_for(lambda: pool(daemon) == (SPARES, SPARES), 10, "the pool at rest")
    spares = spare_pids(daemon)
    for pid in spares:
        os.kill(pid, signal.SIGSTOP)
    # a signalled process stops only once it is next scheduled
    wait_for(lambda: all(stopped(pid) for pid in spares), 10, "the spares stopped")
    doc = wait_for(
        lambda: (d := daemon.call("doctor"))["sentinels"]["spares_stopped"] and d, 10, "seen"
    )
    assert doc["status"] == "fail" and sorted(spares) == doc["sentinels"]["spares_stopped"]
    s = daemon.call("session.create")["session"]
    r = daemon.call("run", {"key": "after", "session": s, "argv": ["true"]})
    assert daemon.wait_exit(r["run"])["outcome"] == "succeeded"
    fs = forkserver_pid(daemon.call("doctor"))
    os.kill(fs, signal.SIGSTOP)
    try:
        wait_for(lambda: stopped(fs), 10, "the fork server stopped")
        check = next(c for c in daemon.call("doctor")["checks"] if c["name"] == "fork_server")
        assert check == {"name": "fork_server", "status": "fail", "detail": f"pid {fs} is stopped"}
    finally:
        os.kill(fs, signal.SIGCONT)
    wait_for(lambda: not daemon.call("doctor")["sentinels"]["spares_stopped"], 10, "ended")


def test_a_fork_server_kept_stopped_under_a_start_is_ended_as_venomxs_failure(
    tmp_path: Path,
) -> None:
    """A program of our uid stops the fork server while a start waits on it for a
    sentinel (no spares: every start forks its own). The start waited for ever. The
    daemon continues it once; stopped again, it is killed and restarted, and the start
    fails as venomx's own failure, not the program's: exec exits with venomx's status
    (6), not a shell's 126 for a program that cannot be executed. The same start then
    succeeds."""
    import os
    import signal
    import subprocess
    import threading

    from tests.helpers import PY, forkserver_pid

    d = start_daemon(config="[spawn]\nspares_max = 0\n")
    gone = threading.Event()
    try:
        wait_for(lambda: pool(d)[0] == 0, 10, "no spares")
        before = d.call("pane.list")["panes"]
        fs = forkserver_pid(d.call("doctor"))

        def keep_stopping() -> None:  # the attacker: stops it again whenever it runs
            while not gone.is_set():
                try:
                    os.kill(fs, signal.SIGSTOP)
                except ProcessLookupError:
                    return
                gone.wait(0.002)

        attacker = threading.Thread(target=keep_stopping, daemon=True)
        attacker.start()
        wait_for(lambda: stopped(fs), 10, "the fork server stopped")
        env = {k: v for k, v in os.environ.items() if not k.startswith("VENOMX_")}
        env.update({"VENOMX_SOCKET": d.socket, "VENOMX_TOKEN": "@owner"})
        r = subprocess.run(
            [PY, "-m", "venomx", "exec", "--", "true"],
            capture_output=True,
            text=True,
            env=env,
            timeout=30,
        )
        assert r.returncode == 6, (r.returncode, r.stderr)
        assert "venomx: unavailable.spawn: venomx could not prepare the start: EIO" in r.stderr
        assert "hint: venomx's side of the start failed, not an exec of 'true'" in r.stderr
        assert "fork server, on the way to the sentinel of pane" in d.log.read_text()
        assert "was stopped again: ended" in d.log.read_text()
        gone.set()
        attacker.join(10)
        assert d.call("pane.list")["panes"] == before
        again = wait_for(lambda: (a := d.cli("exec", "--", "true")).code == 0 and a, 20, "a start")
        assert again.code == 0
    finally:
        gone.set()
        stop_daemon(d)


@pytest.mark.parametrize("what", ["intermediates", "new sentinels"])
def test_a_fork_kept_stopped_under_a_start_is_ended_as_venomxs_failure(what: str) -> None:
    """A program of our uid stops what a start's fork goes through before its sentinel
    says HELLO: the fork server's short-lived intermediate, and the new sentinel (caught
    as the intermediate's child and kept stopped after the intermediate exits and it is
    ours). The start waited on them for ever (only the fork server was watched). Each is
    continued once; stopped again, it is killed, and the starts it held fail as venomx's
    own failure. Every start is answered."""
    import os
    import signal
    import threading

    from tests.helpers import forkserver_pid
    from venomx.daemon.cgroups import children
    from venomx.daemon.procfs import session_of
    from venomx.wire import SPAWN_OURS

    d = start_daemon(config="[spawn]\nspares_max = 0\n[run]\nmax_active = 64\n")
    gone = threading.Event()
    caught: set[int] = set()
    try:
        wait_for(lambda: pool(d)[0] == 0, 10, "no spares")
        fs = forkserver_pid(d.call("doctor"))

        def keep_stopping() -> None:  # the attacker
            while not gone.is_set():
                # intermediates: every fork in progress, as it is seen; new sentinels:
                # those forked, and again whenever they run (while in the fork server's
                # session: a pid reused by another process is left alone)
                targets: list[int] = []
                for mid in children(fs):
                    targets += [mid, *children(mid)] if what == "intermediates" else children(mid)
                if what == "new sentinels":
                    targets += [p for p in caught if session_of(p) == fs]
                for pid in targets:
                    try:
                        os.kill(pid, signal.SIGSTOP)
                    except ProcessLookupError:
                        continue
                    caught.add(pid)

        attacker = threading.Thread(target=keep_stopping, daemon=True)
        attacker.start()
        s = d.call("session.create")["session"]
        answers: list[str] = []
        for round_ in range(5):  # a round the attacker catches nothing proves nothing
            with d.client() as c:
                ids = [
                    c.start("run", {"key": f"k{round_}.{i}", "session": s, "argv": ["true"]})
                    for i in range(8)  # one batch: one intermediate forks all eight
                ]
                c.sock.settimeout(30)  # before: a start held by a stopped fork, for ever
                for _ in ids:
                    frame = c.read()
                    if "ok" in frame:
                        answers.append("ok")
                    else:
                        assert frame["error"]["code"] == "unavailable.spawn", frame
                        assert frame["error"]["message"].startswith(SPAWN_OURS), frame
                        answers.append("failed")
            if caught:
                break
        assert caught, "the attacker never caught a fork"
        assert "failed" in answers
        log = d.log.read_text()
        said = "intermediate" if what == "intermediates" else "new sentinel"
        assert f"{said}, on the way to the sentinel of pane" in log
        assert "was stopped again: ended" in log
        gone.set()
        attacker.join(10)
        # a failed start left no pane, and what was killed is not taken for an escapee
        assert len(d.call("pane.list")["panes"]) == answers.count("ok")
        assert d.call("doctor")["escapees"]["reaped"] == 0
        again = d.call("run", {"key": "after", "session": s, "argv": ["true"]})
        assert d.wait_exit(again["run"])["outcome"] == "succeeded"
    finally:
        gone.set()
        stop_daemon(d)
