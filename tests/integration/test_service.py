"""venomx under systemd (issue 17 §6): readiness and stopping sent to a NOTIFY_SOCKET the
test listens on, socket activation with a socket the test binds and passes as fd 3 (and
the same trust checks as for a socket serve binds itself), no NOTIFY_SOCKET or LISTEN_*
in any pane, and the shipped units as systemd-analyze sees them."""

from __future__ import annotations

import fcntl
import json
import os
import select
import shutil
import signal
import socket
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers import PY, ROOT, Daemon, stop_daemon, wait_for, wait_listening
from venomx.client import Client

NOBODY = 65534
UNITS = ROOT / "contrib" / "systemd"
SYSTEMD_VARS = ("NOTIFY_SOCKET", "LISTEN_PID", "LISTEN_FDS", "LISTEN_FDNAMES")
# LISTEN_PID must be the daemon's own pid: the wrapper moves the passed socket to fd 3,
# sets LISTEN_PID to its own pid and execs the daemon, as systemd does after its fork.
# (Not sh: dash redirects only descriptors 0-9.)
WRAPPER = (
    "import os, sys\n"
    "fd = int(sys.argv[1])\n"
    "os.dup2(fd, 3)\n"
    "os.close(fd)\n"
    "os.environ['LISTEN_PID'] = str(os.getpid())\n"
    "os.execv(sys.argv[2], sys.argv[2:])\n"
)


def wrapped(fd: int, command: list[str]) -> list[str]:
    """``command`` (an absolute path first) run with ``fd`` as its fd 3 and LISTEN_PID."""
    return [PY, "-c", WRAPPER, str(fd), *command]


def clean_env(**extra: str) -> dict[str, str]:
    e = {
        k: v for k, v in os.environ.items() if not k.startswith("VENOMX_") and k not in SYSTEMD_VARS
    }
    e.update(extra)
    return e


def serve_args(sock: Path) -> list[str]:
    return [PY, "-m", "venomx", "serve", "--socket", str(sock), "--log-level", "debug"]


def listening(path: Path, mode: int = 0o600, kind: int = socket.SOCK_STREAM) -> socket.socket:
    """A socket as systemd's socket unit makes it: bound (0600 from birth), then listening."""
    s = socket.socket(socket.AF_UNIX, kind)
    old = os.umask(0o177)
    try:
        s.bind(str(path))
    finally:
        os.umask(old)
    os.chmod(path, mode)
    if kind == socket.SOCK_STREAM:
        s.listen(16)
    return s


def activate(
    fd: int, sock: Path, log: Path, fds: str = "1", **extra: str
) -> subprocess.Popen[bytes]:
    """Start `venomx serve --socket SOCK` with ``fd`` as its fd 3 and LISTEN_* for it."""
    high = fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 10)
    try:
        with open(log, "wb") as logf:
            return subprocess.Popen(
                wrapped(high, serve_args(sock)),
                pass_fds=(high,),
                stdout=subprocess.DEVNULL,
                stderr=logf,
                start_new_session=True,
                env=clean_env(LISTEN_FDS=fds, LISTEN_FDNAMES="venomx.socket", **extra),
                cwd=log.parent,
            )
    finally:
        os.close(high)


def refused_start(proc: subprocess.Popen[bytes], log: Path, words: str) -> None:
    """The daemon refused to start: exit 2, one clear line naming the problem."""
    try:
        code = proc.wait(20)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        raise AssertionError("serve did not refuse: it started serving") from None
    lines = log.read_text().splitlines()
    assert code == 2, (code, lines)
    assert len(lines) == 1, lines  # one line, no traceback
    assert lines[0].startswith("venomx: invalid_params.socket: "), lines[0]
    assert words in lines[0], lines[0]


def pane_env(d: Daemon, tmp: Path) -> dict[str, str]:
    """The environment a program in a new pane of ``d`` starts with."""
    out = tmp / "pane.env"
    s = d.call("session.create")["session"]
    script = f"env -0 > {out}.part && mv {out}.part {out}"
    d.call("window.create", {"session": s, "argv": ["sh", "-c", script]})
    wait_for(out.exists, 10, "the pane's environment")
    pairs = (item.split("=", 1) for item in out.read_text().split("\0") if item)
    return {k: v for k, v in pairs}


