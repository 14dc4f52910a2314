"""Handlers for pane.*: split, list, input, resize, kill, remove, capture and attach.

Dispatch has already authorized, checked the declared steps and resolved the target
pane with its required state (``venomx.manifest.verbs``); every change to a pane goes
through the pane owner (``ctx.panes``).
"""

from __future__ import annotations

import base64
from typing import Any

from venomx.daemon.dispatch import Context, handler, result_size
from venomx.daemon.registry import Grant, Pane, Session, Window
from venomx.verbs.common import start_pane
from venomx.verbs.keys import encode_keys
from venomx.wire import VenomxError, dumps
from workers.rows import TooLarge


@handler("pane.split")
async def split(
    ctx: Context,
    pane: Pane,
    axis: str,
    cols: int,
    rows: int,
    grants: list[Grant],
    argv: list[str] | None = None,
    cwd: str | None = None,
    env: dict[str, Any] | None = None,
    env_unset: list[str] | None = None,
    memory_max: int | None = None,
    pids_max: int | None = None,
) -> dict[str, Any]:
    return await start_pane(
        ctx,
        argv,
        cols,
        rows,
        grants,
        cwd,
        env,
        env_unset,
        memory_max,
        pids_max,
        split=pane.id,
        axis=axis,
    )


@handler("pane.list")
def pane_list(
    ctx: Context, session: Session | None = None, window: Window | None = None
) -> dict[str, Any]:
    out = []
    for p in ctx.registry.panes.values():
        if session is not None and p.session != session.id:
            continue
        if window is not None and p.window != window.id:
            continue
        if ctx.can("read", f"pane:{p.id}", p.node):
            out.append(p.record())
    return {"source": ctx.source, "panes": out}


@handler("pane.send")
async def send(
    ctx: Context,
    pane: str,
    text: str | None = None,
    keys: list[str] | None = None,
    data: str | None = None,
) -> dict[str, Any]:
    """The input is encoded first (a bad key name is invalid_params whatever the pane),
    then the pane is resolved."""
    if text is not None:
        try:
            payload = text.encode("utf-8")
        except UnicodeEncodeError:  # a lone surrogate, as argv and env refuse it
            raise VenomxError(
                "invalid_params.input",
                "text is not valid UTF-8 (a lone surrogate); send bytes as data",
                {"param": "text", "reason": "encoding"},
            ) from None
    elif keys is not None:
        payload = encode_keys(keys)
    else:
        payload = base64.b64decode(data or "", validate=True)  # its syntax was checked
    p: Pane = ctx.resolve()
    if keys is not None and ctx.panes.link(p).application_keys:
        payload = encode_keys(keys, application=True)
    if not payload:
        return {"pane": p.id, "bytes": 0}
    return {"pane": p.id, "bytes": await ctx.panes.send_input(p, payload)}


@handler("pane.resize")
async def resize(ctx: Context, pane: Pane, cols: int, rows: int) -> dict[str, Any]:
    await ctx.panes.resize(pane, cols, rows)
    return pane.record()


@handler("pane.kill")
async def kill(ctx: Context, pane: Pane, signal: str, grace_ms: int) -> dict[str, Any]:
    """Terminate the pane (§9) and return its record once the leader is reaped.

    Cancellation: cancelling the request ends only the request; the termination goes on.
    """
    ctx.panes.terminate(pane, signal, grace_ms, "pane_kill")
    await ctx.panes.wait_terminated(pane)
    return pane.record()


@handler("pane.remove")
async def remove(ctx: Context, pane: Pane) -> dict[str, Any]:
    """Remove an exited pane once any split past its barrier beside it has committed.

    Cancellation: ends the request; nothing is removed."""
    return {"pane": pane.id, "removed": await ctx.panes.remove_exited(pane)}


@handler("pane.cleanup")
async def cleanup(ctx: Context, pane: Pane, signal: str, grace_ms: int) -> dict[str, Any]:
    """End what the exited pane left: {pane, ended, remaining}.

    Cancellation: ends only the request; signals sent are not undone.
    """
    return await ctx.panes.cleanup(pane.id, signal, grace_ms)


@handler("pane.capture_rows")
async def capture_rows(
    ctx: Context,
    pane: Pane,
    limit: int,
    epoch: int | None = None,
    start: int | None = None,
    end: int | None = None,
) -> dict[str, Any]:
    try:
        rows = await ctx.panes.capture(pane, epoch, start, end, limit, ctx.max_frame)
    except TooLarge as exc:  # counted without building them: [] stands for the rows
        empty = len(dumps({"id": 0, "ok": {"pane": pane.id, **exc.result}}))
        raise result_size(empty - 2 + exc.lines, ctx.max_frame) from None
    return {"pane": pane.id, **rows}


def _exit_info(p: Pane) -> dict[str, Any]:
    info: dict[str, Any] = {"offset": p.final.offset if p.final is not None else 0}
    if p.exit_code is not None:
        info["exit_code"] = p.exit_code
    if p.signal is not None:
        info["signal"] = p.signal
    return info


class _Encoded:
    """The output last sent to an attach, base64-encoded, and its items as last cut:
    every attach of a pane gets the same output, and encoding it once per attach made
    100 attaches of a 55 MB/s program hold the daemon at a full core and the program at
    1.6 MB/s. The base64 is kept whatever size the items are cut to (an attach's
    ``max_frame`` sets it, so attaches alternating two sizes would miss a cache of
    items alone)."""

    __slots__ = ("chunk", "data", "encoded", "end", "items")

    def __init__(self) -> None:
        self.data: bytes | None = None  # kept, so its id is not reused while compared
        self.encoded = b""
        self.end = self.chunk = 0
        self.items: list[bytes] = []


_LAST = _Encoded()


def _output_items(data: bytes, end: int, chunk: int) -> list[bytes]:
    """The encoded items (``{"data","offset"}``) of ``data``, ending at offset ``end``,
    in pieces of ``chunk`` bytes rounded down to whole base64 groups."""
    last = _LAST
    chunk -= chunk % 3  # a piece's base64 is then a slice of the whole one's
    if last.data is not data:
        last.data, last.encoded, last.chunk = data, base64.b64encode(data), 0
    elif last.end == end and last.chunk == chunk:
        return last.items
    start, step, encoded = end - len(data), chunk // 3 * 4, last.encoded
    last.items = [
        b'{"data":"%s","offset":%d}'
        % (encoded[i // 3 * 4 : i // 3 * 4 + step], start + min(i + chunk, len(data)))
        for i in range(0, len(data), chunk)
    ]
    last.end, last.chunk = end, chunk
    return last.items


@handler("pane.attach")
async def attach(ctx: Context, pane: Pane, after: int | None = None) -> dict[str, Any]:
    """Stream a repaint (or, with ``after``, the held bytes after it) then every output
    byte in order; respond at pane exit.

    Cancellation: ends the stream; the pane is unaffected.
    """
    chunk = max(256, (ctx.max_frame - 160) * 3 // 4)

    def b64(data: bytes) -> str:
        return base64.b64encode(data).decode("ascii")

    def on_screen(cols: int, rows: int, offset: int, data: bytes, replay: bool) -> None:
        screen: dict[str, Any] = {"cols": cols, "rows": rows, "offset": offset, "data": b64(data)}
        if replay:
            screen["replay"] = True
        ctx.item({"screen": screen})

    def on_output(data: bytes, end: int) -> None:
        ctx.items_encoded(_output_items(data, end, chunk))

    await ctx.panes.stream(pane, on_screen, on_output, after)
    return {"exit": _exit_info(pane)}
