"""``EventLog.after`` takes events from the nearer end of its deque (indexing a deque one
event at a time was quadratic: 11 s for one ``events.read`` of a million events), and
``encode_key`` counts ``M-`` prefixes instead of recursing (a megabyte of them held the
reactor 1.4 s, and past ~1000 raised RecursionError)."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Coroutine
from types import SimpleNamespace
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from venomx.daemon.events import EventLog
from venomx.verbs import events
from venomx.verbs.events import SCAN_PER_TURN
from venomx.verbs.keys import APPLICATION, NAMED, encode_key, one_key
from venomx.wire import VenomxError


@settings(max_examples=300, deadline=None)
@given(
    st.integers(1, 40),
    st.integers(0, 100),
    st.integers(-2, 102),
    st.integers(1, 50),
)
def test_after_is_the_retained_events_past_a_seq(
    retain: int, emitted: int, seq: int, count: int
) -> None:
    log = EventLog("venomx/test", retain)
    for i in range(emitted):
        log.emit("session.created", f"session:s{i}", {})
    want = [ev.seq for ev in log.events if ev.seq > seq][:count] if seq < log.seq else []
    assert [ev.seq for ev in log.after(seq, count)] == want


def recursive(name: str, application: bool) -> bytes | None:
    """encode_key as it was, one call per ``M-``: the model (a key without one is
    ``one_key``'s, unchanged)."""
    if application and name in APPLICATION:
        return APPLICATION[name]
    if name in NAMED:
        return NAMED[name]
    if name.startswith("M-") and len(name) > 2:
        rest = recursive(name[2:], application)
        return b"\x1b" + rest if rest is not None else None
    return one_key(name, application)


PARTS = st.sampled_from(["M-", "C-", "M", "-", "a", "Up", "Enter", "?", "é", ""])


@settings(max_examples=500, deadline=None)
@given(st.lists(PARTS, max_size=8).map("".join), st.booleans())
def test_encode_key_answers_as_the_recursive_one(name: str, application: bool) -> None:
    assert encode_key(name, application) == recursive(name, application)


def test_a_key_under_many_metas() -> None:
    assert encode_key("M-" * 100_000 + "Up", True) == b"\x1b" * 100_000 + b"\x1bOA"
    assert encode_key("M-" * 100_000) is None


# A context with what the event handlers use of one: a caller who may read everything.
def context(log: EventLog) -> tuple[Any, list[dict[str, Any]]]:
    items: list[dict[str, Any]] = []
    ctx = SimpleNamespace(
        events=log,
        source="s",
        can=lambda *a: True,
        item=items.append,
        item_encoded=lambda item: items.append(json.loads(item)),
        items_encoded=lambda got: items.extend(json.loads(item) for item in got),
    )
    return ctx, items


def coroutine(answer: object) -> Coroutine[Any, Any, dict[str, Any]]:
    """A handler's call, which for these verbs is a coroutine."""
    assert asyncio.iscoroutine(answer)
    return answer


def filled(retain: int, n: int) -> EventLog:
    log = EventLog("s", retain)
    for i in range(n):
        log.emit("session.created", f"session:s{i}", {})
    return log


def test_a_read_found_before_a_turn_of_evictions_stands() -> None:
    """A full chunk of SCAN_PER_TURN with its answer found is not thrown away for events
    evicted while other requests ran (review of the chunked scan, helper-103)."""

    async def case() -> dict[str, Any]:
        log = filled(SCAN_PER_TURN, SCAN_PER_TURN)
        ctx, _ = context(log)
        asyncio.get_running_loop().call_soon(
            lambda: [log.emit("x", "session:x", {}) for _ in range(3)]
        )
        return await coroutine(events.read(ctx, limit=1, timeout_ms=0, after=0))

    got = asyncio.run(case())
    assert [e["seq"] for e in got["events"]] == [1] and got["next"] == 1


def test_events_evicted_while_a_read_waits_are_not_skipped() -> None:
    async def case() -> None:
        log = filled(1, 1)
        ctx, _ = context(log)
        read = asyncio.ensure_future(
            coroutine(events.read(ctx, limit=10, timeout_ms=5000, after=1))
        )
        await asyncio.sleep(0)  # the read's first turn: nothing after 1, so it waits
        for _ in range(3):  # one turn: 2 and 3 are evicted by 4
            log.emit("x", "session:b", {})
        with pytest.raises(VenomxError) as err:
            await read
        assert err.value.code == "not_found.cursor"

    asyncio.run(case())


def test_a_finished_replay_is_not_failed_by_evictions_after_it() -> None:
    """The queue, not the log, holds what came after the replay's last event."""

    async def case() -> list[dict[str, Any]]:
        log = filled(SCAN_PER_TURN, SCAN_PER_TURN)
        ctx, items = context(log)
        sub = asyncio.ensure_future(coroutine(events.subscribe(ctx, after=0, snapshot=False)))
        await asyncio.sleep(0)  # the replay's one turn
        for _ in range(SCAN_PER_TURN + 6):
            log.emit("x", "session:y", {})
        while len(items) < 2 * SCAN_PER_TURN + 6 and not sub.done():
            await asyncio.sleep(0)
        sub.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await sub
        return items

    seqs = [item["event"]["seq"] for item in asyncio.run(case())]
    assert seqs == list(range(1, 2 * SCAN_PER_TURN + 7))


def test_an_event_is_encoded_once_for_every_subscriber() -> None:
    """1,000 subscribers each encoding every event made 200 runs take 13.7 s instead of
    0.6 s (7.7 s with this): the newest events' items are kept, a bounded number."""
    from venomx.daemon import events as log_module

    async def emitting() -> None:
        log = EventLog("s", 10)
        evs = [log.emit("session.created", f"session:s{i}", {"n": i}) for i in range(3000)]
        first = log.item(evs[-1])
        assert log.item(evs[-1]) is first
        assert json.loads(first) == {"event": evs[-1].body}
        for ev in evs:  # one further behind than kept is encoded again, the same
            assert json.loads(log.item(ev)) == {"event": ev.body}
        assert len(log.encoded) == log_module.ENCODED_MAX

    asyncio.run(emitting())


def test_a_subscriber_sends_what_waited_in_writes_of_a_bounded_batch_then_ends_at_overflow() -> (
    None
):
    """Live events go out as many as waited since the subscriber's last turn, up to
    ``SEND_AT_ONCE``, in one write each (a write per event cost 1,000 subscribers a
    system call per event: 200 runs took 7.7 s, 2.8 s batched). More than
    ``SUBSCRIBER_QUEUE`` waiting in one turn: the ones kept are sent, then the stream
    ends with ``unavailable.backlog``."""
    from venomx.daemon.events import SUBSCRIBER_QUEUE

    async def case() -> tuple[list[int], list[int], VenomxError]:
        log = EventLog("s", 10)
        ctx, items = context(log)
        writes: list[int] = []

        def write(got: Any) -> None:
            batch = [json.loads(item) for item in got]
            writes.append(len(batch))
            items.extend(batch)

        ctx.items_encoded = write
        sub = asyncio.ensure_future(coroutine(events.subscribe(ctx, after=0, snapshot=False)))
        await asyncio.sleep(0)  # subscribed, waiting
        for _ in range(3):
            log.emit("x", "session:y", {})
        while len(items) < 3:
            await asyncio.sleep(0)
        for _ in range(SUBSCRIBER_QUEUE + 5):
            log.emit("x", "session:y", {})
        with pytest.raises(VenomxError) as err:
            await sub
        return writes, [item["event"]["seq"] for item in items], err.value

    writes, seqs, err = asyncio.run(case())
    assert writes[0] == 3
    assert max(writes) == events.SEND_AT_ONCE
    assert seqs == list(range(1, SUBSCRIBER_QUEUE + 4))
    assert err.code == "unavailable.backlog"
