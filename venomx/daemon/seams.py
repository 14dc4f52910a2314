"""Test seams (§12): named points where a request can be held, only with --test-seams.

Without the flag every gate is a no-op and the seam verbs fail ``unsupported.seams``.
A seam is a hook its owner calls at a named point (``gate``, ``hook``, ``call``); what
holding it means lives here, not in the barrier protocol or the signalling path.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable


class Seams:
    """The named points a test can hold, and the requests held at each."""

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled
        self.held: set[str] = set()
        self.waiting: dict[str, int] = {}
        self._release: dict[str, asyncio.Event] = {}
        self._arrived: dict[str, asyncio.Event] = {}
        self.deferred: set[asyncio.Task[None]] = set()

    def is_held(self, name: str) -> bool:
        return self.enabled and name in self.held

    def set(self, name: str, hold: bool) -> None:
        if hold:
            # a second hold keeps the first one's event, or what it holds is never released
            self.held.add(name)
            self._release.setdefault(name, asyncio.Event())
        else:
            self.held.discard(name)
            ev = self._release.pop(name, None)
            if ev is not None:
                ev.set()

    def release_event(self, name: str) -> asyncio.Event:
        return self._release.setdefault(name, asyncio.Event())

    def arrived(self, name: str) -> asyncio.Event:
        return self._arrived.setdefault(name, asyncio.Event())

    def hook(self, name: str) -> Callable[[], Awaitable[None]] | None:
        """The pause at ``name`` if it is held now (for callers that can skip a step when
        nothing will pause them, like the release that travels with SPAWN), else None."""
        return (lambda: self.gate(name)) if self.is_held(name) else None

    def call(self, name: str, action: Callable[[], None]) -> None:
        """Run ``action`` now, or, while ``name`` is held, once it is released."""
        if not self.is_held(name):
            action()
            return
        released = self.release_event(name)
        self._arrive(name)

        async def later() -> None:
            try:
                await released.wait()
                action()
            finally:
                self._leave(name)

        task = asyncio.ensure_future(later())
        self.deferred.add(task)
        task.add_done_callback(self.deferred.discard)

    async def gate(self, name: str) -> None:
        """Pause here while ``name`` is held (no-op without --test-seams)."""
        if not self.is_held(name):
            return
        self._arrive(name)
        try:
            await self.release_event(name).wait()
        finally:
            self._leave(name)

    def _arrive(self, name: str) -> None:
        self.waiting[name] = self.waiting.get(name, 0) + 1
        self.arrived(name).set()

    def _leave(self, name: str) -> None:
        """One held request has gone on; ``seam.wait`` waits again once none is held."""
        self.waiting[name] -= 1
        if not self.waiting[name]:
            del self.waiting[name]
            self._arrived.pop(name, None)
