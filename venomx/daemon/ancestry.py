"""Which venomx panes a process is inside: what the daemon asks of a peer before it
accepts ``@owner`` (or gives a caller without a token the configured grants).

Every program in a pane runs as our uid, so ``SO_PEERCRED`` cannot tell it from the
person who started the daemon; its ancestry can. A venomx daemon is a child subreaper:
whatever a pane starts stays below it while it lives, however it forks, so the walk up
from a pane's program always passes the pane's daemon. Each daemon names itself
``venomx-daemon`` (its ``comm``, which no other process can change), so a daemon sees
the panes of *other* daemons of the uid as well as its own: without that, a run with
``grants: []`` could ask a second daemon for ``@owner`` and, from a run there, ask the
first (found by an attack pass, session 24).
"""

from __future__ import annotations

import os

from venomx.daemon import procfs
from workers import prctl

DAEMON_NAME = b"venomx-daemon"
MAX_ANCESTRY = 256  # deeper process trees than this are treated as a pane's

# A pane a process is inside: (daemon pid, its start time, pid of the daemon's child on
# the way down, that child's start time). Start times keep a reused pid from matching.
Pane = tuple[int, int, int, int]


def name_this_daemon() -> None:
    """Take the name other daemons look for (see the module's docstring)."""
    prctl.set_name(DAEMON_NAME)


def panes_of(pid: int, me: int | None = None) -> frozenset[Pane] | None:
    """The venomx panes ``pid`` is inside, one per daemon above it; None when it is
    inside one of ``me``'s (``me`` itself among its ancestors) or cannot be told (gone
    while we looked, or deeper than MAX_ANCESTRY)."""
    found: set[Pane] = set()
    below: tuple[int, int] | None = None
    for _ in range(MAX_ANCESTRY):
        if pid == me:
            return None
        if pid <= 1:
            return frozenset(found)
        try:
            name, fields = procfs.named_stat(pid)
            parent, start = int(fields[procfs.PPID]), int(fields[procfs.STARTTIME])
        except (OSError, ValueError, IndexError):
            return None  # gone before we could look: refuse rather than guess
        if name == DAEMON_NAME and below is not None:
            found.add((pid, start, *below))
        below, pid = (pid, start), parent
    return None


def launched_from(pid: int) -> frozenset[Pane]:
    """The panes the process ``pid``, which starts a daemon, is inside: its own, and
    those of its session's leader. A pane's shell that starts ``( venomx serve --detach
    & )`` has its subshell gone before ``serve`` looks, so ``serve`` is already an orphan
    re-parented to the pane's daemon; the session it shares with the shell still leads
    back through the pane. A process that left the session (``setsid``) has only its own."""
    own = panes_of(pid) or frozenset()
    try:
        leader = os.getsid(pid)
    except OSError:
        return own
    if leader == pid:
        return own
    return own | (panes_of(leader) or frozenset())


def in_a_pane(pid: int, me: int, launched_in: frozenset[Pane]) -> bool:
    """Whether ``pid`` is a program started in a pane, of daemon ``me`` or of another
    daemon, that ``me`` was not itself started in. A daemon started from a pane (a test
    suite run as a pane's program starts its own daemons) serves that pane's programs
    as its owner's; every other pane's program acts with a token."""
    panes = panes_of(pid, me)
    return panes is None or not panes <= launched_in