@pytest.fixture
def notify(tmp: Path) -> Iterator[tuple[socket.socket, str]]:
    """A datagram socket standing in for systemd's notify socket, and its NOTIFY_SOCKET."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    s.bind(str(tmp / "notify"))
    s.settimeout(15)
    try:
        yield s, str(tmp / "notify")
    finally:
        s.close()


def message(s: socket.socket) -> dict[str, str]:
    """The next notification, as its fields."""
    data = s.recv(4096).decode()
    return dict(line.split("=", 1) for line in data.splitlines())


# -- Type=notify --------------------------------------------------------------------------------


@pytest.mark.parametrize("where", ["path", "abstract"])
def test_ready_once_accepting_and_stopping_at_shutdown(tmp: Path, where: str) -> None:
    receiver = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    if where == "path":
        receiver.bind(str(tmp / "notify"))
        address = str(tmp / "notify")
    else:
        name = f"venomx-test-{uuid.uuid4().hex}"
        receiver.bind("\0" + name)
        address = "@" + name
    receiver.settimeout(15)
    sock, log = tmp / "s.sock", tmp / "daemon.log"
    with receiver, open(log, "wb") as logf:
        proc = subprocess.Popen(
            serve_args(sock),
            stdout=subprocess.DEVNULL,
            stderr=logf,
            start_new_session=True,
            env=clean_env(NOTIFY_SOCKET=address),
            cwd=tmp,
        )
        d = Daemon(str(sock), proc, log)
        try:
            ready = message(receiver)
            # no retry: READY=1 promises the socket accepts connections now
            with Client(str(sock), "@owner") as c:
                assert c.call("whoami")["principal"] == "g0"
            assert ready["READY"] == "1"
            assert ready["MAINPID"] == str(proc.pid)
            assert str(sock) in ready["STATUS"]
            d.call("shutdown")
            assert message(receiver)["STOPPING"] == "1"
            assert proc.wait(10) == 0
        finally:
            stop_daemon(d)


def test_stopping_on_sigterm(tmp: Path, notify: tuple[socket.socket, str]) -> None:
    receiver, address = notify
    sock, log = tmp / "s.sock", tmp / "daemon.log"
    with open(log, "wb") as logf:
        proc = subprocess.Popen(
            serve_args(sock),
            stdout=subprocess.DEVNULL,
            stderr=logf,
            start_new_session=True,
            env=clean_env(NOTIFY_SOCKET=address),
            cwd=tmp,
        )
    d = Daemon(str(sock), proc, log)
    try:
        assert message(receiver)["READY"] == "1"
        proc.send_signal(signal.SIGTERM)
        assert message(receiver)["STOPPING"] == "1"
        assert proc.wait(10) == 0
    finally:
        stop_daemon(d)


def test_refused_start_tells_the_manager_why(tmp: Path, notify: tuple[socket.socket, str]) -> None:
    receiver, address = notify
    (tmp / "s.sock").mkdir()  # something else is in the way
    r = subprocess.run(
        serve_args(tmp / "s.sock"),
        capture_output=True,
        text=True,
        env=clean_env(NOTIFY_SOCKET=address),
        timeout=20,
        cwd=tmp,
    )
    assert r.returncode == 2, r.stderr
    got = message(receiver)
    assert "READY" not in got
    assert got["STATUS"].startswith("cannot start: ") and "directory" in got["STATUS"]


def test_unusable_notify_socket_is_logged_and_serving_goes_on(tmp: Path) -> None:
    sock, log = tmp / "s.sock", tmp / "daemon.log"
    with open(log, "wb") as logf:
        proc = subprocess.Popen(
            serve_args(sock),
            stdout=subprocess.DEVNULL,
            stderr=logf,
            start_new_session=True,
            env=clean_env(NOTIFY_SOCKET=str(tmp / "nobody-listens")),
            cwd=tmp,
        )
    d = Daemon(str(sock), proc, log)
    try:
        wait_listening(proc, str(sock), log)
        assert d.call("whoami")["principal"] == "g0"
        assert "cannot notify the service manager (READY=1)" in log.read_text()
    finally:
        stop_daemon(d)


def test_no_pane_sees_notify_socket_or_listen_variables(
    tmp: Path, notify: tuple[socket.socket, str]
) -> None:
    """Variables meant for the daemon (and LISTEN_* meant for another process) are gone
    from the daemon's environment before any pane is started."""
    receiver, address = notify
    sock, log = tmp / "s.sock", tmp / "daemon.log"
    e = clean_env(
        NOTIFY_SOCKET=address, LISTEN_PID="1", LISTEN_FDS="1", LISTEN_FDNAMES="x", KEEP="kept"
    )
    with open(log, "wb") as logf:
        proc = subprocess.Popen(
            serve_args(sock),
            stdout=subprocess.DEVNULL,
            stderr=logf,
            start_new_session=True,
            env=e,
            cwd=tmp,
        )
    d = Daemon(str(sock), proc, log)
    try:
        assert message(receiver)["READY"] == "1"
        got = pane_env(d, tmp)
        assert got["KEEP"] == "kept"  # the daemon's environment does reach panes
        assert [k for k in SYSTEMD_VARS if k in got] == []
    finally:
        stop_daemon(d)


