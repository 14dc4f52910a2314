"""Socket, log and config trust (issue 15 §1, §7): what `serve` refuses, and what it never
touches; the client's check of who is listening. Attacks run as uid 65534 via setpriv."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import signal
import socket
import stat
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers import MADE, PY, Daemon, running, start_daemon, stop_daemon, wait_for
from venomx import unixdiag
from venomx.aclient import AsyncClient
from venomx.client import Client
from venomx.paths import abstract_address
from venomx.wire import VenomxError

NOBODY = 65534
AS_NOBODY = ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups"]
needs_setpriv = pytest.mark.skipif(
    shutil.which("setpriv") is None or os.geteuid() != 0,
    reason="needs setpriv and root to act as another uid",
)
needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="needs root to chown")
TOKEN = "5e" * 32


def env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith("VENOMX_")}


def serve(
    *args: str, nobody: bool = False, e: dict[str, str] | None = None, timeout: float = 20
) -> subprocess.CompletedProcess[str]:
    """Run `venomx serve ARGS` expecting it to refuse (a start that serves is a failure)."""
    cmd = [*(AS_NOBODY if nobody else []), PY, "-m", "venomx", "serve", *args]
    e = dict(e or env())
    if nobody:
        e["HOME"] = e["XDG_CONFIG_HOME"] = "/nonexistent"
    p = subprocess.Popen(
        cmd,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=e,
        cwd="/tmp",
        start_new_session=True,
    )
    try:
        out, err = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        p.communicate()
        raise AssertionError("serve did not refuse: it started serving") from None
    return subprocess.CompletedProcess(cmd, p.returncode, out, err)


def refused(r: subprocess.CompletedProcess[str], code: str, words: str) -> None:
    assert r.returncode == 2, (r.returncode, r.stderr)
    lines = r.stderr.splitlines()
    assert len(lines) == 1, r.stderr  # one clear line, no traceback
    assert lines[0].startswith(f"venomx: {code}: "), lines[0]
    assert words in lines[0], lines[0]


def snapshot(d: Path) -> tuple[int, int, list[str]]:
    st = os.lstat(d)
    return st.st_mode, st.st_uid, sorted(os.listdir(d))


# -- the socket directory ----------------------------------------------------------------------


@pytest.mark.parametrize("mode", [0o1777, 0o777, 0o770, 0o720])
def test_directory_writable_by_others_is_refused_and_left_untouched(tmp: Path, mode: int) -> None:
    os.chmod(tmp, mode)
    before = snapshot(tmp)
    r = serve("--socket", str(tmp / "s.sock"))
    refused(r, "invalid_params.socket", "writable by group or others")
    assert snapshot(tmp) == before and stat.S_IMODE(before[0]) == mode


@needs_root
def test_directory_of_another_uid_is_refused(tmp: Path) -> None:
    os.chown(tmp, NOBODY, NOBODY)
    before = snapshot(tmp)
    refused(
        serve("--socket", str(tmp / "s.sock")), "invalid_params.socket", f"owned by uid {NOBODY}"
    )
    assert snapshot(tmp) == before


def test_ancestor_writable_by_others_without_sticky_bit_is_refused(tmp: Path) -> None:
    (tmp / "mine").mkdir(mode=0o700)
    os.chmod(tmp, 0o777)  # anyone could rename "mine" away and put their own in its place
    refused(
        serve("--socket", str(tmp / "mine" / "s.sock")),
        "invalid_params.socket",
        "without the sticky bit",
    )
    assert os.listdir(tmp / "mine") == []
    os.chmod(tmp, 0o1777)  # with the sticky bit only the owner may rename it: accepted
    d = start_in(tmp / "mine" / "s.sock")
    try:
        assert d.call("whoami")["principal"] == "g0"
    finally:
        stop_daemon(d)


def start_in(sock: Path, extra: list[str] | None = None) -> Daemon:
    """A daemon on ``sock`` managed like the fixture's."""
    logs = tempfile.mkdtemp(prefix="vx", dir="/tmp")  # beside the socket's, removed at the end
    MADE.append(logs)
    log = Path(logs) / "daemon.log"
    with open(log, "wb") as logf:
        proc = subprocess.Popen(
            [PY, "-m", "venomx", "serve", "--socket", str(sock), *(extra or [])],
            stdout=subprocess.DEVNULL,
            stderr=logf,
            env=env(),
            cwd="/tmp",
            start_new_session=True,
        )

    def ready() -> bool:
        if proc.poll() is not None:
            raise AssertionError("daemon exited: " + log.read_text())
        try:
            Client(str(sock), "@owner").close()
            return True
        except VenomxError:
            return False

    wait_for(ready, 15, "daemon socket")
    return Daemon(str(sock), proc, log)


