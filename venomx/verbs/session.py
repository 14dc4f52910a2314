"""Handlers for session.* and window.*: create, inspect and remove containers.

Dispatch has already authorized, checked the declared steps and resolved the target
(``venomx.manifest.verbs``): a handler receives the session or window itself.
"""

from __future__ import annotations

from typing import Any

from venomx.daemon.dispatch import Context, handler
from venomx.daemon.registry import Grant, Session, Window
from venomx.verbs.common import start_pane, window_view


@handler("session.create")
def session_create(ctx: Context, reuse: bool, name: str | None = None) -> dict[str, Any]:
    """With ``reuse`` and a name, the lookup and the creation are one reactor turn, so
    concurrent callers asking for the same name end up in one session. Only a session
    the caller made is reused: one another principal made under the same name would
    give that principal read and write (``self``) over everything started in it."""
    reg = ctx.registry
    if reuse and name is not None:
        me = ctx.principal.id
        for s in reg.sessions.values():
            if s.name == name and not s.removing and s.node.owner == me:
                return {"session": s.id, "name": name, "created": False}
    sid = reg.next_id("s")
    s = Session(sid, name, ctx.principal.node(f"session:{sid}"))
    reg.sessions[sid] = s
    ctx.events.emit("session.created", f"session:{sid}", {"session": sid, "name": name}, s.node)
    out: dict[str, Any] = {"session": sid, "name": name}
    if reuse:
        out["created"] = True
    return out


@handler("session.list")
def session_list(ctx: Context) -> dict[str, Any]:
    out = []
    for s in ctx.registry.sessions.values():
        if ctx.can("read", f"session:{s.id}", s.node):
            out.append(
                {
                    "session": s.id,
                    "name": s.name,
                    "windows": list(s.windows),
                    "created_at": s.created_at,
                }
            )
    return {"source": ctx.source, "sessions": out}


@handler("session.get")
def session_get(ctx: Context, session: Session) -> dict[str, Any]:
    return {
        "session": session.id,
        "name": session.name,
        "windows": [window_view(ctx, ctx.registry.windows[w]) for w in session.windows],
    }


@handler("window.create")
async def window_create(
    ctx: Context,
    session: Session,
    cols: int,
    rows: int,
    grants: list[Grant],
    name: str | None = None,
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
        session=session.id,
        name=name,
    )


@handler("window.get")
def window_get(ctx: Context, window: Window) -> dict[str, Any]:
    return window_view(ctx, window)


@handler("window.remove")
async def window_remove(ctx: Context, window: Window, recursive: bool) -> dict[str, Any]:
    return {"window": window.id, "removed": await ctx.panes.remove_window(window, recursive)}


@handler("session.remove")
async def session_remove(ctx: Context, session: Session, recursive: bool) -> dict[str, Any]:
    return {"session": session.id, "removed": await ctx.panes.remove_session(session, recursive)}
