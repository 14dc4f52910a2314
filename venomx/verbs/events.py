"""Handlers for events.subscribe (streaming) and events.read (polling)."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from venomx.daemon.dispatch import Context, handler
from venomx.daemon.events import Event, Subscriber
from venomx.wire import VenomxError


def readable(ctx: Context, ev: Event) -> bool:
    return ctx.can("read", ev.body["resource"], ev.node)


def entities(ctx: Context) -> list[dict[str, Any]]:
    reg = ctx.registry
    out: list[dict[str, Any]] = []
    for s in reg.sessions.values():
        if ctx.can("read", f"session:{s.id}", s.node):
            out.append({"kind": "session", "session": s.id, "name": s.name})
    for w in reg.windows.values():
        if ctx.can("read", f"window:{w.id}", w.node):
            out.append(
                {
                    "kind": "window",
                    "window": w.id,
                    "session": w.session,
                    "name": w.name,
                    "layout": w.layout,
                }
            )
    for p in reg.panes.values():
        if ctx.can("read", f"pane:{p.id}", p.node):
            out.append({"kind": "pane", **p.record()})
    for r in ctx.runs.runs.values():
        if ctx.can("read", f"run:{r.id}", r.node):
            out.append(r.entity())
    return out


# Events one request looks at in a reactor turn: a log may retain a million, and a
# caller may read none of them.
SCAN_PER_TURN = 1024
# Live events a subscriber sends in one write, at most: those queued since its last
# turn go out in writes of this many (a write each cost 1,000 subscribers a system call
# per event).
SEND_AT_ONCE = 64


async def replay(ctx: Context, after: int) -> None:
    """The retained events after ``after`` up to the newest at the call, a turn per
    ``SCAN_PER_TURN``; newer ones are the subscriber's queue's. Events evicted before the
    replay reached them end it with ``unavailable.backlog``, as a full queue does."""
    log = ctx.events
    end, nxt = log.seq, after
    while nxt < end:
        chunk = [ev for ev in log.after(nxt, SCAN_PER_TURN) if ev.seq <= end]
        if chunk:
            nxt = chunk[-1].seq
        ctx.items_encoded(log.item(ev) for ev in chunk if readable(ctx, ev))
        if len(chunk) < SCAN_PER_TURN or nxt >= end:
            return
        await asyncio.sleep(0)
        if not log.cursor_ok(nxt):
            raise VenomxError("unavailable.backlog", "subscriber fell too far behind", {})


def check_cursor(ctx: Context, after: int) -> None:
    log = ctx.events
    if not log.cursor_ok(after):
        why = "were never issued" if after > log.seq else "are no longer retained"
        raise VenomxError("not_found.cursor", f"events after {after} {why}", {"oldest": log.oldest})


@handler("events.subscribe")
async def subscribe(
    ctx: Context, after: int | None = None, snapshot: bool | None = None, source: str | None = None
) -> dict[str, Any]:
    """Snapshot (optional) or the retained events after ``after``, then live events. The
    subscriber is added first, so live events wait in its queue while the snapshot (one
    turn) or the replay (a turn per ``SCAN_PER_TURN`` events) goes out.

    Cancellation: ends the stream. A subscriber that falls 10000 events behind ends with
    ``unavailable.backlog``.
    """
    if after is not None:
        check_cursor(ctx, after)
    if snapshot is None:
        snapshot = after is None
    sub = Subscriber(lambda ev: readable(ctx, ev))
    ctx.events.subscribers.add(sub)
    try:
        if snapshot:
            ctx.item(
                {
                    "snapshot": {
                        "source": ctx.source,
                        "seq": ctx.events.seq,
                        "entities": entities(ctx),
                    }
                }
            )
        elif after is not None:
            await replay(ctx, after)
        log = ctx.events
        while (batch := await sub.take(SEND_AT_ONCE)) is not None:
            ctx.items_encoded(log.item(ev) for ev in batch)
        raise VenomxError("unavailable.backlog", "subscriber fell too far behind", {})
    finally:
        ctx.events.subscribers.discard(sub)


@handler("events.read")
async def read(
    ctx: Context, limit: int, timeout_ms: int, after: int | None = None
) -> dict[str, Any]:
    """Events after ``after`` that the caller may read; waits up to timeout_ms for one."""
    log = ctx.events
    if after is None:
        after = log.oldest - 1
    check_cursor(ctx, after)
    deadline = time.monotonic() + timeout_ms / 1000.0
    while True:
        out: list[dict[str, Any]] = []
        nxt = after
        while len(out) < limit:
            chunk = log.after(nxt, SCAN_PER_TURN)
            for ev in chunk:
                if len(out) == limit:
                    break
                nxt = ev.seq
                if readable(ctx, ev):
                    out.append(ev.body)
            if len(chunk) < SCAN_PER_TURN or len(out) == limit:
                break
            await asyncio.sleep(0)  # events the caller may not read share the reactor
            if not log.cursor_ok(nxt):  # evicted meanwhile: what was found stands
                if out:
                    break
                check_cursor(ctx, nxt)
        remaining = deadline - time.monotonic()
        if out or remaining <= 0:
            return {"source": ctx.source, "events": out, "next": nxt}
        changed = log.changed
        try:
            await asyncio.wait_for(changed.wait(), remaining)
        except TimeoutError:
            pass
        after = nxt
        check_cursor(ctx, after)  # events evicted while we waited are not skipped silently