def test_missing_directory_is_created_0700_even_under_a_strict_umask(tmp: Path) -> None:
    e = env()
    e["XDG_RUNTIME_DIR"] = str(tmp)
    p = subprocess.Popen(
        ["sh", "-c", f"umask 277; exec {PY} -m venomx serve"],
        env=e,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        cwd="/tmp",
        start_new_session=True,
    )
    sock = tmp / "venomx" / "default.sock"
    try:
        wait_for(lambda: p.poll() is not None or sock.exists(), 15, "default socket")
        assert p.poll() is None, p.communicate()[1]
        st = os.lstat(tmp / "venomx")
        assert stat.S_ISDIR(st.st_mode) and stat.S_IMODE(st.st_mode) == 0o700
        assert st.st_uid == os.geteuid()
        assert stat.S_IMODE(os.lstat(sock).st_mode) == 0o600
        with Client(str(sock), "@owner") as c:
            assert c.call("whoami")["principal"] == "g0"
    finally:
        os.killpg(p.pid, signal.SIGTERM)
        assert p.wait(10) == 0
    assert not sock.exists()


def test_socket_directory_that_is_a_symlink_is_refused(tmp: Path) -> None:
    (tmp / "real").mkdir(mode=0o700)
    os.symlink(tmp / "real", tmp / "venomx")
    e = env()
    e["XDG_RUNTIME_DIR"] = str(tmp)
    refused(serve(e=e), "invalid_params.socket", "is a symlink, not a directory")
    assert os.path.islink(tmp / "venomx") and os.listdir(tmp / "real") == []


# -- what is at the socket path ----------------------------------------------------------------


def plant(tmp: Path, what: str) -> Path:
    path = tmp / "s.sock"
    if what == "regular file":
        path.write_text("precious\n")
    elif what == "directory":
        path.mkdir()
        (path / "inside").write_text("precious\n")
    elif what == "symlink":
        (tmp / "target").write_text("precious\n")
        os.symlink(tmp / "target", path)
    elif what == "symlink to a stale socket":
        sk = socket.socket(socket.AF_UNIX)
        sk.bind(str(tmp / "stale"))
        sk.close()
        os.symlink(tmp / "stale", path)
    elif what == "socket of another uid":
        sk = socket.socket(socket.AF_UNIX)
        sk.bind(str(path))
        sk.close()
        os.chown(path, NOBODY, NOBODY)
    return path


def state(path: Path) -> tuple[int, int, int, str]:
    st = os.lstat(path)
    content = ""
    if stat.S_ISREG(st.st_mode):
        content = path.read_text()
    elif stat.S_ISDIR(st.st_mode):
        content = (path / "inside").read_text()
    elif stat.S_ISLNK(st.st_mode):
        content = os.readlink(path)
    return st.st_ino, st.st_mode, st.st_uid, content


@pytest.mark.parametrize(
    "what",
    [
        "regular file",
        "directory",
        "symlink",
        "symlink to a stale socket",
        pytest.param("socket of another uid", marks=needs_root),
    ],
)
def test_something_else_at_the_socket_path_is_refused_and_kept(tmp: Path, what: str) -> None:
    path = plant(tmp, what)
    before = state(path)
    words = {"socket of another uid": f"a socket of uid {NOBODY} is in the way"}.get(
        what, f"{what.split(' to ')[0]} is in the way"
    )
    refused(serve("--socket", str(path)), "invalid_params.socket", words)
    assert state(path) == before


def test_stale_socket_of_ours_is_replaced(tmp: Path) -> None:
    path = tmp / "s.sock"
    sk = socket.socket(socket.AF_UNIX)
    sk.bind(str(path))
    sk.close()
    os.link(path, tmp / "pin")  # keeps the old inode allocated, so a new one must differ
    old = os.lstat(path).st_ino
    d = start_in(path)
    try:
        assert os.lstat(path).st_ino != old
        assert d.call("whoami")["principal"] == "g0"
    finally:
        stop_daemon(d)


def test_bad_socket_paths_are_one_line(tmp: Path) -> None:
    long = tmp / ("x" * (108 - len(str(tmp))))
    refused(serve("--socket", str(long)), "invalid_params.socket", "longer than 107 bytes")
    refused(
        serve("--socket", str(tmp / "no" / "such" / "s.sock")),
        "invalid_params.socket",
        "does not exist",
    )
    (tmp / "file").write_text("x")
    refused(
        serve("--socket", str(tmp / "file" / "s.sock")), "invalid_params.socket", "not a directory"
    )
    assert os.listdir(tmp) == ["file"]


