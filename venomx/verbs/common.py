"""Lookups and small rules shared by the verb families."""

from __future__ import annotations

from typing import Any

from venomx.daemon.auth import parse_grants
from venomx.daemon.dispatch import Context
from venomx.daemon.registry import Grant, Pane, Session, Window
from venomx.daemon.spawn import (
    check_argv,
    check_cwd_form,
    check_env,
    check_name,
    check_size,
)
from venomx.wire import VenomxError


def not_found(kind: str, rid: str) -> VenomxError:
    return VenomxError(f"not_found.{kind}", f"{kind} {rid[:64]} not found", {})


def get_session(ctx: Context, sid: str) -> Session:
    s = ctx.d.registry.sessions.get(sid)
    if s is None:
        raise not_found("session", sid)
    return s


def get_window(ctx: Context, wid: str) -> Window:
    w = ctx.d.registry.windows.get(wid)
    if w is None:
        raise not_found("window", wid)
    return w


def get_pane(ctx: Context, pid: str) -> Pane:
    p = ctx.d.registry.panes.get(pid)
    if p is None:
        raise not_found("pane", pid)
    return p


def refuse_if_shutting_down(ctx: Context) -> None:
    if ctx.d.shutting_down:
        raise VenomxError("unavailable.shutdown", "the daemon is shutting down", {})


def check_spawn_params(argv: list[str], cols: int, rows: int, cwd: str | None,
                       env: dict[str, Any] | None, env_unset: list[str] | None,
                       name: str | None = None) -> None:
    """The parameter rules of every spawn, in the order RFC-0015 §11 step 6 lists them;
    whether cwd exists is resolution (``check_cwd``), which each verb does in its place."""
    check_argv(argv)
    check_name(name)
    check_size(cols, rows)
    check_env(env, env_unset)
    check_cwd_form(cwd)


def parse_optional_grants(value: Any) -> list[Grant] | None:
    return None if value is None else parse_grants(value)


def window_view(ctx: Context, w: Window) -> dict[str, Any]:
    reg = ctx.d.registry
    out: dict[str, Any] = {"window": w.id, "session": w.session}
    if w.name is not None:
        out["name"] = w.name
    out["layout"] = w.layout
    out["panes"] = [reg.panes[p].record() for p in w.panes if p in reg.panes]
    return out
