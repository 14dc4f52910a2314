"""``Daemon``: constructs the services, wires them together, starts and stops them.

It holds no state of its own that a request reads: handlers get the services
(``services.Services``); pane transitions belong to the pane owner (``panes.Panes``),
runs to ``runs.RunTable``.
"""

from __future__ import annotations

import asyncio
import logging
import resource
import signal as _signal
from typing import Any

from venomx.daemon import ancestry, auth
from venomx.daemon.auth import AuditLog
from venomx.daemon.cgroups import Cgroups
from venomx.daemon.collector import Collector
from venomx.daemon.config import Config
from venomx.daemon.doctor import Doctor
from venomx.daemon.events import EventLog
from venomx.daemon.fdreserve import reserve
from venomx.daemon.inflight import InFlight
from venomx.daemon.lifecycle import Lifecycle
from venomx.daemon.panes import Panes
from venomx.daemon.panes.termination import DEFAULT_GRACE_MS
from venomx.daemon.priority import Priority
from venomx.daemon.reaper import Reaper
from venomx.daemon.registry import Pane, Registry
from venomx.daemon.runs import RunTable
from venomx.daemon.seams import Seams
from venomx.daemon.services import Services
from workers import prctl

log = logging.getLogger(__name__)


def raise_nofile() -> int:
    """Raise our soft RLIMIT_NOFILE to the hard limit (every connection, sentinel channel
    and pidfd is a descriptor) and return the soft limit we were started with, which the
    fork server gives back to every sentinel and so to every pane's leader: a program
    using select() breaks with descriptors above 1024."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != hard:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
        except (OSError, ValueError) as exc:  # a hard limit above fs.nr_open
            log.warning("cannot raise the descriptor limit from %d to %d: %s", soft, hard, exc)
    return soft


class Daemon:
    """One daemon start: its services, built and wired here, and their start and stop."""

    def __init__(
        self,
        socket_path: str,
        config: Config,
        test_seams: bool,
        launched_in: frozenset[ancestry.Pane] = frozenset(),
    ) -> None:
        registry = Registry()
        self.source = registry.source
        self.socket_path = socket_path
        self.config = config
        events = EventLog(self.source, config["events.retain_count"])
        audit = AuditLog(config["audit.retain_count"])
        runs = RunTable(registry, events, config)
        self.lifecycle = Lifecycle()
        self.panes = Panes(
            registry, events, runs, config, Seams(test_seams), self.lifecycle, socket_path
        )
        runs.stop = self.stop_pane
        runs.exited_unseen = self.panes.exited_unseen
        runs.sweep = lambda pane: self.panes.signal(pane, [_signal.SIGKILL])
        runs.evicted = lambda: self.panes.exited_panes.enforce(self.panes)
        self.lifecycle.stop_work = self.panes.shutdown
        self.lifecycle.end_requests = self.end_requests
        self.priority = Priority()
        self.reaper = Reaper(
            self.panes.is_leader, self.panes.on_child_exit, self.panes.forkserver.before_reap
        )
        self.connections: set[Any] = set()
        self.collector = Collector()
        self.in_flight = InFlight()
        self.doctor = Doctor(
            self.source,
            registry,
            config,
            events,
            audit,
            runs,
            self.panes,
            self.reaper,
            socket_path,
            self.connections,
            self.priority,
            self.collector,
            self.in_flight,
        )
        owner = registry.new_principal(
            None, list(auth.OWNER_GRANTS), name="owner", with_token=False
        )
        self.services = Services(
            self.source,
            registry,
            config,
            events,
            audit,
            runs,
            self.panes,
            self.panes.seams,
            self.doctor,
            self.lifecycle,
            owner,
            self.connections,
            self.collector,
            launched_in,
            self.in_flight,
        )
        config.listeners.append(self.on_config_changed)
        registry.on_revoked = self.end_revoked

    def stop_pane(self, pane: Pane, cause: str, exited: bool) -> None:
        """A run's deadline passed: end its pane as removal and shutdown do, SIGKILL at
        most the default grace from now (a joined termination may have a longer one)."""
        t = self.panes.terminate(pane, cause=cause, exited=exited)
        if t is not None:
            t.cap_grace(DEFAULT_GRACE_MS)

    def start(self) -> None:
        """Take our cgroup subtree first (the fork server, and so every sentinel, starts
        in its leaf); ``cgroups = "required"`` without one raises ``unsupported.cgroups``."""
        self.panes.cgroups = Cgroups.setup(self.config["cgroups"], self.socket_path, self.source)
        self.doctor.subreaper = prctl.set_child_subreaper()
        # before the fork server exists (alone in our session, or not at all), and while
        # our /proc files are still ours
        self.priority.open()
        prctl.set_undumpable()  # pane programs share our uid: no ptrace, no pidfd_getfd
        loop = asyncio.get_running_loop()
        loop.add_signal_handler(_signal.SIGCHLD, self.reaper.wake)
        # Past a full wakeup socket CPython 3.11 schedules a warning from inside its signal
        # handler (_PyEval_AddPendingCall, which takes a lock the thread it interrupted
        # may hold): a flood of SIGCHLD from a pane's processes hung the daemon for good
        # (session 24). With the warning off, a signal past a full socket loses its byte,
        # as asyncio's own bytes ahead of it are read. Every handler is added by now.
        _signal.set_wakeup_fd(_signal.set_wakeup_fd(-1), warn_on_full_buffer=False)
        self.reaper.wake()  # one that came while it was being set
        self.priority.apply(self.config["daemon.nice"], loop)
        forkserver = self.panes.forkserver
        forkserver.nofile = raise_nofile()
        reserve.fill()
        forkserver.start()
        forkserver.refill()
        self.collector.start(loop)

    async def stop(self) -> None:
        """Stop the fork server, then leave our cgroup subtree once its processes are gone."""
        self.collector.stop()
        self.panes.forkserver.stop()
        self.priority.close()
        await self.panes.cgroups.stop()

    def end_requests(self) -> list[asyncio.Task[None]]:
        """Cancel every request still in flight (a shutdown's last step): each is then
        answered ``cancelled``, as RFC-0015 §7 has it for waiters at teardown."""
        ended = []
        for conn in list(self.connections):
            for task in list(conn.tasks.values()):
                task.cancel()
                ended.append(task)
        return ended

    def end_revoked(self, principals: list[str]) -> None:
        """A revoked token stops working at once (foundation §5): the requests it has in
        flight, a wait, an attach or an event stream, end now with ``denied.token``."""
        revoked = set(principals)
        current = asyncio.current_task()  # a removal that revokes its own caller answers
        for conn in list(self.connections):
            if conn.principal is not None and conn.principal.id in revoked:
                for task in list(conn.tasks.values()):
                    if task is not current:
                        task.cancel()

    def on_config_changed(self, paths: list[str]) -> None:
        s = self.services
        s.events.resize(self.config["events.retain_count"])
        s.audit.resize(self.config["audit.retain_count"])
        s.refresh_anonymous()
        s.events.emit("config.changed", "*", {"paths": sorted(paths)})
        self.panes.cgroups.configured = self.config["cgroups"]
        self.panes.forkserver.configure(
            self.config["spawn.spares_max"],
            self.config["spawn.spares_idle_ms"],
            self.config["spawn.spares_min"],
        )
        s.runs.enforce()
        self.panes.exited_panes.enforce(self.panes)
        if "daemon.nice" in paths:
            self.priority.apply(self.config["daemon.nice"], asyncio.get_running_loop())
