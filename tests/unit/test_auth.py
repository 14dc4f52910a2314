"""``auth.check`` over every scope form x right x resource kind, and delegation."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from venomx.daemon import auth
from venomx.daemon.auth import AuditLog
from venomx.daemon.registry import AuthNode, Grant, Principal, Registry
from venomx.wire import VenomxError


@pytest.fixture
def world() -> tuple[Registry, dict[str, AuthNode], dict[str, Principal]]:
    reg = Registry()
    owner = reg.new_principal(None, list(auth.OWNER_GRANTS), with_token=False)  # g0
    alice = reg.new_principal(owner.id, [], name="alice")  # g1
    child = reg.new_principal(alice.id, [], pane="p1")  # g2, pane principal of p1
    s0 = owner.node("session:s0")
    w0 = owner.node("window:w0", s0)
    p0 = owner.node("pane:p0", w0)
    p1 = alice.node("pane:p1", w0)
    r0 = owner.node("run:r0", p0)
    r1 = child.node("run:r1", p1)  # a run started by alice's pane principal
    nodes = {n.resource: n for n in (s0, w0, p0, p1, r0, r1)}
    return reg, nodes, {"owner": owner, "alice": alice, "child": child}


CASES = [
    # scope, resource, covered
    ("*", "run:r0", True),
    ("*", "session:s0", True),
    ("session:s0", "session:s0", True),
    ("session:s0", "pane:p0", True),
    ("session:s0", "run:r0", True),
    ("window:w0", "run:r0", True),
    ("pane:p0", "run:r0", True),
    ("pane:p1", "run:r0", False),
    ("run:r0", "run:r0", True),
    ("run:r0", "pane:p0", False),
    ("session:*", "session:s0", True),
    ("session:*", "pane:p0", True),
    ("session:*", "run:r0", False),
    ("window:*", "run:r0", False),
    ("pane:*", "run:r0", False),
    ("pane:*", "pane:p1", True),
    ("pane:*", "window:w0", False),
    ("run:*", "run:r1", True),
    ("run:*", "pane:p0", False),
    ("self", "run:r1", True),  # owned by alice's descendant
    ("self", "pane:p1", True),
    ("self", "pane:p0", False),
    ("self", "run:r0", False),
    ("self", "session:s0", False),
]


@pytest.mark.parametrize("right", auth.RIGHTS)
@pytest.mark.parametrize(("scope", "resource", "covered"), CASES)
def test_scope_table(
    world: tuple[Registry, dict[str, AuthNode], dict[str, Principal]],
    right: str,
    scope: str,
    resource: str,
    covered: bool,
) -> None:
    reg, nodes, ps = world
    alice = ps["alice"]
    alice.grants = [Grant(right, scope)]
    assert auth.check(reg, alice, right, resource, nodes[resource]) is covered
    other = next(r for r in auth.RIGHTS if r != right)
    assert auth.check(reg, alice, other, resource, nodes[resource]) is False


def test_self_of_a_pane_principal(
    world: tuple[Registry, dict[str, AuthNode], dict[str, Principal]],
) -> None:
    reg, nodes, ps = world
    child = ps["child"]
    child.grants = [Grant("read", "self")]
    assert auth.check(reg, child, "read", "pane:p1", nodes["pane:p1"])
    assert auth.check(reg, child, "read", "run:r1", nodes["run:r1"])
    assert not auth.check(reg, child, "read", "pane:p0", nodes["pane:p0"])


@pytest.mark.parametrize(
    ("scope", "resource", "covered"),
    [
        ("*", "run:r9", True),
        ("run:*", "run:r9", True),
        ("run:r9", "run:r9", True),
        ("pane:*", "run:r9", False),
        ("session:s0", "run:r9", False),
        ("self", "run:r9", False),
        ("pane:*", "pane:p9", True),
        ("pane:p9", "pane:p9", True),
        ("session:s0", "pane:p9", False),
    ],
)
def test_absent_resources_only_by_id(
    world: tuple[Registry, dict[str, AuthNode], dict[str, Principal]],
    scope: str,
    resource: str,
    covered: bool,
) -> None:
    reg, _, ps = world
    ps["alice"].grants = [Grant("read", scope)]
    assert auth.check(reg, ps["alice"], "read", resource, None) is covered


def test_anonymous_never_writes() -> None:
    reg = Registry()
    anon = Principal("anonymous", None, [Grant(r, "*") for r in auth.RIGHTS], anonymous=True)
    assert auth.check(reg, anon, "read", "session:s0", None)
    for right in ("write", "spawn", "admin"):
        assert not auth.check(reg, anon, right, "session:s0", None)
        assert not auth.has_right(anon, right)


def test_delegation() -> None:
    reg = Registry()
    p = reg.new_principal(None, [Grant("spawn", "session:*"), Grant("read", "self")])
    assert auth.child_grants(reg, p, [Grant("spawn", "session:s3")]) == [
        Grant("spawn", "session:s3")
    ]
    assert auth.child_grants(reg, p, []) == []
    for bad in (
        Grant("spawn", "*"),
        Grant("read", "*"),
        Grant("write", "self"),
        Grant("spawn", "pane:*"),
    ):
        with pytest.raises(VenomxError) as e:
            auth.child_grants(reg, p, [bad])
        assert e.value.code == "denied.delegation" and e.value.data == {"grant": bad.to_dict()}
    assert auth.child_grants(reg, p, None) == [Grant("read", "self")]  # defaults, narrowed


@pytest.mark.parametrize("kind", ["session", "window", "pane"])
def test_a_concrete_scope_delegated_under_a_kind_wildcard_covers_no_runs(
    world: tuple[Registry, dict[str, AuthNode], dict[str, Principal]], kind: str
) -> None:
    """RFC-0015 §11: a kind wildcard never covers runs. ``kind:*`` ⊇ ``kind:<id>`` (§5),
    and a concrete scope covers the runs inside it, so one delegation step reached the
    runs the delegator could not read; the scope handed down now leaves them out, and so
    does every step after it."""
    reg, nodes, ps = world
    alice = ps["alice"]
    alice.grants = [Grant("read", f"{kind}:*")]
    inner = {"session": "session:s0", "window": "window:w0", "pane": "pane:p0"}[kind]
    [given] = auth.child_grants(reg, alice, [Grant("read", inner)])
    assert given == Grant("read", inner) and given.to_dict() == {"right": "read", "scope": inner}
    assert given.runs is False
    child = reg.new_principal(alice.id, [given])
    assert auth.check(reg, child, "read", "pane:p0", nodes["pane:p0"])
    assert not auth.check(reg, child, "read", "run:r0", nodes["run:r0"])
    [again] = auth.child_grants(reg, child, [Grant("read", inner)])
    assert again.runs is False
    with pytest.raises(VenomxError) as e:
        auth.child_grants(reg, child, [Grant("read", "run:r0")])
    assert e.value.code == "denied.delegation"
    alice.grants = [Grant("read", f"{kind}:*"), Grant("read", "session:s0")]
    [whole] = auth.child_grants(reg, alice, [Grant("read", "session:s0")])
    assert whole.runs is True  # held concretely too: the runs come with it
    alice.grants = [Grant("read", "run:*")]
    assert auth.child_grants(reg, alice, [Grant("read", "run:r0")])[0].runs is True


@pytest.mark.parametrize(
    "value",
    [
        None,
        [1],
        [{"right": "read"}],
        [{"right": "x", "scope": "*"}],
        [{"right": "read", "scope": "pane:"}],
        [{"right": "read", "scope": "*", "extra": 1}],
        [{"right": "read", "scope": 5}],
    ],
)
def test_malformed_grants(value: object) -> None:
    with pytest.raises(VenomxError) as e:
        auth.parse_grants(value)
    assert e.value.code == "invalid_params.grants"


def test_audit_record_keeps_a_bounded_resource() -> None:
    from venomx.daemon.auth import RESOURCE_MAX, AuditLog

    log = AuditLog(10)
    edge = "run:" + "9" * (RESOURCE_MAX - 4)
    assert log.append("g1", "run.get", "denied.read", edge).resource == edge
    rec = log.append("g1", "run.get", "denied.read", edge + "9" * 1_000_000)
    assert rec.resource is not None and len(rec.resource) == RESOURCE_MAX + 1


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.tuples(st.lists(st.booleans(), max_size=15), st.integers(1, 20)), min_size=1, max_size=4
    ),
    st.one_of(st.none(), st.integers(-3, 70)),  # after
    st.integers(1, 25),  # limit
)
def test_audit_list_pages_as_a_filter_over_the_retained_records_would(
    rounds: list[tuple[list[bool], int]], after: int | None, limit: int
) -> None:
    # rounds of appends (True: a refusal of another uid's peer), each followed by a
    # resize (config set audit.retain_count)
    log = AuditLog(rounds[0][1])
    for appends, retain in rounds:
        for i, outsider in enumerate(appends):
            if outsider:
                log.append(None, "hello", "denied.owner", None, outsider=True)
            else:
                log.append("g0", "config.set", "ok", f"config:{i}")
        log.resize(retain)
        assert len(log.records) <= retain and len(log.outsiders) <= max(1, retain // 10)
    kept = sorted([*log.records, *log.outsiders], key=lambda r: r.seq)
    assert len(log) == len(kept)
    want = [r.to_dict() for r in kept if after is None or r.seq > after][:limit]
    got, nxt = log.list(after, limit)
    assert got == want
    assert nxt == (want[-1]["seq"] if want else (after or 0))


def test_refusals_of_other_uids_never_push_out_our_callers_records() -> None:
    log = AuditLog(100)
    ours = log.append("g1", "run.get", "denied.read", "run:r0")
    for _ in range(10_000):
        log.append(None, "hello", "denied.owner", None, outsider=True)
    records, _ = log.list(None, 1000)
    assert records[0] == ours.to_dict() and len(records) == 11
    assert [r["seq"] for r in records[1:]] == list(range(9992, 10002))


def test_revoked_principals_are_forgotten_and_their_resources_still_judge_self() -> None:
    """Every spawn makes a principal: a revoked one must not stay in the registry for
    the daemon's lifetime, while what outlives it keeps its owner chain (§5)."""
    reg = Registry()
    owner = reg.new_principal(None, list(auth.OWNER_GRANTS), with_token=False)
    alice = reg.new_principal(owner.id, [Grant("read", "self")])
    pane_p = reg.new_principal(alice.id, [], pane="p1")
    grandchild = reg.new_principal(pane_p.id, [])
    node = grandchild.node("run:r5", pane_p.node("pane:p2"))
    assert reg.revoke(pane_p.id) == [pane_p.id, grandchild.id]
    assert pane_p.revoked and grandchild.revoked
    assert set(reg.principals) == {owner.id, alice.id}
    assert reg.children == {owner.id: {alice.id: None}}
    assert set(reg.tokens.values()) == {alice.id}
    assert auth.check(reg, alice, "read", "run:r5", node)
    assert reg.revoke(pane_p.id) == []
    late = reg.new_principal(pane_p.id, [])  # under a revoked parent: born revoked
    assert late.revoked and late.id not in reg.principals


def test_spawning_and_revoking_leaves_the_registry_as_it_was() -> None:
    reg = Registry()
    owner = reg.new_principal(None, list(auth.OWNER_GRANTS), with_token=False)
    for _ in range(1000):
        p = reg.new_principal(owner.id, [], pane="p")
        reg.new_principal(p.id, [])
        reg.revoke(p.id)
    assert (len(reg.principals), len(reg.children), len(reg.tokens)) == (1, 0, 0)
