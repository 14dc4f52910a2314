"""Views shared by the verb families."""

from __future__ import annotations

from typing import Any

from venomx.daemon.dispatch import Context
from venomx.daemon.registry import Pane, Window


def window_view(ctx: Context, w: Window) -> dict[str, Any]:
    reg = ctx.registry
    out: dict[str, Any] = {"window": w.id, "session": w.session}
    if w.name is not None:
        out["name"] = w.name
    out["layout"] = w.layout
    out["panes"] = [reg.panes[p].record() for p in w.panes if p in reg.panes]
    return out


def spawn_result(pane: Pane) -> dict[str, Any]:
    return {
        "window": pane.window,
        "pane": pane.id,
        "session": pane.session,
        "principal": pane.principal,
        "pid": pane.pid,
    }
