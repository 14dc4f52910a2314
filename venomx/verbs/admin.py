"""Handlers for whoami, principal.*, config.*, audit.list, doctor, shutdown and seam.*."""

from __future__ import annotations

import asyncio
from typing import Any

from venomx.daemon.config import bad as config_error
from venomx.daemon.dispatch import Context, handler
from venomx.daemon.doctor import seen_by
from venomx.daemon.registry import TREE_GRANTS_MAX, TREE_PRINCIPALS_MAX, Grant, Principal
from venomx.wire import VALUE_MAX_DEPTH, JsonError, VenomxError, loads


@handler("whoami")
def whoami(ctx: Context) -> dict[str, Any]:
    p = ctx.principal
    return {
        "principal": None if p.anonymous else p.id,
        "grants": [g.to_dict() for g in p.grants],
        "source": ctx.source,
    }


@handler("principal.create")
def principal_create(ctx: Context, grants: list[Grant], name: str | None = None) -> dict[str, Any]:
    """Mint a child; one the caller's tree has no room for fails
    ``unavailable.principal_limit`` (the owner's own tree is not bounded)."""
    caller = ctx.principal
    if caller.lineage is not None and caller.parent is not None:
        principals, held = ctx.registry.trees.get(caller.lineage.top, (0, 0))
        if principals >= TREE_PRINCIPALS_MAX:
            raise tree_full(TREE_PRINCIPALS_MAX, "principals")
        if held + len(grants) > TREE_GRANTS_MAX:
            raise tree_full(TREE_GRANTS_MAX, "grants")
    p = ctx.registry.new_principal(caller.id, grants, name=name)
    return {"principal": p.id, "token": p.token, "grants": [g.to_dict() for g in grants]}


def tree_full(limit: int, what: str) -> VenomxError:
    return VenomxError(
        "unavailable.principal_limit",
        f"this principal's tree holds {limit} live {what} at most",
        {"limit": limit},
    )


@handler("principal.revoke")
def principal_revoke(ctx: Context, principal: Principal) -> dict[str, Any]:
    return {"principal": principal.id, "revoked": ctx.registry.revoke(principal.id)}


@handler("config.get")
def config_get(ctx: Context, path: str | None = None) -> dict[str, Any]:
    return {"config": ctx.config.get(path)}


@handler("config.set")
def config_set(ctx: Context, path: str, value: str) -> dict[str, Any]:
    """Parse ``value`` with the wire's bounded loader (a value the daemon keeps must fit
    in a reply frame), validate it for ``path`` and apply it at once."""
    try:
        parsed = loads(value.encode("utf-8", "surrogatepass"), VALUE_MAX_DEPTH)
    except JsonError as exc:
        raise config_error(path, f"value is {exc}") from None
    cfg = ctx.config
    parsed = cfg.validate(path, parsed)
    cfg.apply({path: parsed})
    return {"path": path, "value": parsed}


@handler("config.reload")
def config_reload(ctx: Context) -> dict[str, Any]:
    changed = ctx.config.reload()
    return {"config": ctx.config.get(None), "changed": changed}


@handler("audit.list")
def audit_list(ctx: Context, limit: int, after: int | None = None) -> dict[str, Any]:
    records, nxt = ctx.audit.list(after, limit)
    return {"records": records, "next": nxt}


@handler("doctor")
async def doctor(ctx: Context) -> dict[str, Any]:
    report = await ctx.doctor.report()
    return seen_by(report, lambda r: ctx.can_named("read", r))


@handler("shutdown")
def shutdown(ctx: Context) -> dict[str, Any]:
    asyncio.get_running_loop().call_soon(ctx.lifecycle.begin_shutdown)
    return {"shutdown": True}


@handler("seam.set")
def seam_set(ctx: Context, name: str, state: str) -> dict[str, Any]:
    ctx.seams.set(name, state == "hold")
    return {"name": name, "state": state}


@handler("seam.wait")
async def seam_wait(ctx: Context, name: str, timeout_ms: int) -> dict[str, Any]:
    arrived = ctx.seams.arrived(name)
    try:
        if not arrived.is_set():  # wait_for(…, 0) gives up before it looks
            await asyncio.wait_for(arrived.wait(), timeout_ms / 1000.0)
    except TimeoutError:
        raise VenomxError("timeout.seam", f"nothing reached {name}", {"name": name}) from None
    return {"name": name, "held": max(1, ctx.seams.waiting.get(name, 0))}
