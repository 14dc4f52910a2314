"""The event log (§10): bounded, ordered, filtered per reader by read authority.

Each event keeps the ``AuthNode`` of its resource, captured when it was appended, so
events about removed resources stay readable under frozen authorization. Subscribers get
events through a bounded queue; one that falls too far behind is dropped.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from venomx.daemon.registry import AuthNode, now_iso

SUBSCRIBER_QUEUE = 10000


@dataclass
class Event:
    seq: int
    body: dict[str, Any]
    node: AuthNode | None


class Subscriber:
    def __init__(self, allowed: Callable[[Event], bool]) -> None:
        self.allowed = allowed
        self.queue: asyncio.Queue[Event | None] = asyncio.Queue()
        self.overflowed = False


class EventLog:
    def __init__(self, source: str, retain: int) -> None:
        self.source = source
        self.events: deque[Event] = deque(maxlen=retain)
        self.seq = 0
        self.subscribers: set[Subscriber] = set()
        self.changed = asyncio.Event()

    def resize(self, retain: int) -> None:
        self.events = deque(self.events, maxlen=retain)

    def emit(self, etype: str, resource: str, data: dict[str, Any],
             node: AuthNode | None = None) -> Event:
        """Append one event; call in the same reactor turn as the state change."""
        self.seq += 1
        body = {"source": self.source, "seq": self.seq, "ts": now_iso(), "type": etype,
                "resource": resource, "data": data}
        ev = Event(self.seq, body, node)
        self.events.append(ev)
        for sub in list(self.subscribers):
            if sub.overflowed or not sub.allowed(ev):
                continue
            if sub.queue.qsize() >= SUBSCRIBER_QUEUE:
                sub.overflowed = True
                sub.queue.put_nowait(None)
            else:
                sub.queue.put_nowait(ev)
        self.changed.set()
        self.changed = asyncio.Event()
        return ev

    @property
    def oldest(self) -> int:
        return self.events[0].seq if self.events else self.seq + 1

    def after(self, seq: int) -> list[Event]:
        """Retained events with seq > ``seq``; the caller checks the cursor first."""
        if not self.events or seq >= self.seq:
            return []
        first = self.events[0].seq
        start = max(0, seq + 1 - first)
        return [self.events[i] for i in range(start, len(self.events))]

    def cursor_ok(self, after: int) -> bool:
        """A cursor is usable when nothing after it has been evicted."""
        return after + 1 >= self.oldest or after >= self.seq
