"""Per-pane cgroups (issue 20): every process a run starts is accounted for.

Real daemons, real escapees: a ``setsid`` one that keeps its environment and a
double-forked one that clears it. With a writable cgroup v2 hierarchy (this machine's
hybrid one, as root; and a subtree delegated to uid 65534 with chown) and with
``cgroups = "off"``. A test that needs a writable hierarchy skips where there is none.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import uuid
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import (
    PY,
    ROOT,
    Daemon,
    spare_pool,
    start_daemon,
    stop_daemon,
    wait_for,
    wait_listening,
)
from venomx.daemon.cgroups import BELOW_MAX, DAEMON_LEAF, locate, members, socket_key

HERE = locate()
WRITABLE = HERE.directory is not None and os.access(HERE.directory, os.W_OK)
needs_cgroups = pytest.mark.skipif(
    not WRITABLE, reason=f"needs a writable cgroup v2 hierarchy: {HERE.why or 'not writable'}"
)
NOBODY = 65534


def controller(name: str) -> bool:
    """Whether our hierarchy offers ``name`` at all (hybrid hosts bind it to v1)."""
    if not WRITABLE or HERE.directory is None:
        return False
    return name in Path(HERE.directory, "cgroup.controllers").read_text().split()


def escapee(path: Path, keep_env: bool = True) -> str:
    """A shell line that leaves one process behind in a session of its own and waits
    until it has written its pid; ``keep_env`` False: double-forked, environment cleared."""
    inner = f"echo $$ > {path}; exec /bin/sleep 300"
    start = "setsid -f" if keep_env else "env -i /usr/bin/setsid -f"
    line = f"{start} /bin/sh -c '{inner}' </dev/null >/dev/null 2>&1; "
    return line + (settled(path) if keep_env else f"while [ ! -s {path} ]; do :; done")


def settled(path: Path) -> str:
    """A shell loop until the process that writes its pid to ``path`` has done so and
    finished its exec of sleep with VENOMX_PANE: mid-exec its /proc/PID/environ reads
    empty, and a daemon without cgroups that counted then would not see it as the pane's."""
    return (
        f"while [ ! -s {path} ]; do :; done; p=$(cat {path}); "
        f'while [ "$(cat /proc/$p/comm)" != sleep ] || ! grep -qa VENOMX_PANE= /proc/$p/environ; '
        "do [ -e /proc/$p ] || exit 1; done"
    )


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def finished(pid: int) -> None:
    """Wait for an ended process to finish exiting. A process leaves its cgroup early in
    its exit, so the daemon counts it ended (it can no longer run anything) a moment
    before the kernel makes it a zombie; seen from here, it is alive for that moment."""
    wait_for(lambda: not alive(pid), 5, f"process {pid} to finish exiting")


def subtree(d: Daemon) -> str:
    """The cgroup subtree the daemon ``d`` makes for itself under ours."""
    return os.path.join(HERE.directory or "", socket_key(d.socket))


def pid_in(path: Path) -> int:
    return int(path.read_text().strip())


def written(path: Path) -> bool:
    """Whether a shell's `echo $$ > path` has finished: the file exists before it is written."""
    return path.exists() and path.read_text().strip() != ""


class Left(list[int]):
    """Pids a test left running on purpose, each held by a pidfd taken while it is known
    alive: pid_max may be as low as 32768, and a pid reaped during the test may be
    another's process by the end."""

    def __init__(self) -> None:
        super().__init__()
        self.fds: list[int] = []

    def append(self, pid: int) -> None:
        try:
            self.fds.append(os.pidfd_open(pid))
        except OSError:
            pass  # already gone: nothing to end
        super().append(pid)

    def extend(self, pids: Iterable[int]) -> None:
        for pid in pids:
            self.append(pid)

    def end(self) -> None:
        for fd in self.fds:
            try:
                signal.pidfd_send_signal(fd, signal.SIGKILL)
            except OSError:
                pass
            finally:
                os.close(fd)


@pytest.fixture
def left() -> Iterator[Left]:
    """Pids a test left running on purpose; killed whatever happens."""
    pids = Left()
    yield pids
    pids.end()


def start_run(d: Daemon, line: str, **extra: Any) -> dict[str, Any]:
    s = d.call("session.create", {})["session"]
    return d.call("run", {"key": uuid.uuid4().hex, "session": s, "shell": line, **extra})


def completed(d: Daemon, line: str) -> dict[str, Any]:
    return d.wait_exit(start_run(d, line)["run"])


def cgroup_of(pid: int) -> str:
    with open(f"/proc/{pid}/cgroup") as f:
        return next(x[3:] for x in f.read().splitlines() if x.startswith("0::"))


@pytest.fixture
def off() -> Iterator[Daemon]:
    d = start_daemon(config='cgroups = "off"\n')
    try:
        yield d
    finally:
        stop_daemon(d)


