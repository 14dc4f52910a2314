"""The per-pane observation budget of the event log (issue 15.6), on the log itself."""

from __future__ import annotations

import asyncio
import time

import pytest

from venomx.daemon import events as E
from venomx.daemon.events import COALESCED, EventLog

RES = "pane:p1"


def _types(log: EventLog) -> list[str]:
    return [e.body["type"] for e in log.events]


def test_burst_then_coalesced_before_the_next_lifecycle_event() -> None:
    async def main() -> None:
        log = EventLog("venomx/t", 1000)
        kept = [
            log.observe("p1", "command.started", RES, {"pane": "p1"}, None, 1, 5) for _ in range(9)
        ]
        log.observe(
            "p1", "program.status_changed", RES, {"pane": "p1", "state": "busy"}, None, 1, 5
        )
        # a run of ten takes well under a second: at most one token came back
        assert sum(e is not None for e in kept) in (5, 6)
        held = 10 - len(log.events)
        log.emit("pane.exited", RES, {"pane": "p1"})
        types = _types(log)
        assert types[-2:] == [COALESCED, "pane.exited"]
        data = log.events[-2].body["data"]
        assert data["count"] == held == sum(data["types"].values())
        assert data["types"]["program.status_changed"] == 1
        assert data["command_open"] is True and data["state"] == "busy"
        assert log.coalesced == held
        assert RES not in log.budgets  # the pane's exit frees its budget and timer

    asyncio.run(main())


def test_other_panes_and_lifecycle_events_are_never_limited() -> None:
    async def main() -> None:
        log = EventLog("venomx/t", 100000)
        for _ in range(50):
            log.observe("p1", "command.started", RES, {"pane": "p1"}, None, 1, 1)
        assert (
            log.observe("p2", "command.started", "pane:p2", {"pane": "p2"}, None, 1, 1) is not None
        )
        for i in range(5000):
            log.emit("session.created", f"session:s{i}", {"session": f"s{i}"})
        assert _types(log).count("session.created") == 5000
        for b in list(log.budgets.values()):
            log._forget(b)

    asyncio.run(main())


def test_held_back_observations_are_reported_after_an_interval(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(E, "COALESCE_INTERVAL", 0.05)

    async def main() -> None:
        log = EventLog("venomx/t", 1000)
        for i in range(20):
            log.observe(
                "p1",
                "command.finished",
                RES,
                {"pane": "p1", "reason": "marker", "exit_code": i},
                None,
                1,
                2,
            )
        before = len(log.events)
        deadline = time.monotonic() + 10
        while COALESCED not in _types(log):
            assert time.monotonic() < deadline, "no coalesced event"
            await asyncio.sleep(0.01)
        ev = log.events[-1].body
        assert ev["type"] == COALESCED and ev["resource"] == RES
        assert ev["data"] == {
            "pane": "p1",
            "count": 20 - before,
            "types": {"command.finished": 20 - before},
            "command_open": False,
            "state": None,
        }
        log.emit("pane.removed", RES, {"pane": "p1"})
        assert _types(log)[-2:] == [COALESCED, "pane.removed"]  # nothing new to report

    asyncio.run(main())
