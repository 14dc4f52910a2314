"""The termination procedure (§9): the only way the daemon ever stops a pane.

pane.kill, run.cancel, run deadlines, recursive removal and shutdown all call
``terminate`` with a cause. Steps: terminating state and frozen input, pane.terminating
(and run.terminating), SIGCONT + the signal to the pinned group, SIGKILL at the grace
deadline (monotonic), and a 1000 ms kill-wait after which waiting requests fail
``timeout.terminate`` while the pane stays terminating until its leader exits.
A second request joins the first (first signal and cause kept); on an exited pane it is
a no-op.
"""

from __future__ import annotations

import asyncio
import functools
import signal as _signal
import time
from typing import TYPE_CHECKING

from venomx.daemon.panes.link import Link, Termination
from venomx.daemon.panes.watch import EXIT_BOUND
from venomx.manifest.verbs import TERMINATE_GRACE_MS, TERMINATE_SIGNAL
from venomx.wire import VenomxError
from workers import protocol as P
from workers import tracer

if TYPE_CHECKING:
    from venomx.daemon.panes.contract import Owner
    from venomx.daemon.registry import Pane

KILL_WAIT = 1.0
# Once the leader is dead, how long its sentinel may take to drain the PTY (workers'
# DRAIN_MAX, 1 s, while an escaped process keeps writing) and report it.
REPORT_WAIT = 2.0
DEFAULT_SIGNAL, DEFAULT_GRACE_MS = TERMINATE_SIGNAL, TERMINATE_GRACE_MS


def terminate(
    owner: Owner,
    pane: Pane,
    link: Link,
    signame: str,
    grace_ms: int,
    cause: str,
    exited: bool = False,
) -> Termination | None:
    """Start (or join) the termination of ``pane``; one reactor turn, no waiting.
    ``exited``: a run's deadline came before its leader's exit, which the reactor saw
    first (``RunTable.exit_seen``): the termination is recorded, nothing is signalled."""
    if not pane.live:
        return None
    if link.termination is not None:
        return link.termination
    if link.leader_gone.done() and not exited:
        # Its exit came first (RFC-0015 §5: the outcome is what the run was when the exit
        # was observed): no cause is recorded, and the pane ends as its sentinel reports
        # once the PTY is drained, or is lost (watch.EXIT_BOUND). What is left of its
        # group is swept, as the sentinel does at the exit: a tracer may hide that exit
        # from it for good (a chain of tracers that hold each other), and the unreaped
        # zombie still pins the group ID (helper-148).
        owner.signal(pane, [_signal.SIGKILL])
        return None
    t = Termination(pane, signame, grace_ms, cause, functools.partial(_escalate, owner))
    link.termination = t
    pane.state = "terminating"
    if link.channel is not None:  # input is frozen: what is queued goes no further
        link.channel.send(P.Freeze())
    owner.events.emit(
        "pane.terminating",
        f"pane:{pane.id}",
        {"pane": pane.id, "requested_signal": signame, "grace_ms": grace_ms},
        pane.node,
    )
    if pane.run is not None:
        owner.runs.on_terminating(pane.run, cause)
    if exited:
        t.killed_at = time.monotonic()  # waiters wait for the report only
        t.killed.set_result(None)
        return t
    owner.signal(pane, [_signal.SIGCONT, _signal.Signals[signame]])
    loop = asyncio.get_running_loop()
    t.timer = loop.call_later(grace_ms / 1000.0, t.escalate, t)
    return t


def _escalate(owner: Owner, t: Termination) -> None:
    t.timer = None
    if not t.pane.live:
        return
    owner.signal(t.pane, [_signal.SIGKILL])
    t.killed_at = time.monotonic()
    if not t.killed.done():
        t.killed.set_result(None)
    t.timer = asyncio.get_running_loop().call_later(tracer.GRACE, _end_tracers, owner, t)


def _end_tracers(owner: Owner, t: Termination) -> None:
    """SIGKILL was sent a grace ago and the pane lives on: a tracer of the leader, or of
    one of its threads (whose zombie keeps the leader from being waited for), is out of
    every ``killpg``'s reach in a session of its own (``workers.tracer``). Only while
    the leader is unreaped: its number is then its own."""
    t.timer = None
    if owner.leader_unreaped(t.pane):
        tracer.end_tracers(t.pane.pid)
        t.timer = asyncio.get_running_loop().call_later(tracer.GRACE, _end_tracers, owner, t)


async def wait_terminated(pane: Pane, link: Link) -> None:
    """Wait for the leader's reap; ``timeout.terminate`` once kill-wait has passed with
    the leader still alive.

    A leader that died within kill-wait has done what SIGKILL asks: the pane then ends
    once its sentinel has drained the PTY (up to a second, as long as an escaped process
    keeps writing) and reported, so the wait goes on for ``REPORT_WAIT`` more.

    Cancellation: ends only this wait; the termination goes on.
    """
    t = link.termination
    if not pane.live:
        return
    if t is None:  # the leader exited before any termination: its report is on its way
        await asyncio.wait([link.exited], timeout=EXIT_BOUND + REPORT_WAIT)
        if link.exited.done():
            return
        message = f"pane {pane.id} did not end after its leader"
        raise VenomxError("timeout.terminate", message, {"panes": [pane.id]})
    if not link.exited.done():
        await asyncio.wait([link.exited, t.killed], return_when=asyncio.FIRST_COMPLETED)
    if link.exited.done():
        return
    assert t.killed_at is not None
    remaining = t.killed_at + KILL_WAIT - time.monotonic()
    if remaining > 0 and not link.leader_gone.done():
        await asyncio.wait(
            [link.exited, link.leader_gone], timeout=remaining, return_when=asyncio.FIRST_COMPLETED
        )
    if link.leader_gone.done() and not link.exited.done():
        await asyncio.wait([link.exited], timeout=REPORT_WAIT)
    if link.exited.done():
        return
    raise VenomxError(
        "timeout.terminate", f"pane {pane.id} did not exit after SIGKILL", {"panes": [pane.id]}
    )
