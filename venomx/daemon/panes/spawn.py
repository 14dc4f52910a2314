"""The spawn sequence (§6): validate, prepare, barrier, exec status, commit in one turn.

Before the barrier is released no program of the request exists, and cancelling the
request (or losing its connection) rolls everything back. After release the start
completes first (commit or rollback) and only then ends ``cancelled``. Exec failure
rolls back: no pane, window, principal, event or binding becomes visible; consumed IDs
stay consumed.
"""

from __future__ import annotations

import asyncio
import errno
import functools
import logging
import os
import secrets
import signal
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeVar

from venomx.daemon.cgroups import children
from venomx.daemon.layout import split_layout
from venomx.daemon.panes.link import Link
from venomx.daemon.panes.sentinels import (
    START_BOUND,
    Channel,
    Watched,
    end_before_exec,
    kill_stopped,
    unstopped,
)
from venomx.daemon.panes.watch import watch
from venomx.daemon.registry import Grant, Pane, Principal, Session, Window
from venomx.wire import SPAWN_OURS, VenomxError
from workers import protocol as P

if TYPE_CHECKING:
    from venomx.daemon.cgroups import Cgroups
    from venomx.daemon.panes.contract import Owner

T = TypeVar("T")
log = logging.getLogger(__name__)


def argv0_of(argv: list[str]) -> str:
    base = argv[0].rsplit("/", 1)[-1]
    raw = base.encode("utf-8", "surrogatepass")[:255]
    return raw.decode("utf-8", "ignore")


@dataclass
class SpawnRequest:
    """A start, validated and authorized: what to run, where, and with which grants."""

    requester: Principal
    argv: list[str]
    cols: int
    rows: int
    grants: list[Grant]
    cwd: str | None = None
    env: dict[str, str] | None = None
    env_unset: list[str] | None = None
    session: str | None = None  # new window in this session
    split: str | None = None  # or split this pane
    axis: str = "cols"
    name: str | None = None
    run: str | None = None  # run ID, for runs
    owner_node_id: str | None = None
    memory_max: int | None = None  # bytes: the pane cgroup's memory.max
    pids_max: int | None = None  # the pane cgroup's pids.max
    eof: bool = False  # the terminal gives every read end of file (run's input "eof")
    # The verb's own lookup of its target and that target's state (``Context.resolve``:
    # RFC-0015 §11 step 8), done again as the barrier is released.
    target: Callable[[], Session | Pane] | None = None


async def uncancellable(
    aw: Awaitable[T], on_cancel: Callable[[], None] | None = None
) -> tuple[T, bool]:
    """Await to completion even if cancelled; report whether a cancel arrived, and tell
    ``on_cancel`` at once, which hears of it even if ``aw`` then raises."""
    fut = asyncio.ensure_future(aw)
    cancelled = False
    while True:
        try:
            return await asyncio.shield(fut), cancelled
        except asyncio.CancelledError:
            cancelled = True
            if on_cancel is not None:
                on_cancel()
            if fut.done():
                return fut.result(), True


def _spawn_failed(errno_name: str, message: str | None = None) -> VenomxError:
    """``unavailable.spawn`` ``{"errno"}``: by default an exec of the program failed;
    ``message`` says otherwise when venomx's own side did (``SPAWN_OURS``)."""
    return VenomxError(
        "unavailable.spawn",
        message or f"cannot start the program: {errno_name}",
        {"errno": errno_name},
    )


def _daemon_failed(exc: OSError) -> VenomxError:
    """The daemon's own side of a start failed before any process existed: a lost or
    missing sentinel is ``EIO``; anything else (``EMFILE``, ``ENFILE`` out of descriptors,
    ``ENOMEM``) is named as it is. The message says it is venomx's failure, not the
    program's: the same ``errno`` from exec would mean the program's file."""
    name = "EIO"
    if not isinstance(exc, ConnectionError) and exc.errno is not None:
        name = errno.errorcode.get(exc.errno, "EIO")
    return _spawn_failed(
        name, f"{SPAWN_OURS}prepare the start: {name}; the program was not started"
    )


def _sentinel_lost() -> VenomxError:
    """The pane's sentinel was lost once it could have started the leader (between READY
    and STARTED, or dead before its HELLO was taken: ``SentinelReaped``): the start is
    undone (its cgroup killed, if the leader had begun), and that is venomx's failure."""
    return _spawn_failed(
        "EIO",
        f"{SPAWN_OURS}complete the start: EIO (the pane's sentinel was lost); the start was undone",
    )