@needs_setpriv
def test_unwritable_places_are_one_line_as_another_uid(tmp: Path) -> None:
    os.chmod(tmp, 0o755)  # root's: nobody may not create in it
    refused(
        serve("--socket", str(tmp / "sub" / "s.sock"), nobody=True),
        "invalid_params.socket",
        "cannot create directory",
    )
    ro = tmp / "ro"
    ro.mkdir(mode=0o500)
    os.chown(ro, NOBODY, NOBODY)
    refused(
        serve("--socket", str(ro / "s.sock"), nobody=True),
        "invalid_params.socket",
        "cannot listen: permission denied",
    )
    assert sorted(os.listdir(tmp)) == ["ro"] and os.listdir(ro) == []


# -- the log file ---------------------------------------------------------------------------


def test_planted_log_symlink_is_not_followed(tmp: Path) -> None:
    target = tmp / "elsewhere"
    target.mkdir(mode=0o700)
    (target / "root-only").write_text("precious\n")
    os.chmod(target / "root-only", 0o600)
    run_dir = tmp / "run"
    run_dir.mkdir(mode=0o700)
    os.symlink(target / "root-only", run_dir / "venomx.log")
    r = subprocess.run(
        [PY, "-m", "venomx", "serve", "--socket", str(run_dir / "s.sock"), "--detach", "--json"],
        capture_output=True,
        text=True,
        timeout=20,
        env=env(),
    )
    assert r.returncode == 2, r
    err = json.loads(r.stdout)["error"]
    assert err["code"] == "invalid_params.log_file" and "is a symlink" in err["message"]
    r = serve("--socket", str(run_dir / "s.sock"), "--log-file", str(run_dir / "venomx.log"))
    refused(r, "invalid_params.log_file", "is a symlink; not following it")
    assert (target / "root-only").read_text() == "precious\n"
    assert sorted(os.listdir(run_dir)) == ["venomx.log"]  # no socket left behind


def test_log_file_directory_is_checked(tmp: Path) -> None:
    logs = tmp / "logs"
    logs.mkdir(mode=0o1777)
    os.chmod(logs, 0o1777)
    refused(
        serve("--socket", str(tmp / "new" / "s.sock"), "--log-file", str(logs / "d.log")),
        "invalid_params.log_file",
        "writable by group or others",
    )
    # nothing changed on disk: not even the socket's directory, which serve would make
    assert os.listdir(logs) == [] and sorted(os.listdir(tmp)) == ["logs"]


def cloexec(pid: int, fd: str) -> bool:
    """Whether the fd is close-on-exec; one closed while we look (the daemon's transient
    fds: a socketpair for a spare, a /proc read) leaks nothing."""
    try:
        text = Path(f"/proc/{pid}/fdinfo/{fd}").read_text()
    except FileNotFoundError:
        return True
    for line in text.splitlines():
        if line.startswith("flags:"):
            return bool(int(line.split()[1], 8) & 0o2000000)
    raise AssertionError("no flags")


def fd_target(pid: int, fd: str) -> str | None:
    try:
        return os.readlink(f"/proc/{pid}/fd/{fd}")
    except FileNotFoundError:
        return None


def test_detached_daemon_fds_are_close_on_exec(tmp: Path) -> None:
    import psutil

    r = subprocess.run(
        [PY, "-m", "venomx", "serve", "--socket", str(tmp / "s.sock"), "--detach", "--json"],
        capture_output=True,
        text=True,
        timeout=20,
        env=env(),
    )
    assert r.returncode == 0, r.stderr
    info = json.loads(r.stdout)
    assert info["log"] == str(tmp / "venomx.log")
    pid = info["pid"]
    try:
        log = str(tmp / "venomx.log")
        fds = os.listdir(f"/proc/{pid}/fd")
        assert os.readlink(f"/proc/{pid}/fd/2") == log  # stray stderr lands in the log
        leaking = [fd for fd in fds if int(fd) > 2 and not cloexec(pid, fd)]
        assert leaking == [], [(fd, fd_target(pid, fd)) for fd in leaking]
        for child in psutil.Process(pid).children(recursive=True):
            try:  # a short-lived one (the spare pool's refill) may be gone already
                held = os.listdir(f"/proc/{child.pid}/fd")
            except FileNotFoundError:
                continue
            for fd in held:
                if int(fd) > 2:
                    assert fd_target(child.pid, fd) != log
        assert (tmp / "venomx.log").stat().st_mode & 0o777 == 0o600
    finally:
        with Client(str(tmp / "s.sock"), "@owner") as c:
            c.call("shutdown")
        wait_for(lambda: not running(pid), 10, "detached daemon exit")


