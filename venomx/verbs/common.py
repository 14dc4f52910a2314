"""Views, and the start of a window or split pane, shared by the verb families."""

from __future__ import annotations

from typing import Any

from venomx.daemon.dispatch import Context
from venomx.daemon.panes.spawn import SpawnRequest
from venomx.daemon.registry import Grant, Pane, Window


def window_view(ctx: Context, w: Window) -> dict[str, Any]:
    reg = ctx.registry
    return {
        "window": w.id,
        "session": w.session,
        "name": w.name,
        "layout": w.layout,
        "panes": [reg.panes[p].record() for p in w.panes if p in reg.panes],
    }


def spawn_result(pane: Pane) -> dict[str, Any]:
    return {
        "window": pane.window,
        "pane": pane.id,
        "session": pane.session,
        "principal": pane.principal,
        "pid": pane.pid,
    }


async def start_pane(
    ctx: Context,
    argv: list[str] | None,
    cols: int,
    rows: int,
    grants: list[Grant],
    cwd: str | None,
    env: dict[str, Any] | None,
    env_unset: list[str] | None,
    memory_max: int | None,
    pids_max: int | None,
    **where: Any,
) -> dict[str, Any]:
    """window.create and pane.split: start argv (default: the configured shell) in a
    new pane ``where`` says (``session``+``name``, or ``split``+``axis``)."""
    argv = argv if argv is not None else [ctx.config["spawn.default_shell"]]
    req = SpawnRequest(
        ctx.principal,
        argv,
        cols,
        rows,
        grants,
        cwd,
        env,
        env_unset,
        memory_max=memory_max,
        pids_max=pids_max,
        target=ctx.resolve,
        **where,
    )
    return spawn_result(await ctx.panes.spawn(req))