# -- with a cgroup per pane ---------------------------------------------------------------------
@needs_cgroups
def test_leader_is_in_its_pane_cgroup_and_the_sentinel_is_not(daemon: Daemon) -> None:
    doc = daemon.call("doctor")["cgroups"]
    assert doc["active"] and doc["mode"] == "auto", doc
    s = daemon.call("session.create", {})["session"]
    w = daemon.call("window.create", {"session": s, "argv": ["/bin/sleep", "60"]})
    leader = w["pid"]
    pane_cg = cgroup_of(leader)
    assert pane_cg.endswith("." + w["pane"]) and socket_key(daemon.socket) in pane_cg
    sentinel = int(Path(f"/proc/{leader}/stat").read_text().rsplit(")", 1)[1].split()[1])
    assert cgroup_of(sentinel).endswith(f"{socket_key(daemon.socket)}/{DAEMON_LEAF}")
    assert cgroup_of(daemon.proc.pid) == cgroup_of(sentinel)
    base = subtree(daemon)
    assert members(os.path.join(base, pane_cg.rsplit("/", 1)[1])) == [leader]


@needs_cgroups
def test_setsid_escapee_is_in_the_record_and_run_cleanup_ends_it(
    daemon: Daemon, tmp: Path, left: list[int]
) -> None:
    run = start_run(daemon, escapee(tmp / "e"))
    rec = daemon.wait_exit(run["run"])
    pid = pid_in(tmp / "e")
    left.append(pid)
    assert rec["outcome"] == "succeeded" and rec["cleanup"] == {"verified": False, "escapees": 1}
    assert alive(pid)  # completion never waits for, nor ends, an escapee
    doc = daemon.call("doctor")["escapees"]
    assert doc["pids"][rec["pane"]] == [pid] and doc["runs"][rec["pane"]] == run["run"]
    out = daemon.call("run.cleanup", {"run": run["run"], "grace_ms": 500})
    assert out == {"run": run["run"], "pane": rec["pane"], "ended": 1, "remaining": 0}
    finished(pid)
    # the record was fixed at completion: neither cleanup nor a second cancel changes it
    again = daemon.call("run.cancel", {"run": run["run"]})
    assert again == daemon.call("run.get", {"run": run["run"], "output": False})
    assert again["cleanup"] == {"verified": False, "escapees": 1}
    assert daemon.call("doctor")["escapees"]["count"] == 0
    assert daemon.call("run.cleanup", {"run": run["run"]})["ended"] == 0


@needs_cgroups
def test_escapee_that_clears_its_environment_is_still_counted(
    daemon: Daemon, tmp: Path, left: list[int]
) -> None:
    run = start_run(daemon, escapee(tmp / "e", keep_env=False))
    rec = daemon.wait_exit(run["run"])
    pid = pid_in(tmp / "e")
    left.append(pid)
    assert b"VENOMX_PANE" not in Path(f"/proc/{pid}/environ").read_bytes()
    assert rec["cleanup"] == {"verified": False, "escapees": 1}
    assert daemon.call("doctor")["escapees"]["pids"][rec["pane"]] == [pid]
    # SIGTERM is ignored by nobody here: the grace ends it; pane.cleanup is the same act
    out = daemon.call("pane.cleanup", {"pane": rec["pane"], "signal": "SIGTERM"})
    assert out == {"pane": rec["pane"], "ended": 1, "remaining": 0}
    finished(pid)


def own_cgroup() -> str:
    """A shell expression: the calling shell's cgroup v2 directory."""
    return f"{HERE.mount}$(sed -n 's/^0:://p' /proc/self/cgroup)"


@needs_cgroups
def test_an_escapee_in_a_cgroup_below_the_panes_is_found_and_ended(
    daemon: Daemon, tmp: Path, left: list[int]
) -> None:
    """A program may make cgroups below its pane's and move into one (rootless container
    runtimes do): the pane's own process list is then empty, and its cgroup is not."""
    path = tmp / "e"
    script = tmp / "term.py"
    script.write_text(
        "import os, signal, sys, time\n"
        "def term(*_):\n"
        f"    open({str(path) + '.term'!r}, 'w').close()\n"
        "    sys.exit(0)\n"
        "signal.signal(signal.SIGHUP, term)\n"
        f"open({str(path) + '.tmp'!r}, 'w').write(str(os.getpid()))\n"
        f"os.rename({str(path) + '.tmp'!r}, {str(path)!r})\n"
        "time.sleep(300)\n"
    )
    inner = (
        f'd={own_cgroup()}/x; mkdir -p "$d/y"; echo threaded > "$d/y/cgroup.type"; '
        f'echo $$ > "$d/cgroup.procs"; echo $$ > "$d/y/cgroup.threads"'
    )
    line = (
        f"setsid -f /bin/sh -c '{inner}; exec {sys.executable} {script}' "
        "</dev/null >/dev/null 2>&1; "
    )
    run = start_run(daemon, line + f"while [ ! -s {path} ]; do :; done")
    rec = daemon.wait_exit(run["run"])
    pid = pid_in(path)
    left.append(pid)
    assert cgroup_of(pid).endswith(
        "." + rec["pane"] + "/x/y"
    )  # its one thread, in a threaded cgroup
    assert rec["cleanup"] == {"verified": False, "escapees": 1}
    assert daemon.call("doctor")["escapees"]["pids"][rec["pane"]] == [pid]
    out = daemon.call("run.cleanup", {"run": run["run"], "grace_ms": 5000})
    assert out == {"run": run["run"], "pane": rec["pane"], "ended": 1, "remaining": 0}
    finished(pid)
    assert Path(str(path) + ".term").exists()  # asked to go first: SIGHUP reached it there
    # with its process gone, the pane's cgroup goes, and the cgroups made below it first
    wait_for(lambda: daemon.call("doctor")["cgroups"]["kept"] == 0, 10, "the cgroups removed")
    assert not [n for n in os.listdir(subtree(daemon)) if n.endswith("." + rec["pane"])]


