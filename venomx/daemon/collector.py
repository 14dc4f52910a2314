"""When the daemon's cyclic garbage collector runs: once requests pause, not in a burst.

CPython 3.11 starts a collection whenever allocations minus deallocations pass 700. In
a burst of starts whose exits overlap them, the exits free about as much as the starts
allocate, so a young collection finds 15-40 k objects (10-35 ms of one reactor turn) and
the full ones 60-80 k (50-60 ms): the pauses that set the daemon's p99 latency. The
daemon's garbage is nearly all freed by reference counting (the collections of a
1000-burst found 0-6,000 objects in cycles, none holding a descriptor), so it can wait:
here automatic collection is off, and a timer collects once a look finds that no request
arrived since the previous one. Under requests that never pause it collects anyway
``max_defer`` seconds after its last collection, so no garbage waits longer than that
in the young generation, nor longer than ``full_every`` plus ``max_defer`` in any. The price
is one longer collection when a burst ends, of what the burst left alive, at the moment
the daemon is quiet.

The start-up heap is frozen before this starts (``main``): no collection scans it.
"""

from __future__ import annotations

import asyncio
import gc
from typing import Any

TICK = 1.0  # seconds between looks
MAX_DEFER = 10.0  # seconds of unbroken requests before a collection runs regardless
FULL_EVERY = 60.0  # seconds after which a collection owed is a full one


class Collector:
    """Collects at quiet moments; the server counts the requests it dispatches in
    ``requests``."""

    def __init__(
        self, tick: float = TICK, max_defer: float = MAX_DEFER, full_every: float = FULL_EVERY
    ) -> None:
        self.tick = tick
        self.max_defer = max_defer
        self.full_every = full_every
        self.requests = 0
        self.seen = 0  # ``requests`` at the last look
        self.quiet_at = 0  # ``requests`` at the last collection in a quiet moment
        self.last = 0.0  # loop time of the last collection
        self.last_full = 0.0
        self.collections = 0
        self.full = 0
        self.loop: asyncio.AbstractEventLoop | None = None
        self.timer: asyncio.TimerHandle | None = None
        self.was_enabled = True

    def start(self, loop: asyncio.AbstractEventLoop) -> None:
        assert self.timer is None, "started twice"
        self.loop = loop
        self.last = self.last_full = loop.time()
        self.was_enabled = gc.isenabled()
        gc.disable()
        self.timer = loop.call_later(self.tick, self.look)

    def stop(self) -> None:
        """Give automatic collection back (a process that goes on, such as a test's)."""
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None
        if self.was_enabled:
            gc.enable()

    def report(self) -> dict[str, Any]:
        """Doctor's ``collector`` section: whether CPython's own collector is on, the
        requests counted, and the collections made here (all, and full ones)."""
        return {
            "automatic": gc.isenabled(),
            "requests": self.requests,
            "collections": self.collections,
            "full": self.full,
        }

    def look(self) -> None:
        """A quiet look collects if a request came since the last quiet collection (one
        made under load does not count: what it promoted is still owed) or the
        allocation count passed CPython's threshold; a busy one only after
        ``max_defer``."""
        assert self.loop is not None
        self.timer = self.loop.call_later(self.tick, self.look)
        quiet = self.requests == self.seen
        self.seen = self.requests
        if quiet:
            if self.requests != self.quiet_at or gc.get_count()[0] > gc.get_threshold()[0]:
                self.collect()
                self.quiet_at = self.requests
        elif self.loop.time() - self.last >= self.max_defer:
            self.collect()

    def collect(self) -> None:
        """CPython's own choice of generation from its counts and thresholds (without
        its rule that a full collection waits for a quarter more long-lived objects),
        and a full one ``full_every`` after the last."""
        assert self.loop is not None
        _, young_runs, middle_runs = gc.get_count()
        _, t1, t2 = gc.get_threshold()
        now = self.loop.time()
        if middle_runs > t2 or now - self.last_full >= self.full_every:
            gen = 2
        elif young_runs > t1:
            gen = 1
        else:
            gen = 0
        gc.collect(gen)
        self.last = self.loop.time()
        if gen == 2:
            self.last_full = self.last
            self.full += 1
        self.collections += 1
