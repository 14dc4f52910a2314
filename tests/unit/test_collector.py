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


def _scenario(
    busy_for: float, max_defer: float, tick: float = 0.05
) -> tuple[bool, bool, int, bool]:
    """Garbage in a cycle, then requests every 10 ms for ``busy_for`` seconds, then
    none: (freed while busy, freed by 2 s after, collections, automatic collection on
    while the collector ran)."""

    async def run() -> tuple[bool, bool, int, bool]:
        gc.collect()  # nothing of earlier tests left for the first look to find
        c = Collector(tick=tick, max_defer=max_defer)
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
    # looks 250 ms apart: only a pause of the test's process that long could pass
    # between two looks without a request and pass for quiet
    while_busy, after, collections, enabled = _scenario(busy_for=0.6, max_defer=60.0, tick=0.25)
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


def _looks(c: Collector, busy: list[bool]) -> list[int]:
    """Drive ``c``'s looks by hand (its own timer is an hour away), a request before
    each busy one, 50 ms apart; the generations collected meanwhile, from CPython's
    own callbacks."""
    gens: list[int] = []

    def seen(phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            gens.append(info["generation"])

    async def run() -> None:
        gc.collect()  # counts at zero: the generations chosen do not hang on earlier tests
        c.start(asyncio.get_running_loop())
        gc.callbacks.append(seen)
        try:
            for b in busy:
                if b:
                    c.requests += 1
                c.look()
                await asyncio.sleep(0.05)
        finally:
            gc.callbacks.remove(seen)
            c.stop()

    asyncio.run(run())
    return gens


def test_a_collection_made_under_load_leaves_the_next_quiet_one_owed() -> None:
    # What a collection under load promoted is still garbage-to-be: the first quiet look
    # after it must collect, though no request came since.
    c = Collector(tick=3600, max_defer=0.0, full_every=3600)
    gens = _looks(c, [True, False])
    assert len(gens) == 2
    assert c.collections == 2


def test_load_that_never_pauses_still_gets_a_full_collection() -> None:
    c = Collector(tick=3600, max_defer=0.0, full_every=0.2)
    gens = _looks(c, [True] * 12)  # 0.6 s of looks, every one busy
    assert 0 in gens  # young ones in between
    assert gens.count(2) >= 2  # and a full one every 0.2 s


def test_a_quiet_look_after_a_quiet_collection_owes_nothing() -> None:
    c = Collector(tick=3600, max_defer=3600, full_every=3600)
    gens = _looks(c, [True, False, False, False])
    assert gens == [0]  # busy: deferred; quiet: collected once; then nothing owed
