"""Handlers for whoami, principal.*, config.*, audit.list, doctor, shutdown and seam.*."""

from __future__ import annotations

import asyncio
from typing import Any

from venomx.daemon import doctor as _doctor
from venomx.daemon.auth import child_grants, parse_grants
from venomx.daemon.config import bad as config_error
from venomx.daemon.dispatch import Context, handler
from venomx.verbs.common import check_params
from venomx.wire import VALUE_MAX_DEPTH, JsonError, VenomxError, loads


@handler("whoami")
async def whoami(ctx: Context) -> dict[str, Any]:
    p = ctx.principal
    return {"principal": None if p.anonymous else p.id,
            "grants": [g.to_dict() for g in p.grants], "source": ctx.d.source}


def _not_anonymous(ctx: Context) -> None:
    if ctx.principal.anonymous:
        raise VenomxError("denied.anonymous", "the anonymous caller has no principal", {})


@handler("principal.create")
async def principal_create(ctx: Context, grants: list[Any], name: str | None = None
                           ) -> dict[str, Any]:
    _not_anonymous(ctx)
    wanted = parse_grants(grants)
    granted = child_grants(ctx.d.registry, ctx.principal, wanted)
    check_params(ctx, name=name)
    p = ctx.d.registry.new_principal(ctx.principal.id, granted, name=name)
    return {"principal": p.id, "token": p.token, "grants": [g.to_dict() for g in granted]}


@handler("principal.revoke")
async def principal_revoke(ctx: Context, principal: str) -> dict[str, Any]:
    _not_anonymous(ctx)
    reg = ctx.d.registry
    me = ctx.principal
    target = reg.principals.get(principal)
    if target is None or target.id == me.id or not reg.is_descendant(target.id, me.id):
        if target is None and me.id == ctx.d.owner.id:
            raise VenomxError("not_found.principal", f"principal {principal[:64]} not found", {})
        raise VenomxError("denied.revoke", "only a descendant principal can be revoked", {})
    return {"principal": target.id, "revoked": reg.revoke(target.id)}


@handler("config.get")
async def config_get(ctx: Context, path: str | None = None) -> dict[str, Any]:
    return {"config": ctx.d.config.get(path)}


@handler("config.set")
async def config_set(ctx: Context, path: str, value: str) -> dict[str, Any]:
    """Parse ``value`` with the wire's bounded loader (a value the daemon keeps must fit
    in a reply frame), validate it for ``path`` and apply it at once."""
    try:
        parsed = loads(value.encode("utf-8", "surrogatepass"), VALUE_MAX_DEPTH)
    except JsonError as exc:
        raise config_error(path, f"value is {exc}") from None
    cfg = ctx.d.config
    parsed = cfg.validate(path, parsed)
    cfg.apply({path: parsed})
    return {"path": path, "value": parsed}


@handler("config.reload")
async def config_reload(ctx: Context) -> dict[str, Any]:
    changed = ctx.d.config.reload()
    return {"config": ctx.d.config.get(None), "changed": changed}


@handler("audit.list")
async def audit_list(ctx: Context, limit: int, after: int | None = None) -> dict[str, Any]:
    records, nxt = ctx.d.audit.list(after, limit)
    return {"records": records, "next": nxt}


@handler("doctor")
async def doctor(ctx: Context) -> dict[str, Any]:
    return await _doctor.report(ctx.d)


@handler("shutdown")
async def shutdown(ctx: Context) -> dict[str, Any]:
    asyncio.get_running_loop().call_soon(ctx.d.begin_shutdown)
    return {"shutdown": True}


def _seams_enabled(ctx: Context) -> None:
    if not ctx.d.seams.enabled:
        raise VenomxError("unsupported.seams", "the daemon was not started with --test-seams",
                          {})


@handler("seam.set")
async def seam_set(ctx: Context, name: str, state: str) -> dict[str, Any]:
    _seams_enabled(ctx)
    ctx.d.seams.set(name, state == "hold")
    return {"name": name, "state": state}


@handler("seam.wait")
async def seam_wait(ctx: Context, name: str, timeout_ms: int) -> dict[str, Any]:
    _seams_enabled(ctx)
    try:
        await asyncio.wait_for(ctx.d.seams.arrived(name).wait(), timeout_ms / 1000.0)
    except TimeoutError:
        raise VenomxError("timeout.seam", f"nothing reached {name}", {"name": name}) from None
    return {"name": name, "held": max(1, ctx.d.seams.waiting.get(name, 0))}
