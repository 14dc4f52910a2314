"""The daemon's only reaper: a SIGCHLD handler looping ``waitid``/``wait4`` WNOHANG.

The daemon is a child subreaper, so its children are the fork server, every sentinel,
and any process that escaped a pane. Exits are dispatched by PID. A pane leader whose
sentinel was lost is re-parented here: its group is swept while its zombie still pins
the group ID, then it is reaped and its pane exits with the real wait status and the
usage that same reap gave.
No asyncio child watcher and no blocking wait ever run on the reactor.
"""

from __future__ import annotations

import logging
import os
import signal
from collections.abc import Callable

from workers import protocol as P
from workers import tracer

# pid, wait status, and the reap's usage (workers.protocol.usage)
OnExit = Callable[[int, int, dict[str, int]], bool]

log = logging.getLogger(__name__)
STOPS_MAX = 64  # stops of our tracees let go in one pass


class Reaper:
    """Reaps every child; ``on_exit`` says whether the child was one of ours, and the
    rest (escaped descendants) are counted."""

    def __init__(self, is_leader: Callable[[int], bool], on_exit: OnExit) -> None:
        self.is_leader = is_leader
        self.on_exit = on_exit
        self.reaped_escapees = 0

    def reap(self) -> None:
        stops = 0
        while True:
            try:
                info = os.waitid(os.P_ALL, 0, os.WEXITED | os.WNOHANG | os.WNOWAIT)
            except ChildProcessError:
                return
            if info is None or info.si_pid == 0:
                return
            pid = info.si_pid
            if info.si_code not in tracer.ENDED:  # a descendant made us its tracer
                stops += 1
                if stops > STOPS_MAX:  # stopping again and again: the next SIGCHLD
                    return
                tracer.let_go(pid, info)
                continue
            if self.is_leader(pid):
                try:
                    os.killpg(pid, signal.SIGKILL)
                except OSError:
                    pass
            try:
                _, status, ru = os.wait4(pid, os.WNOHANG)
            except ChildProcessError:
                continue
            usage = P.usage(round(ru.ru_utime * 1e6), round(ru.ru_stime * 1e6), ru.ru_maxrss)
            try:
                if not self.on_exit(pid, status, usage):
                    self.reaped_escapees += 1
            except Exception:  # the reaper must survive any handler bug
                log.exception("exit handler failed for pid %d", pid)
