"""The daemon's CPU priority (``venomx.daemon.priority``): its own session's autogroup at
``daemon.nice`` where the host permits it, never a pane's, never a shared session's."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

import psutil
import pytest

from tests.helpers import (
    PY,
    Daemon,
    forkserver_pid,
    spare_pool,
    start_daemon,
    stop_daemon,
    wait_for,
    wait_listening,
)
from venomx.daemon.priority import autogroup_nice

HAS_AUTOGROUP = os.path.exists("/proc/self/autogroup")


def in_new_session(body: Callable[[], str]) -> str | None:
    """What ``body`` returns, run in a child in a session (so an autogroup) of its own;
    None if it raised."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            os.close(r)
            os.setsid()
            os.write(w, body().encode())
            code = 0
        finally:
            os._exit(code)
    os.close(w)
    with os.fdopen(r, "rb") as f:
        out = f.read().decode()
    _, status = os.waitpid(pid, 0)
    return out if os.waitstatus_to_exitcode(status) == 0 else None


def may_raise(nice: int) -> bool:
    """Whether a process of ours alone in a new session may set its autogroup to ``nice``
    (asked of the kernel: root, CAP_SYS_NICE or RLIMIT_NICE decide)."""

    def ask() -> str:
        with open("/proc/self/autogroup", "w") as f:
            f.write(str(nice))
        return ""

    return in_new_session(ask) is not None


def priority(d: Daemon) -> dict[str, object]:
    doc = d.call("doctor")
    check = next(c for c in doc["checks"] if c["name"] == "priority")
    assert check["status"] == "ok"  # it says what it is; it is never a fault
    assert check["detail"] == doc["priority"]["detail"]
    return dict(doc["priority"])


@pytest.mark.skipif(not HAS_AUTOGROUP, reason="a kernel without autogroups")
def test_the_daemon_raises_its_own_session_and_no_pane_inherits_it(daemon: Daemon) -> None:
    expected = -5 if may_raise(-5) else 0
    assert autogroup_nice(daemon.proc.pid) == expected
    p = priority(daemon)
    assert p["asked"] == -5 and p["autogroup_nice"] == expected
    if expected:
        assert p["detail"] == "autogroup nice -5"
    else:
        assert str(p["detail"]).startswith("not permitted"), p
    # Once it serves (its spares have said HELLO) the fork server has its own session.
    wait_for(lambda: (p := spare_pool(daemon))[0] == p[1], 20, "a full spare pool")
    assert autogroup_nice(forkserver_pid(daemon.call("doctor"))) == 0
    s = daemon.call("session.create")["session"]
    w = daemon.call("window.create", {"session": s, "argv": ["sleep", "60"]})
    leader = w["pid"]
    assert autogroup_nice(leader) == 0
    assert autogroup_nice(psutil.Process(leader).ppid()) == 0  # its sentinel


@pytest.mark.skipif(not HAS_AUTOGROUP, reason="a kernel without autogroups")
def test_daemon_nice_applies_at_once_and_zero_puts_it_back() -> None:
    d = start_daemon(config="[daemon]\nnice = 0\n")
    try:
        assert autogroup_nice(d.proc.pid) == 0
        assert priority(d) == {"asked": 0, "autogroup_nice": 0, "detail": "autogroup nice 0"}
        permitted = may_raise(-3)
        d.call("config.set", {"path": "daemon.nice", "value": "-3"})
        # may_raise's own change counts against the kernel's one per 100 ms: a retry
        want = -3 if permitted else 0
        wait_for(lambda: autogroup_nice(d.proc.pid) == want, 5, "the autogroup at -3")
        assert priority(d)["autogroup_nice"] == (-3 if permitted else 0)
        d.call("config.set", {"path": "daemon.nice", "value": "0"})
        # Back to 0 once raised; the kernel may ask an unprivileged caller to retry.
        wait_for(lambda: autogroup_nice(d.proc.pid) == 0, 5, "the autogroup back at 0")
        assert priority(d)["autogroup_nice"] == 0
    finally:
        stop_daemon(d)


