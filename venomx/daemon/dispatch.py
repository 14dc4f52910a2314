"""The one place a request is validated, authorized, handled and answered.

Order (§5, RFC-0015 §11): schema validation with defaults, dispatch gate (a grant of the
verb's right at all), the manifest's resource check before lookup, then the handler.
Every request gets exactly one reply; denials and admin actions are audited here.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, Protocol

from venomx.daemon import auth
from venomx.daemon.registry import AuthNode, Principal
from venomx.manifest.rules import check_group
from venomx.manifest.schema import validate
from venomx.manifest.verbs import Group, Verb
from venomx.wire import VenomxError, dumps

if TYPE_CHECKING:
    from venomx.daemon.core import Daemon
    from venomx.daemon.panes import Panes

log = logging.getLogger(__name__)
Handler = Callable[..., Awaitable[dict[str, Any]]]
HANDLERS: dict[str, Handler] = {}


def handler(name: str) -> Callable[[Handler], Handler]:
    """Register a verb's handler under its manifest name."""
    def register(fn: Handler) -> Handler:
        if name in HANDLERS:
            raise RuntimeError(f"two handlers for {name}")
        HANDLERS[name] = fn
        return fn
    return register


class Caller(Protocol):
    """What dispatch needs of the connection a request came on (``server.Connection``)."""

    principal: Principal | None
    max_frame: int

    def send(self, obj: dict[str, Any]) -> None: ...
    def reply(self, rid: int | None, result: dict[str, Any]) -> None: ...
    def reply_error(self, rid: int | None, err: VenomxError) -> None: ...


class Context:
    """What a handler may use: the daemon, the caller, and the stream for items."""

    def __init__(self, d: Daemon, conn: Caller, verb: Verb, rid: int) -> None:
        self.d = d
        self.conn = conn
        self.verb = verb
        self.rid = rid

    @property
    def panes(self) -> Panes:
        """Requests to panes' sentinels (input, resize, capture, stream)."""
        return self.d.panes

    @property
    def principal(self) -> Principal:
        assert self.conn.principal is not None
        return self.conn.principal

    def can(self, right: str, resource: str, node: AuthNode | None) -> bool:
        return auth.check(self.d.registry, self.principal, right, resource, node)

    def item(self, obj: dict[str, Any]) -> None:
        """Send one stream item; one that would exceed max_frame fails the request."""
        frame = {"id": self.rid, "item": obj}
        size = len(dumps(frame))
        if size > self.conn.max_frame:
            raise VenomxError("unsupported.result_size",
                              f"item of {size} bytes exceeds max_frame {self.conn.max_frame}",
                              {"bytes": size})
        self.conn.send(frame)

    @property
    def max_frame(self) -> int:
        return self.conn.max_frame


def denied(right: str, resource: str | None) -> VenomxError:
    """The same error for every caller and target (RFC-0015 row 20: identical for all);
    the resource goes only to the audit record."""
    err = VenomxError(f"denied.{right}", f"{right} denied", {})
    err.resource = resource  # type: ignore[attr-defined]
    return err


def resource_check(ctx: Context, params: dict[str, Any]) -> str | None:
    """The manifest's resource check, before any lookup; returns the resource checked."""
    c = ctx.verb.check
    if c is None:
        return None
    if c.scope is not None:
        if not ctx.can(c.right, c.scope, None):
            raise denied(c.right, c.scope)
        return c.scope
    if c.exactly_one is not None:
        check_group(Group("exactly_one", c.params, c.exactly_one), params)
    present = [n for n in c.params if params.get(n) is not None]
    checked = None
    for name in present:
        resource = f"{name}:{params[name]}"
        if not ctx.can(c.right, resource, ctx.d.registry.node_of(resource)):
            raise denied(c.right, resource)
        checked = resource
    return checked


async def dispatch(ctx: Context, raw_params: Any) -> None:
    d, verb, conn = ctx.d, ctx.verb, ctx.conn
    resource: str | None = None
    try:
        params = validate(verb, raw_params)
        p = ctx.principal
        if p.revoked:
            raise VenomxError("denied.token", "token revoked", {})
        if verb.dispatch is not None and not auth.has_right(p, verb.dispatch):
            raise denied(verb.dispatch, None)
        resource = resource_check(ctx, params)
        result = await HANDLERS[verb.name](ctx, **params)
        conn.reply(ctx.rid, result)
        if verb.dispatch == "admin":
            d.audit.append(p.id, verb.name, "ok", resource)
    except VenomxError as exc:
        if exc.code.startswith("denied.") or verb.dispatch == "admin":
            resource = getattr(exc, "resource", resource)
            principal = conn.principal.id if conn.principal else None
            d.audit.append(principal, verb.name, exc.code, resource)
        conn.reply_error(ctx.rid, exc)
    except asyncio.CancelledError:
        conn.reply_error(ctx.rid, VenomxError("cancelled", "request cancelled", {}))
    except Exception:
        log.exception("internal error in verb=%s", verb.name)
        conn.reply_error(ctx.rid, VenomxError("internal", "internal error", {}))
