"""A deadline applies only to an exit after its time (RFC-0015 §7), whatever order the
reactor runs a turn's callbacks in (its I/O before its due timers) and however late the
turn is: an exit seen late is decided by when the sentinel saw it, and a venomx failure
that loses that time decides for the deadline, never for the program."""

from __future__ import annotations

import asyncio
import signal
import time
import types
from collections.abc import Callable
from pathlib import Path

from venomx.daemon.config import Config
from venomx.daemon.events import EventLog
from venomx.daemon.panes.link import Link
from venomx.daemon.panes.termination import terminate
from venomx.daemon.registry import AuthNode, Pane, Registry
from venomx.daemon.runs import Run, RunTable

Seen = Callable[[RunTable, float], None]


def _table(deadline_s: float) -> tuple[RunTable, Run, float, list[tuple[str, bool]]]:
    """A table with one run r0 (pane p0) committed now with a deadline of ``deadline_s``:
    the table, the run, the deadline's time and the stops the run gets (cause, exited)."""
    registry = Registry()
    table = RunTable(registry, EventLog("venomx/t", 100), Config(Path("/nonexistent")))
    stopped: list[tuple[str, bool]] = []
    table.stop = lambda pane, cause, exited: stopped.append((cause, exited))
    node = AuthNode("pane:p0", None)
    registry.panes["p0"] = Pane("p0", "w0", "s0", node, "g0", 1, "true", 80, 24, 2, run="r0")
    run = Run("r0", "k", "@owner", b"", False, 10, 1024)
    run.pane = "p0"
    table.runs["r0"] = run
    loop = asyncio.get_running_loop()
    when = loop.time() + deadline_s
    run.deadline = loop.call_at(when, table.on_deadline, run)
    return table, run, when, stopped


async def _stops(deadline_s: float, seen_after_s: float, seen: Seen) -> list[tuple[str, bool]]:
    """The stops a run gets when ``seen`` reports its exit ``seen_after_s`` after a commit
    with a deadline of ``deadline_s``, before the loop had a turn to run timers; ``seen``
    is given the deadline's time on the monotonic clock."""
    table, run, when, stopped = _table(deadline_s)
    loop = asyncio.get_running_loop()
    end = loop.time() + seen_after_s
    while loop.time() < end:  # a turn that runs late: no timer runs meanwhile
        pass
    seen(table, when)
    assert run.deadline is None, "the timer is cancelled once the exit is seen"
    assert run.held_deadline is None, "and nothing is left held"
    return stopped


def _ns(seconds: float) -> int:
    return int(seconds * 1e9)


def pidfd_then_exit(offset_s: float) -> Seen:
    """The pidfd first, then EXIT saying the exit was ``offset_s`` after the deadline."""

    def seen(table: RunTable, when: float) -> None:
        table.exit_seen("r0")
        table.exit_seen("r0", _ns(when + offset_s))

    return seen


def test_an_exit_seen_before_the_deadline_is_the_programs() -> None:
    assert asyncio.run(_stops(5.0, 0.0, pidfd_then_exit(-4.9))) == []


def test_a_late_turn_does_not_take_an_exit_before_the_deadline_for_the_deadlines() -> None:
    assert asyncio.run(_stops(0.01, 0.05, pidfd_then_exit(-0.005))) == []


def test_an_exit_after_the_deadline_is_the_deadlines() -> None:
    assert asyncio.run(_stops(0.01, 0.05, pidfd_then_exit(0.001))) == [("deadline", True)]


def test_an_exit_reported_first_by_its_sentinel_is_decided_at_once() -> None:
    def before(table: RunTable, when: float) -> None:
        table.exit_seen("r0", _ns(when - 0.005))

    def after(table: RunTable, when: float) -> None:
        table.exit_seen("r0", _ns(when + 0.005))

    assert asyncio.run(_stops(0.01, 0.05, before)) == []
    assert asyncio.run(_stops(0.01, 0.05, after)) == [("deadline", True)]


