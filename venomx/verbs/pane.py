"""Handlers for pane.*: split, list, input, resize, kill, remove, capture and attach."""

from __future__ import annotations

import asyncio
import base64
import binascii
from typing import Any

from venomx.daemon.auth import child_grants
from venomx.daemon.dispatch import Context, handler
from venomx.daemon.spawn import SpawnRequest, check_cwd, pane_must_run, spawn
from venomx.daemon.termination import terminate, wait_terminated
from venomx.manifest.rules import check_size
from venomx.verbs.common import (
    check_params,
    get_pane,
    get_session,
    get_window,
    parse_optional_grants,
    refuse_if_shutting_down,
)
from venomx.verbs.keys import encode_keys
from venomx.verbs.session import spawn_result
from venomx.wire import VenomxError
from workers import protocol as P
from workers.rows import EpochConflict, capture, repaint


@handler("pane.split")
async def split(ctx: Context, pane: str, axis: str, cols: int, rows: int,
                argv: list[str] | None = None, grants: list[Any] | None = None,
                cwd: str | None = None, env: dict[str, Any] | None = None,
                env_unset: list[str] | None = None) -> dict[str, Any]:
    d = ctx.d
    refuse_if_shutting_down(ctx)
    argv = argv if argv is not None else [d.config["spawn.default_shell"]]
    new_grants = child_grants(d.registry, ctx.principal, parse_optional_grants(grants))
    check_params(ctx, argv=argv, cols=cols, rows=rows, env=env, env_unset=env_unset, cwd=cwd)
    check_cwd(cwd)
    target = get_pane(ctx, pane)
    pane_must_run(target)
    if d.registry.windows[target.window].removing or d.registry.sessions[target.session].removing:
        raise VenomxError("conflict.removing", f"window {target.window} is being removed", {})
    new = await spawn(d, SpawnRequest(ctx.principal, argv, cols, rows, new_grants, cwd, env,
                                      env_unset, split=target.id, axis=axis))
    return spawn_result(new)


@handler("pane.list")
async def pane_list(ctx: Context, session: str | None = None,
                    window: str | None = None) -> dict[str, Any]:
    if session is not None:
        get_session(ctx, session)
    if window is not None:
        get_window(ctx, window)
    out = []
    for p in ctx.d.registry.panes.values():
        if session is not None and p.session != session:
            continue
        if window is not None and p.window != window:
            continue
        if ctx.can("read", f"pane:{p.id}", p.node):
            out.append(p.record())
    return {"source": ctx.d.source, "panes": out}


@handler("pane.send")
async def send(ctx: Context, pane: str, text: str | None = None, keys: list[str] | None = None,
               data: str | None = None) -> dict[str, Any]:
    check_params(ctx, text=text, keys=keys, data=data)
    if text is not None:
        payload = text.encode("utf-8", "surrogatepass")
    elif keys is not None:
        payload = encode_keys(keys)
    else:
        try:
            payload = base64.b64decode(data or "", validate=True)
        except (binascii.Error, ValueError):
            raise VenomxError("invalid_params.input", "data is not base64",
                              {"param": "data", "reason": "base64"}) from None
    p = get_pane(ctx, pane)
    pane_must_run(p)
    if not payload:
        return {"pane": p.id, "bytes": 0}
    return {"pane": p.id, "bytes": await ctx.panes.send_input(p, payload)}


@handler("pane.resize")
async def resize(ctx: Context, pane: str, cols: int, rows: int) -> dict[str, Any]:
    check_size(cols, rows)
    p = get_pane(ctx, pane)
    if not p.live:
        raise VenomxError("conflict.pane_exited", f"pane {p.id} has exited", {})
    if (cols, rows) != (p.cols, p.rows):
        await ctx.panes.resize(p, cols, rows)
    return p.record()


@handler("pane.kill")
async def kill(ctx: Context, pane: str, signal: str, grace_ms: int) -> dict[str, Any]:
    """Terminate the pane (§9) and return its record once the leader is reaped.

    Cancellation: cancelling the request ends only the request; the termination goes on.
    """
    p = get_pane(ctx, pane)
    terminate(ctx.d, p, signal, grace_ms, "pane_kill")
    await wait_terminated(p)
    return p.record()


@handler("pane.remove")
async def remove(ctx: Context, pane: str) -> dict[str, Any]:
    p = get_pane(ctx, pane)
    if p.live:
        raise VenomxError("conflict.pane_live", f"pane {p.id} is still running", {})
    return {"pane": p.id, "removed": ctx.d.remove_pane(p)}


@handler("pane.capture_rows")
async def capture_rows(ctx: Context, pane: str, limit: int, epoch: int | None = None,
                       start: int | None = None, end: int | None = None) -> dict[str, Any]:
    p = get_pane(ctx, pane)
    res: dict[str, Any] | None = None
    if p.live and not p.sentinel_lost:
        res = await ctx.panes.capture(p, epoch, start, end, limit)
    if res is None:
        if p.final is None:
            raise VenomxError("unavailable.sentinel", f"pane {p.id} has no terminal state", {})
        try:
            res = capture(p.final, epoch, start, end, limit)
        except EpochConflict as exc:
            raise VenomxError("conflict.epoch", "the row epoch changed",
                              {"epoch": exc.epoch}) from None
    return {"pane": p.id, **res}


def _exit_info(p: Any) -> dict[str, Any]:
    info: dict[str, Any] = {"offset": p.final.offset if p.final is not None else 0}
    if p.exit_code is not None:
        info["exit_code"] = p.exit_code
    if p.signal is not None:
        info["signal"] = p.signal
    return info


@handler("pane.attach")
async def attach(ctx: Context, pane: str) -> dict[str, Any]:
    """Stream a repaint then every output byte in order; respond at pane exit.

    Cancellation: ends the stream; the pane is unaffected.
    """
    p = get_pane(ctx, pane)
    chunk = max(256, (ctx.max_frame - 160) * 3 // 4)

    def b64(data: bytes) -> str:
        return base64.b64encode(data).decode("ascii")

    if not p.live or p.channel is None or p.sentinel_lost:
        if p.live:
            await asyncio.shield(p.exited)
        snap = p.final
        if snap is not None:
            from workers.rows import Snapshot

            assert isinstance(snap, Snapshot)
            ctx.item({"screen": {"cols": snap.cols, "rows": snap.rows, "offset": snap.offset,
                                 "data": b64(repaint(snap))}})
        return {"exit": _exit_info(p)}

    def on_screen(m: P.Screen) -> None:
        ctx.item({"screen": {"cols": m.cols, "rows": m.rows, "offset": m.offset,
                             "data": b64(m.data)}})

    def on_output(m: P.Output) -> None:
        data, end = m.data, m.offset
        start = end - len(data)
        for i in range(0, len(data), chunk):
            piece = data[i:i + chunk]
            ctx.item({"data": b64(piece), "offset": start + i + len(piece)})

    await ctx.panes.stream(p, on_screen, on_output)
    return {"exit": _exit_info(p)}