# -- the client checks who listens --------------------------------------------------------------

FAKE = r"""
import socket, sys
path, record, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
s = socket.socket(socket.AF_UNIX)
s.bind(path)
s.listen(8)
open(record + ".ready", "w").close()
s.settimeout(30)
forged = b'{"id":0,"ok":{"protocol":1,"server":"venomx/0.1.0","source":"venomx/x",' \
         b'"principal":"g0","max_frame":1048576}}\n'
for i in range(n):
    c, _ = s.accept()
    c.settimeout(3)
    got = b""
    try:
        while b"\n" not in got:
            chunk = c.recv(65536)
            if not chunk:
                break
            got += chunk
        if got:
            c.sendall(forged)
    except OSError:
        pass
    with open(f"{record}.{i}", "wb") as f:
        f.write(got)
    c.close()
"""


@needs_setpriv
def test_swapped_socket_never_receives_the_token(tmp: Path) -> None:
    """The owner of a socket directory swaps in its own listener; no client sends hello."""
    os.chown(tmp, NOBODY, NOBODY)
    sock, record = str(tmp / "s.sock"), str(tmp / "got")
    (tmp / "fake.py").write_text(FAKE)
    fake = subprocess.Popen(
        [*AS_NOBODY, PY, str(tmp / "fake.py"), sock, record, "4"],
        cwd="/tmp",
        start_new_session=True,
    )
    try:
        wait_for(lambda: os.path.exists(record + ".ready"), 15, "fake server")
        with pytest.raises(VenomxError) as exc:
            Client(sock, TOKEN)
        assert exc.value.code == "transport" and exc.value.exit_code == 9
        assert exc.value.data == {"socket": sock, "server_uid": NOBODY}

        async def mcp_side() -> VenomxError:
            client = AsyncClient(sock, TOKEN)
            try:
                await client.connect()
            except VenomxError as err:
                return err
            finally:
                await client.close()
            raise AssertionError("connected to a foreign server")

        assert asyncio.run(mcp_side()).code == "transport"
        e = env()
        e["VENOMX_TOKEN"] = TOKEN
        r = subprocess.run(
            [PY, "-m", "venomx", "whoami", "--socket", sock],
            env=e,
            capture_output=True,
            text=True,
            timeout=20,
        )
        assert r.returncode == 9 and f"runs as uid {NOBODY}" in r.stderr, r
        # Control: the fake does record what a client sends.
        with socket.socket(socket.AF_UNIX) as raw:
            raw.connect(sock)
            raw.sendall(b'{"id":0,"verb":"hello"}\n')
            raw.recv(4096)
        assert fake.wait(15) == 0
        got = [Path(f"{record}.{i}").read_bytes() for i in range(4)]
        assert got[:3] == [b"", b"", b""]
        assert got[3] == b'{"id":0,"verb":"hello"}\n'
    finally:
        if fake.poll() is None:
            os.killpg(fake.pid, signal.SIGKILL)
            fake.wait()


SQUATTER = """
import socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.bind(bytes.fromhex(sys.argv[1]))
if sys.argv[2] == "listen":
    s.listen(1)  # and never accepts: once its queue is full, a blocking connect waits forever
print("ready", flush=True)
sys.stdin.read()
"""


@contextlib.contextmanager
def holding(script: str, *args: str, nobody: bool = True) -> Iterator[subprocess.Popen[bytes]]:
    """Run ``script`` (as uid 65534 unless ``nobody`` is False) until it prints ready;
    kill it at the end if it still runs."""
    p = subprocess.Popen(
        [*(AS_NOBODY if nobody else []), PY, "-c", script, *args],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        cwd="/tmp",
        start_new_session=True,
    )
    try:
        assert p.stdout is not None and p.stdout.readline() == b"ready\n"
        yield p
    finally:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()