@needs_cgroups
def test_more_cgroups_below_a_pane_than_are_read_prove_nothing(tmp: Path, left: list[int]) -> None:
    """Past BELOW_MAX cgroups below a pane its exit reads none of them (that read runs on
    the reactor): the record claims nothing either way, cleanup still ends the whole
    subtree, and the shutdown, off the reactor, removes it."""
    d = start_daemon()
    try:
        path = tmp / "e"
        n = BELOW_MAX + 5
        line = (
            f'here={own_cgroup()}; i=0; while [ $i -lt {n} ]; do mkdir "$here/c$i"; '
            "i=$((i+1)); done; setsid -f /bin/sh -c "
            f"'echo $$ > \"$0/c7/cgroup.procs\"; echo $$ > {path}; exec /bin/sleep 300' "
            f'"$here" </dev/null >/dev/null 2>&1; {settled(path)}'
        )
        run = start_run(d, line)
        rec = d.wait_exit(run["run"])
        pid = pid_in(path)
        left.append(pid)
        assert cgroup_of(pid).endswith("." + rec["pane"] + "/c7")
        assert rec["cleanup"] == {"verified": False, "escapees": 0}
        out = d.call("run.cleanup", {"run": run["run"], "grace_ms": 100})
        assert out["remaining"] == 0, out
        finished(pid)
        assert d.call("doctor")["cgroups"]["kept"] == 1  # too many below to remove now
    finally:
        stop_daemon(d)
    assert not os.path.exists(subtree(d))


@needs_cgroups
def test_cgroups_a_clean_run_made_below_its_own_go_with_it(daemon: Daemon) -> None:
    here = own_cgroup()
    rec = completed(
        daemon, f'mkdir -p "{here}/a/b" "{here}/c" && echo threaded > "{here}/a/b/cgroup.type"'
    )
    assert rec["outcome"] == "succeeded", rec
    assert rec["cleanup"] == {"verified": True, "escapees": 0}
    wait_for(lambda: daemon.call("doctor")["cgroups"]["kept"] == 0, 10, "the cgroups removed")
    assert not [n for n in os.listdir(subtree(daemon)) if n.endswith("." + rec["pane"])]


@needs_cgroups
def test_a_clean_run_is_verified_and_its_cgroup_goes(daemon: Daemon) -> None:
    rec = completed(daemon, "/bin/sleep 0.01 & wait")
    assert rec["cleanup"] == {"verified": True, "escapees": 0}
    assert type(rec["cgroup_cpu_usec"]) is int
    assert "oom" not in rec
    # removed off the reactor, at once (an rmdir may wait for the kernel's cgroup lock)
    wait_for(lambda: daemon.call("doctor")["cgroups"]["kept"] == 0, 10, "the cgroup removed")


@needs_cgroups
def test_cgroups_of_many_panes_ending_together_all_go(daemon: Daemon) -> None:
    """Removals queue in the remover's one thread, off the reactor: every one goes."""
    s = daemon.call("session.create")["session"]
    runs = [
        daemon.call("run", {"key": f"k{i}", "session": s, "argv": ["true"]})["run"]
        for i in range(40)
    ]
    panes = []
    for r in runs:
        rec = daemon.wait_exit(r)
        assert rec["cleanup"] == {"verified": True, "escapees": 0}
        panes.append(rec["pane"])
    wait_for(lambda: daemon.call("doctor")["cgroups"]["kept"] == 0, 10, "every cgroup removed")
    left = os.listdir(daemon.call("doctor")["cgroups"]["cgroup"])
    assert not [name for name in left for p in panes if name.endswith("." + p)], left


