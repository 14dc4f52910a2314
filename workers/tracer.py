"""A leader held by a tracer: the one way a program can hide its exit from its parent.

Linux shows a traced zombie only to its tracer, until the tracer waits for it, detaches
or dies; and a traced zombie *thread* of the leader keeps the whole leader from being
waited for at all. Without Yama any process of our uid may trace a pane's leader or any
of its threads (it is dumpable after exec), so a program could fork a tracer that never
waits and keep its run from ever completing, out of reach of a deadline's or a cancel's
``killpg``. A tracer that holds an exited leader longer than a debugger needs to take
the exit is killed; the zombie then passes to its parent with its real wait status.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Callable
from typing import Any

# How long a tracer may hold an exited leader before it is killed: a debugger waits for
# its tracee's exit at once; a program holding its own outcome gains no more than this.
GRACE = 0.5
# How many tracers ``end_tracers`` follows up a chain of them (each traced by the next).
CHAIN = 64


# What a wait reports for a child that has ended; anything else it reports without
# WSTOPPED is a stop of a child that made us its tracer (PTRACE_TRACEME).
ENDED = frozenset({os.CLD_EXITED, os.CLD_KILLED, os.CLD_DUMPED})
PTRACE_DETACH = 17


def let_go(pid: int, info: os.waitid_result) -> None:
    """``pid`` made us its tracer (PTRACE_TRACEME) and ``info`` is its stop: take that
    stop and detach, handing back the signal that stopped it (a SIGTRAP is the trace's
    own, after an exec), so it goes on untraced as it would have. A stop is never an
    exit: the outcome stays the wait status of its real end."""
    hold(pid)
    sig = info.si_status if info.si_status != signal.SIGTRAP else 0
    _detach(pid, sig)


def hold(pid: int) -> None:
    """Take ``pid``'s stop and leave it there: it stays stopped, traced by us, until it is
    killed or we exit. For a tracee that stops again and again (``let_go`` each time
    would keep us busy for as long as it liked)."""
    os.waitid(os.P_PID, pid, os.WSTOPPED | os.WNOHANG)  # only a stop: never the reap


_ptrace: Callable[[int, int, Any, Any], int] | None = None


def _detach(pid: int, sig: int) -> None:
    global _ptrace
    if _ptrace is None:
        import ctypes  # only here, where a program asked for it

        libc = ctypes.CDLL(None, use_errno=True)
        libc.ptrace.argtypes = [ctypes.c_long, ctypes.c_long, ctypes.c_void_p, ctypes.c_void_p]
        _ptrace = libc.ptrace
    _ptrace(PTRACE_DETACH, pid, None, sig or None)


def _field(path: str, name: bytes) -> int:
    """An integer field of a /proc status file, or 0 (absent, or unreadable)."""
    try:
        with open(path, "rb") as f:
            for line in f:
                if line.startswith(name):
                    return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        pass
    return 0


def tracer_of(pid: int, tid: int | None = None) -> int:
    """The thread ID tracing thread ``tid`` of process ``pid`` (its main thread by
    default), or 0: none, or unreadable."""
    return _field(f"/proc/{pid}/task/{tid or pid}/status", b"TracerPid:")


def end_tracers(pid: int) -> int:
    """SIGKILL every process that traces a thread of ``pid``, an unreaped child of ours
    (so the number is its own), but ourselves; and every process that traces one of
    those, up the chain (at most ``CHAIN``). A tracer killed while its own tracer holds
    it at its exit (``PTRACE_O_TRACEEXIT``) still traces, and so still hides the zombie:
    a program that made such a chain kept its run from ever completing, its process
    group running past its deadline (helper-147). The number of tracers signalled."""
    ended = 0
    # never ourselves or those above us: a process a program handed to the daemon (an
    # orphan's PTRACE_TRACEME) has the daemon for its tracer, and the sentinel following
    # the chain from it must not kill the daemon
    seen = {pid, *_ancestors()}
    chain: list[tuple[int, int]] = [(pid, -1)]  # and its pidfd (-1: our child)
    while chain:
        target, target_fd = chain.pop()
        try:
            for tgid, fd in _end_tracers_of(target, target_fd, seen):
                ended += 1
                if len(seen) < CHAIN:
                    chain.append((tgid, fd))
                else:
                    os.close(fd)
        finally:
            if target_fd >= 0:
                os.close(target_fd)
    return ended


def _ancestors() -> set[int]:
    """This process and every process above it, up to init."""
    found: set[int] = set()
    pid = os.getpid()
    while pid > 1 and pid not in found and len(found) < CHAIN:
        found.add(pid)
        pid = _field(f"/proc/{pid}/status", b"PPid:")
    return found


def _end_tracers_of(pid: int, pidfd: int, seen: set[int]) -> list[tuple[int, int]]:
    """SIGKILL the processes that trace a thread of ``pid`` and are not in ``seen`` (added
    to it); each with a pidfd, open, that names it. ``pidfd`` names ``pid`` (-1: ``pid``
    is our unreaped child): what was read of ``pid`` is trusted only if that process
    still exists after the read, so the number was not yet another's."""
    try:
        threads = [int(t) for t in os.listdir(f"/proc/{pid}/task")]
    except (OSError, ValueError):
        return []
    found: list[tuple[int, int]] = []
    for tid in threads:
        tracer = tracer_of(pid, tid)
        # TracerPid names the tracing thread: its process is the one to end
        tgid = _field(f"/proc/{tracer}/status", b"Tgid:") if tracer > 0 else 0
        if tgid <= 0 or tgid in seen:
            continue
        try:
            fd = os.pidfd_open(tgid)
        except OSError:
            continue
        try:
            # Still its tracer once we hold a pidfd: the pidfd names that process, not a
            # later one given the same number after the tracer let go and exited.
            if tracer_of(pid, tid) == tracer and _field(f"/proc/{tracer}/status", b"Tgid:") == tgid:
                if pidfd >= 0:
                    signal.pidfd_send_signal(pidfd, 0)  # raises once it is reaped
                signal.pidfd_send_signal(fd, signal.SIGKILL)
                seen.add(tgid)
                found.append((tgid, fd))
                continue
        except OSError:
            pass
        os.close(fd)
    return found