# -- socket activation --------------------------------------------------------------------------


def test_activated_daemon_serves_the_passed_socket(
    tmp: Path, notify: tuple[socket.socket, str]
) -> None:
    receiver, address = notify
    path, log = tmp / "s.sock", tmp / "daemon.log"
    passed = listening(path)
    ino = path.stat().st_ino
    # a client that connects before the daemon exists waits in the backlog, not refused
    early = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    early.connect(str(path))
    early.sendall(b'{"id":0,"verb":"hello","params":{"protocol":1,"token":"@owner"}}\n')
    proc = activate(passed.fileno(), path, log, NOTIFY_SOCKET=address)
    d = Daemon(str(path), proc, log)
    try:
        early.settimeout(15)
        assert json.loads(early.makefile("rb").readline())["ok"]["principal"] == "g0"
        assert message(receiver)["READY"] == "1"
        assert path.stat().st_ino == ino  # served, not replaced
        assert "activated=systemd" in log.read_text()
        r = d.cli("doctor", "--json")
        checks = {c["name"]: c for c in r.json["checks"]}
        assert checks["socket"]["status"] == "ok", checks["socket"]
        got = pane_env(d, tmp)
        assert [k for k in SYSTEMD_VARS if k in got] == []
        d.call("shutdown")
        assert proc.wait(10) == 0
        # the socket file is the socket unit's: it stays, and still queues connections
        assert path.stat().st_ino == ino
        again = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        again.connect(str(path))
        again.close()
    finally:
        early.close()
        stop_daemon(d)
        passed.close()