async def make_cgroup(
    cgroups: Cgroups, pane_id: str, run: str | None, memory_max: int | None, pids_max: int | None
) -> str | None:
    """The pane's cgroup (None without cgroups), made in a worker thread: a cgroup's
    mkdir waits for the kernel's cgroup lock, which every sentinel moving its leader into
    a cgroup takes too, and in a burst that wait was ~1.5 ms per start, on the reactor.

    Only the directory is made in the thread; the daemon's table changes on the reactor,
    where others iterate it. A cancel meanwhile waits for the thread, then removes what it
    made."""
    if not cgroups.active:
        return None
    made = asyncio.ensure_future(asyncio.to_thread(cgroups.make, pane_id, memory_max, pids_max))
    cancelled = False
    while not made.done():
        try:
            await asyncio.wait([made])
        except asyncio.CancelledError:
            cancelled = True
    if cancelled:
        if made.exception() is None:
            cgroups.adopt(pane_id, made.result(), run)
            cgroups.discard(pane_id)
        raise asyncio.CancelledError
    directory = made.result()
    cgroups.adopt(pane_id, directory, run)
    return directory


async def spawn(
    owner: Owner, req: SpawnRequest, on_commit: Callable[[Pane], None] | None = None
) -> Pane:
    """Prepare, release the barrier, and commit; raise with nothing left behind.

    Limits the daemon cannot apply fail ``unsupported.cgroups`` first, before any ID is
    taken: after authorization, the value rules and the target's resolution (for ``run``
    also after its key lookup, with the run limit: what this daemon can do).

    The target is looked up again in the turn the barrier is released, where a change
    still rolls the start back with nothing run. From then on the start completes first
    (foundation §6): the commit does not fail on the target's state, and a removal of
    its window or session waits for it (``Panes.past_barrier``)."""
    releasing: list[str] = []
    try:
        return await _spawn(owner, req, on_commit, releasing)
    finally:
        for pane_id in releasing:
            owner.start_done(pane_id)


def still_wanted(owner: Owner, pane_id: str) -> None:
    """What ends a start before its commit whatever its target: shutdown, a recursive
    removal that went on without it."""
    owner.lifecycle.refuse_new_work()
    if owner.abandoned(pane_id):
        raise VenomxError("conflict.removing", f"the target of pane {pane_id} was removed", {})


def release_point(owner: Owner, req: SpawnRequest, pane_id: str, releasing: list[str]) -> None:
    """The target as step 8 wants it, checked again in the turn the barrier is released;
    from here a removal of its window or session waits for this start. A requester
    revoked before this point gets nothing run; one revoked later gets its start
    completed (RFC-0015 §8: past the barrier the program may be running) and the
    request ended ``denied.token``, and the new pane's principal is born revoked."""
    still_wanted(owner, pane_id)
    if req.requester.revoked:  # while the start was prepared: its token stopped working
        raise VenomxError("denied.token", "the principal was revoked during the start", {})
    assert req.target is not None
    target = req.target()
    if isinstance(target, Session):
        owner.hold(pane_id, target.id, None, None)
    else:
        owner.hold(pane_id, target.session, target.window, target.id)
    if pane_id not in releasing:
        releasing.append(pane_id)


