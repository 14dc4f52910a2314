"""Test seams (§12): named points where a request can be held, only with --test-seams.

Without the flag every gate is a no-op and the seam verbs fail ``unsupported.seams``.
"""

from __future__ import annotations

import asyncio


class Seams:
    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled
        self.held: set[str] = set()
        self.waiting: dict[str, int] = {}
        self._release: dict[str, asyncio.Event] = {}
        self._arrived: dict[str, asyncio.Event] = {}

    def is_held(self, name: str) -> bool:
        return self.enabled and name in self.held

    def set(self, name: str, hold: bool) -> None:
        if hold:
            self.held.add(name)
            self._release[name] = asyncio.Event()
        else:
            self.held.discard(name)
            ev = self._release.pop(name, None)
            if ev is not None:
                ev.set()

    def release_event(self, name: str) -> asyncio.Event:
        return self._release.setdefault(name, asyncio.Event())

    def arrived(self, name: str) -> asyncio.Event:
        return self._arrived.setdefault(name, asyncio.Event())

    async def gate(self, name: str) -> None:
        """Pause here while ``name`` is held (no-op without --test-seams)."""
        if not self.is_held(name):
            return
        self.waiting[name] = self.waiting.get(name, 0) + 1
        self.arrived(name).set()
        try:
            await self.release_event(name).wait()
        finally:
            self.waiting[name] -= 1
            if not self.waiting[name]:
                self._arrived.pop(name, None)
