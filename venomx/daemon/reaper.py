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
and nothing else: a start took 24 s, a deadline fired 7 s late (session 24). A pass
lasts at most PASS_SECONDS, and what is left waits for the next reactor turn.
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

# pid, wait status, and the reap's usage (workers.protocol.usage; a leader's only)
OnExit = Callable[[int, int, dict[str, int] | None], bool]

log = logging.getLogger(__name__)
# A pass's time; the rest waits for the next turn. Exits count too: a thread that calls
# PTRACE_TRACEME and returns leaves a zombie only its tracer (us) may reap, at a kernel
# cost that grew to ~0.36 ms a reap with a backlog, and a pass that took every exit
# there was kept the reactor for 28 s (session 24).
PASS_SECONDS = 0.005
HOLD_AFTER = 10.0  # seconds: a tracee let go that stops for us again within this is held
REMEMBERED = 4096  # tracees let go whose time is kept (the oldest are forgotten)


class Reaper:
    """Reaps every child; ``on_exit`` says whether the child was one of ours, and the
    rest (escaped descendants) are counted."""

    def __init__(
        self,
        is_leader: Callable[[int], bool],
        on_exit: OnExit,
        before: Callable[[int], None] = lambda pid: None,
    ) -> None:
        """``before``: told of each exited child while it is still a zombie, so that
        what its pid (or a session or group numbered so) holds is settled while the
        number cannot be any other process's."""
        self.is_leader = is_leader
        self.on_exit = on_exit
        self.before = before
        self.reaped_escapees = 0
        self.pending = False
        self.let_go_at: OrderedDict[int, float] = OrderedDict()

    def wake(self) -> None:
        """SIGCHLD: one pass in the next turn, however many signals came before it."""
        if not self.pending:
            self.pending = True
            asyncio.get_running_loop().call_soon(self.reap)

    def reap(self) -> None:
        self.pending = False
        end = time.monotonic() + PASS_SECONDS
        while True:
            if time.monotonic() > end:
                self.wake()  # requests and timers first
                return
            try:
                info = os.waitid(os.P_ALL, 0, os.WEXITED | os.WNOHANG | os.WNOWAIT)
            except ChildProcessError:
                return
            if info is None or info.si_pid == 0:
                return
            pid = info.si_pid
            if info.si_code not in tracer.ENDED:  # a descendant made us its tracer
                self.stopped(pid, info)
                continue
            try:
                self.before(pid)
            except Exception:  # the reaper must survive any handler bug
                log.exception("pre-reap handler failed for pid %d", pid)
            usage: dict[str, int] | None = None
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
            else:
                # Without rusage, which the kernel sums over the child's threads: a traced
                # thread (PTRACE_TRACEME, then return) of a process with thousands of them
                # made every reap walk them all, 0.36 ms each, 95% of the daemon's time.
                try:
                    done = os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG)
                except ChildProcessError:
                    continue
                if done is None:
                    continue
                status = P.wait_status(done)
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
                log.warning("holding pid %d stopped: it makes the daemon its tracer again", pid)
                return
            tracer.let_go(pid, info)
        except ChildProcessError:
            return  # killed since
        self.let_go_at[pid] = now
        if len(self.let_go_at) > REMEMBERED:
            self.let_go_at.popitem(last=False)
