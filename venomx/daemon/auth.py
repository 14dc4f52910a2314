"""Authorization (§5): grants, scopes, containment, delegation, and the audit log.

``check(principal, right, resource, node)`` is the one question every verb's
authorization reduces to; the dispatcher asks it, handlers never improvise. ``node`` is
the resource's containment and ownership chain (live, or frozen for removed resources);
``None`` means the resource is absent, and then only ID-based scopes cover it.
"""

from __future__ import annotations

import bisect
import heapq
import logging
import re
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass
from itertools import islice
from operator import attrgetter
from typing import Any

from venomx.daemon.logs import logfmt
from venomx.daemon.registry import AuthNode, Grant, Principal, Registry, now_iso
from venomx.wire import VenomxError

log = logging.getLogger(__name__)
RIGHTS = ("read", "write", "spawn", "admin")
KINDS = ("session", "window", "pane", "run")
_SCOPE = re.compile(r"\*|self|(session|window|pane|run):(\*|[A-Za-z0-9._-]{1,64})")
OWNER_GRANTS = [Grant(r, "*") for r in RIGHTS]
DEFAULT_CHILD = [Grant("read", "self"), Grant("write", "self"), Grant("spawn", "self")]
# Grants one request may hand down: each is kept for the new principal's life, and a
# spawn's pane principal is not bounded by its tree's count of grants (registry).
GRANTS_MAX = 1024


def parse_grants(value: Any, param: str = "grants") -> list[Grant]:
    """Validate a grants array; errors are ``invalid_params.grants`` naming the index."""

    def fail(reason: str, index: int | None = None) -> VenomxError:
        data: dict[str, Any] = {"param": param, "reason": reason}
        if index is not None:
            data["index"] = index
        return VenomxError("invalid_params.grants", f"{param}: {reason}", data)

    if not isinstance(value, list):
        raise fail("not_array")
    if len(value) > GRANTS_MAX:
        raise fail("size")
    out = []
    for i, g in enumerate(value):
        if not isinstance(g, dict) or set(g) != {"right", "scope"}:
            raise fail("shape", i)
        right, scope = g["right"], g["scope"]
        if not isinstance(right, str) or right not in RIGHTS:
            raise fail("right", i)
        if not isinstance(scope, str) or not _SCOPE.fullmatch(scope):
            raise fail("scope", i)
        out.append(Grant(right, scope))
    return out


def kind_of(resource: str) -> str:
    return resource.split(":", 1)[0]


class Held:
    """One right's grants of a principal, indexed by scope form, so that a check costs the
    resource's chain, not the number of grants (a principal holds up to GRANTS_MAX, and
    every event is checked against every subscriber's)."""

    __slots__ = ("concrete", "kinds", "runless", "self", "star")

    def __init__(self) -> None:
        self.star = False
        self.self = False
        self.kinds: set[str] = set()  # ``kind:*``
        self.concrete: set[str] = set()  # ``kind:<id>``
        self.runless: set[str] = set()  # ``kind:<id>`` had through ``kind:*``: no runs

    def add(self, g: Grant) -> None:
        scope = g.scope
        if scope == "*":
            self.star = True
        elif scope == "self":
            self.self = True
        elif scope.endswith(":*"):
            self.kinds.add(scope[:-2])
        elif g.runs:
            self.concrete.add(scope)
        else:
            self.runless.add(scope)

    def covers(self, holder: Principal, resource: str, node: AuthNode | None) -> bool:
        """Whether any of these scopes covers ``resource`` (with this chain, or absent)."""
        if self.star:
            return True
        if resource in ("*", "session:*"):
            return resource == "session:*" and "session" in self.kinds
        chain = node.chain() if node is not None else []
        if self.self and owned_by(holder, chain, run=kind_of(resource) == "run"):
            return True
        if self.kinds:
            kind = kind_of(resource)
            if kind == "run" or node is None:  # a kind wildcard covers runs only as run:*
                if kind in self.kinds:
                    return True
            elif any(n.kind in self.kinds for n in chain):
                return True
        if _within(self.concrete, resource, chain):
            return True
        return kind_of(resource) != "run" and _within(self.runless, resource, chain)

    def contains(self, reg: Registry, inner: str) -> bool | None:
        """Delegation containment: ``*`` ⊇ all; ``kind:*`` ⊇ ``kind:*``/``kind:<id>``;
        a concrete scope ⊇ concrete resources inside it; ``self`` ⊇ ``self``. None when
        ``inner`` is not contained, else whether the runs inside it come too: a
        ``kind:<id>`` had only through ``kind:*`` comes without them, as ``kind:*``
        never covered them, or one delegation step would reach them."""
        if self.star:
            return True
        if inner in ("*", "self"):
            return True if inner == "self" and self.self else None
        kind, _, rid = inner.partition(":")
        wildcard = kind in self.kinds
        if rid == "*":
            return True if wildcard else None
        if inner in self.concrete or (wildcard and kind == "run"):
            return True  # before any lookup: one per wanted grant at most
        node = reg.node_of(inner) if self.concrete or self.runless else None
        chain = node.chain() if node is not None else []
        if _within(self.concrete, inner, chain):
            return True
        if kind != "run" and (wildcard or _within(self.runless, inner, chain)):
            return False
        return None


def _within(scopes: set[str], resource: str, chain: list[AuthNode]) -> bool:
    """Whether a concrete scope of ``scopes`` is ``resource`` or holds it."""
    return bool(scopes) and (resource in scopes or any(n.resource in scopes for n in chain))


