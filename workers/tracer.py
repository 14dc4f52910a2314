"""A leader held by a tracer: the one way a program can hide its exit from its parent.

Linux shows a traced zombie only to its tracer, until the tracer waits for it, detaches
or dies. Without Yama any process of our uid may trace a pane's leader (it is dumpable
after exec), so a program could fork a tracer that never waits and keep its run from
ever completing, out of reach of a deadline's or a cancel's ``killpg``. A tracer that
holds an exited leader longer than a debugger needs to see the exit is killed; the
zombie then passes to its parent with its real wait status.
"""

from __future__ import annotations

import os
import signal

# How long a tracer may hold an exited leader before it is killed: a debugger waits for
# its tracee's exit at once; a program holding its own outcome gains no more than this.
GRACE = 0.5


def tracer_of(pid: int) -> int:
    """The pid of the process tracing ``pid``, or 0 (none, or unreadable)."""
    try:
        with open(f"/proc/{pid}/status", "rb") as f:
            for line in f:
                if line.startswith(b"TracerPid:"):
                    return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        pass
    return 0


def end_tracer(pid: int) -> bool:
    """SIGKILL the tracer of ``pid``, an unreaped child of ours (so the number is its
    own), unless we trace it ourselves. True if a tracer was signalled."""
    tracer = tracer_of(pid)
    if tracer <= 0 or tracer == os.getpid():
        return False
    try:
        fd = os.pidfd_open(tracer)
    except OSError:
        return False
    try:
        # Still its tracer once we hold a pidfd: the pidfd names that process, not a
        # later one given the same number after the tracer let go and exited.
        if tracer_of(pid) != tracer:
            return False
        signal.pidfd_send_signal(fd, signal.SIGKILL)
        return True
    except OSError:
        return False
    finally:
        os.close(fd)