async def _spawn(
    owner: Owner,
    req: SpawnRequest,
    on_commit: Callable[[Pane], None] | None,
    releasing: list[str],
) -> Pane:
    cgroups = owner.cgroups
    cgroups.check_limits(req.memory_max, req.pids_max)
    await owner.pacer.turn()  # a burst's starts begin a few per reactor turn
    reg = owner.registry
    window_id = reg.next_id("w") if req.session is not None else None
    pane_id = reg.next_id("p")
    principal_id = reg.next_id("g")
    token = secrets.token_hex(32)
    given = owner.base_env()
    given.update(req.env or {})
    for name in req.env_unset or []:
        given.pop(name, None)
    # first: the daemon looks for VENOMX_PANE only near the start (cgroups.ENVIRON_READ)
    env = {"VENOMX_PANE": pane_id, "VENOMX_SOCKET": owner.socket_path, "VENOMX_TOKEN": token}
    if req.run is not None:
        env["VENOMX_RUN"] = req.run
    env.update((k, v) for k, v in given.items() if k not in env)
    try:
        cgroup = await make_cgroup(cgroups, pane_id, req.run, req.memory_max, req.pids_max)
    except OSError as exc:
        if cgroups.mode == "required" or req.memory_max is not None or req.pids_max is not None:
            raise _daemon_failed(exc) from None
        log.warning("pane %s runs without a cgroup: %s", pane_id, exc)
        cgroup = None
    owner.preparing.add(pane_id)
    chan: Channel | None = None
    leaders: list[int] = []
    # every wait on the sentinel's answers, together, is bounded (``START_BOUND``)
    start_until = asyncio.get_running_loop().time() + START_BOUND
    cancelled_early = False  # a cancel came while the start could not be rolled back

    def cancel_seen() -> None:
        nonlocal cancelled_early
        cancelled_early = True

    async def released(aw: Awaitable[T]) -> T:
        """Await ``aw`` once SPAWN is sent: when it carries the release, the barrier is
        released from then on, and the start must complete first (foundation §6) even if
        the request is cancelled meanwhile, or the program may run with its key freed."""
        if not release_now:
            return await aw
        result, _ = await uncancellable(aw, cancel_seen)
        return result

    def answer(c: Channel, kind: type[P.Message]) -> Awaitable[P.Message]:
        """The sentinel's next message of ``kind`` (or FAILED), never waiting on it while
        something keeps it stopped."""
        left = start_until - asyncio.get_running_loop().time()
        return unstopped(lambda: watched(c), c.expect(kind), functools.partial(abandon, c), left)

    def watched(c: Channel) -> list[Watched]:
        """What a start waits on: its sentinel, or before that sentinel said HELLO (no
        spare: a fork asked for) the fork server and the fork in progress, which a
        program of our uid can stop too; stopped for good, each is killed, the channel
        closes and the start fails."""
        if c.sentinel_pid:
            if c.sentinel_pid not in owner.forkserver.greeted:
                # reaped while the start waits: a child it left before its exec may hold
                # a copy of the channel, which would never close (helper-147)
                c.close()
                return []
            # and the leader it spawns, which a program of our uid can stop before its
            # exec: the sentinel then waits in its vfork, never stopped itself
            end = functools.partial(end_leader, c)
            what = f"leader of pane {pane_id}, before its exec"
            return [
                (c.sentinel_pid, f"sentinel of pane {pane_id}", end_sentinel),
                *((pid, what, end) for pid in children(c.sentinel_pid)),
            ]
        forking = owner.forkserver.forking(reg.sentinels)
        return [
            (pid, f"{what}, on the way to the sentinel of pane {pane_id}", end)
            for pid, what, end in forking
        ]

    def end_sentinel(pid: int) -> None:
        """Kill the stopped sentinel, and its leader if it forked one before STARTED
        named it: the start fails, and that leader's reap is a start undone."""
        fs = owner.forkserver
        for leader in kill_stopped(pid, fs.live_sessions(), fs.greeted) or []:
            if leader not in reg.leaders:
                reg.undone(leader)

    def abandon(c: Channel) -> None:
        """The start has not had its sentinel's answers in ``START_BOUND``: the sentinel
        (while greeted) and any child it started (through a pidfd) are killed, and the
        channel closed; the start fails as for a lost sentinel."""
        children_of = children(c.sentinel_pid) if c.sentinel_pid else []
        for pid in children_of:
            end_leader(c, pid)
        if c.sentinel_pid in owner.forkserver.greeted:
            try:
                os.kill(c.sentinel_pid, signal.SIGKILL)
            except OSError:
                pass
        c.close()

    def end_leader(c: Channel, pid: int) -> None:
        """End a leader kept stopped before its exec, and its sentinel: the start fails,
        and the leader's reap is a start undone."""
        if end_before_exec(c.sentinel_pid, pid, owner.forkserver.greeted):
            if pid not in reg.leaders:
                reg.undone(pid)

    def started(pid: int) -> None:
        leaders.append(pid)
        reg.leaders[pid] = pane_id

    def forget_leader() -> None:
        """The start is rolled back after its leader existed: the channel's close makes
        the sentinel stop the leader's group and leave the leader to the daemon (it lives),
        which then reaps it as a start undone, not as an escaped process."""
        for pid in leaders:
            reg.leaders.pop(pid, None)
            if reg.early_exits.pop(pid, None) is None:
                reg.undone(pid)

    try:
        # With nothing to pause at the barrier, the release travels with SPAWN.
        pause = owner.seams.hook("run.before_barrier") if req.run is not None else None
        release_now = pause is None
        spawn_msg = P.Spawn(
            pane_id,
            req.argv,
            env,
            req.cwd or owner.cwd,
            req.cols,
            req.rows,
            int(owner.config["vt.scrollback"]),
            release_now,
            cgroup,
            cgroups.leaf if cgroup is not None else None,
            req.eof,
        )
        if release_now:
            release_point(owner, req, pane_id, releasing)
        chan = owner.forkserver.take()  # a spare said HELLO long ago
        ready: P.Message | None = None
        if chan is not None:
            reg.sentinels[chan.sentinel_pid] = pane_id
            chan.on_started = started
            chan.send(spawn_msg)
            try:
                ready = await released(answer(chan, P.Ready))
            except ConnectionError:  # the spare died unnoticed; nothing has started yet
                # Its reap is a spare's: neither this pane's sentinel lost nor an escapee.
                if reg.sentinels.get(chan.sentinel_pid) == pane_id:
                    del reg.sentinels[chan.sentinel_pid]
                owner.forkserver.retire(chan)
                chan = None
                if cancelled_early:  # nothing ran: the cancel rolls the start back
                    raise asyncio.CancelledError from None
        if chan is None:
            owner.forkserver.used()  # the pool is empty
            # SPAWN waits in the socket until the new sentinel reads it: no HELLO round trip
            born = owner.forkserver.reaps.count
            chan = await Channel.open(await owner.forkserver.fork_one(), born)
            if release_now:  # again: the fork took turns, and this SPAWN releases
                release_point(owner, req, pane_id, releasing)
            chan.on_started = started
            chan.send(spawn_msg)
            hello = await released(answer(chan, P.Hello))
            if isinstance(hello, P.Hello):
                if not owner.forkserver.greet(chan, hello.pid):
                    # it may have started the leader before it died: undone as a lost one
                    raise SentinelReaped
                reg.sentinels[hello.pid] = pane_id
            ready = hello if isinstance(hello, P.Failed) else await released(answer(chan, P.Ready))
        if isinstance(ready, P.Failed):
            give_back(owner, chan)
            chan = None
            failed = _spawn_failed(ready.errno)
            raise CancelledAfter(failed) if cancelled_early else failed
        if pause is not None:
            await pause()
    except BaseException as exc:
        if chan is not None:
            chan.send(P.Abort())
            chan.close()
            owner.forkserver.used()
        owner.preparing.discard(pane_id)
        if isinstance(exc, SentinelReaped):
            forget_leader()
            cgroups.kill(pane_id)
            cgroups.discard(pane_id)
            failed = _sentinel_lost()
            raise CancelledAfter(failed) if cancelled_early else failed from None
        cgroups.discard(pane_id)
        if isinstance(exc, OSError):  # the sentinel could not be had, or died
            if cancelled_early:  # before READY, so before any program: a plain cancel
                raise asyncio.CancelledError from None
            raise _daemon_failed(exc) from None
        raise

    async def release() -> P.Message:
        assert chan is not None
        if not release_now:
            release_point(owner, req, pane_id, releasing)
            chan.send(P.Release())
        msg = await answer(chan, P.Started)
        if req.run is not None:
            await owner.seams.gate("run.after_barrier")
        await owner.pacer.turn(ahead=True)  # the commit and its reply, a few per turn
        return msg

    try:
        started_msg, cancelled = await uncancellable(release(), cancel_seen)
        cancelled = cancelled or cancelled_early
    except BaseException as exc:
        forget_leader()
        chan.close()
        owner.forkserver.used()
        owner.preparing.discard(pane_id)
        # The leader may have started (a program can kill its sentinel before STARTED):
        # the start fails, so it must not run on out of every deadline's reach.
        cgroups.kill(pane_id)
        cgroups.discard(pane_id)  # kept, and accounted for, while it ends
        if isinstance(exc, ConnectionError):
            failed = _sentinel_lost()
            raise CancelledAfter(failed) if cancelled_early else failed from None
        raise
    owner.preparing.discard(pane_id)
    if isinstance(started_msg, P.Failed):
        give_back(owner, chan)
        cgroups.discard(pane_id)
        raise (
            CancelledAfter(_spawn_failed(started_msg.errno))
            if cancelled
            else _spawn_failed(started_msg.errno)
        )
    assert isinstance(started_msg, P.Started)
    try:
        pane = commit(
            owner, req, chan, window_id, pane_id, principal_id, token, started_msg.pid, on_commit
        )
    except VenomxError as exc:
        forget_leader()
        chan.close()  # the sentinel stops the leader's group when its channel closes
        owner.forkserver.used()
        cgroups.discard(pane_id)  # kept, and accounted for, while the leader's group ends
        raise CancelledAfter(exc) if cancelled else exc from None
    owner.forkserver.used()
    if cancelled:
        raise asyncio.CancelledError
    return pane