@needs_cgroups
def test_sigkill_survivor_counts_and_unkillable_grace_escalates(
    daemon: Daemon, tmp: Path, left: list[int]
) -> None:
    """An escapee that ignores the signal is ended at the grace by SIGKILL."""
    inner = f"trap '' HUP TERM; echo $$ > {tmp / 'e'}; while :; do /bin/sleep 1; done"
    line = (
        f'setsid -f /bin/sh -c "{inner}" </dev/null >/dev/null 2>&1; '
        f"while [ ! -s {tmp / 'e'} ]; do :; done"
    )
    rec = completed(daemon, line)
    pid = pid_in(tmp / "e")
    left.append(pid)
    assert rec["cleanup"]["escapees"] >= 1
    out = daemon.call("pane.cleanup", {"pane": rec["pane"], "grace_ms": 100})
    assert out["remaining"] == 0 and out["ended"] >= 1
    finished(pid)


def test_pane_cleanup_needs_an_exited_pane(daemon: Daemon) -> None:
    s = daemon.call("session.create", {})["session"]
    w = daemon.call("window.create", {"session": s, "argv": ["/bin/sleep", "60"]})
    assert daemon.error("pane.cleanup", {"pane": w["pane"]}).code == "conflict.pane_live"
    run = start_run(daemon, "/bin/sleep 60")
    err = daemon.error("run.cleanup", {"run": run["run"]})
    assert err.code == "conflict.pane_live" and err.data == {"pane": run["pane"]}
    assert daemon.error("pane.cleanup", {"pane": "p999"}).code == "not_found.pane"
    assert daemon.error("run.cleanup", {"run": "r999"}).code == "not_found.run"


def test_cleanup_needs_write(daemon: Daemon) -> None:
    rec = completed(daemon, "true")
    reader = daemon.call("principal.create", {"grants": [{"right": "read", "scope": "*"}]})
    err = daemon.error("run.cleanup", {"run": rec["run"]}, token=reader["token"])
    assert err.code == "denied.write"
    err = daemon.error("pane.cleanup", {"pane": rec["pane"]}, token=reader["token"])
    assert err.code == "denied.write"


@needs_cgroups
def test_shutdown_ends_every_pane_cgroup(tmp: Path, left: list[int]) -> None:
    d = start_daemon()
    try:
        rec = completed(d, escapee(tmp / "e", keep_env=False))
        pid = pid_in(tmp / "e")
        left.append(pid)
        assert rec["cleanup"]["escapees"] == 1 and alive(pid)
    finally:
        stop_daemon(d)
    assert d.proc.returncode == 0
    wait_for(lambda: not alive(pid), 5, "the escapee to end at shutdown")
    assert not os.path.exists(subtree(d))


@needs_cgroups
def test_shutdown_while_spares_are_made_leaves_no_subtree() -> None:
    # The pool's first batch is still being made right after start-up: the spares
    # under way must not outlive the daemon's own exit (they kept its subtree).
    met = 0
    for _ in range(3):
        d = start_daemon()
        spares, target = spare_pool(d)
        met += spares < target  # this shutdown meets the batch under way
        stop_daemon(d)
        assert d.proc.returncode == 0
        assert not os.path.exists(subtree(d))
        errors = [ln for ln in d.log.read_text().splitlines() if "level=error" in ln]
        assert errors == []  # a fork server that exits because we stop is no error
    assert met  # the case this is about happened at least once


@needs_cgroups
def test_a_stopped_spare_does_not_outlive_a_shutdown(left: list[int]) -> None:
    """Every pane has ended when the daemon leaves its subtree, so what is left in its
    leaf is its own: the fork server and spares are ended, not waited for, even one that
    cannot see its channel close (stopped here by a program of our uid)."""
    from workers.protocol import SPARE_TITLE

    d = start_daemon()
    try:
        wait_for(lambda: d.titled(SPARE_TITLE), 10, "a spare")
        spare = d.titled(SPARE_TITLE)[0]
        left.append(spare)
        os.kill(spare, signal.SIGSTOP)
    finally:
        stop_daemon(d)
    assert d.proc.returncode == 0
    assert not alive(spare)
    assert not os.path.exists(subtree(d))


def test_limits_fail_where_the_controller_is_missing(daemon: Daemon, off: Daemon) -> None:
    for d in (daemon, off):
        info = d.call("doctor")["cgroups"]
        for controller, param, value in (
            ("memory", "memory_max", 1 << 26),
            ("pids", "pids_max", 8),
        ):
            if controller in info["controllers"]:
                continue
            s = d.call("session.create", {})["session"]
            err = d.error(
                "run", {"key": uuid.uuid4().hex, "session": s, "argv": ["true"], param: value}
            )
            assert err.code == "unsupported.cgroups" and err.data == {"controller": controller}
            w = d.call("window.create", {"session": s, "argv": ["/bin/sleep", "60"]})
            err = d.error(
                "pane.split", {"pane": w["pane"], "axis": "cols", "argv": ["true"], param: value}
            )
            assert err.code == "unsupported.cgroups" and err.data == {"controller": controller}
            # nothing was started or left: the window still has its one pane
            assert len(d.call("window.get", {"window": w["window"]})["panes"]) == 1


