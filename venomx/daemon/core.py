"""The daemon's state and the pane lifecycle that every verb family builds on.

``Daemon`` owns the registry, config, event log, audit log, runs, seams, the fork server
and the reaper. Sentinel messages arrive here (``on_sentinel``) and are turned into
state changes with their events, each in one reactor turn.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import os
import resource
import signal as _signal
import time
from typing import Any

from venomx.daemon import auth, watch
from venomx.daemon.auth import AuditLog
from venomx.daemon.config import Config
from venomx.daemon.events import EventLog
from venomx.daemon.exited import ExitedPanes
from venomx.daemon.fdreserve import reserve
from venomx.daemon.layout import remove_from_layout
from venomx.daemon.panes import Panes
from venomx.daemon.reaper import Reaper
from venomx.daemon.registry import Pane, Principal, Registry, now_iso
from venomx.daemon.runs import RunTable
from venomx.daemon.seams import Seams
from venomx.daemon.sentinels import ForkServer, waitstatus_fields
from workers import prctl
from workers import protocol as P
from workers.rows import Snapshot

log = logging.getLogger(__name__)
SHUTDOWN_GRACE_MS = 2000


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
    def __init__(self, socket_path: str, config: Config, test_seams: bool) -> None:
        self.socket_path = socket_path
        self.socket_ino = -1  # the socket file we bound, to notice it being replaced
        self.config = config
        self.registry = Registry()
        self.source = self.registry.source
        self.events = EventLog(self.source, config["events.retain_count"])
        self.audit = AuditLog(config["audit.retain_count"])
        self.runs = RunTable(self)
        self.seams = Seams(test_seams)
        self.forkserver = ForkServer()
        self.reaper = Reaper(self.is_leader, self.on_child_exit)
        self.started = time.monotonic()
        self.cwd = os.getcwd()
        self.preparing: set[str] = set()  # pane IDs whose spawn has not committed yet
        self.shutting_down = False
        self.stopped: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.connections: set[Any] = set()
        self.background: set[asyncio.Task[None]] = set()  # tasks the reactor owns
        self.subreaper = False
        self.losses = watch.Losses()
        self.panes = Panes()
        self.exited = ExitedPanes()
        self.owner = self.registry.new_principal(None, list(auth.OWNER_GRANTS), name="owner",
                                                 with_token=False)
        config.listeners.append(self.on_config_changed)

    # -- lifecycle -------------------------------------------------------------------------
    def start(self) -> None:
        self.subreaper = prctl.set_child_subreaper()
        prctl.set_undumpable()  # pane programs share our uid: no ptrace, no pidfd_getfd
        loop = asyncio.get_running_loop()
        loop.add_signal_handler(_signal.SIGCHLD, self.reaper.reap)
        self.forkserver.nofile = raise_nofile()
        reserve.fill()
        self.forkserver.start()
        self.forkserver.refill()

    def stop(self) -> None:
        self.forkserver.stop()

    def begin_shutdown(self) -> None:
        """Refuse new work, terminate every live pane (cause shutdown), then stop."""
        if self.shutting_down:
            return
        self.shutting_down = True
        task = asyncio.ensure_future(self._shutdown())
        self.background.add(task)
        task.add_done_callback(self.background.discard)

    async def _shutdown(self) -> None:
        from venomx.daemon.termination import KILL_WAIT, terminate

        live = [p for p in self.registry.panes.values() if p.live]
        for p in live:
            t = terminate(self, p, "SIGHUP", SHUTDOWN_GRACE_MS, "shutdown")
            if t is not None:
                t.cap_grace(SHUTDOWN_GRACE_MS)  # a joined termination may have a longer grace
        if live:
            await asyncio.wait([p.exited for p in live],
                               timeout=SHUTDOWN_GRACE_MS / 1000.0 + KILL_WAIT)
        # Let waiters woken by the last completions write their replies.
        for _ in range(3):
            await asyncio.sleep(0)
        if not self.stopped.done():
            self.stopped.set_result(None)

    def anonymous(self) -> Principal:
        grants = [g for g in auth.parse_grants(self.config["auth.default_grants"])
                  if g.right == "read"]
        return Principal("anonymous", None, grants, anonymous=True)

    def base_env(self) -> dict[str, str]:
        """A fresh copy of the environment every pane starts from."""
        return dict(self._base_env)

    @functools.cached_property
    def _base_env(self) -> dict[str, str]:
        # the daemon's own environment never changes; reading os.environ decodes each entry
        env = {k: v for k, v in os.environ.items() if k not in ("VENOMX_TOKEN", "VENOMX_RUN")}
        env["TERM"] = "xterm-256color"
        return env

    def on_config_changed(self, paths: list[str]) -> None:
        self.events.resize(self.config["events.retain_count"])
        self.audit.resize(self.config["audit.retain_count"])
        self.events.emit("config.changed", "*", {"paths": sorted(paths)})
        self.runs.enforce()
        self.exited.enforce(self)

    # -- children --------------------------------------------------------------------------
    def is_leader(self, pid: int) -> bool:
        return pid in self.registry.leaders

    def on_child_exit(self, pid: int, status: int) -> None:
        reg = self.registry
        if pid == self.forkserver.pid:
            log.error("fork server exited (status %d); restarting it", status)
            if not self.shutting_down:
                self.forkserver.restart()
            return
        if self.forkserver.lost(pid):
            log.error("a spare sentinel exited (status %d)", status)
            if not self.shutting_down:
                self.forkserver.refill()
            return
        pane_id = reg.sentinels.pop(pid, None)
        if pane_id is not None:
            reg.reaps_after_exit.pop(pid, None)  # it reaped its leader on the way out
            pane = reg.panes.get(pane_id)
            if pane is not None and pane.live and not pane.exit_seen and status != 0:
                watch.lose(self, pane, f"exited with status {status}")
                self.settle(pane)
            return
        pane_id = reg.leaders.get(pid)
        if pane_id is not None:
            pane = reg.panes.get(pane_id)
            if pane is None:  # its sentinel died before the start committed
                reg.early_exits[pid] = status
            elif pane.live:
                pane.leader_status = status
                self.settle(pane)
            return
        if pid in reg.reaps_after_exit.values():
            # an exited pane's leader, whose sentinel died after EXIT, before reaping it
            reg.reaps_after_exit = {s: ld for s, ld in reg.reaps_after_exit.items()
                                    if ld != pid}
            return
        self.reaper.reaped_escapees += 1

    def settle(self, pane: Pane) -> None:
        """Exit the pane once its wait status is known: from the sentinel's EXIT (its own
        wait on the child it started), or, when the sentinel is lost, from the daemon's
        own reap of the leader, which re-parents to it."""
        if not pane.live:
            return
        if pane.exit_seen:
            self.pane_exited(pane, pane.exit_status, pane.exit_state)
        elif pane.leader_status is None:
            return
        elif pane.fault is not None:
            self.pane_exited(pane, pane.leader_status, None)
        elif pane.watchdog is None:
            # The sentinel has exited (the leader could not re-parent to us otherwise);
            # its EXIT can only still be on its way through the channel.
            pane.watchdog = asyncio.get_running_loop().call_later(
                watch.CHANNEL_BOUND, watch.overdue, self, pane)

    # -- sentinel messages -----------------------------------------------------------------
    def on_sentinel(self, pane: Pane, m: P.Message) -> None:
        if isinstance(m, (P.Output, P.Screen)):
            pane.told_offset = m.offset
            for send in list(pane.attachers.values()):
                send(m)
        elif isinstance(m, P.Marker):
            self.on_marker(pane, m)
        elif isinstance(m, P.Rows):
            if m.error is None:
                pane.told_epoch = m.result.get("epoch", pane.told_epoch)
                pane.told_offset = m.result.get("offset", pane.told_offset)
            self.panes.answered(m.req, m)
        elif isinstance(m, P.Resized):
            pane.told_epoch = m.epoch
            if (m.cols, m.rows) != (pane.cols, pane.rows):
                # applied now, even if the request that asked for it gave up waiting
                pane.cols, pane.rows = m.cols, m.rows
                self.events.emit("pane.resized", f"pane:{pane.id}",
                                 {"pane": pane.id, "cols": m.cols, "rows": m.rows}, pane.node)
            self.panes.answered(m.req, m)
        elif isinstance(m, (P.Wrote, P.Pong)):
            self.panes.answered(m.req, m)
        elif isinstance(m, P.Exit):
            if pane.live and pane.fault is None and not pane.exit_seen:
                pane.exit_seen = True
                pane.exit_status = m.status
                pane.exit_state = Snapshot.from_dict(m.state)
                self.settle(pane)

    def on_marker(self, pane: Pane, m: P.Marker) -> None:
        # Observations only: nothing but these events changes (RFC-0015 §5). They come
        # from the program, so each pane has a budget; the excess is coalesced (events.py).
        pane.told_offset = m.offset
        res = f"pane:{pane.id}"
        rate, burst = self.config["events.observe_rate"], self.config["events.observe_burst"]
        if m.what == "started":
            pane.command_open = True
            self.events.observe(pane.id, "command.started", res, {"pane": pane.id}, pane.node,
                                rate, burst)
        elif m.what == "finished":
            pane.command_open = False
            data: dict[str, Any] = {"pane": pane.id, "reason": "marker"}
            if m.exit_code is not None:
                data["exit_code"] = m.exit_code
            self.events.observe(pane.id, "command.finished", res, data, pane.node, rate, burst)
        elif m.what == "status":
            pane.status_set = m.state is not None
            self.events.observe(pane.id, "program.status_changed", res,
                                {"pane": pane.id, "state": m.state}, pane.node, rate, burst)

    # -- exit, signals, removal ------------------------------------------------------------
    def pane_exited(self, pane: Pane, status: int, final: Snapshot | None) -> None:
        """The leader was reaped: pane.exited and the run's completion, one turn."""
        fields = waitstatus_fields(status)
        pane.state = "exited"
        pane.exit_code = fields.get("exit_code")
        pane.signal = fields.get("signal")
        pane.exited_at = now_iso()
        pane.exited_mono = time.monotonic()
        pane.final = final  # None when the sentinel was lost: no rows are invented
        pane.exit_state = None
        watch.unwatch(pane)
        self.registry.leaders.pop(pane.pid, None)
        if pane.leader_status is None:  # its sentinel reaps it once the channel closes
            self.registry.reaps_after_exit[pane.sentinel_pid] = pane.pid
        if pane.termination is not None:
            pane.termination.cancel_timer()
        res = f"pane:{pane.id}"
        if pane.command_open:
            pane.command_open = False
            data: dict[str, Any] = {"pane": pane.id, "reason": "pane_exit"}
            self.events.emit("command.finished", res, data, pane.node)
        if pane.status_set:
            pane.status_set = False
            self.events.emit("program.status_changed", res, {"pane": pane.id, "state": None},
                             pane.node)
        data = {"pane": pane.id}
        if pane.exit_code is not None:
            data["exit_code"] = pane.exit_code
        if pane.signal is not None:
            data["signal"] = pane.signal
        self.events.emit("pane.exited", res, data, pane.node)
        if pane.run is not None:
            self.runs.complete(pane.run, pane)
        if not pane.exited.done():
            pane.exited.set_result(None)
        if pane.channel is not None:
            pane.channel.close()
            pane.channel = None  # its decoder's buffers held the whole final state
        self.exited.add(pane)
        self.exited.enforce(self)

    def signal_pane(self, pane: Pane, sigs: list[int]) -> None:
        """Deliver signals to the pane's pinned group (the ``terminate.unkillable`` seam
        withholds them until released)."""
        self.seams.call("terminate.unkillable", lambda: self._signal_group(pane, sigs))

    def _signal_group(self, pane: Pane, sigs: list[int]) -> None:
        if not pane.live:
            return
        # Directly, never through the sentinel (which may be busy, stopped or dead): a
        # sentinel reaps its leader only once the pane has exited, so while the pane is
        # live its group ID is pinned.
        for s in sigs:
            try:
                os.killpg(pane.pid, s)
            except OSError:
                pass

    def remove_pane(self, pane: Pane) -> list[str]:
        """Remove an exited pane (and its window if last); one turn. Returns removed IDs."""
        reg = self.registry
        removed = [pane.id]
        del reg.panes[pane.id]
        self.exited.forget(pane.id)
        principal = reg.principals.get(pane.principal)
        if principal is not None:
            reg.revoke(principal.id)
        pane.final = None
        self.events.emit("pane.removed", f"pane:{pane.id}", {"pane": pane.id}, pane.node)
        window = reg.windows.get(pane.window)
        if window is not None:
            window.panes.remove(pane.id)
            layout = remove_from_layout(window.layout, pane.id)
            if layout is None:
                removed += self.remove_window_record(window.id)
            else:
                window.layout = layout
                self.events.emit("window.layout_changed", f"window:{window.id}",
                                 {"window": window.id, "layout": layout}, window.node)
        return removed

    def remove_window_record(self, window_id: str) -> list[str]:
        reg = self.registry
        window = reg.windows.pop(window_id)
        session = reg.sessions.get(window.session)
        if session is not None and window_id in session.windows:
            session.windows.remove(window_id)
        self.events.emit("window.removed", f"window:{window_id}", {"window": window_id},
                         window.node)
        return [window_id]
