"""Progress while ``run_dwait`` blocks: a host sees the call is alive.

When the tool call carries a progress token, a notification goes out every
``PROGRESS_EVERY`` seconds: ``progress`` is the milliseconds waited (monotonic, so it only
grows) and ``message`` gives the run's state, the time waited and where the pane's output
stands (byte offset; the cursor's row and the row count in ``pane_dcapture_rows``'s
numbering, with the epoch). Never row text: no verb streams rows (RFC-0015 §4), and rows
can still change on screen; read them with ``pane_dcapture_rows``.

Progress is a side channel: a describe step that fails or is slow shortens the message,
never the wait, and the wait's result or error is exactly what it would be without it.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from venomx.aclient import AsyncClient
from venomx.wire import VenomxError

log = logging.getLogger(__name__)
T = TypeVar("T")
PROGRESS_EVERY = 3.0  # seconds between notifications; hosts are told "every few seconds"
DESCRIBE_WITHIN = 1.0  # seconds one describe step may take before the message goes without
ROW_END = 2**62  # capture_rows from here returns no rows, only the counts

Report = Callable[[int, str], Awaitable[None]]


async def describe(client: AsyncClient, run: str, waited_ms: int) -> str:
    """The progress message: state, time waited, output offset and row count."""
    rec = await client.call("run.get", {"run": run, "output": False})
    text = f"run {run} {rec.get('state')}, waited {waited_ms // 1000} s"
    pane = rec.get("pane")
    if not isinstance(pane, str):
        return text
    try:
        rows = await client.call("pane.capture_rows", {"pane": pane, "start": ROW_END, "limit": 1})
    except VenomxError:  # e.g. no read right on the pane: state and time are still news
        return text
    cursor = rows.get("cursor") or {}
    return (
        f"{text}; pane {pane}: output offset {rows.get('offset')}, cursor row "
        f"{cursor.get('row')} of {rows.get('end')} (epoch {rows.get('epoch')})"
    )


async def bounded_describe(client: AsyncClient, run: str, waited_ms: int) -> str:
    try:
        return await asyncio.wait_for(describe(client, run, waited_ms), DESCRIBE_WITHIN)
    except (VenomxError, TimeoutError):
        return f"waiting for run {run}: {waited_ms // 1000} s"


async def with_progress(
    call: Awaitable[T], report: Callable[[int], Awaitable[None]], every: float = PROGRESS_EVERY
) -> T:
    """Await ``call``; meanwhile ``report(ms_waited)`` every ``every`` seconds.

    Cancelling this cancels ``call`` (for a daemon request: its ``cancel`` is sent) and
    stops the reports.
    """
    start = time.monotonic()

    async def tick() -> None:
        n = 1
        while True:
            delay = start + n * every - time.monotonic()
            if delay > 0:
                await asyncio.sleep(delay)
            n = max(n + 1, int((time.monotonic() - start) // every) + 1)
            try:
                await report(int((time.monotonic() - start) * 1000))
            except Exception as exc:  # the host went away: the wait answers for itself
                log.debug("progress report failed: %s", exc)
                return

    ticker = asyncio.ensure_future(tick())
    try:
        return await call
    finally:
        ticker.cancel()


async def wait_with_progress(
    client: AsyncClient, args: dict[str, Any], notify: Report
) -> dict[str, Any]:
    """``run.wait`` with ``args``, reporting progress through ``notify(ms, message)``."""
    run = str(args.get("run"))

    async def report(ms: int) -> None:
        await notify(ms, await bounded_describe(client, run, ms))

    return await with_progress(client.call("run.wait", args), report)


__all__ = ["PROGRESS_EVERY", "describe", "wait_with_progress", "with_progress"]
