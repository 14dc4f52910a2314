"""What a leader inherits from its sentinel besides the terminal: resource limits and
scheduling (nice value, policy, CPUs).

Any process of our uid may change them on the fork server or a sentinel: ``prlimit(2)``,
``setpriority``, ``sched_setscheduler`` and ``sched_setaffinity`` are not held back by
``PR_SET_DUMPABLE``. Every leader forked after would inherit the change, so one run's
program, gone long since, could decide how later runs of every principal end (a CPU
limit's SIGKILL, SIGXFSZ) or starve them. The fork server takes what it was started
with as the baseline; it puts it back before each fork, and each sentinel before it
spawns a leader. What cannot be put back (a lowered hard limit, a nice value or policy
that only privilege may undo) is refused: the fork server exits, to be started afresh
by the daemon, and the sentinel fails its start with EPERM and exits.
"""

from __future__ import annotations

import os
import resource

# The fork server's exit status when it cannot put its baseline back: the daemon says
# why in its log and starts another.
CHANGED = 3

RESOURCES = tuple(
    getattr(resource, name) for name in sorted(dir(resource)) if name.startswith("RLIMIT_")
)

# limits (one (soft, hard) per RESOURCES), nice value, scheduling policy and its
# priority, CPUs
Baseline = tuple[tuple[tuple[int, int], ...], int, tuple[int, int], frozenset[int]]


def now() -> Baseline:
    """What this process would hand a child now."""
    return (
        tuple(resource.getrlimit(r) for r in RESOURCES),
        os.getpriority(os.PRIO_PROCESS, 0),
        (os.sched_getscheduler(0), os.sched_getparam(0).sched_priority),
        frozenset(os.sched_getaffinity(0)),
    )


def restore(base: Baseline) -> bool:
    """Put back whatever differs from ``base``; False if something cannot be. CPUs taken
    away are given back where the host still allows them, never refused; CPUs added
    since are kept."""
    limits, nice, policy, cpus = base
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
    now = os.sched_getaffinity(0)
    if not cpus <= now:  # narrowed; CPUs the host added since are kept
        try:
            os.sched_setaffinity(0, cpus | now)
        except OSError:
            pass  # the host's cpuset changed since: its choice, not a program's
    return intact
