"""Bursts (issue 19 §2): the pane owner's heavy steps pass a pacer that lets a few run per
reactor turn, and a pipelined burst of runs still ends with every outcome right."""

from __future__ import annotations

import asyncio
import functools
from collections import Counter

import pytest

from tests.helpers import Daemon
from venomx.client import Client
from venomx.daemon.panes.pacing import Pacer


class Clock:
    """Counts reactor turns: a callback that schedules itself once per turn."""

    def __init__(self) -> None:
        self.turn = 0
        self.running = True
        asyncio.get_running_loop().call_soon(self.tick)

    def tick(self) -> None:
        self.turn += 1
        if self.running:
            asyncio.get_running_loop().call_soon(self.tick)


def test_a_queued_burst_runs_at_most_per_turn_steps_each_turn_in_order() -> None:
    async def main() -> tuple[list[tuple[str, int]], int]:
        clock = Clock()
        pacer = Pacer(per_turn=4)
        ran: list[tuple[str, int]] = []

        async def start(name: str, ahead: bool) -> None:
            await pacer.turn(ahead)
            ran.append((name, clock.turn))

        tasks = [asyncio.ensure_future(start(f"new{i}", False)) for i in range(30)]
        await asyncio.sleep(0)  # every start is queued now
        tasks += [asyncio.ensure_future(start(f"ahead{i}", True)) for i in range(10)]

        def exit_step(i: int) -> None:
            ran.append((f"exit{i}", clock.turn))

        for i in range(10):
            pacer.call(functools.partial(exit_step, i))
        await asyncio.gather(*tasks)
        clock.running = False
        return ran, pacer.queued()

    ran, left = asyncio.run(main())
    assert left == 0
    assert len(ran) == 50
    per_turn = Counter(turn for _, turn in ran)
    assert max(per_turn.values()) <= 4, per_turn
    names = [n for n, _ in ran]
    # the first four went at once; after that, work in progress (ahead, exits) first
    assert names[:4] == ["new0", "new1", "new2", "new3"]
    news = [n for n in names if n.startswith("new")]
    assert news == [f"new{i}" for i in range(30)]
    last_ahead = max(names.index(f"ahead{i}") for i in range(10))
    last_exit = max(names.index(f"exit{i}") for i in range(10))
    assert max(last_ahead, last_exit) < names.index("new29")
    assert names.index("new4") > last_ahead  # queued before them, but not in progress


def test_a_lone_step_goes_through_in_its_own_turn() -> None:
    async def main() -> tuple[int, int]:
        clock = Clock()
        pacer = Pacer(per_turn=4)
        before = clock.turn
        await pacer.turn()
        after = clock.turn
        clock.running = False
        return before, after

    before, after = asyncio.run(main())
    assert before == after


def test_a_cancelled_waiter_takes_no_place() -> None:
    async def main() -> tuple[list[str], int]:
        pacer = Pacer(per_turn=1)
        ran: list[str] = []

        async def start(name: str) -> None:
            await pacer.turn()
            ran.append(name)

        first = asyncio.ensure_future(start("a"))
        queued = [asyncio.ensure_future(start(n)) for n in ("b", "c", "d")]
        await asyncio.sleep(0)
        queued[0].cancel()
        await asyncio.gather(first, *queued, return_exceptions=True)
        return ran, pacer.queued()

    ran, left = asyncio.run(main())
    assert ran == ["a", "c", "d"]
    assert left == 0


@pytest.mark.timeout(120)
def test_a_pipelined_burst_of_runs_ends_with_every_outcome_while_others_are_answered(
    daemon: Daemon,
) -> None:
    n = 60  # within the default run.max_active
    with daemon.client() as c, daemon.client() as other:
        s = c.call("session.create")["session"]
        rids = [
            c.start("run", {"key": f"k{i}", "session": s, "argv": ["sh", "-c", f"exit {i % 3}"]})
            for i in range(n)
        ]
        # another connection is answered while the burst is being started
        assert other.call("whoami")["principal"] is not None
        got: dict[int, dict[str, object]] = {}
        while len(got) < n:
            frame = c.read()
            assert "error" not in frame, frame
            got[frame["id"]] = frame["ok"]
        runs = [got[r]["run"] for r in rids]
        assert len(set(runs)) == n
        assert len({got[r]["pane"] for r in rids}) == n
        waits = [c.start("run.wait", {"run": r, "output": False}) for r in runs]
        done: dict[int, dict[str, object]] = {}
        while len(done) < n:
            frame = c.read()
            assert "error" not in frame, frame
            done[frame["id"]] = frame["ok"]
        for i, w in enumerate(waits):
            rec = done[w]
            assert rec["state"] == "completed"
            assert rec.get("exit_code", 0) == i % 3
            assert rec["outcome"] == ("succeeded" if i % 3 == 0 else "failed")
        assert all(p["state"] == "exited" for p in c.call("pane.list", {"session": s})["panes"])
        c.call("session.remove", {"session": s, "recursive": True})


def test_a_client_sees_its_burst_answered_even_when_it_reads_late(daemon: Daemon) -> None:
    """The replies of a paced burst queue on the connection as before: a client that
    starts reading only after sending everything still gets every answer."""
    with Client(daemon.socket, "@owner") as c:
        s = c.call("session.create")["session"]
        rids = [c.start("run", {"key": f"x{i}", "session": s, "argv": ["true"]}) for i in range(30)]
        seen: set[int] = set()
        while len(seen) < len(rids):
            frame = c.read()
            assert "ok" in frame, frame
            seen.add(frame["id"])
        assert seen == set(rids)