@pytest.mark.skipif(not HAS_AUTOGROUP, reason="a kernel without autogroups")
def test_a_daemon_that_shares_its_session_leaves_the_autogroup_alone(tmp: Path) -> None:
    sock, log = tmp / "s.sock", tmp / "daemon.log"
    # A session like a shell's: another process in it beside the daemon.
    script = "sleep 600 & exec " + " ".join([PY, "-m", "venomx", "serve", "--socket", str(sock)])
    with open(log, "wb") as logf:
        proc = subprocess.Popen(["sh", "-c", script], stderr=logf, start_new_session=True, cwd=tmp)
    d = Daemon(str(sock), proc, log)
    try:
        wait_listening(proc, str(sock), log)
        assert autogroup_nice(proc.pid) == 0
        p = priority(d)
        assert p["autogroup_nice"] == 0
        assert "shares its session" in str(p["detail"]), p
    finally:
        stop_daemon(d)  # the session's group: the sleep goes with it


@pytest.mark.skipif(
    not HAS_AUTOGROUP or shutil.which("setpriv") is None or os.geteuid() != 0,
    reason="as root without CAP_SYS_NICE (unprivileged, the first test sees this case)",
)
def test_without_the_right_the_daemon_says_so_and_serves(tmp: Path) -> None:
    setpriv = shutil.which("setpriv")
    assert setpriv is not None
    # root with RLIMIT_NICE 0 and no CAP_SYS_NICE: like any unprivileged user here
    d = start_daemon(wrap=[setpriv, "--bounding-set", "-sys_nice"])
    try:
        assert d.call("whoami")["principal"] == "g0"
        assert autogroup_nice(d.proc.pid) == 0
        p = priority(d)
        assert p["autogroup_nice"] == 0 and p["asked"] == -5
        assert str(p["detail"]).startswith("not permitted"), p
        assert "daemon priority: not permitted" in d.log.read_text()
    finally:
        stop_daemon(d)


def keep_only_sys_nice_as_nobody() -> None:
    """In a child of root: become uid 65534 holding CAP_SYS_NICE alone, as a unit's
    ``AmbientCapabilities=CAP_SYS_NICE`` would leave a daemon (no root, no other right)."""
    import ctypes

    from workers import prctl

    pr_set_keepcaps, cap_sys_nice, version_3 = 8, 23, 0x20080522
    prctl._prctl(pr_set_keepcaps, 1)
    os.setgroups([])
    os.setgid(65534)
    os.setuid(65534)

    class Header(ctypes.Structure):
        _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]

    class Data(ctypes.Structure):
        _fields_ = [(n, ctypes.c_uint32) for n in ("effective", "permitted", "inheritable")]

    bit = 1 << cap_sys_nice
    data = (Data * 2)(Data(bit, bit, 0), Data(0, 0, 0))
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.capset(ctypes.byref(Header(version_3, 0)), data) != 0:
        raise OSError(ctypes.get_errno(), "capset")
    # Changing uid left us undumpable; an exec'd daemon of its own uid starts dumpable.
    prctl._prctl(prctl.PR_SET_DUMPABLE, 1)


def as_unprivileged_user(open_first: bool) -> tuple[int, str]:
    """In a child: a session of its own, uid 65534 with CAP_SYS_NICE, dumpable as a
    freshly exec'd daemon is; then ``Priority`` opened before (``open_first``) or after
    the child makes itself undumpable, as the daemon does, and -5 asked for. Returns (the
    autogroup's nice, the detail)."""
    from venomx.daemon.priority import Priority
    from workers import prctl

    def child() -> str:
        keep_only_sys_nice_as_nobody()
        p = Priority()
        if open_first:
            p.open()
        prctl.set_undumpable()
        if not open_first:
            p.open()

        def done() -> bool:  # another process's change within 100 ms: EAGAIN
            p.apply(-5)
            return "EAGAIN" not in p.detail

        wait_for(done, 5, "the kernel to take the change")
        return f"{autogroup_nice()}\n{p.detail}"

    out = in_new_session(child)
    assert out is not None, "the child failed"
    nice, detail = out.split("\n", 1)
    return int(nice), detail


@pytest.mark.skipif(
    not HAS_AUTOGROUP or os.geteuid() != 0, reason="needs root to become another uid"
)
def test_a_daemon_of_another_uid_with_cap_sys_nice_raises_it_though_undumpable() -> None:
    # Undumpable, a process's /proc files belong to root: opened first, the autogroup's
    # file still takes the write, which the kernel checks against the capability.
    assert as_unprivileged_user(open_first=True) == (-5, "autogroup nice -5")
    nice, detail = as_unprivileged_user(open_first=False)
    assert nice == 0
    assert detail == "cannot open /proc/self/autogroup: EACCES", detail