def test_limits_are_checked_after_authorization(daemon: Daemon) -> None:
    reader = daemon.call("principal.create", {"grants": [{"right": "read", "scope": "*"}]})
    s = daemon.call("session.create", {})["session"]
    err = daemon.error(
        "run",
        {"key": "k", "session": s, "argv": ["true"], "memory_max": 1 << 26},
        token=reader["token"],
    )
    assert err.code == "denied.spawn"
    err = daemon.error("run", {"key": "k", "session": s, "argv": ["true"], "pids_max": 0})
    assert err.code == "invalid_params.range"


@pytest.mark.skipif(
    not controller("pids"),
    reason="needs the pids controller in a writable cgroup v2 hierarchy (this host binds it "
    "to cgroup v1)",
)
def test_pids_max_stops_a_fork_loop(daemon: Daemon) -> None:
    line = "i=0; while [ $i -lt 50 ]; do /bin/sleep 5 & i=$((i+1)); done 2>/dev/null; echo ok"
    rec = daemon.wait_exit(start_run(daemon, line + "; exit 3", pids_max=10)["run"], 20)
    assert rec["exit_code"] == 3
    assert rec["cleanup"]["verified"] is True  # the sweep took the sleeps with the group


@pytest.mark.skipif(
    not controller("memory"),
    reason="needs the memory controller in a writable cgroup v2 hierarchy (this host binds "
    "it to cgroup v1)",
)
def test_memory_max_ooms_an_allocation_loop(daemon: Daemon) -> None:
    code = "b=[]\nwhile True: b.append(bytearray(1 << 20))"
    s = daemon.call("session.create", {})["session"]
    run = daemon.call(
        "run",
        {"key": "m", "session": s, "argv": [PY, "-c", code], "memory_max": 64 << 20},
    )
    rec = daemon.wait_exit(run["run"], 30)
    assert rec["outcome"] == "signaled" and rec["signal"] == "SIGKILL" and rec["oom"] is True
    assert rec["memory_peak_kib"] >= 32 << 10


# -- crash safety and neighbours ----------------------------------------------------------------
def serve_on(sock: str, log: Path, config: Path | None = None) -> Daemon:
    args = [PY, "-m", "venomx", "serve", "--socket", sock, "--log-level", "debug"]
    if config is not None:
        args += ["--config", str(config)]
    env = {k: v for k, v in os.environ.items() if not k.startswith("VENOMX_")}
    with open(log, "ab") as logf:
        proc = subprocess.Popen(
            args, stdout=subprocess.DEVNULL, stderr=logf, start_new_session=True, env=env
        )
    wait_listening(proc, sock, log)
    return Daemon(sock, proc, log)


@needs_cgroups
def test_next_start_on_the_socket_ends_what_a_killed_daemon_left(
    tmp: Path, left: list[int]
) -> None:
    sock, log = str(tmp / "s.sock"), tmp / "d.log"
    first = serve_on(sock, log)
    try:
        rec = completed(first, escapee(tmp / "e", keep_env=False))
        pid = pid_in(tmp / "e")
        left.append(pid)
        assert rec["cleanup"]["escapees"] == 1
        os.kill(first.proc.pid, signal.SIGKILL)
        first.proc.wait(5)
        assert alive(pid)  # kill -9 of the daemon ends nothing by itself
    finally:
        stop_daemon(first)
    second = serve_on(sock, log)
    try:
        finished(pid)
        info = second.call("doctor")["cgroups"]
        assert info["recovered"]["cgroups"] == 1 and info["recovered"]["processes"] == 1, info
        check = next(c for c in second.call("doctor")["checks"] if c["name"] == "cgroups")
        assert "ended 1 leftover cgroups (1 processes)" in check["detail"]
    finally:
        stop_daemon(second)


@needs_cgroups
def test_a_start_removes_what_gone_daemons_left_empty(tmp: Path) -> None:
    """A daemon killed with -9 on a socket never used again leaves its subtree, its leaf
    and its panes' cgroups (some with cgroups their programs made below): with no process
    anywhere in it, the next daemon to start beside it removes all of it. One with a
    process in it is a live daemon's, or holds what its next start must end: kept."""
    assert HERE.directory is not None
    tag = uuid.uuid4().hex[:8]
    gone = Path(HERE.directory, f"venomx-test{tag}")
    for sub in ("daemon", f"{tag}.p0/x/y", f"{tag}.p0/z", f"{tag}.p1"):
        (gone / sub).mkdir(parents=True)
    busy = Path(HERE.directory, f"venomx-test{tag}b")
    (busy / "p0").mkdir(parents=True)
    sleeper = subprocess.Popen(["sleep", "60"])
    try:
        (busy / "p0" / "cgroup.procs").write_text(str(sleeper.pid))
        d = start_daemon()
        try:
            assert d.call("doctor")["cgroups"]["active"]
            assert not gone.exists()
            assert (busy / "p0").exists()
        finally:
            stop_daemon(d)
    finally:
        sleeper.kill()
        sleeper.wait()
        wait_for(lambda: not members(str(busy)), 5, "the test cgroup to empty")
        for top in (busy, gone):
            for root, _, _ in os.walk(top, topdown=False):  # cgroups: no files to remove
                os.rmdir(root)


