"""Requests to a pane's sentinel: tagged, answered in turn, and bounded.

Input, resize, capture, the attach stream and doctor's ping are tagged requests; each
has a bound, so a busy, stopped or lost sentinel fails the request
(``unavailable.sentinel``) instead of hanging it, and nothing is reported done that the
sentinel did not confirm (issue 14 §5).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from venomx.daemon.panes.sentinels import SENTINEL_BOUND, PaneGone
from venomx.wire import VenomxError
from workers import protocol as P
from workers.rows import TooLarge

if TYPE_CHECKING:
    from venomx.daemon.panes.link import Link
    from venomx.daemon.registry import Pane

# Input a program does not read within this bound is dropped, and the request says how
# much of it reached the terminal (timeout.input), so nothing is ever typed late.
INPUT_BOUND = 5.0
PING_BOUND = 1.0  # doctor: a sentinel silent this long is a fail
# A sentinel sends EXIT right after the input it could not write: waited for this long.
EXIT_FOLLOWS = 2.0


def lost(p: Pane) -> VenomxError:
    """The error for what needs a pane's sentinel (or the screen that went with it) when
    venomx lost it."""
    return VenomxError(
        "unavailable.sentinel", f"pane {p.id} lost its sentinel", {"pane": p.id, "reason": "lost"}
    )


def gone(p: Pane) -> VenomxError:
    """The error for a request whose pane exited, or lost its sentinel, before it answered."""
    if p.live:
        return lost(p)
    return VenomxError("conflict.pane_exited", f"pane {p.id} has exited", {})


def silent(p: Pane, bound: float) -> VenomxError:
    return VenomxError(
        "unavailable.sentinel",
        f"the sentinel of pane {p.id} did not answer within {bound:g} s",
        {"pane": p.id, "reason": "timeout"},
    )


class Requests:
    """Tags requests, routes the sentinels' tagged answers back, and bounds every wait."""

    def __init__(self) -> None:
        self._req = 0
        self._waiting: dict[int, asyncio.Future[P.Message]] = {}

    def next_req(self) -> int:
        self._req += 1
        return self._req

    def answered(self, req: int, m: P.Message) -> None:
        """A tagged answer (ROWS, RESIZED, WROTE, PONG) from some pane's sentinel."""
        fut = self._waiting.pop(req, None)
        if fut is not None and not fut.done():
            fut.set_result(m)

    async def ask(
        self,
        pane: Pane,
        link: Link,
        make: Callable[[int], P.Message],
        bound: float = SENTINEL_BOUND,
    ) -> P.Message:
        """Send a request and await its answer; ``PaneGone`` if the pane exits or loses
        its sentinel meanwhile, ``unavailable.sentinel`` after ``bound`` seconds."""
        if link.channel is None or pane.sentinel_lost:
            raise lost(pane)
        req = self.next_req()
        fut: asyncio.Future[P.Message] = asyncio.get_running_loop().create_future()
        self._waiting[req] = fut
        channel = link.channel
        channel.send(make(req))
        try:
            await asyncio.wait(
                [fut, channel.closed, link.exited],
                timeout=bound,
                return_when=asyncio.FIRST_COMPLETED,
            )
        finally:
            self._waiting.pop(req, None)
        if fut.done():
            return fut.result()
        if pane.live and not pane.sentinel_lost and not channel.closed.done():
            raise silent(pane, bound)
        raise PaneGone(pane)

    async def send_input(self, pane: Pane, link: Link, payload: bytes) -> int:
        """Write to the pane's terminal; the bytes written, all of them or an error."""
        until_ms = int((time.monotonic() + INPUT_BOUND) * 1000)
        try:
            m = await self.ask(
                pane, link, lambda req: P.Input(payload, req, until_ms), INPUT_BOUND + 1.0
            )
        except PaneGone:
            raise gone(pane) from None
        assert isinstance(m, P.Wrote)
        if m.written < len(payload):
            # only what reached the terminal counts; the rest was dropped, never sent late
            took = f"pane {pane.id} took {m.written} of {len(payload)} bytes"
            if link.termination is not None:  # its FREEZE dropped the rest
                raise VenomxError("conflict.pane_terminating", f"{took}, then terminated", {})
            why = f"within {INPUT_BOUND:g} s"
            if time.monotonic() * 1000 < until_ms:
                # cut short before its bound: the pane is ending (its EXIT follows at once),
                # or its program closed the terminal
                await asyncio.wait([link.exited], timeout=EXIT_FOLLOWS)
                if link.exited.done():
                    raise VenomxError("conflict.pane_exited", f"{took}, then exited", {})
                why = "before its terminal stopped taking input"
            raise VenomxError(
                "timeout.input", f"{took} {why}", {"pane": pane.id, "bytes": m.written}
            )
        return m.written

    async def resize(self, pane: Pane, link: Link, cols: int, rows: int) -> None:
        """Resize; the size, its epoch and pane.resized change when the sentinel applied
        it (``Panes.on_sentinel``), even if this request stopped waiting."""
        try:
            await self.ask(pane, link, lambda req: P.Resize(cols, rows, req))
        except PaneGone:
            raise gone(pane) from None

    async def capture(
        self,
        pane: Pane,
        link: Link,
        epoch: int | None,
        start: int | None,
        end: int | None,
        limit: int,
    ) -> dict[str, Any] | None:
        """Rows from the live terminal; None when the pane ended first (read its final
        state instead)."""
        try:
            m = await self.ask(pane, link, lambda req: P.Capture(req, epoch, start, end, limit))
        except PaneGone:
            return None
        assert isinstance(m, P.Rows)
        if m.error is not None:
            lines = m.error.get("lines")
            if m.error.get("code") == "unsupported.result_size" and type(lines) is int:
                raise TooLarge(m.result, lines)
            raise VenomxError(
                "conflict.epoch", "the row epoch changed", {"epoch": m.error.get("epoch")}
            )
        return m.result

    async def responsive(self, pane: Pane, link: Link) -> bool:
        """Doctor's ping; a pane that ends meanwhile counts as responsive."""
        try:
            await self.ask(pane, link, P.Ping, PING_BOUND)
        except VenomxError:
            return False
        except PaneGone:
            pass
        return True

    async def stream(
        self,
        pane: Pane,
        link: Link,
        on_screen: Callable[[P.Screen], None],
        on_output: Callable[[P.Output], None],
        after: int | None = None,
    ) -> None:
        """A repaint (or, with ``after``, the bytes after that offset if the sentinel still
        holds them), then every output byte in order, until the pane exits."""
        assert link.channel is not None
        req = self.next_req()
        loop = asyncio.get_running_loop()
        screen: asyncio.Future[None] = loop.create_future()
        # An item this stream cannot send (over its client's max_frame) ends this stream
        # alone: raised into the sentinel's channel, it would end the pane's.
        failed: asyncio.Future[None] = loop.create_future()

        def on_message(m: P.Message) -> None:
            try:
                if isinstance(m, P.Screen) and m.req == req:
                    if not screen.done():
                        screen.set_result(None)
                    on_screen(m)
                elif isinstance(m, P.Output) and screen.done():
                    on_output(m)
            except Exception as exc:
                link.attachers.pop(req, None)
                if not failed.done():
                    failed.set_exception(exc)

        link.attachers[req] = on_message  # the request tag is unique
        closed = link.channel.closed  # the sentinel is gone: nothing more will come
        link.channel.send(P.Stream(True, req, -1 if after is None else after))
        try:
            await asyncio.wait(
                [screen, link.exited, failed, closed],
                timeout=SENTINEL_BOUND,
                return_when=asyncio.FIRST_COMPLETED,
            )
            if not (screen.done() or link.exited.done() or failed.done() or closed.done()):
                raise silent(pane, SENTINEL_BOUND)
            await asyncio.wait([link.exited, failed, closed], return_when=asyncio.FIRST_COMPLETED)
            if failed.done():
                failed.result()  # raises what the stream could not send
            if not link.exited.done():  # lost with the pane still live (its leader too)
                raise gone(pane)
        finally:
            if failed.done():
                failed.exception()  # retrieved, whether raised above or not
            link.attachers.pop(req, None)
            if not link.attachers and pane.live and link.channel is not None:
                link.channel.send(P.Stream(False))
