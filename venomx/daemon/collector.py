"""When the daemon's cyclic garbage collector runs: once requests pause, not in a burst.

CPython 3.11 starts a collection whenever allocations minus deallocations pass 700. In
a burst of starts whose exits overlap them, the exits free about as much as the starts
allocate, so a young collection finds 15-40 k objects (10-35 ms of one reactor turn) and
the full ones 60-80 k (50-60 ms): the pauses that set the daemon's p99 latency. The
daemon's garbage is nearly all freed by reference counting (the collections of a
1000-burst found 0-2,000 objects in cycles), so it can wait: here automatic collection
is off, and a timer collects, making CPython's own choice of generation, once a look
finds that no request arrived since the previous one. Under requests that never pause
it collects anyway ``max_defer`` seconds after its last collection (never a full one),
so garbage in cycles is bounded in time. The price is one longer collection when a
burst ends, of what the burst left alive, at the moment the daemon is quiet.

The start-up heap is frozen before this starts (``main``): no collection scans it.
"""

from __future__ import annotations

import asyncio
import gc

TICK = 1.0  # seconds between looks
MAX_DEFER = 10.0  # seconds of unbroken requests before a collection runs regardless


class Collector:
    """Collects at quiet moments; the server counts the requests it dispatches in
    ``requests``."""

    def __init__(self, tick: float = TICK, max_defer: float = MAX_DEFER) -> None:
        self.tick = tick
        self.max_defer = max_defer
        self.requests = 0
        self.seen = 0  # ``requests`` at the last look
        self.collected_at = 0  # ``requests`` at the last collection
        self.last = 0.0  # loop time of the last collection
        self.collections = 0
        self.loop: asyncio.AbstractEventLoop | None = None
        self.timer: asyncio.TimerHandle | None = None
        self.was_enabled = True

    def start(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.last = loop.time()
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

    def look(self) -> None:
        assert self.loop is not None
        now = self.loop.time()
        quiet = self.requests == self.seen
        self.seen = self.requests
        owed = self.requests != self.collected_at or gc.get_count()[0] >= gc.get_threshold()[0]
        if owed and (quiet or now - self.last >= self.max_defer):
            self.collect(full_allowed=quiet)
            self.last = self.loop.time()
        self.timer = self.loop.call_later(self.tick, self.look)

    def collect(self, full_allowed: bool) -> None:
        """The generation CPython would choose from its counts and thresholds (without
        its rule that a full collection waits for a quarter more long-lived objects), a
        full one only when quiet."""
        _, young_runs, middle_runs = gc.get_count()
        _, t1, t2 = gc.get_threshold()
        gen = 2 if middle_runs >= t2 and full_allowed else 1 if young_runs >= t1 else 0
        gc.collect(gen)
        self.collected_at = self.requests
        self.collections += 1