@needs_setpriv
@pytest.mark.parametrize("listens", [True, False])
def test_another_user_holding_the_abstract_address_cannot_stop_the_daemon(
    tmp: Path, listens: bool
) -> None:
    """Anyone can compute a socket's abstract address and take it first; the daemon then
    serves at the path alone, and clients pass the holder over for the path."""
    address = abstract_address(str(tmp / "s.sock"))
    fillers: list[socket.socket] = []
    how = "listen" if listens else "bind"
    with holding(SQUATTER, address.encode().hex(), how) as squatter:
        d = start_daemon(directory=str(tmp))
        try:
            while listens:  # fill the holder's queue
                filler = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                filler.setblocking(False)
                try:
                    filler.connect(address)
                except BlockingIOError:
                    filler.close()
                    break
                fillers.append(filler)
            assert d.call("whoami")["principal"] == "g0"
            assert d.cli("whoami", "--json", timeout=20).json["principal"] == "g0"
            assert asyncio.run(mcp_whoami(d.socket)) == "g0"
            check = next(c for c in d.call("doctor")["checks"] if c["name"] == "socket")
            assert check["status"] == "warn", check
            assert f"held by uid {NOBODY}" in check["detail"], check
            assert "serving at the path only" in d.log.read_text()
            # Once the holder lets go, the daemon takes the address back (else any program
            # of our uid could take it, and clients trust a holder of our uid).
            os.killpg(squatter.pid, signal.SIGKILL)
            squatter.wait()
            wait_for(
                lambda: (
                    next(c for c in d.call("doctor")["checks"] if c["name"] == "socket")["status"]
                    == "ok"
                ),
                15,
                "abstract address taken back",
            )
            held = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            with pytest.raises(OSError):
                held.bind(address)
            held.close()
        finally:
            stop_daemon(d)
            for f in fillers:
                f.close()


def serve_is_refused_as_in_use(sock: Path) -> None:
    r = subprocess.run(
        [PY, "-m", "venomx", "serve", "--socket", str(sock)],
        capture_output=True,
        text=True,
        env=env(),
        timeout=20,
    )
    assert r.returncode == 6 and "unavailable.address_in_use" in r.stderr, r
    assert not sock.exists()


def test_a_holder_of_our_own_uid_keeps_the_abstract_address_in_use(tmp: Path) -> None:
    """Bound without listening, so no connect can say whose it is: the kernel can, and a
    holder of our uid is never passed over (it could listen later, and clients trust
    our uid at that address)."""
    holder = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    holder.bind(abstract_address(str(tmp / "s.sock")))
    try:
        serve_is_refused_as_in_use(tmp / "s.sock")
    finally:
        holder.close()


STALE = """
import socket, sys
name = bytes.fromhex(sys.argv[1])
listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
listener.bind(name)
listener.listen(1)
client = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
client.connect(name)
accepted, _ = listener.accept()  # carries the name, and outlives its listener
listener.close()
print("ready", flush=True)
sys.stdin.read()
"""


@needs_setpriv
def test_a_connection_left_by_another_users_listener_is_not_the_holder(tmp: Path) -> None:
    address = abstract_address(str(tmp / "s.sock"))
    with holding(STALE, address.encode().hex()):
        d = start_daemon(directory=str(tmp))
        try:
            assert unixdiag.holder_uid(address.encode()) == os.getuid()
            assert unixdiag.holder_uid(address.encode(), listening=True) == os.getuid()
            check = next(c for c in d.call("doctor")["checks"] if c["name"] == "socket")
            assert check["status"] == "ok", check
        finally:
            stop_daemon(d)


SEQPACKET = """
import socket, sys
other = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
other.bind(bytes.fromhex(sys.argv[1]))
other.listen(1)
print("ready", flush=True)
sys.stdin.read()
"""


@needs_setpriv
def test_a_socket_of_another_type_at_the_name_is_not_the_holder(tmp: Path) -> None:
    """Abstract names are per socket type: another user's seqpacket listener at our name
    must not make the holder unknown (which would refuse to start the daemon)."""
    address = abstract_address(str(tmp / "s.sock"))
    with holding(SEQPACKET, address.encode().hex()), socket.socket(socket.AF_UNIX) as ours:
        ours.bind(address)
        assert unixdiag.holder_uid(address.encode()) == os.getuid()  # bound, not listening
        ours.listen(1)
        assert unixdiag.holder_uid(address.encode(), listening=True) == os.getuid()


SPLIT = """
import os, socket, sys
name = bytes.fromhex(sys.argv[1])
os.setegid(65534)
os.seteuid(65534)
sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)  # made by uid 65534 ...
sock.bind(name)
os.seteuid(0)
os.setegid(0)
sock.listen(5)  # ... listened on by root: clients see root's credentials
print("ready", flush=True)
sys.stdin.read()
"""


@needs_root
def test_a_holder_made_by_another_uid_but_listened_on_by_ours_is_ours(tmp: Path) -> None:
    address = abstract_address(str(tmp / "s.sock"))
    with holding(SPLIT, address.encode().hex(), nobody=False):
        assert unixdiag.holder_uid(address.encode()) == NOBODY  # what the kernel records
        serve_is_refused_as_in_use(tmp / "s.sock")