@needs_cgroups
def test_two_daemons_side_by_side_never_touch_each_others(tmp: Path, left: list[int]) -> None:
    a, b = start_daemon(), start_daemon()
    try:
        ra = completed(a, escapee(tmp / "a", keep_env=False))
        rb = completed(b, escapee(tmp / "b", keep_env=False))
        pa, pb = pid_in(tmp / "a"), pid_in(tmp / "b")
        left.extend([pa, pb])
        assert ra["pane"] == rb["pane"]  # the same pane ID in each, and separate cgroups
        assert cgroup_of(pa) != cgroup_of(pb)
        assert a.call("run.cleanup", {"run": ra["run"]})["ended"] == 1
        finished(pa)
        assert alive(pb)
        assert b.call("doctor")["escapees"]["pids"] == {rb["pane"]: [pb]}
        stop_daemon(a)
        assert alive(pb)
    finally:
        stop_daemon(a)
        stop_daemon(b)
    wait_for(lambda: not alive(pb), 5, "b's escapee to end at b's shutdown")


@needs_cgroups
def test_required_mode_starts_with_a_writable_hierarchy(tmp: Path) -> None:
    d = start_daemon(config='cgroups = "required"\n')
    try:
        info = d.call("doctor")["cgroups"]
        assert info["mode"] == "required" and info["active"] is True
        assert completed(d, "true")["cleanup"] == {"verified": True, "escapees": 0}
    finally:
        stop_daemon(d)


def test_config_key_is_checked_and_applies_at_next_start(daemon: Daemon) -> None:
    err = daemon.error("config.set", {"path": "cgroups", "value": '"maybe"'})
    assert err.code == "invalid_params.config"
    assert 'one of "auto", "required", "off"' in err.message
    daemon.call("config.set", {"path": "cgroups", "value": '"off"'})
    info = daemon.call("doctor")["cgroups"]
    assert info["configured"] == "off" and info["mode"] == "auto"


# -- without cgroups -------------------------------------------------------------------------
def test_off_counts_escapees_by_environment_only(off: Daemon, tmp: Path, left: list[int]) -> None:
    info = off.call("doctor")["cgroups"]
    assert info["active"] is False and info["why"] == 'cgroups = "off"'
    rec = completed(off, escapee(tmp / "kept"))
    left.append(pid_in(tmp / "kept"))
    assert rec["cleanup"] == {"verified": False, "escapees": 1}
    hidden = completed(off, escapee(tmp / "hidden", keep_env=False))
    left.append(pid_in(tmp / "hidden"))
    assert hidden["cleanup"] == {"verified": False, "escapees": 0}  # only a cgroup sees it
    assert "cgroup_cpu_usec" not in rec
    out = off.call("run.cleanup", {"run": rec["run"], "grace_ms": 500})
    assert out["ended"] == 1 and out["remaining"] == 0
    # ended: it is exiting (its memory, and so its VENOMX_PANE, already gone); the process
    # itself may take a moment more to be a zombie and be reaped
    wait_for(lambda: not alive(pid_in(tmp / "kept")), 10, "the ended escapee gone")
    assert alive(pid_in(tmp / "hidden"))
    assert completed(off, "true")["cleanup"] == {"verified": False, "escapees": 0}


def test_off_exits_that_settle_together_count_their_own_escapees(
    off: Daemon, tmp: Path, left: list[int]
) -> None:
    """The daemon lists its adopted orphans once per reactor turn; a burst's exits settle
    a few per turn, and each must still find exactly its own pane's escapee. Each escapee
    is the leader's child until the leader exits (it is re-parented to the daemon then),
    and the runs exit in two waves: a listing kept from the first wave misses the second."""
    lines = []
    for i in range(8):
        mine = tmp / f"e{i}"
        stay = f"setsid /bin/sh -c 'echo $$ > {mine}; exec /bin/sleep 300' </dev/null >/dev/null 2>&1 &"
        ready = f"{settled(mine)}; " if i % 2 == 0 else ""
        wave = tmp / f"go{i // 4}"
        lines.append(
            (stay if i % 2 == 0 else "") + f"{ready}while [ ! -e {wave} ]; do sleep 0.01; done"
        )
    s = off.call("session.create", {})["session"]
    runs = off.start_runs(
        [{"key": f"k{i}", "session": s, "shell": ln} for i, ln in enumerate(lines)]
    )
    wait_for(lambda: all(written(tmp / f"e{i}") for i in range(0, 8, 2)), 20, "escapees")
    left.extend(pid_in(tmp / f"e{i}") for i in range(0, 8, 2))
    recs = []
    for w in range(2):
        (tmp / f"go{w}").touch()
        recs += [off.wait_exit(r, 20) for r in runs[4 * w : 4 * w + 4]]
    assert [r["cleanup"] for r in recs] == [
        {"verified": False, "escapees": 1 if i % 2 == 0 else 0} for i in range(8)
    ]


