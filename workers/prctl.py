"""The process controls venomx needs from Linux ``prctl``, without a dependency.

Must not import ``venomx``: the fork server and sentinels use it too.
"""

from __future__ import annotations

import ctypes

PR_SET_DUMPABLE = 4
PR_GET_DUMPABLE = 3
PR_SET_CHILD_SUBREAPER = 36
PR_SET_NAME = 15

_libc: ctypes.CDLL | None = None


def _prctl(option: int, arg: int | ctypes.Array[ctypes.c_char]) -> int:
    global _libc
    if _libc is None:
        _libc = ctypes.CDLL(None, use_errno=True)
    result: int = _libc.prctl(option, arg, 0, 0, 0)
    return result


def set_undumpable() -> bool:
    """Make this process (and, until they exec, its forks) non-dumpable.

    A non-dumpable process cannot be ptrace-attached, nor its fds taken with
    ``pidfd_getfd`` or its memory read through /proc, by another process of the same uid
    without CAP_SYS_PTRACE. The pane programs run as our uid; this is what keeps them away
    from the daemon's, the fork server's and the sentinels' sockets. The flag resets at
    exec, so pane programs themselves stay debuggable.
    """
    try:
        return _prctl(PR_SET_DUMPABLE, 0) == 0
    except (OSError, AttributeError):  # pragma: no cover - not Linux
        return False


def dumpable() -> bool:
    try:
        return _prctl(PR_GET_DUMPABLE, 0) != 0
    except (OSError, AttributeError):  # pragma: no cover - not Linux
        return True


def set_child_subreaper() -> bool:
    """Become the reaper of every orphaned descendant (escapees, sentinels, leaders)."""
    try:
        return _prctl(PR_SET_CHILD_SUBREAPER, 1) == 0
    except (OSError, AttributeError):  # pragma: no cover - not Linux
        return False


def set_name(name: bytes) -> bool:
    """Set this thread's command name (``/proc/PID/comm``, 15 bytes at most). Only the
    process itself can change it: no other process of our uid can."""
    try:
        return _prctl(PR_SET_NAME, ctypes.create_string_buffer(name[:15])) == 0
    except (OSError, AttributeError):  # pragma: no cover - not Linux
        return False
