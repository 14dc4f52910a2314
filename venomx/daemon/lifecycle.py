"""Whether the daemon is stopping: new work is refused from the first turn of a shutdown."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

from venomx.wire import VenomxError

END_WAIT = 1.0  # seconds the requests still in flight at the end of a shutdown may take


class Lifecycle:
    """The daemon's shutdown, as the services see it: a flag, a request, a future.

    ``stop_work`` (wired by the daemon) ends every pane; ``end_requests`` then cancels
    what is still in flight (a start held before its barrier, a stream, a wait on a run
    that did not complete), so that every request is answered, ``cancelled``, before the
    transport closes. ``stopped`` is set once the waiters it woke and the requests it
    ended have written their replies.
    """

    def __init__(self) -> None:
        self.shutting_down = False
        self.closing = False  # the requests in flight have been ended: so is any new one
        self.stopped: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.stop_work: Callable[[], Awaitable[None]] | None = None
        self.end_requests: Callable[[], list[asyncio.Task[None]]] | None = None
        self._task: asyncio.Task[None] | None = None

    def refuse_new_work(self) -> None:
        if self.shutting_down:
            raise VenomxError("unavailable.shutdown", "the daemon is shutting down", {})

    def begin_shutdown(self) -> None:
        """Refuse new work, end every pane (cause shutdown), then stop; idempotent."""
        if self.shutting_down:
            return
        self.shutting_down = True
        self._task = asyncio.ensure_future(self._shutdown())

    async def _shutdown(self) -> None:
        if self.stop_work is not None:
            await self.stop_work()
        # Let waiters woken by the last completions write their replies.
        for _ in range(3):
            await asyncio.sleep(0)
        if self.end_requests is not None:
            self.closing = True
            ended = self.end_requests()
            if ended:  # a start rolls back first: nothing of it may outlive us
                await asyncio.wait(ended, timeout=END_WAIT)
            for _ in range(3):
                await asyncio.sleep(0)
        if not self.stopped.done():
            self.stopped.set_result(None)
