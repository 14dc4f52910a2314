"""Starting a pane's leader: the PATH search, the spawn onto the PTY, the PTY's size;
and, once it has exited, what it used.

The leader is the untrusted program: it starts as a session leader with the PTY slave as
its controlling terminal, every catchable signal at its default and no fd of ours open.
Must not import ``venomx``.
"""

from __future__ import annotations

import ctypes
import errno
import fcntl
import os
import signal
import struct
import termios
from typing import Any

from workers import protocol as P
from workers import syscalls


def resolve(argv0: str, env: dict[str, str]) -> list[str]:
    """Candidate paths for argv0, searched like execvpe in the *child's* PATH."""
    if "/" in argv0:
        return [argv0]
    path = env.get("PATH", os.defpath)
    return [os.path.join(d or ".", argv0) for d in path.split(":")]


# Every catchable signal starts at its default in the leader, whatever the sentinel did
# or the daemon inherited (a real-time signal ignored by whoever started it included).
# glibc's own two (32 and 33, which valid_signals() leaves out) are set to ignored by
# posix_spawn itself, as for any program a Python subprocess starts that way.
SIGDEF = [s for s in signal.valid_signals() if s not in (signal.SIGKILL, signal.SIGSTOP)]


def join_cgroup(directory: str) -> None:
    """Move this process into the cgroup ``directory`` ("0": the writer itself)."""
    fd = os.open(os.path.join(directory, "cgroup.procs"), os.O_WRONLY | os.O_CLOEXEC)
    try:
        os.write(fd, b"0")
    finally:
        os.close(fd)


def spawn_leader(
    argv: list[str],
    env: dict[str, str],
    slave: str,
    cgroup: str | None = None,
    home: str | None = None,
) -> int:
    """posix_spawn the leader: new session, the PTY slave opened as fd 0 (controlling tty).

    With ``cgroup``, the leader is in that cgroup from before its exec: ``posix_spawn``
    has no pre-exec hook, so the sentinel joins the cgroup, spawns (the child inherits
    it) and moves back to ``home`` at once. If it cannot move back, the leader is killed
    and the start fails: a sentinel never stays among the pane's processes.

    Raises OSError with the exec errno; follows execvpe's rules for PATH search (EACCES
    is remembered and reported only if nothing else runs). Never falls back to a shell.
    """
    if cgroup is None or home is None:
        return _spawn(argv, env, slave)
    join_cgroup(cgroup)
    try:
        pid = _spawn(argv, env, slave)
    except OSError:
        join_cgroup(home)
        raise
    try:
        join_cgroup(home)
    except OSError:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        raise
    return pid


def _spawn(argv: list[str], env: dict[str, str], slave: str) -> int:
    actions: list[tuple[Any, ...]] = [
        (os.POSIX_SPAWN_OPEN, 0, slave, os.O_RDWR, 0),
        (os.POSIX_SPAWN_DUP2, 0, 1),
        (os.POSIX_SPAWN_DUP2, 0, 2),
    ]
    # Every fd of ours is close-on-exec already; closing each one explicitly as well means
    # one slip (a library fd, a future change) still cannot hand the program a channel.
    actions += [(os.POSIX_SPAWN_CLOSE, fd) for fd in open_fds() if fd > 2]
    seen_eacces = False
    last: OSError | None = None
    for path in resolve(argv[0], env):
        # A failed posix_spawn costs a whole clone and exec attempt; a missing file
        # would fail with ENOENT/ENOTDIR anyway, so a stat finds it far cheaper.
        try:
            os.lstat(path)
        except OSError as exc:
            if exc.errno in (errno.ENOENT, errno.ENOTDIR):
                last = exc
                continue
        try:
            return os.posix_spawn(
                path, argv, env, file_actions=actions, setsid=True, setsigdef=SIGDEF, setsigmask=()
            )
        except OSError as exc:
            last = exc
            if exc.errno == errno.EACCES:
                seen_eacces = True
                continue
            if exc.errno in (
                errno.ENOENT,
                errno.ENOTDIR,
                errno.ESTALE,
                errno.ENODEV,
                errno.ETIMEDOUT,
            ):
                continue
            raise
    if seen_eacces:
        raise OSError(errno.EACCES, os.strerror(errno.EACCES))
    raise last or OSError(errno.ENOENT, os.strerror(errno.ENOENT))


