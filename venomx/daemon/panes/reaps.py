"""Which numbers the daemon reaped lately, in order.

A sentinel says HELLO with its own pid, but the daemon acts on that message turns later
(after awaits), and the sentinel may have died and been reaped in between: its number
is then free, and a program that holds every other free pid can have a process of its
own take it, a child of the daemon too (``clone(CLONE_PARENT)`` from an orphan). A
number learnt from a channel is the sentinel's only if it was not reaped since the
channel was made (helper-146): each channel is marked with ``count`` when its socketpair
is made, before any fork, and ``since`` answers for that mark.
"""

from __future__ import annotations

from collections import OrderedDict

# Numbers remembered; past this, the oldest are forgotten, and a channel older than the
# newest forgotten reap is refused (fails closed: its start fails, or its spare goes).
KEEP = 65536


class Reaps:
    """The daemon's reaps, counted, with the last count at which each number was reaped."""

    def __init__(self, keep: int = KEEP) -> None:
        self.count = 0
        self.last: OrderedDict[int, int] = OrderedDict()
        self.keep = keep
        self.forgotten = 0  # the count of the newest reap no longer remembered

    def note(self, pid: int) -> None:
        """``pid`` is about to be reaped (or was): from now on its number may be anyone's."""
        self.count += 1
        self.last[pid] = self.count
        self.last.move_to_end(pid)
        if len(self.last) > self.keep:
            _, self.forgotten = self.last.popitem(last=False)

    def since(self, pid: int, mark: int) -> bool:
        """Whether ``pid`` may have been reaped after the count was ``mark``."""
        return self.forgotten > mark or self.last.get(pid, 0) > mark