def test_exec_that_woke_an_activated_daemon_follows_it_to_its_own_address(tmp: Path) -> None:
    # exec's first connection waits in the socket unit's queue (SO_PEERCRED: the manager,
    # here this test); the daemon then binds its abstract address, where exec's later
    # connections go (SO_PEERCRED: the daemon). Both serve one source: neither is an
    # impostor while the other lives.
    path, log = tmp / "s.sock", tmp / "daemon.log"
    passed = listening(path)
    proc = subprocess.Popen(
        [PY, "-m", "venomx", "exec", "--", "sh", "-c", "echo hi; exit 3"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        env=clean_env(VENOMX_SOCKET=str(path)),
    )
    d: Daemon | None = None
    try:
        wait_for(lambda: select.select([passed], [], [], 0)[0], 30, "exec to queue")
        daemon = activate(passed.fileno(), path, log)
        d = Daemon(str(path), daemon, log)
        out, err = proc.communicate(timeout=60)
        assert (proc.returncode, out) == (3, b"hi\n"), err
    finally:
        proc.kill()
        proc.wait()
        if d is not None:
            stop_daemon(d)
        passed.close()


def test_passed_socket_is_not_inherited_by_panes(tmp: Path) -> None:
    path, log = tmp / "s.sock", tmp / "daemon.log"
    passed = listening(path)
    proc = activate(passed.fileno(), path, log)
    d = Daemon(str(path), proc, log)
    try:
        wait_listening(proc, str(path), log)
        out = tmp / "fds"
        s = d.call("session.create")["session"]
        script = f"ls -l /proc/$$/fd > {out}.part; mv {out}.part {out}"
        d.call("window.create", {"session": s, "argv": ["sh", "-c", script]})
        wait_for(out.exists, 10, "the pane's descriptors")
        assert "socket:" not in out.read_text()
        flags = (Path(f"/proc/{proc.pid}/fdinfo/3").read_text().split("flags:")[1]).split()[0]
        assert int(flags, 8) & 0o2000000, "fd 3 is close-on-exec in the daemon"
    finally:
        stop_daemon(d)
        passed.close()


@pytest.mark.parametrize("mode", [0o666, 0o660, 0o606, 0o640])
def test_passed_socket_others_could_reach_is_refused(tmp: Path, mode: int) -> None:
    path, log = tmp / "s.sock", tmp / "daemon.log"
    passed = listening(path, mode)
    try:
        proc = activate(passed.fileno(), path, log)
        refused_start(proc, log, f"is reachable by group or others (mode {mode:04o})")
        assert path.exists()  # never removed
    finally:
        passed.close()


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to chown the socket to another uid")
def test_passed_socket_of_another_uid_is_refused(tmp: Path) -> None:
    path, log = tmp / "s.sock", tmp / "daemon.log"
    passed = listening(path)
    os.chown(path, NOBODY, NOBODY)
    try:
        proc = activate(passed.fileno(), path, log)
        refused_start(proc, log, f"is owned by uid {NOBODY}, not by uid 0")
        assert path.exists()
    finally:
        passed.close()


@pytest.mark.skipif(
    shutil.which("setpriv") is None or os.geteuid() != 0,
    reason="needs setpriv and root to act as another uid",
)
def test_passed_socket_of_root_is_refused_as_another_uid(tmp: Path) -> None:
    """A daemon of uid 65534 handed a socket file of root in its own directory."""
    os.chown(tmp, NOBODY, NOBODY)
    path, log = tmp / "s.sock", tmp / "daemon.log"
    passed = listening(path)
    high = fcntl.fcntl(passed.fileno(), fcntl.F_DUPFD_CLOEXEC, 10)
    e = clean_env(LISTEN_FDS="1", HOME="/nonexistent", XDG_CONFIG_HOME="/nonexistent")
    try:
        setpriv = shutil.which("setpriv")
        assert setpriv is not None
        # setpriv execs in place, so the daemon keeps the pid the wrapper put in LISTEN_PID
        as_nobody = [setpriv, f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups"]
        with open(log, "wb") as logf:
            proc = subprocess.Popen(
                wrapped(high, [*as_nobody, *serve_args(path)]),
                pass_fds=(high,),
                stdout=subprocess.DEVNULL,
                stderr=logf,
                start_new_session=True,
                env=e,
                cwd="/tmp",
            )
        refused_start(proc, log, f"is owned by uid 0, not by uid {NOBODY}")
        assert path.exists()
    finally:
        os.close(high)
        passed.close()


def test_passed_socket_that_is_not_listening_is_refused(tmp: Path) -> None:
    path, log = tmp / "s.sock", tmp / "daemon.log"
    idle = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        idle.bind(str(path))
        os.chmod(path, 0o600)
        refused_start(activate(idle.fileno(), path, log), log, "is not listening")
    finally:
        idle.close()


def test_passed_datagram_socket_is_refused(tmp: Path) -> None:
    path, log = tmp / "s.sock", tmp / "daemon.log"
    passed = listening(path, kind=socket.SOCK_DGRAM)
    try:
        refused_start(activate(passed.fileno(), path, log), log, "not a Unix stream socket")
    finally:
        passed.close()


def test_passed_socket_bound_elsewhere_is_refused(tmp: Path) -> None:
    log = tmp / "daemon.log"
    passed = listening(tmp / "other.sock")
    try:
        proc = activate(passed.fileno(), tmp / "s.sock", log)
        refused_start(proc, log, f"is bound at {tmp / 'other.sock'}, not at {tmp / 's.sock'}")
        assert not (tmp / "s.sock").exists()  # nothing bound in its place
    finally:
        passed.close()


def test_passed_file_that_is_not_a_socket_is_refused(tmp: Path) -> None:
    log = tmp / "daemon.log"
    (tmp / "file").write_text("")
    fd = os.open(tmp / "file", os.O_RDONLY | os.O_CLOEXEC)
    try:
        refused_start(activate(fd, tmp / "s.sock", log), log, "is a regular file, not a socket")
    finally:
        os.close(fd)


def test_more_than_one_passed_socket_is_refused(tmp: Path) -> None:
    path, log = tmp / "s.sock", tmp / "daemon.log"
    passed = listening(path)
    try:
        refused_start(activate(passed.fileno(), path, log, fds="2"), log, "2 sockets were passed")
    finally:
        passed.close()


# -- the shipped units --------------------------------------------------------------------------


def unit(name: str) -> dict[str, list[str]]:
    """``Key: [values]`` of a unit file (sections flattened; they do not repeat keys here)."""
    keys: dict[str, list[str]] = {}
    for line in (UNITS / name).read_text().splitlines():
        if "=" in line and not line.startswith(("#", ";", "[")):
            k, v = line.split("=", 1)
            keys.setdefault(k.strip(), []).append(v.strip())
    return keys


def test_units_say_what_the_daemon_needs() -> None:
    sock, service = unit("venomx.socket"), unit("venomx.service")
    assert sock["ListenStream"] == ["%t/venomx/default.sock"]  # venomx's default socket
    assert sock["SocketMode"] == ["0600"]
    assert service["Type"] == ["notify"]
    assert service["KillMode"] == ["mixed"]
    assert service["Delegate"] == ["yes"]
    (start,) = service["ExecStart"]
    assert start.split()[1:] == ["serve", "--socket", "%t/venomx/default.sock"]
    # shutdown ends within grace 2 s + kill-wait 1 s + 1 s (foundation §11); then a margin
    stop = service["TimeoutStopSec"][0]
    assert stop.endswith("s") and int(stop[:-1]) >= 4 + 5


@pytest.mark.skipif(
    shutil.which("systemd-analyze") is None,
    reason="systemd-analyze is not installed on this host (no systemd to verify against)",
)
def test_units_pass_systemd_analyze_verify(tmp: Path) -> None:
    """systemd-analyze also checks that ExecStart's program exists: the copies verified
    name this checkout's venomx instead of the bare name systemd looks up in /usr/bin."""
    venomx = Path(PY).parent / "venomx"
    assert venomx.exists(), venomx
    for name in ("venomx.socket", "venomx.service"):
        text = (UNITS / name).read_text()
        (tmp / name).write_text(text.replace("ExecStart=venomx ", f"ExecStart={venomx} "))
    runtime = tmp / "runtime"
    runtime.mkdir(mode=0o700)
    r = subprocess.run(
        [
            "systemd-analyze",
            "verify",
            "--user",
            str(tmp / "venomx.socket"),
            str(tmp / "venomx.service"),
        ],
        capture_output=True,
        text=True,
        cwd=tmp,
        env=clean_env(XDG_RUNTIME_DIR=str(runtime), SYSTEMD_PAGER="cat"),
        timeout=60,
    )
    ours = [line for line in (r.stdout + r.stderr).splitlines() if "venomx" in line]
    assert r.returncode == 0 and ours == [], (r.returncode, r.stdout, r.stderr)