def give_back(owner: Owner, chan: Channel) -> None:
    """The start failed before any process existed: the sentinel is a spare again."""
    owner.registry.sentinels.pop(chan.sentinel_pid, None)
    owner.forkserver.recycle(chan)


class SentinelReaped(ConnectionError):
    """A new sentinel's HELLO came from a number reaped since (``ForkServer.greet``): it
    died after it read its SPAWN, which may have released its leader."""


class CancelledAfter(asyncio.CancelledError):
    """The request was cancelled after the barrier and the start then failed with ``error``:
    the request ends ``cancelled``; requests that joined the start get ``error``."""

    def __init__(self, error: VenomxError) -> None:
        super().__init__(error.code)
        self.error = error


def commit(
    owner: Owner,
    req: SpawnRequest,
    chan: Channel,
    window_id: str | None,
    pane_id: str,
    principal_id: str,
    token: str,
    pid: int,
    on_commit: Callable[[Pane], None] | None,
) -> Pane:
    """Make the new pane (and window, principal, run) visible with their events: one turn."""
    reg = owner.registry
    # Past the barrier: the target was checked as it was released, and a removal waits
    # for this start, so it is here; a split's target may have exited or begun terminating
    # since, and the new pane still goes beside it. Only a removal that gave up waiting
    # (the start stalled past SETTLE_WITHIN) turns it away.
    still_wanted(owner, pane_id)
    if req.session is not None:
        session = reg.sessions.get(req.session)
        if session is None:
            raise VenomxError("not_found.session", f"session {req.session} not found", {})
        s_id, snode = session.id, session.node
        assert window_id is not None
        wnode = req.requester.node(f"window:{window_id}", snode)
        window = Window(window_id, s_id, req.name, wnode, {"pane": pane_id})
    else:
        assert req.split is not None
        target = reg.panes.get(req.split)
        if target is None:
            raise VenomxError("not_found.pane", f"pane {req.split} not found", {})
        window = reg.windows[target.window]
        s_id = window.session
    pnode = req.requester.node(f"pane:{pane_id}", window.node)
    principal = Principal(principal_id, req.requester.id, req.grants, token, None, pane_id)
    reg.add_principal(principal)
    pane = Pane(
        pane_id,
        window.id,
        s_id,
        pnode,
        principal_id,
        pid,
        argv0_of(req.argv),
        req.cols,
        req.rows,
        chan.sentinel_pid,
        run=req.run,
    )
    link = Link(chan, leader_status=reg.early_exits.pop(pid, None))
    reg.panes[pane_id] = pane
    owner.links[pane_id] = link
    reg.leaders[pid] = pane_id
    created = {
        "pane": pane_id,
        "window": window.id,
        "session": s_id,
        "principal": principal_id,
        "argv0": pane.argv0,
        "cols": req.cols,
        "rows": req.rows,
    }
    if req.session is not None:
        reg.windows[window.id] = window
        reg.sessions[s_id].windows.append(window.id)
        window.panes.append(pane_id)
        owner.events.emit(
            "window.created",
            f"window:{window.id}",
            {"window": window.id, "session": s_id, "name": window.name},
            window.node,
        )
        owner.events.emit("pane.created", f"pane:{pane_id}", created, pnode)
    else:
        assert req.split is not None
        window.panes.append(pane_id)
        window.layout = split_layout(window.layout, req.split, pane_id, req.axis)
        owner.events.emit("pane.created", f"pane:{pane_id}", created, pnode)
        owner.events.emit(
            "window.layout_changed",
            f"window:{window.id}",
            {"window": window.id, "layout": window.layout},
            window.node,
        )
    if on_commit is not None:
        on_commit(pane)
    chan.on_started = None
    chan.attach(lambda m: owner.on_sentinel(pane, link, m))
    watch(owner, pane, link)
    return pane