def test_off_a_lost_sentinels_pane_counts_its_escapee(
    off: Daemon, tmp: Path, left: list[int]
) -> None:
    """A killed sentinel's leader is reaped by the daemon itself; the escapee the leader
    leaves is re-parented only then, and the record still counts it."""
    mine = tmp / "e"
    stay = f"setsid /bin/sh -c 'echo $$ > {mine}; exec /bin/sleep 300' </dev/null >/dev/null 2>&1 &"
    r = start_run(off, f"{stay} {settled(mine)}; touch {mine}.ok; sleep 30")
    wait_for(lambda: Path(f"{mine}.ok").exists(), 20, "the escapee")
    left.append(pid_in(mine))
    sentinel = int(Path(f"/proc/{r['pid']}/stat").read_text().rsplit(")", 1)[1].split()[1])
    os.kill(sentinel, signal.SIGKILL)
    rec = off.wait_exit(r["run"], 20)
    assert rec["fault"] == "sentinel_lost", rec
    assert rec["cleanup"] == {"verified": False, "escapees": 1}
    assert alive(pid_in(mine))


# -- as another uid, on a delegated subtree -----------------------------------------------------
def nobody_python() -> list[str] | None:
    """A Python uid 65534 can execute with this checkout and its packages importable: ours,
    or the system's of the same version when ours lives where that uid cannot reach."""
    site = [p for p in sys.path if p.endswith("site-packages")]
    env = {"PYTHONPATH": os.pathsep.join([str(ROOT), *site])}
    for exe in (PY, f"/usr/bin/python{sys.version_info[0]}.{sys.version_info[1]}"):
        probe = ["env", f"PYTHONPATH={env['PYTHONPATH']}", exe, "-c", "import psutil, venomx"]
        try:
            ok = subprocess.run(
                ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups", *probe],
                cwd="/tmp",
                capture_output=True,
                timeout=30,
            )
        except (OSError, subprocess.TimeoutExpired):
            continue
        if ok.returncode == 0:
            return ["env", f"PYTHONPATH={env['PYTHONPATH']}", exe]
    return None


