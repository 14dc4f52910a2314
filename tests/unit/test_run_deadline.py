"""A deadline whose time has come when the leader's exit is seen comes first, whatever
order the reactor runs that turn's callbacks in (its I/O before its due timers)."""

from __future__ import annotations

import asyncio
from pathlib import Path

from venomx.daemon.config import Config
from venomx.daemon.events import EventLog
from venomx.daemon.registry import AuthNode, Pane, Registry
from venomx.daemon.runs import Run, RunTable


async def _seen_at(deadline_s: float, seen_after_s: float) -> list[str]:
    """The causes a run was stopped with when its exit is seen ``seen_after_s`` after a
    commit with a deadline of ``deadline_s``, before the loop had a turn to run timers."""
    registry = Registry()
    table = RunTable(registry, EventLog("venomx/t", 100), Config(Path("/nonexistent")))
    stopped: list[str] = []
    table.stop = lambda pane, cause: stopped.append(cause)
    node = AuthNode("pane:p0", None)
    pane = Pane("p0", "w0", "s0", node, "g0", 1, "true", 80, 24, 2, run="r0")
    registry.panes["p0"] = pane
    run = Run("r0", "k", "@owner", b"", False, 10, 1024)
    run.pane = "p0"
    table.runs["r0"] = run
    loop = asyncio.get_running_loop()
    run.deadline = loop.call_at(loop.time() + deadline_s, table.on_deadline, run)
    end = loop.time() + seen_after_s
    while loop.time() < end:  # a turn that runs late: no timer runs meanwhile
        pass
    table.overdue("r0")
    if run.deadline is not None:
        run.deadline.cancel()
    return stopped


def test_an_exit_seen_after_the_deadline_is_the_deadlines() -> None:
    assert asyncio.run(_seen_at(0.01, 0.05)) == ["deadline"]


def test_an_exit_seen_before_the_deadline_is_the_programs() -> None:
    assert asyncio.run(_seen_at(5.0, 0.0)) == []