def open_fds() -> list[int]:
    return [int(name) for name in os.listdir("/proc/self/fd")]


def set_winsize(fd: int, cols: int, rows: int) -> None:
    fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))


def end_of_file(fd: int) -> None:
    """The terminal gives every read end of file, as /dev/null does: non-canonical with
    VMIN and VTIME 0, so a read returns at once with what was typed, and with nothing
    (end of file) when nothing was. Set before the leader starts: a read already waiting
    in canonical mode would not see the change, and a typed VEOF answers one read only
    (and none once a password prompt flushes its input). A program that sets its own
    mode later (a raw editor) has its own."""
    attrs = termios.tcgetattr(fd)
    attrs[3] &= ~termios.ICANON
    attrs[6][termios.VMIN] = 0
    attrs[6][termios.VTIME] = 0
    termios.tcsetattr(fd, termios.TCSANOW, attrs)


# The raw waitid(2) system call: unlike the C library's wrapper it takes a fifth argument,
# a struct rusage, which Linux fills from the zombie even with WNOWAIT (kernel/exit.c
# wait_task_zombie), exactly as the reaping wait4 would. Per architecture; elsewhere no
# usage is reported (workers/syscalls.py).
SYS_WAITID = syscalls.WAITID
_libc = ctypes.CDLL(None, use_errno=True)
SIGINFO_SIZE = 128
_Siginfo = ctypes.c_char * SIGINFO_SIZE
# Looked up and typed once, here (in the fork server): CDLL's attribute look-up, the
# argument wrapping and ``create_string_buffer`` cost each sentinel ~30 page faults.
_syscall = _libc.syscall
_syscall.restype = ctypes.c_long
_syscall.argtypes = (
    ctypes.c_long,  # the system call's number
    ctypes.c_long,  # idtype
    ctypes.c_long,  # id
    ctypes.c_void_p,  # siginfo_t *
    ctypes.c_long,  # options
    ctypes.c_void_p,  # struct rusage *
)


class _Timeval(ctypes.Structure):
    _fields_ = [("sec", ctypes.c_long), ("usec", ctypes.c_long)]


class _Rusage(ctypes.Structure):
    # struct rusage: two timevals, then 14 longs of which only ru_maxrss is read
    _fields_ = [("utime", _Timeval), ("stime", _Timeval), ("maxrss", ctypes.c_long)] + [
        (f"_{i}", ctypes.c_long) for i in range(13)
    ]


def exit_usage(pid: int) -> dict[str, int] | None:
    """What the exited, still unreaped child ``pid`` used: the ``rusage`` its reap will
    give (its own CPU time plus that of every descendant it waited for, and the largest
    resident set of any one of them), read without reaping it. None if the kernel does
    not say (an unknown architecture, or ``pid`` is not an exited child)."""
    if SYS_WAITID is None:
        return None
    info = _Siginfo()
    ru = _Rusage()
    flags = os.WEXITED | os.WNOHANG | os.WNOWAIT
    if _syscall(SYS_WAITID, os.P_PID, pid, ctypes.addressof(info), flags, ctypes.addressof(ru)):
        return None
    # si_signo, the first int, is SIGCHLD only when a child was found (and rusage filled)
    if struct.unpack_from("i", info)[0] != signal.SIGCHLD:
        return None
    utime = ru.utime.sec * 1_000_000 + ru.utime.usec
    stime = ru.stime.sec * 1_000_000 + ru.stime.usec
    return P.usage(utime, stime, ru.maxrss)