FOREIGN = """
import json, select, socket, sys, time
name = bytes.fromhex(sys.argv[1])
socks = [socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) for _ in range(12)]
for s in socks:
    s.connect(name)
deadline, gone = time.monotonic() + 10, set()
while len(gone) < 4 and time.monotonic() < deadline:
    ready, _, _ = select.select([s for s in socks if s not in gone], [], [], 0.5)
    for s in ready:
        try:
            assert s.recv(1) == b""
        except ConnectionResetError:
            pass
        gone.add(s)
kept = [s for s in socks if s not in gone]
print(len(kept), flush=True)
sys.stdin.readline()
codes, rest = set(), set()
for s in kept:
    s.sendall(b'{"id":0,"verb":"hello","params":{"protocol":1,"token":"@owner"}}\\n')
    f = s.makefile("rb")
    codes.add(json.loads(f.readline())["error"]["code"])
    rest.add(f.read())
big = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
big.connect(name)
big.sendall(b"x" * 5000)
f = big.makefile("rb")
err = json.loads(f.readline())["error"]
print(json.dumps([sorted(codes), sorted(r.decode() for r in rest), err["code"], err["data"],
                  f.read().decode()]), flush=True)
"""


@needs_setpriv
def test_another_users_connections_are_few_small_and_answered_once(daemon: Daemon) -> None:
    """Another uid reaches the abstract address but can never pass hello: eight of its
    connections at a time, one frame of at most 4096 bytes each, then the daemon hangs
    up; the owner is served throughout."""
    name = abstract_address(daemon.socket).encode()
    p = subprocess.Popen(
        [*AS_NOBODY, PY, "-c", FOREIGN, name.hex()],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        cwd="/tmp",
        start_new_session=True,
    )
    try:
        assert p.stdin is not None and p.stdout is not None
        assert p.stdout.readline() == "8\n"
        assert daemon.call("whoami")["principal"] == "g0"
        p.stdin.write("go\n")
        p.stdin.flush()
        got = json.loads(p.stdout.readline())
        assert got == [
            ["denied.owner"],
            [""],
            "invalid_request.frame_size",
            {"max_frame": 4096},
            "",
        ]
        assert p.wait(10) == 0
    finally:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()


RATE = """
import json, socket, sys, time
name = bytes.fromhex(sys.argv[1])
answered = refused = 0
t0 = time.monotonic()
for _ in range(200):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(name)
    try:
        s.sendall(b'{"id":0,"verb":"hello","params":{"protocol":1}}\\n')
        line = s.makefile("rb").readline()
    except OSError:
        line = b""
    s.close()
    if line:
        assert json.loads(line)["error"]["code"] == "denied.owner"
        answered += 1
    else:
        refused += 1
print(json.dumps([answered, refused, time.monotonic() - t0]), flush=True)
"""


@needs_setpriv
def test_another_users_connections_are_served_at_most_32_a_second(daemon: Daemon) -> None:
    """Past the rate, another uid's connections are closed as they are accepted."""
    name = abstract_address(daemon.socket).encode()
    out = subprocess.run(
        [*AS_NOBODY, PY, "-c", RATE, name.hex()],
        capture_output=True,
        text=True,
        cwd="/tmp",
        timeout=60,
    )
    answered, refused, took = json.loads(out.stdout)
    assert answered + refused == 200 and answered >= 32, out
    assert answered <= 32 * (int(took) + 2), out  # the windows the loop spanned
    assert daemon.call("whoami")["principal"] == "g0"


async def mcp_whoami(sock: str) -> str:
    """The principal the MCP adapter's client is, as the owner, at ``sock``."""
    client = AsyncClient(sock, "@owner")
    try:
        await client.connect()
        return str((await client.call("whoami"))["principal"])
    finally:
        await client.close()


def test_clients_accept_a_daemon_of_their_own_uid(daemon: Daemon) -> None:
    assert asyncio.run(mcp_whoami(daemon.socket)) == "g0"
    assert daemon.call("whoami")["principal"] == "g0"


# -- the config file ----------------------------------------------------------------------------


