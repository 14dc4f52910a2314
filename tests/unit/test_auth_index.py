"""``auth.check`` and delegation answer from an index of the holder's grants exactly as
taking the grants one by one would (foundation §5), and cost the resource's chain, not
the number of grants: a request's ``grants`` held tens of thousands before GRANTS_MAX
bounded them at 1024, and comparing each wanted grant with each held one blocked the
daemon for 14 s (helper-99)."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from venomx.daemon import auth
from venomx.daemon.registry import AuthNode, Grant, Principal, Registry
from venomx.wire import VenomxError


class World(Registry):
    """A registry whose resources are a fixed set of nodes, counting lookups."""

    def __init__(self) -> None:
        super().__init__()
        owner = self.new_principal(None, list(auth.OWNER_GRANTS), with_token=False)  # g0
        self.alice = self.new_principal(owner.id, [], name="alice")  # g1
        child = self.new_principal(self.alice.id, [], pane="p1")  # g2
        s0 = owner.node("session:s0")
        w0 = owner.node("window:w0", s0)
        w1 = self.alice.node("window:w1", s0)
        p0 = owner.node("pane:p0", w0)
        p1 = self.alice.node("pane:p1", w0)
        p2 = child.node("pane:p2", w1)
        r0 = owner.node("run:r0", p0)
        r1 = child.node("run:r1", p1)
        self.nodes = {n.resource: n for n in (s0, w0, w1, p0, p1, p2, r0, r1)}
        self.lookups = 0

    def node_of(self, resource: str) -> AuthNode | None:
        self.lookups += 1
        return self.nodes.get(resource)


RESOURCES = ["session:s0", "window:w0", "window:w1", "pane:p0", "pane:p1", "pane:p2"]
RESOURCES += ["run:r0", "run:r1", "pane:p9", "run:r9", "session:s9"]
SCOPES = ["*", "self", *(f"{k}:*" for k in auth.KINDS), *RESOURCES]
GRANTS = st.lists(st.builds(Grant, st.sampled_from(auth.RIGHTS), st.sampled_from(SCOPES)))


# The rules of foundation §5 written grant by grant, as they stood before the index.
def covers_one(holder: Principal, scope: str, resource: str, node: AuthNode | None) -> bool:
    if scope == "*":
        return True
    if resource in ("*", "session:*"):
        return resource == "session:*" and scope == "session:*"
    chain = node.chain() if node is not None else []
    if scope == "self":
        return any(
            (n.lineage is not None and n.lineage.descends_from(holder.id))
            or (holder.pane is not None and n.resource == f"pane:{holder.pane}")
            for n in chain
        )
    kind, _, rid = scope.partition(":")
    if rid == "*":
        if auth.kind_of(resource) == "run":
            return kind == "run"
        if node is None:
            return auth.kind_of(resource) == kind
        return any(n.kind == kind for n in chain)
    return resource == scope or any(n.resource == scope for n in chain)


def uncovered(reg: Registry, p: Principal, wanted: list[Grant]) -> Grant | None:
    """The grant delegation refuses first, as ``denied.delegation`` names it."""
    try:
        auth.child_grants(reg, p, wanted)
    except VenomxError as exc:
        return Grant(**exc.data["grant"])
    return None


def contains_one(reg: Registry, outer: str, inner: str) -> bool:
    if outer == "*":
        return True
    if outer == "self" or inner in ("*", "self"):
        return outer == inner
    okind, _, oid = outer.partition(":")
    ikind, _, iid = inner.partition(":")
    if oid == "*":
        return okind == ikind
    if iid == "*":
        return False
    if outer == inner:
        return True
    node = reg.node_of(inner)
    return node is not None and any(n.resource == outer for n in node.chain())


@settings(max_examples=300, deadline=None)
@given(GRANTS, st.sampled_from(auth.RIGHTS), st.sampled_from(["*", "session:*", *RESOURCES]))
def test_check_answers_as_grant_by_grant(held: list[Grant], right: str, resource: str) -> None:
    world = World()
    alice = world.alice
    alice.grants = held
    for node in (world.nodes.get(resource), None):
        want = any(g.right == right and covers_one(alice, g.scope, resource, node) for g in held)
        assert auth.check(world, alice, right, resource, node) is want


@settings(max_examples=300, deadline=None)
@given(GRANTS, GRANTS)
def test_delegation_answers_as_grant_by_grant(held: list[Grant], wanted: list[Grant]) -> None:
    world = World()
    world.alice.grants = held
    first = next(
        (
            g
            for g in wanted
            if not any(h.right == g.right and contains_one(world, h.scope, g.scope) for h in held)
        ),
        None,
    )
    assert uncovered(world, world.alice, wanted) == first


def test_a_new_grants_list_is_indexed_afresh() -> None:
    world = World()
    alice: Any = world.alice
    alice.grants = [Grant("read", "*")]
    assert auth.check(world, alice, "read", "pane:p0", world.nodes["pane:p0"])
    alice.grants = [Grant("read", "pane:p1")]  # as auth.default_grants replaces its list
    assert not auth.check(world, alice, "read", "pane:p0", world.nodes["pane:p0"])


def test_many_grants_cost_one_lookup_per_wanted_grant() -> None:
    world = World()
    n = 20_000
    world.alice.grants = [Grant("write", f"pane:p{i}") for i in range(n)] + [Grant("read", "*")]
    wanted = [Grant("write", "pane:p1")] * n  # held as it is
    assert uncovered(world, world.alice, wanted) is None
    assert world.lookups == 0  # found among the held scopes before any lookup
    wanted = [Grant("write", "run:r1")] * 100  # inside pane:p1: one chain per wanted grant
    assert uncovered(world, world.alice, wanted) is None
    assert world.lookups == 100
