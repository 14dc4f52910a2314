"""Lookups and small rules shared by the verb families."""

from __future__ import annotations

from typing import Any

from venomx.daemon.auth import parse_grants
from venomx.daemon.dispatch import Context
from venomx.daemon.registry import Grant, Pane, Session, Window
from venomx.manifest.rules import check_rules
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


def check_params(ctx: Context, **params: Any) -> None:
    """The verb's value rules (its manifest ``rules``, in order), where the handler calls
    this: after authorization, as RFC-0015 §11 step 6 puts them. Whether cwd exists is
    resolution (``check_cwd``), which each verb does in its place."""
    check_rules(ctx.verb, params)


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
