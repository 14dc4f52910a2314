"""The one place a request is validated, authorized, resolved, handled and answered.

Order (§5, RFC-0015 §11): schema validation with defaults, the dispatch gate (a grant of
the verb's right at all), the manifest's resource check before lookup, then the verb's
declared steps (``Verb.order``: source, shutdown, delegation, value rules, cwd, target
lookup and state, ...), then the handler with the resolved target. Every request gets
exactly one reply; denials and admin actions are audited here.

A verb whose handler never waits (a plain function) is answered in the reactor turn that
read it; the others run as the request's task, from the next turn on. Under a burst of
starts a turn can take milliseconds, so a ``whoami`` or ``run.get`` that waited for the
next one took a turn longer to answer than it needed. Requests on one connection still
start in the order sent: one read behind a request that became a task becomes a task
too.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from collections.abc import Awaitable, Callable, Coroutine, Iterable
from typing import TYPE_CHECKING, Any, Protocol

from venomx.daemon import auth, states
from venomx.daemon.auth import AuditLog
from venomx.daemon.registry import AuthNode, Pane, Principal
from venomx.manifest.rules import check_group, check_rules
from venomx.manifest.schema import validate
from venomx.manifest.verbs import Group, Verb
from venomx.wire import VenomxError, dumps

if TYPE_CHECKING:
    from venomx.daemon.services import Services

log = logging.getLogger(__name__)
Handler = Callable[..., Awaitable[dict[str, Any]] | dict[str, Any]]
HANDLERS: dict[str, Handler] = {}
ANSWERED_NOW: set[str] = set()  # verbs whose handler is a plain function


def handler(name: str) -> Callable[[Handler], Handler]:
    """Register a verb's handler under its manifest name."""

    def register(fn: Handler) -> Handler:
        if name in HANDLERS:
            raise RuntimeError(f"two handlers for {name}")
        HANDLERS[name] = fn
        if not inspect.iscoroutinefunction(fn):
            ANSWERED_NOW.add(name)
        return fn

    return register


class Caller(Protocol):
    """What dispatch needs of the connection a request came on (``server.Connection``)."""

    principal: Principal | None
    max_frame: int

    def send(self, obj: dict[str, Any]) -> None: ...
    def send_frame(self, frame: bytes) -> None:
        """Write a frame (or several, joined by newlines) and a newline."""

    def reply(self, rid: int | None, result: dict[str, Any]) -> None: ...
    def reply_error(self, rid: int | None, err: VenomxError) -> None: ...


class Context:
    """What a handler may use: the daemon's services (never the daemon), the caller, the
    verb, and the stream for items."""

    def __init__(self, services: Services, conn: Caller, verb: Verb, rid: int) -> None:
        self.services = services
        self.registry = services.registry
        self.config = services.config
        self.events = services.events
        self.audit = services.audit
        self.runs = services.runs
        self.panes = services.panes
        self.seams = services.seams
        self.doctor = services.doctor
        self.lifecycle = services.lifecycle
        self.source = services.source
        self.conn = conn
        self.verb = verb
        self.rid = rid
        self.params: dict[str, Any] = {}
        self.resource: str | None = None  # what the resource check checked, for the audit
        self._head: bytes | None = None  # a stream item's frame up to the item

    @property
    def principal(self) -> Principal:
        assert self.conn.principal is not None
        return self.conn.principal

    def can(self, right: str, resource: str, node: AuthNode | None) -> bool:
        return auth.check(self.registry, self.principal, right, resource, node)

    def can_named(self, right: str, resource: str) -> bool:
        """``can``, for a resource known by its name only (an absent one: by ID scopes)."""
        return self.can(right, resource, self.registry.node_of(resource))

    def item(self, obj: dict[str, Any]) -> None:
        """Send one stream item; one that would exceed max_frame fails the request."""
        self.item_encoded(dumps(obj))

    def item_encoded(self, item: bytes) -> None:
        """``item`` for an item already encoded (``dumps``): one encoding sent to many
        streams."""
        self.items_encoded((item,))

    def items_encoded(self, items: Iterable[bytes]) -> None:
        """Items already encoded, in one write: a stream of many small items paid a
        system call for each (1,000 event subscribers). Those before one that would
        exceed max_frame are sent; that one fails the request."""
        if self._head is None:
            self._head = b'{"id":' + dumps(self.rid) + b',"item":'
        head, most = self._head, self.conn.max_frame
        frames: list[bytes] = []
        for item in items:
            frame = head + item + b"}"
            if len(frame) > most:
                if frames:
                    self.conn.send_frame(b"\n".join(frames))
                raise VenomxError(
                    "unsupported.result_size",
                    f"item of {len(frame)} bytes exceeds max_frame {most}",
                    {"bytes": len(frame)},
                )
            frames.append(frame)
        if frames:
            self.conn.send_frame(b"\n".join(frames))

    @property
    def max_frame(self) -> int:
        return self.conn.max_frame

    def resolve(self) -> Any:
        """Look up the verb's target and check its declared state: the object, or None
        when none of its params was given (RFC-0015 §11 step 8 for ``run``)."""
        found = resolve_target(self, self.params)
        return next(iter(found.values()), None)


