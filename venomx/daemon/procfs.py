"""What ``/proc/PID/stat`` says about a process: its state, parent and session.

One reader for its layout, so the command name (which may hold spaces and ``)``) is
skipped the same way everywhere. Callers decide what an unreadable entry means: a
process that is gone reads as ``FileNotFoundError`` or ``ProcessLookupError``.
"""

from __future__ import annotations

# Indices into ``stat_fields``: the fields after the command name.
STATE, PPID, PGRP, SESSION, FLAGS, STARTTIME = 0, 1, 2, 3, 6, 19
PF_EXITING = 0x4  # include/linux/sched.h: set as the process starts its exit


def stat_fields(pid: int | str) -> list[bytes]:
    """The fields of /proc/PID/stat after the command name (state, ppid, pgrp,
    session, ...). Raises ``OSError`` if it cannot be read, ``ValueError`` if it is not
    the kernel's layout."""
    return named_stat(pid)[1]


def named_stat(pid: int | str) -> tuple[bytes, list[bytes]]:
    """The command name (``comm``) and the fields after it, as ``stat_fields``."""
    with open(f"/proc/{pid}/stat", "rb") as f:
        stat = f.read()
    end = stat.rfind(b")")
    fields = stat[end + 2 :].split() if end > 0 else []
    if len(fields) <= SESSION:
        raise ValueError(f"/proc/{pid}/stat: unexpected layout")
    return stat[stat.find(b"(") + 1 : end], fields


def state(pid: int) -> str | None:
    """The one-letter state (R, S, D, T, t, Z, ...), or None if it cannot be read."""
    try:
        return stat_fields(pid)[STATE].decode("ascii", "replace")
    except (OSError, ValueError):
        return None


def session_of(pid: int) -> int | None:
    """The session a process is in, or None if it cannot be read."""
    try:
        return int(stat_fields(pid)[SESSION])
    except (OSError, ValueError):
        return None


def exiting(pid: int | str) -> bool:
    """Whether the process (or the thread, given as ``PID/task/TID``) has begun its exit:
    it runs none of its own code again, though its memory and ``/proc`` entries may
    still be there for a while. A process whose main thread alone has exited reads as
    exiting here while its other threads run. Raises ``FileNotFoundError`` or
    ``ProcessLookupError`` once it is gone, and ``OSError`` when /proc will not say:
    a caller that counted that as exiting would let a hidden process pass for ending."""
    try:
        return bool(int(stat_fields(pid)[FLAGS]) & PF_EXITING)
    except (ValueError, IndexError):
        return False


def stopped(pid: int) -> bool:
    """Whether the process is stopped (by a signal or a tracer): it will not answer."""
    return state(pid) in ("T", "t")
