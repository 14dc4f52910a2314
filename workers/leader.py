"""Starting a pane's leader: the PATH search, the spawn onto the PTY, the PTY's size.

The leader is the untrusted program: it starts as a session leader with the PTY slave as
its controlling terminal, every catchable signal at its default and no fd of ours open.
Must not import ``venomx``.
"""

from __future__ import annotations

import errno
import fcntl
import os
import signal
import struct
import termios
from typing import Any


def resolve(argv0: str, env: dict[str, str]) -> list[str]:
    """Candidate paths for argv0, searched like execvpe in the *child's* PATH."""
    if "/" in argv0:
        return [argv0]
    path = env.get("PATH", os.defpath)
    return [os.path.join(d or ".", argv0) for d in path.split(":")]


# Every catchable signal starts at its default in the leader, whatever the sentinel did.
SIGDEF = [
    s
    for s in signal.valid_signals()
    if s not in (signal.SIGKILL, signal.SIGSTOP) and s < signal.SIGRTMIN
]


def spawn_leader(argv: list[str], env: dict[str, str], slave: str) -> int:
    """posix_spawn the leader: new session, the PTY slave opened as fd 0 (controlling tty).

    Raises OSError with the exec errno; follows execvpe's rules for PATH search (EACCES
    is remembered and reported only if nothing else runs). Never falls back to a shell.
    """
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