def as_nobody(
    sock_dir: Path, cgroup: str | None, config: str
) -> tuple[subprocess.Popen[bytes], Path]:
    """A daemon of uid 65534 started inside ``cgroup`` (root puts it there, then drops)."""
    os.chown(sock_dir, NOBODY, NOBODY)
    cfg = sock_dir / "config.toml"
    cfg.write_text(config)
    os.chown(cfg, NOBODY, NOBODY)
    sock, log = str(sock_dir / "s.sock"), sock_dir / "d.log"
    setpriv = shutil.which("setpriv")
    assert setpriv is not None
    python = nobody_python()
    assert python is not None
    serve = [*python, "-m", "venomx", "serve", "--socket", sock, "--config", str(cfg)]
    drop = [setpriv, f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups", *serve]
    line = 'echo $$ > "$0"/cgroup.procs && exec "$@"' if cgroup else 'exec "$@"'
    env = {k: v for k, v in os.environ.items() if not k.startswith("VENOMX_")}
    env.update(HOME="/nonexistent", XDG_CONFIG_HOME="/nonexistent")
    with open(log, "wb") as logf:
        proc = subprocess.Popen(
            ["/bin/sh", "-c", line, cgroup or "-", *drop],
            stdout=subprocess.DEVNULL,
            stderr=logf,
            start_new_session=True,
            env=env,
            cwd="/tmp",
        )
    return proc, log


CAN_DROP = shutil.which("setpriv") is not None and os.geteuid() == 0
nobody = pytest.mark.skipif(
    not CAN_DROP or not WRITABLE or nobody_python() is None,
    reason="needs root, setpriv, a Python uid 65534 can run and a writable cgroup v2 "
    "hierarchy to delegate a subtree",
)


@pytest.fixture
def delegated() -> Iterator[str]:
    """A cgroup of our hierarchy handed to uid 65534 as systemd's Delegate=yes does."""
    assert HERE.directory is not None
    d = os.path.join(HERE.directory, f"vxtest-{uuid.uuid4().hex[:8]}")
    os.mkdir(d)
    for name in ("", "cgroup.procs", "cgroup.subtree_control", "cgroup.threads"):
        os.chown(os.path.join(d, name), NOBODY, NOBODY)
    try:
        yield d
    finally:
        for root, dirs, _ in os.walk(d, topdown=False):
            for sub in dirs:
                path = os.path.join(root, sub)
                try:
                    with open(os.path.join(path, "cgroup.kill"), "w") as f:
                        f.write("1")
                except OSError:
                    pass
                wait_for(lambda p=path: not members(p), 5, "the test cgroup to empty")  # type: ignore[misc]
                os.rmdir(path)
        wait_for(lambda: not members(d), 5, "the test cgroup to empty")
        os.rmdir(d)


def nobody_call(sock: str, verb: str, params: dict[str, Any] | None = None) -> Any:
    """One request as uid 65534 (the daemon serves its own uid only): result or error."""
    python = nobody_python()
    assert python is not None
    code = (
        "import json, sys\n"
        "from venomx.client import Client\n"
        "from venomx.wire import VenomxError\n"
        "try:\n"
        "    with Client(sys.argv[1], '@owner') as c:\n"
        "        print(json.dumps(c.call(sys.argv[2], json.loads(sys.argv[3]))))\n"
        "except VenomxError as e:\n"
        "    print(json.dumps({'error': e.code}))\n"
    )
    drop = ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups"]
    out = subprocess.run(
        [*drop, *python, "-c", code, sock, verb, json.dumps(params or {})],
        capture_output=True,
        text=True,
        timeout=30,
        cwd="/tmp",
    )
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def nobody_daemon(tmp: Path, cgroup: str | None, config: str) -> subprocess.Popen[bytes]:
    proc, log = as_nobody(tmp, cgroup, config)
    sock = str(tmp / "s.sock")

    def ready() -> bool:
        if proc.poll() is not None:
            raise AssertionError("daemon exited: " + log.read_text())
        return os.path.exists(sock) and "error" not in nobody_call(sock, "whoami")

    wait_for(ready, 20, "the daemon of uid 65534")
    return proc


def end_nobody(proc: subprocess.Popen[bytes], sock: str) -> None:
    if proc.poll() is None:
        nobody_call(sock, "shutdown")
        proc.wait(10)


@nobody
def test_another_uid_on_a_delegated_subtree(delegated: str, left: list[int]) -> None:
    tmp = Path(tempfile.mkdtemp(prefix="vx", dir="/tmp"))
    sock = str(tmp / "s.sock")
    proc = nobody_daemon(tmp, delegated, 'cgroups = "required"\n')
    try:
        info = nobody_call(sock, "doctor")["cgroups"]
        assert info["active"] is True and info["cgroup"].startswith(delegated), info
        path = Path("/tmp") / f"vx-nobody-{uuid.uuid4().hex}"
        s = nobody_call(sock, "session.create")["session"]
        line = escapee(path, keep_env=False)
        run = nobody_call(sock, "run", {"key": "e", "session": s, "shell": line})
        rec = nobody_call(sock, "run.wait", {"run": run["run"], "timeout_ms": 10000})
        pid = pid_in(path)
        left.append(pid)
        path.unlink()
        assert rec["cleanup"] == {"verified": False, "escapees": 1}
        assert os.stat(f"/proc/{pid}").st_uid == NOBODY
        assert cgroup_of(pid).startswith(cgroup_of(proc.pid).rsplit("/", 1)[0])
        out = nobody_call(sock, "run.cleanup", {"run": run["run"], "grace_ms": 200})
        assert out["ended"] == 1 and out["remaining"] == 0
        finished(pid)
    finally:
        end_nobody(proc, sock)
        shutil.rmtree(tmp, ignore_errors=True)


@nobody
def test_another_uid_without_delegation(tmp: Path) -> None:
    """The hierarchy's root is not the uid's: auto runs without cgroups and says why,
    required refuses to start."""
    auto_dir = Path(tempfile.mkdtemp(prefix="vx", dir="/tmp"))
    sock = str(auto_dir / "s.sock")
    proc = nobody_daemon(auto_dir, None, 'cgroups = "auto"\n')
    try:
        info = nobody_call(sock, "doctor")["cgroups"]
        assert info["active"] is False and "not delegated" in info["why"], info
    finally:
        end_nobody(proc, sock)
        shutil.rmtree(auto_dir, ignore_errors=True)
    proc, log = as_nobody(tmp, None, 'cgroups = "required"\n')
    assert proc.wait(15) == 10
    assert "unsupported.cgroups" in log.read_text()


# -- venomx exec ------------------------------------------------------------------------------
@needs_cgroups
def test_exec_ends_what_its_command_left_unless_asked_not_to(
    daemon: Daemon, tmp: Path, left: list[int]
) -> None:
    done = daemon.cli("exec", "--json", "--", "/bin/sh", "-c", escapee(tmp / "a", keep_env=False))
    pid = pid_in(tmp / "a")
    left.append(pid)
    assert done.code == 0, done.err
    assert done.json["cleanup"] == {"verified": False, "escapees": 1}
    assert "ended 1 processes" in done.err
    finished(pid)
    kept = daemon.cli(
        "exec", "--keep-escapees", "--", "/bin/sh", "-c", escapee(tmp / "b", keep_env=False)
    )
    pid = pid_in(tmp / "b")
    left.append(pid)
    assert kept.code == 0 and "ended" not in kept.err
    assert alive(pid)
