"""All the connections together: the bytes they make the daemon hold, and how many may
be open before the quiet ones make room.

Each connection is bounded on its own: an unfinished frame by ``max_frame``, replies it
has not read by ``server.BACKLOG_MIN`` (or four frames). Connections themselves were
bounded only by descriptors (20,000 where this was measured), and a process of our uid
needs no token to open them: 3,900 connections each holding a frame one byte short of
``max_frame`` held 3.9 GiB of the daemon's memory, and 20,000 that sent nothing left no
descriptor to accept the owner's next `venomx whoami` with (helper-125). Architecture
rule 7 bounds everything; these are the bounds over all connections at once.
"""

from __future__ import annotations

import resource
from collections import OrderedDict
from typing import Protocol

MIB = 1024 * 1024
# Unfinished frames held, over all connections: at least this, and eight full frames.
READ_BUDGET = 64 * MIB
# Replies written and not yet read by their clients, over all connections; only a
# connection whose own backlog passes LARGE is counted (the slow readers).
WRITE_BUDGET = 128 * MIB
LARGE = MIB
# Descriptors a connection may take: half of what the daemon may open; the other half
# is for panes (a channel and a pidfd each), spares, the log and the listeners.
SHARE = 2


class Peer(Protocol):
    """What the crowd needs of a connection (``server.Connection``)."""

    def backlog(self) -> int: ...
    def idle(self) -> bool: ...
    def waiting(self) -> bool: ...
    def drop(self, why: str) -> None: ...


def read_budget(max_frame: int) -> int:
    return max(READ_BUDGET, 8 * max_frame)


def most_connections() -> int:
    """How many connections may be open at once (our own uid's)."""
    soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    return 1 << 30 if soft == resource.RLIM_INFINITY else max(64, soft // SHARE)


class Crowd:
    """The daemon's connections as a whole."""

    def __init__(self) -> None:
        self.reading = 0  # bytes of unfinished (or not yet handled) frames held
        # connections holding part of a frame and no whole one, the one heard from
        # longest ago first
        self.holding: OrderedDict[Peer, None] = OrderedDict()
        self.slow: dict[Peer, None] = {}  # connections whose backlog passed LARGE
        # our uid's connections, the one heard from longest ago first
        self.heard: OrderedDict[Peer, None] = OrderedDict()

    def held(self, peer: Peer, delta: int, partial: bool) -> None:
        """``peer`` holds ``delta`` more bytes of frames not yet handled than it did;
        ``partial``: they are part of a frame, and no whole frame waits its turn."""
        self.reading += delta
        if not partial:
            self.holding.pop(peer, None)
        elif peer not in self.holding:
            self.holding[peer] = None

    def over_read(self, max_frame: int) -> Peer | None:
        """The connection to drop because all unfinished frames together pass the read
        budget: the one holding part of a frame that was heard from longest ago, not the
        one whose bytes crossed the budget (a client sending one large request while
        others hold frames they never finish: it is heard from as it sends, they are
        quiet). A connection whose whole frames wait their turn is not chosen: what it
        holds is requests being handled, a read's worth at most. None if within the
        budget."""
        if self.reading <= read_budget(max_frame):
            return None
        return next(iter(self.holding), None)

    def over_write(self, peer: Peer, backlog: int) -> Peer | None:
        """``peer``'s backlog is ``backlog`` (past LARGE): the slow reader to drop if all
        their backlogs together now pass WRITE_BUDGET, the one holding the most. Only
        the slow readers are summed, and there are at most WRITE_BUDGET / LARGE of them
        before one is dropped."""
        self.slow[peer] = None
        total, most, worst = 0, -1, peer
        for p in list(self.slow):
            size = backlog if p is peer else p.backlog()
            if size < LARGE:
                del self.slow[p]
            total += size
            if size > most:
                most, worst = size, p
        return worst if total > WRITE_BUDGET else None

    def opened(self, peer: Peer) -> bool:
        """A new connection of our uid: make room, if the daemon is at
        ``most_connections``, by dropping the one heard from longest ago that holds
        nothing (else, the one heard from longest ago that holds only part of a frame:
        one byte of one kept such connections from ever being closed). False if there
        is none to drop: every connection is waiting on a request, and those are
        bounded by ``InFlight``."""
        if len(self.heard) >= most_connections():
            quiet = next((p for p in self.heard if p.idle()), None)
            if quiet is None:
                quiet = next((p for p in self.heard if not p.waiting()), None)
            if quiet is None:
                return False
            self.closed(quiet)
            quiet.drop("a connection with nothing in flight, the daemon being at its limit")
        self.heard[peer] = None
        return True

    def heard_from(self, peer: Peer) -> None:
        if peer in self.heard:
            self.heard.move_to_end(peer)
        if peer in self.holding:
            self.holding.move_to_end(peer)

    def closed(self, peer: Peer) -> None:
        self.heard.pop(peer, None)
        self.slow.pop(peer, None)
        self.holding.pop(peer, None)
