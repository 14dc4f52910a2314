"""Handlers for session.* and window.*: create, inspect and remove containers."""

from __future__ import annotations

import asyncio
from typing import Any

from venomx.daemon.auth import child_grants
from venomx.daemon.dispatch import Context, handler
from venomx.daemon.registry import AuthNode, Pane, Session
from venomx.daemon.spawn import SpawnRequest, check_cwd, spawn
from venomx.daemon.termination import terminate, wait_terminated
from venomx.verbs.common import (
    check_params,
    get_session,
    get_window,
    parse_optional_grants,
    refuse_if_shutting_down,
    window_view,
)
from venomx.wire import VenomxError


@handler("session.create")
async def session_create(ctx: Context, name: str | None = None) -> dict[str, Any]:
    refuse_if_shutting_down(ctx)
    check_params(ctx, name=name)
    reg = ctx.d.registry
    sid = reg.next_id("s")
    s = Session(sid, name, AuthNode(f"session:{sid}", ctx.principal.id))
    reg.sessions[sid] = s
    ctx.d.events.emit("session.created", f"session:{sid}", {"session": sid, "name": name},
                      s.node)
    return {"session": sid, "name": name} if name is not None else {"session": sid}


@handler("session.list")
async def session_list(ctx: Context) -> dict[str, Any]:
    out = []
    for s in ctx.d.registry.sessions.values():
        if ctx.can("read", f"session:{s.id}", s.node):
            item: dict[str, Any] = {"session": s.id}
            if s.name is not None:
                item["name"] = s.name
            item["windows"] = list(s.windows)
            item["created_at"] = s.created_at
            out.append(item)
    return {"source": ctx.d.source, "sessions": out}


@handler("session.get")
async def session_get(ctx: Context, session: str) -> dict[str, Any]:
    s = get_session(ctx, session)
    out: dict[str, Any] = {"session": s.id}
    if s.name is not None:
        out["name"] = s.name
    reg = ctx.d.registry
    out["windows"] = [window_view(ctx, reg.windows[w]) for w in s.windows]
    return out


@handler("window.create")
async def window_create(ctx: Context, session: str, cols: int, rows: int,
                        name: str | None = None, argv: list[str] | None = None,
                        grants: list[Any] | None = None, cwd: str | None = None,
                        env: dict[str, Any] | None = None,
                        env_unset: list[str] | None = None) -> dict[str, Any]:
    d = ctx.d
    refuse_if_shutting_down(ctx)
    argv = argv if argv is not None else [d.config["spawn.default_shell"]]
    new_grants = child_grants(d.registry, ctx.principal, parse_optional_grants(grants))
    check_params(ctx, argv=argv, name=name, cols=cols, rows=rows, env=env,
                 env_unset=env_unset, cwd=cwd)
    check_cwd(cwd)
    s = get_session(ctx, session)
    if s.removing:
        raise VenomxError("conflict.removing", f"session {s.id} is being removed", {})
    pane = await spawn(d, SpawnRequest(ctx.principal, argv, cols, rows, new_grants, cwd, env,
                                       env_unset, session=s.id, name=name))
    return spawn_result(pane)


def spawn_result(pane: Pane) -> dict[str, Any]:
    return {"window": pane.window, "pane": pane.id, "session": pane.session,
            "principal": pane.principal, "pid": pane.pid}


@handler("window.get")
async def window_get(ctx: Context, window: str) -> dict[str, Any]:
    return window_view(ctx, get_window(ctx, window))


async def terminate_all(ctx: Context, panes: list[Pane], cause: str) -> None:
    """Terminate live panes (SIGHUP, 2000 ms) and wait; timeout.terminate lists laggards."""
    live = [p for p in panes if p.live]
    for p in live:
        terminate(ctx.d, p, "SIGHUP", 2000, cause)
    results = await asyncio.gather(*(wait_terminated(p) for p in live), return_exceptions=True)
    stuck = [p.id for p, r in zip(live, results, strict=True) if isinstance(r, VenomxError)]
    for r in results:
        if isinstance(r, BaseException) and not isinstance(r, VenomxError):
            raise r
    if stuck:
        raise VenomxError("timeout.terminate", "panes did not exit after SIGKILL",
                          {"panes": stuck})


def live_conflict(panes: list[Pane]) -> None:
    live = [p.id for p in panes if p.live]
    if live:
        raise VenomxError("conflict.live_panes", "live panes remain", {"panes": live})


@handler("window.remove")
async def window_remove(ctx: Context, window: str, recursive: bool) -> dict[str, Any]:
    d = ctx.d
    w = get_window(ctx, window)
    panes = [d.registry.panes[p] for p in w.panes]
    if w.removing:
        raise VenomxError("conflict.removing", f"window {w.id} is being removed", {})
    if not recursive:
        live_conflict(panes)
    w.removing = True
    try:
        await terminate_all(ctx, panes, "removal")
    finally:
        w.removing = False
    removed: list[str] = []
    for p in list(w.panes):
        removed += d.remove_pane(d.registry.panes[p])
    return {"window": w.id, "removed": removed}


@handler("session.remove")
async def session_remove(ctx: Context, session: str, recursive: bool) -> dict[str, Any]:
    d = ctx.d
    reg = d.registry
    s = get_session(ctx, session)
    panes = [reg.panes[p] for w in s.windows for p in reg.windows[w].panes]
    if s.removing:
        raise VenomxError("conflict.removing", f"session {s.id} is being removed", {})
    if not recursive:
        live_conflict(panes)
    s.removing = True
    try:
        await terminate_all(ctx, panes, "removal")
        removed: list[str] = []
        for w in list(s.windows):
            for p in list(reg.windows[w].panes):
                removed += d.remove_pane(reg.panes[p])
            if w in reg.windows:
                removed += d.remove_window_record(w)
        del reg.sessions[s.id]
        d.events.emit("session.removed", f"session:{s.id}", {"session": s.id}, s.node)
        removed.append(s.id)
    finally:
        s.removing = False
    return {"session": s.id, "removed": removed}
