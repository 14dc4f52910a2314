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
# Bytes of frames not yet handled, over all connections: at least this, and eight full
# frames. Parts of frames and whole frames waiting their turn are bounded apart, each by
# this: a flood of pipelined requests must not push out a client's one large request.
READ_BUDGET = 64 * MIB
# Replies written and not yet read by their clients, over all connections: every
# backlog counts (3,000 connections each leaving 0.8 MiB unread held 2.5 GB while only
# backlogs past 1 MiB were counted).
WRITE_BUDGET = 128 * MIB
# Descriptors a connection may take: half of what the daemon may open; the other half
# is for panes (a channel and a pidfd each), spares, the log and the listeners.
SHARE = 2


class Peer(Protocol):
    """What the crowd needs of a connection (``server.Connection``)."""

    def backlog(self) -> int: ...
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
        # connections holding part of a frame and no whole one, the one heard from
        # longest ago first, with the bytes each holds
        self.holding: OrderedDict[Peer, int] = OrderedDict()
        self.partial = 0
        # connections whose whole frames wait their turn (reading paused), and bytes
        self.queued: dict[Peer, int] = {}
        self.queued_bytes = 0
        # replies not yet taken, as last seen, in the order the connections last had
        # none: a backlog is looked at when written to, and a connection says when it
        # has none; ``writing`` may be stale high
        self.backlogs: dict[Peer, int] = {}
        self.writing = 0
        # our uid's connections, the one heard from longest ago first; those found
        # waiting on a request when room was wanted are parked until heard from again
        self.heard: OrderedDict[Peer, None] = OrderedDict()
        self.parked: dict[Peer, None] = {}

    # -- bytes read and not yet handled ------------------------------------------------
    def held(self, peer: Peer, size: int, partial: bool) -> None:
        """``peer`` holds ``size`` bytes of frames not yet handled; ``partial``: they
        are part of a frame, and no whole frame waits its turn."""
        was = self.holding.get(peer)
        if was is not None:
            self.partial -= was
            if not (partial and size):
                del self.holding[peer]
        else:
            self.queued_bytes -= self.queued.pop(peer, 0)
        if not size:
            return
        if partial:
            self.holding[peer] = size  # where it was in the order, or last: heard now
            self.partial += size
        else:
            self.queued[peer] = size
            self.queued_bytes += size

    def over_read(self, max_frame: int) -> tuple[Peer, str] | None:
        """The connection to drop because the frames held together pass the read
        budget, or None. Past it with parts of frames: the one holding part of a frame
        that was heard from longest ago, not the one whose bytes crossed the budget (a
        client sending one large request while others hold frames they never finish:
        it is heard from as it sends, they are quiet). Past it with whole frames waiting
        their turn: the connection with the most of them (each stopped reading when its
        turn ended, so it holds at most a read's worth more than it could be handled).
        With the reason to log."""
        budget = read_budget(max_frame)
        if self.partial > budget:
            return next(iter(self.holding)), (
                "it holds part of a frame and is the quietest such, "
                "the unfinished frames together holding too much"
            )
        if self.queued_bytes > budget:
            return max(self.queued, key=self.queued.__getitem__), (
                "it has the most requests waiting their turn, "
                "those of every connection together holding too much"
            )
        return None

    # -- bytes written and not yet read ------------------------------------------------
    def wrote(self, peer: Peer, backlog: int) -> None:
        """``peer``'s replies not yet taken are ``backlog`` bytes now."""
        self.writing += backlog - self.backlogs.get(peer, 0)
        if backlog:
            self.backlogs[peer] = backlog  # where it was in the order, or last
        else:
            self.backlogs.pop(peer, None)

    def over_write(self) -> list[Peer]:
        """The slow readers to drop because all backlogs together pass WRITE_BUDGET:
        those that have not taken all their replies for longest, until the rest fit.
        Not the largest: a client reading normally whose one large reply was just
        written would be that, among connections that each leave less unread and never
        read; to look new, a connection must take everything it was sent. The backlogs
        are looked at again first (a client that took part of its replies never said
        so), so a look costs one step per connection with a backlog, and only when the
        budget seems passed. A look leaves an eighth of the budget free, finding it so
        or dropping until it is: else, with the total held within one reply of the
        budget by connections taking parts of theirs, each later reply would pass it
        again as last seen, and pay for a look at thousands of backlogs (helper-134)."""
        if self.writing <= WRITE_BUDGET:
            return []
        for p in list(self.backlogs):
            self.wrote(p, p.backlog())
        room = WRITE_BUDGET - WRITE_BUDGET // 8
        drop: list[Peer] = []
        total = self.writing
        for p, size in self.backlogs.items():
            if total <= room:
                break
            drop.append(p)
            total -= size
        return drop

    # -- how many connections ------------------------------------------------------------
    def opened(self, peer: Peer) -> bool:
        """A new connection of our uid: make room, if the daemon is at
        ``most_connections``, by dropping the one heard from longest ago that has no
        request in flight or waiting its turn (idle, or holding part of a frame: one
        byte of one kept such connections from ever being closed). False if there is
        none to drop: every connection is waiting on a request, and those are bounded
        by ``InFlight``."""
        if len(self.heard) + len(self.parked) >= most_connections():
            quiet = self._quietest()
            if quiet is None:
                return False
            self.closed(quiet)
            quiet.drop("a connection with nothing in flight, the daemon being at its limit")
        self.heard[peer] = None
        return True

    def _quietest(self) -> Peer | None:
        """The connection heard from longest ago with nothing in flight. Those passed
        over, waiting on a request, are parked, so a connection reopened again and
        again at the limit does not walk past them each time (842 µs a connection with
        8,192 waiting); parked ones are looked at again only when no other is left."""
        for again in (False, True):
            if again:
                done = [p for p in self.parked if not p.waiting()]
                for p in done:
                    del self.parked[p]
                    self.heard[p] = None
            while self.heard:
                quiet = next(iter(self.heard))
                if not quiet.waiting():
                    return quiet
                del self.heard[quiet]
                self.parked[quiet] = None
        return None

    def heard_from(self, peer: Peer) -> None:
        if peer in self.heard:
            self.heard.move_to_end(peer)
        elif peer in self.parked:
            del self.parked[peer]
            self.heard[peer] = None
        if peer in self.holding:
            self.holding.move_to_end(peer)

    def closed(self, peer: Peer) -> None:
        self.heard.pop(peer, None)
        self.parked.pop(peer, None)
        self.held(peer, 0, False)
        self.wrote(peer, 0)
