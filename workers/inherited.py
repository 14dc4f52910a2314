"""What a leader inherits from its sentinel besides the terminal: resource limits and
scheduling (nice value, policy, CPUs, I/O priority).

Any process of our uid may change them on the fork server or a sentinel: ``prlimit(2)``,
``setpriority``, ``sched_setscheduler``, ``sched_setaffinity`` and ``ioprio_set`` are
not held back by ``PR_SET_DUMPABLE``. Every leader forked after would inherit the
change, so one run's program, gone long since, could decide how later runs of every
principal end (a CPU limit's SIGKILL, SIGXFSZ) or starve them. The fork server takes
the baseline the daemon passes it (the daemon's own values when it started), puts it
back at its start and before each fork, and each sentinel before it spawns a leader.
What cannot be put back (a lowered hard limit, a nice value or policy that only
privilege may undo) is refused: the fork server exits, to be started afresh by the
daemon, and the sentinel fails its start with EPERM and exits.
"""

from __future__ import annotations

import ctypes
import json
import os
import resource

from workers import syscalls

# The fork server's exit status when it cannot put its baseline back: the daemon says
# why in its log and starts another.
CHANGED = 3


def _limits() -> tuple[int, ...]:
    """Every resource limit this kernel has, by number, once each: Python's names miss
    some (RLIMIT_LOCKS, 10 on Linux) and name one twice (RLIMIT_OFILE is RLIMIT_NOFILE),
    and a limit left out is one a program may lower for every later run."""
    found = []
    for r in range(64):
        try:
            resource.getrlimit(r)
        except (ValueError, OSError):
            continue
        found.append(r)
    return tuple(found)


RESOURCES = _limits()

IOPRIO_WHO_PROCESS = 1
# A function object of its own (``CDLL[...]`` is not cached), so that its argument types
# do not clash with the waitid call's (workers/leader.py).
_ioprio = ctypes.CDLL(None, use_errno=True)["syscall"]
_ioprio.restype = ctypes.c_long
_ioprio.argtypes = (ctypes.c_long, ctypes.c_long, ctypes.c_long, ctypes.c_long)

# limits (one (soft, hard) per RESOURCES), nice value, scheduling policy and its
# priority, CPUs, I/O priority (-1 where unknown)
Baseline = tuple[tuple[tuple[int, int], ...], int, tuple[int, int], frozenset[int], int]


def ioprio() -> int:
    """This process's I/O priority as ``ioprio_get`` gives it (class and level in one
    number), or -1 where the system call is unknown or refused."""
    if syscalls.IOPRIO_GET is None:
        return -1
    return int(_ioprio(syscalls.IOPRIO_GET, IOPRIO_WHO_PROCESS, 0, 0))


def set_ioprio(value: int) -> bool:
    """Set this process's I/O priority; False if refused."""
    set_ = syscalls.IOPRIO_SET
    return set_ is not None and _ioprio(set_, IOPRIO_WHO_PROCESS, 0, value) == 0


def now() -> Baseline:
    """What this process would hand a child now."""
    return (
        tuple(resource.getrlimit(r) for r in RESOURCES),
        os.getpriority(os.PRIO_PROCESS, 0),
        (os.sched_getscheduler(0), os.sched_getparam(0).sched_priority),
        frozenset(os.sched_getaffinity(0)),
        ioprio(),
    )


def encode(base: Baseline) -> str:
    """``base`` as the daemon hands it to a fork server it starts (an argument)."""
    limits, nice, policy, cpus, io = base
    return json.dumps([limits, nice, policy, sorted(cpus), io], separators=(",", ":"))


def decode(text: str) -> Baseline:
    limits, nice, policy, cpus, io = json.loads(text)
    return (
        tuple((int(soft), int(hard)) for soft, hard in limits),
        int(nice),
        (int(policy[0]), int(policy[1])),
        frozenset(map(int, cpus)),
        int(io),
    )


def restore(base: Baseline) -> bool:
    """Put back whatever differs from ``base``; False if something cannot be. The CPUs
    are set to the baseline's, narrowed or widened (an operator's ``taskset``), and
    never refused: the kernel keeps only those the host's cpuset still allows."""
    limits, nice, policy, cpus, io = base
    intact = True
    for r, want in zip(RESOURCES, limits, strict=True):
        if resource.getrlimit(r) != want:
            try:
                resource.setrlimit(r, want)
            except (OSError, ValueError):
                intact = False
    if os.getpriority(os.PRIO_PROCESS, 0) != nice:
        try:
            os.setpriority(os.PRIO_PROCESS, 0, nice)
        except OSError:
            intact = False
    if os.sched_getscheduler(0) != policy[0] or os.sched_getparam(0).sched_priority != policy[1]:
        try:
            os.sched_setscheduler(0, policy[0], os.sched_param(policy[1]))
        except OSError:
            intact = False
    if io >= 0 and ioprio() != io and not set_ioprio(io):
        intact = False
    if os.sched_getaffinity(0) != cpus:
        try:
            os.sched_setaffinity(0, cpus)
        except OSError:
            pass  # none of them is allowed any more: the host's choice, not a program's
    return intact
