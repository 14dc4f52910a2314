"""Pacing: the pane owner's heavy steps, a few per reactor turn.

A burst of a thousand starts (or of exits) must not fill reactor turns with its own
work: every other request waits for the turn in progress and then the next. Each
heavy step of a start (its preparation up to SPAWN, its commit and reply) and each
pane's exit passes a ``Pacer``, which lets at most ``per_turn`` of them run in one turn,
first come first served, finishing work in progress (``ahead``) before it begins new
starts. When nothing is queued a step goes through at once, so a lone start pays
nothing for it.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable

# Steps let through per reactor turn. A step costs the reactor 0.1-0.5 ms of CPU (a
# commit with its events and reply, a pane's exit with its cgroup's reading), so a
# turn of paced work stays within a few milliseconds.
STEPS_PER_TURN = 8

Step = asyncio.Future[None] | Callable[[], None]


class Pacer:
    """At most ``per_turn`` steps per reactor turn while any are queued, in two FIFO
    queues: ``ahead`` (work in progress: commits, exits) before ``new`` (starts not yet
    begun). A step that finds nothing queued and room in the turn goes at once."""

    def __init__(self, per_turn: int = STEPS_PER_TURN) -> None:
        self.per_turn = per_turn
        self.ahead: deque[Step] = deque()
        self.new: deque[Step] = deque()
        self.now = 0  # steps running in this turn
        self.next = 0  # steps let through to run in the next turn
        self.clock = False  # ``_turn`` is scheduled for the next turn

    def queued(self) -> int:
        return len(self.ahead) + len(self.new)

    async def turn(self, ahead: bool = False) -> None:
        """Wait until this step may run: at once when nothing is queued and the turn has
        room, else in a later turn, in order."""
        if self._room():
            self.now += 1
            self._wind()
            return
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        (self.ahead if ahead else self.new).append(fut)
        self._wind()
        await fut

    def call(self, step: Callable[[], None]) -> None:
        """Run ``step`` in a coming turn, in the ``ahead`` queue's order."""
        if self._room():
            self.next += 1
            asyncio.get_running_loop().call_soon(step)
        else:
            self.ahead.append(step)
        self._wind()

    def _room(self) -> bool:
        return not (self.ahead or self.new) and self.now + self.next < self.per_turn

    def _wind(self) -> None:
        if not self.clock:
            self.clock = True
            asyncio.get_running_loop().call_soon(self._turn)

    def _turn(self) -> None:
        """Once per turn while there is work: what was let through last turn runs now;
        let the next ``per_turn`` queued steps through to the coming turn."""
        self.clock = False
        self.now, self.next = self.next, 0
        loop = asyncio.get_running_loop()
        while self.next < self.per_turn and (self.ahead or self.new):
            step = (self.ahead or self.new).popleft()
            if isinstance(step, asyncio.Future):
                if step.done():  # its request was cancelled meanwhile
                    continue
                step.set_result(None)
            else:
                loop.call_soon(step)
            self.next += 1
        if self.now or self.next or self.ahead or self.new:
            self._wind()