def owned_by(holder: Principal, chain: list[AuthNode], run: bool = False) -> bool:
    """``self``: the holder's own pane, or a resource the holder or a descendant owns (and
    what they contain). ``run``: the chain is a run's, which RFC-0015 §11 gives ``self``
    "for its owner and the owner's ancestors" and the run's own pane principal, not a
    holder that owns the window or session another principal started the run in. The run's
    pane is still the holder's, as a ``pane:<id>`` had through ``pane:*`` reaches the pane
    and not the run in it: it can capture or kill the pane, not read or cancel the run."""
    for i, n in enumerate(chain):
        if n.lineage is not None and n.lineage.descends_from(holder.id) and not (run and i):
            return True
        if holder.pane is not None and n.resource == f"pane:{holder.pane}":
            return True
    return False


def held(p: Principal) -> dict[str, Held]:
    """``p``'s grants by right, indexed once per grants list (the anonymous caller's is
    replaced, never changed, when ``auth.default_grants`` changes)."""
    if p.held is None or p.held[0] is not p.grants:
        by_right: dict[str, Held] = {}
        for g in p.grants:
            by_right.setdefault(g.right, Held()).add(g)
        p.held = (p.grants, by_right)
    return p.held[1]


def check(reg: Registry, p: Principal, right: str, resource: str, node: AuthNode | None) -> bool:
    """Does ``p`` hold ``right`` on ``resource`` (with this chain, or absent)?"""
    if p.revoked:
        return False
    if p.anonymous and right != "read":
        return False
    h = held(p).get(right)
    return h is not None and h.covers(p, resource, node)


def has_right(p: Principal, right: str) -> bool:
    if p.anonymous and right != "read":
        return False
    return right in held(p)


def delegable(reg: Registry, p: Principal, g: Grant) -> Grant | None:
    """``g`` as ``p`` can hand it down (perhaps without runs), or None if it cannot."""
    h = held(p).get(g.right)
    if p.anonymous or h is None:
        return None
    runs = h.contains(reg, g.scope)
    return None if runs is None else Grant(g.right, g.scope, runs)


def child_grants(reg: Registry, p: Principal, requested: list[Grant] | None) -> list[Grant]:
    """Grants of a new principal: explicit ones delegation-checked, else narrowed defaults."""
    if requested is None:
        return [g for g in DEFAULT_CHILD if delegable(reg, p, g) is not None]
    out = []
    for g in requested:
        given = delegable(reg, p, g)
        if given is None:
            raise VenomxError(
                "denied.delegation",
                f"cannot delegate {g.right} on {g.scope}",
                {"grant": g.to_dict()},
            )
        out.append(given)
    return out


@dataclass
class AuditRecord:
    """One denial or admin action: who, which verb, the result code and the resource."""

    seq: int
    ts: str
    principal: str | None
    verb: str
    code: str
    resource: str | None

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {
            "seq": self.seq,
            "ts": self.ts,
            "principal": self.principal,
            "verb": self.verb,
            "code": self.code,
        }
        if self.resource is not None:
            d["resource"] = self.resource
        return d


RESOURCE_MAX = 256  # characters of a resource name kept in an audit record


def outsiders_kept(retain: int) -> int:
    """How many refusals of other uids' peers are kept, besides ``retain`` records."""
    return max(1, retain // 10)


class AuditLog:
    """Bounded in-memory audit log; records carry no params beyond the resource ID.

    The refusals of peers of another uid (at ``hello``: they can never get further) are
    kept apart, at most a tenth of ``retain`` of them: any local user may connect at the
    abstract address, and 32 refusals a second (the most the listener serves them)
    pushed every record of our own callers out of 10,000 in five minutes (session 24).
    ``list`` reads both in ``seq`` order, as one log."""

    def __init__(self, retain: int) -> None:
        self.records: deque[AuditRecord] = deque(maxlen=retain)
        self.outsiders: deque[AuditRecord] = deque(maxlen=outsiders_kept(retain))
        self.seq = 0

    def resize(self, retain: int) -> None:
        self.records = deque(self.records, maxlen=retain)
        self.outsiders = deque(self.outsiders, maxlen=outsiders_kept(retain))

    def __len__(self) -> int:
        return len(self.records) + len(self.outsiders)

    def append(
        self,
        principal: str | None,
        verb: str,
        code: str,
        resource: str | None,
        outsider: bool = False,
    ) -> AuditRecord:
        """Record a denial or an admin action; ``outsider``: a peer of another uid's."""
        if resource is not None and len(resource) > RESOURCE_MAX:
            # a caller's resource string may be a whole frame long: the record stays small
            resource = resource[:RESOURCE_MAX] + "…"
        self.seq += 1
        rec = AuditRecord(self.seq, now_iso(), principal, verb, code, resource)
        (self.outsiders if outsider else self.records).append(rec)
        log.info(
            "audit seq=%d principal=%s verb=%s code=%s resource=%s",
            rec.seq,
            principal,
            logfmt(verb),
            code,
            logfmt(resource),
        )
        return rec

    def list(self, after: int | None, limit: int) -> tuple[list[dict[str, Any]], int]:
        """Up to ``limit`` records after seq ``after``, of both rings in ``seq`` order;
        only the records returned are converted."""
        merged = heapq.merge(_after(self.records, after), _after(self.outsiders, after), key=SEQ)
        out = [r.to_dict() for r in islice(merged, limit)]
        return out, (out[-1]["seq"] if out else (after or 0))


SEQ = attrgetter("seq")


def _after(ring: deque[AuditRecord], after: int | None) -> Iterator[AuditRecord]:
    """The records of ``ring`` (in ``seq`` order) past seq ``after``."""
    skip = 0 if after is None else bisect.bisect_right(ring, after, key=SEQ)
    return islice(ring, skip, None)
