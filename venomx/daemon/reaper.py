"""The daemon's only reaper: on SIGCHLD, one pass per reactor turn of ``waitid``/``wait4``
WNOHANG.

The daemon is a child subreaper, so its children are the fork server, every sentinel,
and any process that escaped a pane. Exits are dispatched by PID. A pane leader whose
sentinel was lost is re-parented here: its group is swept while its zombie still pins
the group ID, then it is reaped and its pane exits with the real wait status and the
usage that same reap gave.
No asyncio child watcher and no blocking wait ever run on the reactor.

A child that made us its tracer (``PTRACE_TRACEME``: any orphan of a pane may) is let
go at its stop, once; one that stops again soon after is held stopped. Without that, a
pane's processes looping "trace me, raise a signal" kept the reactor letting go of them
and nothing else: a start took 24 s, a deadline fired 7 s late (session 24).
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import time
from collections import OrderedDict
from collections.abc import Callable

from workers import protocol as P
from workers import tracer

# pid, wait status, and the reap's usage (workers.protocol.usage)
OnExit = Callable[[int, int, dict[str, int]], bool]

log = logging.getLogger(__name__)
STOPS_MAX = 64  # stops of our tracees taken in one pass; the rest wait for the next turn
HOLD_AFTER = 10.0  # seconds: a tracee let go that stops for us again within this is held
REMEMBERED = 4096  # tracees let go whose time is kept (the oldest are forgotten)


class Reaper:
    """Reaps every child; ``on_exit`` says whether the child was one of ours, and the
    rest (escaped descendants) are counted."""

    def __init__(self, is_leader: Callable[[int], bool], on_exit: OnExit) -> None:
        self.is_leader = is_leader
        self.on_exit = on_exit
        self.reaped_escapees = 0
        self.held = 0  # tracees held stopped
        self.pending = False
        self.let_go_at: OrderedDict[int, float] = OrderedDict()

    def wake(self) -> None:
        """SIGCHLD: one pass in the next turn, however many signals came before it."""
        if not self.pending:
            self.pending = True
            asyncio.get_running_loop().call_soon(self.reap)

    def reap(self) -> None:
        self.pending = False
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
                if stops > STOPS_MAX:
                    self.wake()
                    return
                self.stopped(pid, info)
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

    def stopped(self, pid: int, info: os.waitid_result) -> None:
        """``pid`` made us its tracer and stopped: let it go on untraced, unless it was
        let go less than HOLD_AFTER ago; then hold it. A held process stays stopped until
        it is killed (a deadline, cancel or cleanup does) or the daemon exits."""
        now = time.monotonic()
        last = self.let_go_at.pop(pid, None)
        try:
            if last is not None and now - last < HOLD_AFTER:
                tracer.hold(pid)
                self.held += 1
                log.warning("holding pid %d stopped: it makes the daemon its tracer again", pid)
                return
            tracer.let_go(pid, info)
        except ChildProcessError:
            return  # killed since
        self.let_go_at[pid] = now
        if len(self.let_go_at) > REMEMBERED:
            self.let_go_at.popitem(last=False)
