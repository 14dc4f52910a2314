"""The daemon's collector: garbage in cycles waits while requests arrive, and is
collected once they pause, or after ``max_defer`` of requests that never pause."""

from __future__ import annotations

import asyncio
import gc
import weakref
from collections.abc import Callable

from venomx.daemon.collector import Collector


class Node:
    """Something a cycle can hold, whose end a finalizer reports."""

    def __init__(self) -> None:
        self.me = self


def _cycle(freed: list[str]) -> None:
    """One object in a cycle with nothing else referring to it: only the cyclic
    collector can free it."""
    node = Node()
    weakref.finalize(node, freed.append, "freed")


async def _until(cond: Callable[[], object], timeout: float) -> bool:
    deadline = asyncio.get_running_loop().time() + timeout
    while not cond():
        if asyncio.get_running_loop().time() > deadline:
            return False
        await asyncio.sleep(0.01)
    return True


def _scenario(busy_for: float, max_defer: float) -> tuple[bool, bool, int, bool]:
    """Garbage in a cycle, then requests every 10 ms for ``busy_for`` seconds, then
    none: (freed while busy, freed by 2 s after, collections, automatic collection on
    while the collector ran)."""

    async def run() -> tuple[bool, bool, int, bool]:
        gc.collect()  # nothing of earlier tests left for the first look to find
        c = Collector(tick=0.05, max_defer=max_defer)
        c.start(asyncio.get_running_loop())
        try:
            enabled = gc.isenabled()
            freed: list[str] = []
            _cycle(freed)
            loop = asyncio.get_running_loop()
            end = loop.time() + busy_for
            while loop.time() < end:
                c.requests += 1
                await asyncio.sleep(0.01)
            while_busy = bool(freed)
            after = await _until(lambda: freed, 2.0)
            return while_busy, after, c.collections, enabled
        finally:
            c.stop()

    return asyncio.run(run())


def test_garbage_waits_while_requests_arrive_and_goes_once_they_pause() -> None:
    was = gc.isenabled()
    while_busy, after, collections, enabled = _scenario(busy_for=0.5, max_defer=60.0)
    assert not enabled
    assert gc.isenabled() == was  # stop gives automatic collection back
    assert not while_busy
    assert after
    assert collections >= 1


def test_requests_that_never_pause_defer_a_collection_only_so_long() -> None:
    while_busy, _, _, _ = _scenario(busy_for=1.5, max_defer=0.3)
    assert while_busy


def test_a_quiet_daemon_with_nothing_allocated_does_not_collect() -> None:
    async def run() -> int:
        gc.collect()
        c = Collector(tick=0.02)
        c.start(asyncio.get_running_loop())
        try:
            await asyncio.sleep(0.3)  # the looks to count: fifteen of them
            return c.collections
        finally:
            c.stop()

    assert asyncio.run(run()) == 0