def test_a_sentinel_that_does_not_know_when_decides_for_the_deadline() -> None:
    def unknown(table: RunTable, when: float) -> None:
        table.exit_seen("r0")
        table.exit_seen("r0", 0)

    assert asyncio.run(_stops(0.01, 0.05, unknown)) == [("deadline", True)]


def test_a_lost_sentinel_decides_for_the_deadline() -> None:
    def lost(table: RunTable, when: float) -> None:
        table.exit_seen("r0")
        table.exit_untold("r0")

    assert asyncio.run(_stops(0.01, 0.05, lost)) == [("deadline", True)]


def test_a_leader_reaped_late_with_no_word_from_its_sentinel_is_the_deadlines() -> None:
    """The daemon reaped the leader of a lost sentinel in a late turn, before its pidfd's
    callback or the timer ran."""

    def reaped(table: RunTable, when: float) -> None:
        table.exit_untold("r0")

    assert asyncio.run(_stops(0.01, 0.05, reaped)) == [("deadline", True)]
    assert asyncio.run(_stops(5.0, 0.0, reaped)) == []


def test_a_lost_sentinel_before_the_deadline_leaves_nothing_to_decide() -> None:
    def lost(table: RunTable, when: float) -> None:
        table.exit_seen("r0")
        table.exit_untold("r0")

    assert asyncio.run(_stops(5.0, 0.0, lost)) == []


def test_the_sentinels_clock_is_the_reactors() -> None:
    """The sentinel stamps with ``time.monotonic_ns``; the reactor's time is
    ``time.monotonic``: one clock, or the comparison above means nothing."""

    async def both() -> tuple[float, float, float]:
        loop = asyncio.get_running_loop()
        return loop.time(), time.monotonic_ns() / 1e9, loop.time()

    before, stamp, after = asyncio.run(both())
    assert before <= stamp <= after


def test_a_timer_that_runs_before_an_unseen_exit_holds_the_deadline() -> None:
    """A late turn may run the deadline's timer before the exit's callback (its wait for
    I/O cut short); the leader has exited unseen, so the exit's time decides."""

    async def late_timer(offset_s: float) -> list[tuple[str, bool]]:
        table, run, when, stopped = _table(0.001)
        table.exited_unseen = lambda pane: True
        await asyncio.sleep(0.01)  # the timer runs
        assert run.deadline is None and run.held_deadline == when and stopped == []
        table.exit_seen("r0")
        table.exit_seen("r0", _ns(when + offset_s))
        assert run.held_deadline is None
        return stopped

    assert asyncio.run(late_timer(-0.0005)) == []
    assert asyncio.run(late_timer(0.0005)) == [("deadline", True)]


def test_a_stop_after_the_leaders_exit_sweeps_its_group() -> None:
    """No cause is recorded once the exit came first, but what is left of the group is
    swept (the owner sends it only while the unreaped leader pins the group ID): an
    exit hidden for good by tracers that hold each other left the group running past
    the deadline (helper-148)."""

    async def stop() -> tuple[object, list[list[int]]]:
        sent: list[list[int]] = []
        owner = types.SimpleNamespace(signal=lambda pane, sigs: sent.append(sigs))
        pane = Pane("p0", "w0", "s0", AuthNode("pane:p0", None), "g0", 1, "true", 80, 24, 2)
        link = Link(None)
        link.leader_gone.set_result(None)
        return terminate(owner, pane, link, "SIGHUP", 2000, "deadline"), sent  # type: ignore[arg-type]

    assert asyncio.run(stop()) == (None, [[signal.SIGKILL]])


def test_a_held_deadline_sweeps_the_group_at_once() -> None:
    """Held, the deadline signals nothing until EXIT decides it, which may never come
    (an exit hidden for good): the group is swept when it is held (helper-149)."""
    swept: list[str] = []

    def seen(table: RunTable, when: float) -> None:
        table.sweep = lambda pane: swept.append(pane.id)
        table.exit_seen("r0")
        assert swept == ["p0"]
        table.exit_seen("r0", _ns(when - 0.001))

    assert asyncio.run(_stops(0.01, 0.05, seen)) == []
    assert swept == ["p0"]