def result_size(size: int, max_frame: int) -> VenomxError:
    """``unsupported.result_size`` for a reply of ``size`` bytes, counted as if its id were
    0, so one request gets one error object whichever client's id sequence sent it
    (RFC-0015 §13 compares the CLI's and MCP's)."""
    size = max(size, max_frame + 1)
    return VenomxError(
        "unsupported.result_size",
        f"reply of {size} bytes exceeds max_frame {max_frame}; ask for less: output=false "
        "for a run's record (then read its rows with pane.capture_rows), a smaller limit "
        "for a list",
        {"bytes": size},
    )


def revoked(audit: AuditLog, principal: Principal, verb: str, resource: str | None) -> VenomxError:
    """A request a revocation ended (``Daemon.end_revoked``): a denial, so audited."""
    audit.append(principal.id, verb, "denied.token", resource)
    return VenomxError("denied.token", "the principal was revoked", {})


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
        if not ctx.can_named(c.right, resource):
            raise denied(c.right, resource)
        checked = resource
    return checked


def not_found(kind: str, rid: str) -> VenomxError:
    return VenomxError(f"not_found.{kind}", f"{kind} {rid[:64]} not found", {})


def lookup(ctx: Context, kind: str, rid: str) -> Any:
    """The live object a target param names (kind = param name)."""
    if kind == "run":
        run = ctx.runs.runs.get(rid)
        if run is None:
            raise ctx.runs.missing(rid)
        return run
    if kind == "principal":
        return principal_target(ctx, rid)
    found = ctx.registry.container(kind, rid)
    if found is None:
        raise not_found(kind, rid)
    return found


def resolve_target(ctx: Context, params: dict[str, Any]) -> dict[str, Any]:
    """The objects the verb's target params name (those given), each checked against the
    declared state, in the declared order."""
    target = ctx.verb.target
    assert target is not None
    found: dict[str, Any] = {}
    for name in target.params:
        if params.get(name) is not None:
            found[name] = lookup(ctx, name, params[name])
            check_state(ctx, found[name], target.state)
    return found


def principal_target(ctx: Context, rid: str) -> Principal:
    """Only a strict descendant of the caller can be named; anyone else learns nothing
    of whether the principal exists, except the owner (who may revoke any). A principal
    revoked lately is named by its remembered lineage: revoking it again revokes
    nothing."""
    reg = ctx.registry
    me = ctx.principal
    target = reg.principals.get(rid)
    line = target.lineage if target is not None else reg.forgotten.get(rid)
    if rid == me.id or line is None or not line.descends_from(me.id):
        if line is None and me.id == ctx.services.owner.id:
            raise VenomxError("not_found.principal", f"principal {rid[:64]} not found", {})
        raise VenomxError("denied.revoke", "only a descendant principal can be revoked", {})
    return target if target is not None else Principal(rid, None, [], revoked=True)


def check_state(ctx: Context, obj: Any, wanted: tuple[str, ...]) -> None:
    for state in wanted:
        if state == "not_removing":
            states.not_removing(ctx.registry, obj)
        elif isinstance(obj, Pane):
            {
                "running": states.must_run,
                "live": states.must_live,
                "exited": states.must_have_exited,
            }[state](obj)


def perform(ctx: Context, step: str, params: dict[str, Any]) -> None:
    """One of the verb's declared steps (``venomx.manifest.verbs.STEPS``)."""
    if step == "source":
        source = params.get("source")
        if source is not None and source != ctx.source:
            raise VenomxError(
                "conflict.source", "the daemon's source differs", {"source": ctx.source}
            )
    elif step == "shutdown":
        ctx.lifecycle.refuse_new_work()
    elif step == "identified":
        if ctx.principal.anonymous:
            raise VenomxError("denied.anonymous", "the anonymous caller has no principal", {})
    elif step == "seams":
        if not ctx.seams.enabled:
            raise VenomxError(
                "unsupported.seams", "the daemon was not started with --test-seams", {}
            )
    elif step == "delegation":
        wanted = params.get("grants")
        params["grants"] = auth.child_grants(
            ctx.registry, ctx.principal, None if wanted is None else auth.parse_grants(wanted)
        )
    elif step == "rules":
        check_rules(ctx.verb, params)
    elif step == "cwd":
        states.check_cwd(params.get("cwd"))
    elif step == "target":
        params.update(resolve_target(ctx, params))
    else:
        raise AssertionError(f"{ctx.verb.name}: unknown step {step}")


