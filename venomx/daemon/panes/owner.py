"""``Panes``: the one owner of every pane transition and the only holder of a sentinel.

Start (``spawn``), input, resize, capture, attach, signal and terminate, exit, and
removal all happen here, each visible change with its events in one reactor turn. The
pane itself is a plain record in the registry; what the daemon holds of its processes
(channel, pidfd, termination, exit status) is its ``Link``, kept here. Sentinel messages
arrive in ``on_sentinel`` and leave only from this package.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import os
import signal as signal_mod
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from venomx.daemon.cgroups import Cgroups, strangers
from venomx.daemon.config import Config
from venomx.daemon.events import EventLog
from venomx.daemon.layout import remove_from_layout
from venomx.daemon.lifecycle import Lifecycle
from venomx.daemon.panes import watch
from venomx.daemon.panes.exited import ExitedPanes
from venomx.daemon.panes.link import Link, Termination
from venomx.daemon.panes.losses import Losses
from venomx.daemon.panes.pacing import Pacer
from venomx.daemon.panes.replays import Replays
from venomx.daemon.panes.requests import Requests, lost
from venomx.daemon.panes.sentinels import SENTINEL_BOUND, ForkServer
from venomx.daemon.panes.spawn import SpawnRequest, spawn
from venomx.daemon.panes.termination import (
    DEFAULT_GRACE_MS,
    DEFAULT_SIGNAL,
    KILL_WAIT,
    terminate,
    wait_terminated,
)
from venomx.daemon.registry import Pane, Registry, Session, Window, now_iso
from venomx.daemon.runs import RunTable
from venomx.daemon.seams import Seams
from venomx.daemon.waitstatus import waitstatus_fields
from venomx.wire import VenomxError
from workers import inherited
from workers import protocol as P
from workers.rows import EpochConflict, Snapshot, capture, repaint

log = logging.getLogger(__name__)

SETTLE_WITHIN = SENTINEL_BOUND  # seconds a removal waits for starts past their barrier


@dataclass
class PastBarrier:
    """A start past its barrier: where it will be committed, and done when it has been
    (or was rolled back); ``abandoned`` once a recursive removal stopped waiting for it."""

    pane: str
    session: str
    window: str | None
    target: str | None
    done: asyncio.Future[None]
    abandoned: bool = False


# cols, rows, offset, repaint bytes, and whether bytes after ``offset`` follow instead
OnScreen = Callable[[int, int, int, bytes, bool], None]
OnOutput = Callable[[bytes, int], None]  # bytes, offset after them


class Panes:
    """The pane owner: every pane transition, with its events, in one reactor turn."""

    def __init__(
        self,
        registry: Registry,
        events: EventLog,
        runs: RunTable,
        config: Config,
        seams: Seams,
        lifecycle: Lifecycle,
        socket_path: str,
    ) -> None:
        self.registry = registry
        self.events = events
        self.runs = runs
        self.config = config
        self.seams = seams
        self.lifecycle = lifecycle
        self.socket_path = socket_path
        self.cwd = os.getcwd()
        self.forkserver = ForkServer(
            config["spawn.spares_max"], config["spawn.spares_idle_ms"], config["spawn.spares_min"]
        )
        self.forkserver.unsafe = self.panes_alive
        self.forkserver.exited = self.on_child_exit
        self.links: dict[str, Link] = {}
        self.preparing: set[str] = set()  # pane IDs whose spawn has not committed yet
        # Starts past their barrier, by pane ID. A removal of their session or window waits
        # for them; an exited split target is not evicted under them.
        self.past_barrier: dict[str, PastBarrier] = {}
        self.losses = Losses()
        self.exited_panes = ExitedPanes()
        self.replays = Replays()  # the last bytes of panes that ended lately
        self.requests = Requests()
        # A burst's heavy steps (starts, commits, exits), a few per reactor turn.
        self.pacer = Pacer()
        # One cgroup per pane where the host allows it; the daemon sets it up at start.
        self.cgroups = Cgroups("off")
        self.orphans_now: list[int] | None = None  # this turn's ``orphans``

    # -- start -------------------------------------------------------------------------------
    async def spawn(
        self, req: SpawnRequest, on_commit: Callable[[Pane], None] | None = None
    ) -> Pane:
        """Prepare, release the barrier and commit (``panes.spawn``); nothing is left
        behind when it raises."""
        return await spawn(self, req, on_commit)

    def base_env(self) -> dict[str, str]:
        """A fresh copy of the environment every pane starts from."""
        return dict(self._base_env)

    @functools.cached_property
    def _base_env(self) -> dict[str, str]:
        # the daemon's own environment never changes; reading os.environ decodes each entry
        env = {k: v for k, v in os.environ.items() if k not in ("VENOMX_TOKEN", "VENOMX_RUN")}
        env["TERM"] = "xterm-256color"
        return env

    def link(self, pane: Pane) -> Link:
        return self.links[pane.id]

    def leader_unreaped(self, pane: Pane) -> bool:
        """Whether the pane's leader is not reaped by the daemon (a sentinel reaps its
        own only once the pane has exited): its number, and group ID, are its own."""
        link = self.links.get(pane.id)
        return pane.live and link is not None and link.leader_status is None

    def exited_unseen(self, pane: Pane) -> bool:
        """Whether the pane's leader has exited though its pidfd's callback has not run."""
        link = self.links.get(pane.id)
        return link is not None and watch.exited_unseen(link)

    # -- requests to the sentinel --------------------------------------------------------
    async def send_input(self, pane: Pane, payload: bytes) -> int:
        """Write to the pane's terminal; the bytes written, all of them or an error."""
        return await self.requests.send_input(pane, self.link(pane), payload)

    async def resize(self, pane: Pane, cols: int, rows: int) -> None:
        """Resize; the size changes (with pane.resized) when the sentinel applied it."""
        if (cols, rows) != (pane.cols, pane.rows):
            await self.requests.resize(pane, self.link(pane), cols, rows)

    async def capture(
        self,
        pane: Pane,
        epoch: int | None,
        start: int | None,
        end: int | None,
        limit: int,
        budget: int,
    ) -> dict[str, Any]:
        """Rows from the live terminal, or from the final state once the pane has ended;
        ``workers.rows.TooLarge`` when rows of a final state would take over ``budget``
        bytes (a live one counts against the largest frame any client may have)."""
        res: dict[str, Any] | None = None
        if pane.live and not pane.sentinel_lost:
            res = await self.requests.capture(pane, self.link(pane), epoch, start, end, limit)
        if res is not None:
            return res
        if pane.final is None:
            raise lost(pane)  # and the screen with it
        try:
            return capture(pane.final, epoch, start, end, limit, budget)
        except EpochConflict as exc:
            raise VenomxError(
                "conflict.epoch", "the row epoch changed", {"epoch": exc.epoch}
            ) from None

    async def responsive(self, pane: Pane) -> bool:
        """Doctor's ping; a pane that ends meanwhile counts as responsive."""
        return await self.requests.responsive(pane, self.link(pane))

    async def stream(
        self, pane: Pane, on_screen: OnScreen, on_output: OnOutput, after: int | None = None
    ) -> None:
        """A repaint, then every output byte in order, until the pane exits; with ``after``,
        the bytes after that offset instead of the repaint while the sentinel holds them
        (``on_screen`` then gets ``replay`` and no data). For an ended pane the final
        screen; ``unavailable.sentinel`` for one whose sentinel is lost, whose screen went
        with it."""
        link = self.link(pane)
        if pane.live and link.channel is not None and not pane.sentinel_lost:
            shown = False

            def screen(m: P.Screen) -> None:
                nonlocal shown
                shown = True
                if m.replay:
                    on_screen(m.cols, m.rows, m.offset - len(m.data), b"", True)
                    if m.data:
                        on_output(m.data, m.offset)
                else:
                    on_screen(m.cols, m.rows, m.offset, m.data, False)

            await self.requests.stream(
                pane, link, screen, lambda m: on_output(m.data, m.offset), after
            )
            if shown:
                return
            # The pane ended before its sentinel answered: its final screen, as for an
            # attach that came after the exit.
        if pane.live and not pane.sentinel_lost:
            await asyncio.shield(link.exited)
        if pane.final is None:
            raise lost(pane)  # and the screen with it
        snap = pane.final
        held = None if after is None else self.replays.after(pane.id, snap.offset, after)
        if after is not None and held is not None:  # the bytes asked for, as a sentinel would
            on_screen(snap.cols, snap.rows, after, b"", True)
            if held:
                on_output(held, snap.offset)
            return
        on_screen(snap.cols, snap.rows, snap.offset, repaint(snap), False)

    async def wait_exited(self, pane: Pane) -> None:
        """Until the pane's exit turn has happened (cancelling ends only the wait)."""
        await asyncio.shield(self.link(pane).exited)

    # -- signals and termination ---------------------------------------------------------
    def signal(self, pane: Pane, sigs: list[int]) -> None:
        """Deliver signals to the pane's pinned group, at the ``terminate.unkillable`` seam."""
        self.seams.call("terminate.unkillable", lambda: self._signal_group(pane, sigs))

    def _signal_group(self, pane: Pane, sigs: list[int]) -> None:
        if not self.leader_unreaped(pane):  # reaped by us: its group ID is free
            return
        # Directly, never through the sentinel (which may be busy, stopped or dead): a
        # sentinel reaps its leader only once the pane has exited, so while the pane is
        # live its group ID is pinned.
        for s in sigs:
            try:
                os.killpg(pane.pid, s)
            except OSError:
                pass

    def terminate(
        self,
        pane: Pane,
        signame: str = DEFAULT_SIGNAL,
        grace_ms: int = DEFAULT_GRACE_MS,
        cause: str = "pane_kill",
        exited: bool = False,
    ) -> Termination | None:
        """Start or join the pane's termination (§9); one turn, no waiting."""
        return terminate(self, pane, self.link(pane), signame, grace_ms, cause, exited)

    async def wait_terminated(self, pane: Pane) -> None:
        await wait_terminated(pane, self.link(pane))

    async def terminate_all(self, panes: list[Pane], cause: str) -> None:
        """Terminate live panes (the default signal and grace) and wait; timeout.terminate
        lists laggards."""
        live = [p for p in panes if p.live]
        for p in live:
            self.terminate(p, cause=cause)
        results = await asyncio.gather(
            *(self.wait_terminated(p) for p in live), return_exceptions=True
        )
        stuck = [p.id for p, r in zip(live, results, strict=True) if isinstance(r, VenomxError)]
        for r in results:
            if isinstance(r, BaseException) and not isinstance(r, VenomxError):
                raise r
        if stuck:
            raise VenomxError(
                "timeout.terminate", "panes did not exit after SIGKILL", {"panes": stuck}
            )

    async def shutdown(self) -> None:
        """Terminate every live pane, cause shutdown, within the shutdown grace; then end
        every pane's cgroup, so nothing a pane started outlives the daemon."""
        live = [p for p in self.registry.panes.values() if p.live]
        for p in live:
            t = self.terminate(p, cause="shutdown")
            if t is not None:
                t.cap_grace(DEFAULT_GRACE_MS)  # a joined termination may have a longer grace
        if live:
            await asyncio.wait(
                [self.link(p).exited for p in live], timeout=DEFAULT_GRACE_MS / 1000.0 + KILL_WAIT
            )
        await self.cgroups.end_all()

    # -- what a pane left behind -------------------------------------------------------------
    def ours(self) -> set[int]:
        """The daemon's own children: the fork server, spares and sentinels (their
        environment is the daemon's, never a pane's), and what of the fork server's is
        ended or left by a dead one (a reserve, an intermediate) until reaped."""
        fs = self.forkserver
        return {fs.pid, *fs.spare_pids, *self.registry.sentinels, *fs.leftover()}

    def orphans(self) -> list[int]:
        """The daemon's children that are not its own (``cgroups.strangers``), listed once
        per reactor turn. Listing them walks every sentinel, so a burst of a thousand exits
        without cgroups, each listing them, cost O(panes) each (the daemon's CPU per run:
        6.0 + 1.4 ms user + system, against 1.9 + 0.4 with cgroups). The exits of one turn
        share the listing: an orphan of an exiting pane was re-parented before its
        sentinel sent EXIT. A reap of the daemon's own (a leader whose sentinel is lost)
        forgets the listing, since its orphans were re-parented only then."""
        if self.orphans_now is None:
            loop = asyncio.get_running_loop()
            self.orphans_now = strangers(self.ours())
            loop.call_soon(self.forget_orphans)
        return self.orphans_now

    def forget_orphans(self) -> None:
        self.orphans_now = None

    def panes_alive(self) -> str | None:
        """What panes started that is still alive, said for a person, or None: a leader
        of a live pane, or a process re-parented to the daemon (every other descendant of
        a pane is below one of those, the daemon being their subreaper)."""
        live = len(self.registry.leaders)
        left = len(self.orphans())
        if not live and not left:
            return None
        return (
            f"the {live} live panes and the {left} processes panes left behind have ended "
            "(a program could reach a fork server while it starts)"
        )

    async def cleanup(self, pane_id: str, signame: str, grace_ms: int) -> dict[str, Any]:
        """End every process the exited pane ``pane_id`` left (its cgroup's members, else
        those the subreaper accounts to it): the signal, the grace, then SIGKILL."""
        ended, remaining = await self.cgroups.end(
            pane_id, self.ours(), signal_mod.Signals[signame], grace_ms
        )
        return {"pane": pane_id, "ended": ended, "remaining": remaining}

    # -- children ----------------------------------------------------------------------------
    def is_leader(self, pid: int) -> bool:
        return pid in self.registry.leaders

    def on_child_exit(self, pid: int, status: int, usage: dict[str, int] | None = None) -> bool:
        """A child of the daemon was reaped: the fork server, a sentinel, a leader whose
        sentinel is gone; False for anything else (an escaped descendant)."""
        self.forget_orphans()  # the daemon's children changed: a reaped leader's re-parented
        ended = self.forkserver.reaped(pid, status)  # ours ended on purpose, or left
        reg = self.registry
        if pid == self.forkserver.pid:
            # reaped: its pid may be any process's now, and none of it is the fork
            # server's until a restart (which may fail, out of descriptors) says so
            self.forkserver.pid = 0
            if self.forkserver.control is None:  # we closed its socket: its expected exit
                log.debug("fork server exited (status %d)", status)
            elif self.lifecycle.shutting_down:
                log.error("fork server exited (status %d) during shutdown", status)
            else:
                if os.waitstatus_to_exitcode(status) == inherited.CHANGED:
                    log.error(
                        "fork server's limits or scheduling were changed by another process "
                        "past repair; restarting it"
                    )
                else:
                    log.error("fork server exited (status %d); restarting it", status)
                fields = waitstatus_fields(status)
                fields.pop("signum", None)
                self.forkserver.died(pid, fields, now_iso())
            return True
        if self.forkserver.lost(pid):
            log.error("a spare sentinel exited (status %d)", status)
            if not self.lifecycle.shutting_down:
                self.forkserver.refill()
            return True
        pane_id = reg.sentinels.pop(pid, None)
        if pane_id is not None:
            reg.reaps_after_exit.pop(pid, None)  # it reaped its leader on the way out
            pane = reg.panes.get(pane_id)
            # A live pane's sentinel that exits before EXIT is lost, even with status 0
            # (a closed channel makes it exit so): the daemon then reaps the leader.
            if pane is not None and pane.live:
                link = self.link(pane)
                if not link.exit_seen:
                    watch.lose(self, pane, link, f"exited with status {status}")
                    self.settle(pane)
            return True
        pane_id = reg.leaders.get(pid)
        if pane_id is not None:
            pane = reg.panes.get(pane_id)
            if pane is None:  # its sentinel died before the start committed
                reg.early_exits[pid] = status
            elif pane.live:
                link = self.link(pane)
                link.leader_status, link.leader_usage = status, usage
                self.settle(pane)
            return True
        if pid in reg.reaps_after_exit.values():
            # an exited pane's leader, whose sentinel died after EXIT, before reaping it
            reg.reaps_after_exit = {s: ld for s, ld in reg.reaps_after_exit.items() if ld != pid}
            return True
        if pid in reg.undone_leaders:  # a start rolled back after its leader existed
            del reg.undone_leaders[pid]
            return True
        # last: a pid the daemon knows for something else is never taken for a spare
        return ended

    # -- what the sentinel says ----------------------------------------------------------
    def on_sentinel(self, pane: Pane, link: Link, m: P.Message) -> None:
        if isinstance(m, (P.Output, P.Screen)):
            pane.told_offset = m.offset
            for send in list(link.attachers.values()):
                send(m)
        elif isinstance(m, P.Marker):
            self.on_marker(pane, link, m)
        elif isinstance(m, P.Rows):
            if m.error is None:
                pane.told_epoch = m.result.get("epoch", pane.told_epoch)
                pane.told_offset = m.result.get("offset", pane.told_offset)
            self.requests.answered(m.req, m)
        elif isinstance(m, P.Resized):
            pane.told_epoch = m.epoch
            if (m.cols, m.rows) != (pane.cols, pane.rows):
                # applied now, even if the request that asked for it gave up waiting
                pane.cols, pane.rows = m.cols, m.rows
                self.events.emit(
                    "pane.resized",
                    f"pane:{pane.id}",
                    {"pane": pane.id, "cols": m.cols, "rows": m.rows},
                    pane.node,
                )
            self.requests.answered(m.req, m)
        elif isinstance(m, (P.Wrote, P.Pong)):
            self.requests.answered(m.req, m)
        elif isinstance(m, P.Keypad):
            link.application_keys = m.cursor
        elif isinstance(m, P.Exit):
            if pane.live and pane.fault is None and not link.exit_seen:
                self.runs.exit_seen(pane.run, m.ended_ns)
                link.exit_seen = True
                link.exit_status = m.status
                link.exit_raw = m.state
                link.exit_usage = m.usage
                link.exit_replay = m.replay
                # A thousand panes ending together must not hold the reactor for all of
                # them in one turn: their exits are settled a few per turn (EXIT is
                # recorded at once, so nothing takes such a pane for lost meanwhile).
                self.pacer.call(functools.partial(self.settle_paced, pane))

    def on_marker(self, pane: Pane, link: Link, m: P.Marker) -> None:
        # Observations only: nothing but these events changes (RFC-0015 §5). They come
        # from the program, so each pane has a budget; the excess is coalesced (events.py).
        pane.told_offset = m.offset
        res = f"pane:{pane.id}"
        rate, burst = self.config["events.observe_rate"], self.config["events.observe_burst"]
        if m.what == "started":
            link.command_open = True
            self.events.observe(
                pane.id, "command.started", res, {"pane": pane.id}, pane.node, rate, burst
            )
        elif m.what == "finished":
            link.command_open = False
            data: dict[str, Any] = {"pane": pane.id, "reason": "marker"}
            if m.exit_code is not None:
                data["exit_code"] = m.exit_code
            self.events.observe(pane.id, "command.finished", res, data, pane.node, rate, burst)
        elif m.what == "status":
            link.status_set = m.state is not None
            self.events.observe(
                pane.id,
                "program.status_changed",
                res,
                {"pane": pane.id, "state": m.state},
                pane.node,
                rate,
                burst,
            )

    # -- exit --------------------------------------------------------------------------------
    def settle_paced(self, pane: Pane) -> None:
        try:
            self.settle(pane)
        except Exception:  # one pane's bug must not leave the others of its turn live
            log.exception("settling pane %s failed", pane.id)

    def settle(self, pane: Pane) -> None:
        """Exit the pane once its wait status is known: from the sentinel's EXIT (its own
        wait on the child it started), or, when the sentinel is lost, from the daemon's
        own reap of the leader, which re-parents to it."""
        if not pane.live:
            return
        link = self.link(pane)
        if link.exit_seen:
            if link.exit_raw is not None:
                link.exit_state = Snapshot.from_dict(link.exit_raw)
                link.exit_raw = None
            self.exit(pane, link, link.exit_status, link.exit_state, link.exit_usage)
        elif link.leader_status is None:
            return
        elif pane.fault is not None:
            self.exit(pane, link, link.leader_status, None, link.leader_usage)
        elif link.watchdog is None:
            # The sentinel has exited (the leader could not re-parent to us otherwise);
            # its EXIT can only still be on its way through the channel.
            link.watchdog = asyncio.get_running_loop().call_later(
                watch.CHANNEL_BOUND, watch.overdue, self, pane, link
            )

    def exit(
        self,
        pane: Pane,
        link: Link,
        status: int,
        final: Snapshot | None,
        usage: dict[str, int] | None = None,
    ) -> None:
        """The leader was reaped: pane.exited and the run's completion (with ``usage``,
        from the same wait as ``status``), one turn."""
        if final is None:  # no EXIT: nobody says when the leader exited
            self.runs.exit_untold(pane.run)
        fields = waitstatus_fields(status)
        pane.state = "exited"
        pane.exit_code = fields.get("exit_code")
        pane.signal = fields.get("signal")
        pane.exited_at = now_iso()
        pane.exited_mono = time.monotonic()
        pane.final = final  # None when the sentinel was lost: no rows are invented
        if final is not None:
            self.replays.add(pane.id, link.exit_replay, pane.node.owner or "")
        link.exit_replay = b""
        link.exit_state = None
        watch.unwatch(link)
        self.registry.leaders.pop(pane.pid, None)
        if link.leader_status is None:  # its sentinel reaps it once the channel closes
            self.registry.reaps_after_exit[pane.sentinel_pid] = pane.pid
        if link.termination is not None:
            link.termination.cancel_timer()
        res = f"pane:{pane.id}"
        if link.command_open:
            link.command_open = False
            data: dict[str, Any] = {"pane": pane.id, "reason": "pane_exit"}
            self.events.emit("command.finished", res, data, pane.node)
        if link.status_set:
            link.status_set = False
            self.events.emit(
                "program.status_changed", res, {"pane": pane.id, "state": None}, pane.node
            )
        data = {"pane": pane.id}
        if pane.exit_code is not None:
            data["exit_code"] = pane.exit_code
        if pane.signal is not None:
            data["signal"] = pane.signal
        self.events.emit("pane.exited", res, data, pane.node)
        if pane.run is not None or pane.id in self.cgroups.groups:
            # what the pane left, fixed now: the run's record never changes afterwards
            cleanup, tree = self.cgroups.settle(pane.id, self.orphans)
            if pane.run is not None:
                self.runs.complete(pane.run, pane, usage, cleanup, tree)
        if not link.exited.done():
            link.exited.set_result(None)
        if link.channel is not None:
            link.channel.close()
            link.channel = None  # its decoder's buffers held the whole final state
        self.exited_panes.add(pane)
        self.exited_panes.enforce(self)

    # -- removal -----------------------------------------------------------------------------
    def remove(self, pane: Pane) -> list[str]:
        """Remove an exited pane (and its window if last); one turn. Returns removed IDs."""
        reg = self.registry
        removed = [pane.id]
        del reg.panes[pane.id]
        self.links.pop(pane.id, None)
        self.exited_panes.forget(pane.id)
        self.replays.forget(pane.id)
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
                removed += self._remove_window_record(window.id)
            else:
                window.layout = layout
                self.events.emit(
                    "window.layout_changed",
                    f"window:{window.id}",
                    {"window": window.id, "layout": layout},
                    window.node,
                )
        return removed

    def _remove_window_record(self, window_id: str) -> list[str]:
        reg = self.registry
        window = reg.windows.pop(window_id)
        session = reg.sessions.get(window.session)
        if session is not None and window_id in session.windows:
            session.windows.remove(window_id)
        self.events.emit(
            "window.removed", f"window:{window_id}", {"window": window_id}, window.node
        )
        return [window_id]

    def hold(self, pane_id: str, session: str, window: str | None, target: str | None) -> None:
        """A start's barrier is being released into ``session`` (beside ``target`` in
        ``window``, for a split); a second call for the same start changes nothing."""
        if pane_id not in self.past_barrier:
            done = asyncio.get_running_loop().create_future()
            self.past_barrier[pane_id] = PastBarrier(pane_id, session, window, target, done)

    def start_done(self, pane_id: str) -> None:
        """The start of ``pane_id`` committed or rolled back."""
        start = self.past_barrier.pop(pane_id, None)
        if start is None:
            return
        start.done.set_result(None)
        if start.target is not None:
            self.exited_panes.enforce(self)  # its target may have been spared for it

    def abandoned(self, pane_id: str) -> bool:
        """Whether a recursive removal went on without this start (``abandon``)."""
        start = self.past_barrier.get(pane_id)
        return start is not None and start.abandoned

    def split_targets(self) -> set[str]:
        """Panes a start past its barrier is about to be committed beside."""
        return {
            s.target for s in self.past_barrier.values() if s.target is not None and not s.abandoned
        }

    async def wait_for_starts(self, session: str, window: str | None = None) -> list[str]:
        """Wait up to ``SETTLE_WITHIN`` for the starts past their barrier into ``session``
        (or only ``window``): their programs run, so they become panes before a removal
        counts what it ends. Returns the pane IDs of those still uncommitted (a stalled
        sentinel), for the removal to count as live or to give up on (``abandon``).

        Cancellation: ends only this wait; the starts go on."""
        starts = [
            s
            for s in self.past_barrier.values()
            if s.session == session and (window is None or s.window == window) and not s.abandoned
        ]
        if starts:
            await asyncio.wait([s.done for s in starts], timeout=SETTLE_WITHIN)
        return [s.pane for s in starts if not s.done.done()]

    def abandon(self, panes: list[str]) -> None:
        """A recursive removal goes on without these starts: their commits fail
        ``conflict.removing``, and so does their release if it has not happened yet."""
        for pane_id in panes:
            start = self.past_barrier.get(pane_id)
            if start is not None:
                start.abandoned = True

    async def remove_exited(self, pane: Pane) -> list[str]:
        """``pane.remove``: a split past its barrier beside ``pane`` is committed first
        (waited for up to ``SETTLE_WITHIN``), since its program runs; one still stalled
        then is a live pane of the window, and the removal fails ``conflict.pane_live``
        naming it, giving nothing up. Returns the removed IDs.

        Cancellation: ends only the wait; nothing is removed."""
        beside = [s for s in self.past_barrier.values() if s.target == pane.id and not s.abandoned]
        if beside:
            await asyncio.wait([s.done for s in beside], timeout=SETTLE_WITHIN)
            if self.registry.panes.get(pane.id) is not pane:  # removed meanwhile
                raise VenomxError("not_found.pane", f"pane {pane.id} not found", {})
            stalled = [s.pane for s in beside if not s.done.done() and not s.abandoned]
            if stalled:
                raise VenomxError(
                    "conflict.pane_live",
                    f"pane {stalled[0]} is starting beside pane {pane.id}",
                    {"panes": stalled},
                )
        return self.remove(pane)

    def _live_conflict(self, panes: list[Pane], starting: list[str]) -> None:
        live = [p.id for p in panes if p.live] + list(starting)
        if live:
            raise VenomxError("conflict.live_panes", "live panes remain", {"panes": live})

    async def remove_window(self, w: Window, recursive: bool) -> list[str]:
        """Remove a window: with ``recursive`` its live panes are terminated first (cause
        removal), and it is marked removing meanwhile so nothing new starts in it. Splits
        past their barrier count as live panes once committed (waited for up to
        ``SETTLE_WITHIN``; one still stalled then is live to a plain removal and given up by
        a recursive one)."""
        reg = self.registry
        if w.removing:
            raise VenomxError("conflict.removing", f"window {w.id} is being removed", {})
        w.removing = True
        try:
            stalled = await self.wait_for_starts(w.session, w.id)
            panes = [reg.panes[p] for p in w.panes]
            if not recursive:
                self._live_conflict(panes, stalled)
            self.abandon(stalled)
            await self.terminate_all(panes, "removal")
        finally:
            w.removing = False
        removed: list[str] = []
        for p in list(w.panes):
            removed += self.remove(reg.panes[p])
        return removed

    async def remove_session(self, s: Session, recursive: bool) -> list[str]:
        """Remove a session and all its windows, as ``remove_window`` does for one (with
        the starts past their barrier into any of them)."""
        reg = self.registry
        if s.removing:
            raise VenomxError("conflict.removing", f"session {s.id} is being removed", {})
        s.removing = True
        try:
            stalled = await self.wait_for_starts(s.id)
            panes = [reg.panes[p] for w in s.windows for p in reg.windows[w].panes]
            if not recursive:
                self._live_conflict(panes, stalled)
            self.abandon(stalled)
            await self.terminate_all(panes, "removal")
            removed: list[str] = []
            for w in list(s.windows):
                for p in list(reg.windows[w].panes):
                    removed += self.remove(reg.panes[p])
                if w in reg.windows:
                    removed += self._remove_window_record(w)
            del reg.sessions[s.id]
            self.events.emit("session.removed", f"session:{s.id}", {"session": s.id}, s.node)
            removed.append(s.id)
        finally:
            s.removing = False
        return removed