def test_config_named_but_missing_means_defaults_until_it_is_written(tmp: Path) -> None:
    """foundation §11: missing = defaults, for --config too; a later reload reads it."""
    cfg = tmp / "config.toml"
    (tmp / "run").mkdir(mode=0o700)
    d = start_in(tmp / "run" / "s.sock", ["--config", str(cfg)])
    try:
        assert d.call("config.get", {"path": "run.max_active"})["config"] == {"run.max_active": 64}
        assert f"config file {cfg} does not exist" in d.log.read_text()
        cfg.write_text("[run]\nmax_active = 5\n")
        assert d.call("config.reload")["changed"] == ["run.max_active"]
        cfg.unlink()
        assert d.call("config.reload")["changed"] == ["run.max_active"]
        assert d.call("config.get", {"path": "run.max_active"})["config"] == {"run.max_active": 64}
    finally:
        stop_daemon(d)


@pytest.mark.parametrize("where", ["a directory that is not there", "a group-writable one"])
def test_default_config_may_be_missing(tmp: Path, where: str) -> None:
    """A missing file means defaults, whatever its directory: umask 002 (Fedora) makes a
    fresh ~/.config group-writable, and that must not stop a daemon that reads nothing."""
    e = env()
    e["XDG_CONFIG_HOME"] = str(tmp / "nothing-here")
    if where == "a group-writable one":
        (tmp / "nothing-here").mkdir()
        os.chmod(tmp / "nothing-here", 0o775)
    (tmp / "run").mkdir(mode=0o700)
    p = subprocess.Popen(
        [PY, "-m", "venomx", "serve", "--socket", str(tmp / "run" / "s.sock")],
        env=e,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        cwd="/tmp",
        start_new_session=True,
    )
    try:
        wait_for(lambda: p.poll() is not None or (tmp / "run" / "s.sock").exists(), 15, "start")
        assert p.poll() is None
        with Client(str(tmp / "run" / "s.sock"), "@owner") as c:
            assert c.call("config.get", {"path": "log.keep"})["config"] == {"log.keep": 3}
    finally:
        os.killpg(p.pid, signal.SIGTERM)
        assert p.wait(10) == 0


@pytest.mark.parametrize("problem", ["group-writable", "other uid", "directory"])
def test_untrusted_config_is_refused(tmp: Path, problem: str) -> None:
    cfg = tmp / "config.toml"
    if problem == "directory":
        cfg.mkdir()
    else:
        cfg.write_text("[run]\nmax_active = 5\n")
    if problem == "group-writable":
        os.chmod(cfg, 0o664)
        words = "writable by group or others (mode 0664)"
    elif problem == "other uid":
        if os.geteuid() != 0:
            pytest.skip("needs root to chown")
        os.chown(cfg, NOBODY, NOBODY)
        words = f"owned by uid {NOBODY}"
    else:
        words = "is a directory, not a regular file"
    refused(
        serve("--socket", str(tmp / "s.sock"), "--config", str(cfg)), "invalid_params.config", words
    )


@pytest.mark.parametrize(
    "where", ["in it", "linked from it", "a link on the way", "under a directory link"]
)
def test_a_config_reached_through_a_directory_others_can_change_is_refused(
    tmp: Path, where: str
) -> None:
    """Whoever can write a directory the lookup reads a name from can delete or swap that
    name (defaults: anonymous callers read everything), a symlink's included."""
    shared = tmp / "shared"
    shared.mkdir()
    os.chmod(shared, 0o775)  # group-writable, no sticky bit
    ours = tmp / "ours"
    ours.mkdir()
    (ours / "venomx.toml").write_text("[auth]\ndefault_grants = []\n")
    if where == "in it":
        cfg = shared / "config.toml"
        cfg.write_text("[auth]\ndefault_grants = []\n")
    elif where == "linked from it":
        cfg = shared / "config.toml"
        os.symlink(ours / "venomx.toml", cfg)
    elif where == "a link on the way":  # ours/config.toml -> shared/link -> ours/venomx.toml
        os.symlink(ours / "venomx.toml", shared / "link")
        cfg = ours / "config.toml"
        os.symlink(shared / "link", cfg)
    else:
        os.symlink(ours, shared / "dlink")
        cfg = shared / "dlink" / "venomx.toml"
    words = f"directory {shared} is writable by group or others without the sticky bit"
    refused(
        serve("--socket", str(tmp / "s.sock"), "--config", str(cfg)), "invalid_params.config", words
    )