def dispatch(ctx: Context, raw_params: Any, now: bool) -> Coroutine[Any, Any, None] | None:
    """Answer a request here if its handler never waits and ``now`` allows it (None),
    else return the coroutine that will, for the server to run as the request's task.
    The server passes ``now`` false behind a request of the same read that became a
    task: requests on one connection start in the order they were sent."""
    if not now or ctx.verb.name not in ANSWERED_NOW:
        return handled(ctx, raw_params)
    try:
        answer(ctx, plain(ctx, HANDLERS[ctx.verb.name](ctx, **admitted(ctx, raw_params))))
    except (Exception, asyncio.CancelledError) as exc:
        refuse(ctx, exc)
    return None


async def handled(ctx: Context, raw_params: Any) -> None:
    name = ctx.verb.name
    try:
        params = admitted(ctx, raw_params)
        if name in ANSWERED_NOW:  # behind a waiting request of its read: its turn now
            answer(ctx, plain(ctx, HANDLERS[name](ctx, **params)))
            return
        tree = tree_of(ctx.services, ctx.principal)
        ctx.services.in_flight.admit(name, tree)
        try:
            result = HANDLERS[name](ctx, **params)
            answer(ctx, await result if inspect.isawaitable(result) else result)
        finally:
            ctx.services.in_flight.done(name, tree)
    except (Exception, asyncio.CancelledError) as exc:
        refuse(ctx, exc)


def tree_of(services: Services, p: Principal) -> str | None:
    """Whose quota of waiting requests ``p``'s count against (``inflight``): None for
    the owner's, one for every anonymous caller."""
    if p is services.owner:
        return None
    return "anonymous" if p.lineage is None else p.lineage.top


def plain(ctx: Context, result: Awaitable[dict[str, Any]] | dict[str, Any]) -> dict[str, Any]:
    """A plain handler's result: one that returned an awaitable is a bug, on either path."""
    if inspect.isawaitable(result):
        close = getattr(result, "close", None)
        if close is not None:
            close()
        raise TypeError(f"{ctx.verb.name}: a plain handler returned an awaitable")
    return result


def admitted(ctx: Context, raw_params: Any) -> dict[str, Any]:
    """The request's parameters, validated, authorized and resolved by the verb's steps."""
    verb = ctx.verb
    params = validate(verb, raw_params)
    p = ctx.principal
    if p.revoked:
        raise VenomxError("denied.token", "token revoked", {})
    if verb.dispatch is not None and not auth.has_right(p, verb.dispatch):
        raise denied(verb.dispatch, None)
    ctx.resource = resource_check(ctx, params)
    ctx.params = dict(params)  # as given, for a target the handler resolves itself
    for step in verb.order:
        perform(ctx, step, params)
    return params


def answer(ctx: Context, result: dict[str, Any]) -> None:
    ctx.conn.reply(ctx.rid, result)
    if ctx.verb.dispatch == "admin":
        ctx.audit.append(ctx.principal.id, ctx.verb.name, "ok", ctx.resource)


def refuse(ctx: Context, exc: BaseException) -> None:
    """The one error reply, audited when it is a denial or concerns an admin verb."""
    verb, conn = ctx.verb, ctx.conn
    if isinstance(exc, VenomxError):
        if exc.code.startswith("denied.") or verb.dispatch == "admin":
            resource = getattr(exc, "resource", ctx.resource)
            p = conn.principal
            principal = None if p is None or p.anonymous else p.id  # as hello and whoami
            ctx.audit.append(principal, verb.name, exc.code, resource)
        conn.reply_error(ctx.rid, exc)
    elif isinstance(exc, asyncio.CancelledError):
        if ctx.principal.revoked:
            conn.reply_error(ctx.rid, revoked(ctx.audit, ctx.principal, verb.name, ctx.resource))
        else:
            conn.reply_error(ctx.rid, VenomxError("cancelled", "request cancelled", {}))
    else:
        log.error("internal error in verb=%s", verb.name, exc_info=exc)
        conn.reply_error(ctx.rid, VenomxError("internal", "internal error", {}))