def test_a_config_whose_directory_becomes_untrusted_is_not_reloaded(tmp: Path) -> None:
    (tmp / "etc").mkdir()
    cfg = tmp / "etc" / "config.toml"
    cfg.write_text("[run]\nmax_active = 5\n")
    (tmp / "run").mkdir(mode=0o700)
    d = start_in(tmp / "run" / "s.sock", ["--config", str(cfg)])
    try:
        if os.geteuid() == 0:
            os.chown(tmp / "etc", NOBODY, NOBODY)
            words = f"directory {tmp / 'etc'} is owned by uid {NOBODY}, not by root"
        else:
            os.chmod(tmp / "etc", 0o777)
            words = f"directory {tmp / 'etc'} is writable by group or others"
        cfg.write_text("[run]\nmax_active = 6\n")
        e = d.error("config.reload")
        assert e.code == "invalid_params.config" and words in e.message, e.message
        assert d.call("config.get", {"path": "run.max_active"})["config"] == {"run.max_active": 5}
    finally:
        stop_daemon(d)


def test_config_symlink_of_a_dotfile_manager_is_accepted(tmp: Path) -> None:
    (tmp / "dotfiles").mkdir()
    (tmp / "dotfiles" / "venomx.toml").write_text("[run]\nmax_active = 5\n")
    os.symlink(tmp / "dotfiles" / "venomx.toml", tmp / "config.toml")
    (tmp / "run").mkdir(mode=0o700)
    d = start_in(tmp / "run" / "s.sock", ["--config", str(tmp / "config.toml")])
    try:
        assert d.call("config.get", {"path": "run.max_active"})["config"] == {"run.max_active": 5}
    finally:
        stop_daemon(d)


@needs_setpriv
def test_unreadable_config_is_an_error(tmp: Path) -> None:
    os.chown(tmp, NOBODY, NOBODY)
    cfg = tmp / "config.toml"
    cfg.write_text("[run]\nmax_active = 5\n")
    os.chown(cfg, NOBODY, NOBODY)
    os.chmod(cfg, 0o200)
    refused(
        serve("--socket", str(tmp / "s.sock"), "--config", str(cfg), nobody=True),
        "invalid_params.config",
        "cannot open: permission denied",
    )


def shared_link(tmp: Path, target: Path) -> Path:
    """A symlink to ``target`` that uid 65534 owns in a sticky, world-writable directory,
    as ``ln -s`` by another user in /tmp makes one: theirs to replace at will."""
    shared = tmp / "shared"
    shared.mkdir()
    os.chmod(shared, 0o1777)
    link = shared / "link"
    os.symlink(target, link)
    os.chown(link, NOBODY, NOBODY, follow_symlinks=False)
    return link


@needs_root
def test_a_socket_reached_through_another_users_symlink_is_refused(tmp: Path) -> None:
    (tmp / "ours").mkdir(mode=0o700)
    link = shared_link(tmp, tmp / "ours")
    words = f"symlink {link} is owned by uid {NOBODY}, not by root"
    refused(serve("--socket", str(link / "run" / "s.sock")), "invalid_params.socket", words)
    refused(
        serve("--socket", str(tmp / "ours" / "s.sock"), "--log-file", str(link / "venomx.log")),
        "invalid_params.log_file",
        words,
    )
    assert os.listdir(tmp / "ours") == []


@needs_root
@pytest.mark.parametrize("when", ["at start", "repointed at nothing before a reload"])
def test_a_config_reached_through_another_users_symlink_is_refused(tmp: Path, when: str) -> None:
    """Pointed at nothing, the link would turn a trusted config into defaults, which let
    anonymous callers read everything again."""
    (tmp / "ours").mkdir(mode=0o700)
    (tmp / "ours" / "config.toml").write_text("[auth]\ndefault_grants = []\n")
    link = shared_link(tmp, tmp / "ours")
    words = f"symlink {link} is owned by uid {NOBODY}, not by root"
    if when == "at start":
        refused(
            serve("--socket", str(tmp / "s.sock"), "--config", str(link / "config.toml")),
            "invalid_params.config",
            words,
        )
        return
    os.chown(link, 0, 0, follow_symlinks=False)  # ours while the daemon starts
    (tmp / "run").mkdir(mode=0o700)
    d = start_in(tmp / "run" / "s.sock", ["--config", str(link / "config.toml")])
    try:
        assert d.error("session.list", token=None).code == "denied.read"
        link.unlink()
        os.symlink(tmp / "nothing", link)
        os.chown(link, NOBODY, NOBODY, follow_symlinks=False)
        e = d.error("config.reload")
        assert e.code == "invalid_params.config" and words in e.message, e.message
        assert d.error("session.list", token=None).code == "denied.read"
    finally:
        stop_daemon(d)


def test_fixture_daemon_still_starts() -> None:
    d = start_daemon()
    try:
        assert d.call("whoami")["principal"] == "g0"
    finally:
        stop_daemon(d)
