"""The daemon's entities and ID counters: sessions, windows, panes, principals.

Every resource carries an ``AuthNode``: its resource name, owner and container. Nodes
never change after creation, so events and records that outlive a resource keep its
node as the frozen authorization data (§5 "Removed resources").
"""

from __future__ import annotations

import hashlib
import secrets
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from workers.rows import Snapshot

UNDONE_MAX = 1024  # leaders of rolled-back starts remembered for a quiet reap
FORGOTTEN_MAX = 4096  # revoked principals remembered, so that revoking one again is no error
# What one principal tree (the owner's child and all under it) may hold live before
# principal.create is refused: a program with its pane's token minted ~150,000 a second
# at ~1 KiB each, more with large grants, until the daemon ran out of memory.
TREE_PRINCIPALS_MAX = 16384
TREE_GRANTS_MAX = 262144


_second: tuple[int, str] = (-1, "")  # the last whole second formatted, and its text


def now_iso() -> str:
    """UTC now to the millisecond, ``2026-12-01T15:51:31.680Z``. A run's start and exit
    stamp it a dozen times with its events; the date and time are formatted once a
    second."""
    global _second
    sec, ns = divmod(time.time_ns(), 1_000_000_000)
    known, text = _second
    if known != sec:
        text = time.strftime("%Y-%m-%dT%H:%M:%S.", time.gmtime(sec))
        _second = (sec, text)
    return f"{text}{ns // 1_000_000:03d}Z"


def token_key(token: str) -> str:
    """Tokens are looked up by digest, so lookup time says nothing about a token's bytes."""
    return hashlib.sha256(token.encode("utf-8", "surrogatepass")).hexdigest()


def monotonic_ms() -> float:
    return time.monotonic() * 1000.0


@dataclass(frozen=True, slots=True)
class Lineage:
    """A principal and its ancestors, nearest first: the owner chain a resource freezes
    (§5 "Removed resources"), shared by every node its principal owns, so revoked
    principals can be forgotten while their resources' records and events remain."""

    id: str
    parent: Lineage | None

    @property
    def top(self) -> str:
        """The ancestor just below the root (the owner), or this principal itself: the
        tree whose members share one quota of waiting requests (``inflight``)."""
        line = self
        while line.parent is not None and line.parent.parent is not None:
            line = line.parent
        return line.id

    def descends_from(self, ancestor: str) -> bool:
        """True when this principal is ``ancestor`` or one of its descendants."""
        line: Lineage | None = self
        while line is not None:
            if line.id == ancestor:
                return True
            line = line.parent
        return False


@dataclass(frozen=True)
class AuthNode:
    """A resource's frozen authorization data: its name, creator (with the creator's
    owner chain) and container."""

    resource: str  # "pane:p0"
    lineage: Lineage | None  # the creator's
    parent: AuthNode | None = None

    @property
    def owner(self) -> str | None:
        """The principal ID of the creator."""
        return self.lineage.id if self.lineage is not None else None

    @property
    def kind(self) -> str:
        return self.resource.split(":", 1)[0]

    def chain(self) -> list[AuthNode]:
        out: list[AuthNode] = []
        node: AuthNode | None = self
        while node is not None:
            out.append(node)
            node = node.parent
        return out


@dataclass(frozen=True)
class Grant:
    """A right on a scope (``*``, ``pane:*``, ``session:s0``, ``self``, ...)."""

    right: str
    scope: str
    # False for a concrete scope delegated under a kind wildcard only: ``pane:*`` does
    # not cover runs (RFC-0015 §11), so the ``pane:p0`` it hands down does not either.
    runs: bool = field(default=True, compare=False)

    def to_dict(self) -> dict[str, str]:
        return {"right": self.right, "scope": self.scope}


@dataclass
class Principal:
    """Who a connection acts as: grants, parent, token, and the pane it was minted for."""

    id: str
    parent: str | None
    grants: list[Grant]
    token: str | None = None
    name: str | None = None
    pane: str | None = None
    revoked: bool = False
    anonymous: bool = False
    lineage: Lineage | None = None  # set when the registry adds it
    # ``auth.held``'s index of ``grants`` by right, with the list it was built from
    held: tuple[list[Grant], dict[str, Any]] | None = field(default=None, repr=False, compare=False)

    def node(self, resource: str, parent: AuthNode | None = None) -> AuthNode:
        """The frozen authorization data of a resource this principal creates."""
        return AuthNode(resource, self.lineage, parent)


@dataclass
class Session:
    """A container of windows."""

    id: str
    name: str | None
    node: AuthNode
    windows: list[str] = field(default_factory=list)
    removing: bool = False
    created_at: str = field(default_factory=now_iso)


@dataclass
class Window:
    """A container of panes and their layout tree."""

    id: str
    session: str
    name: str | None
    node: AuthNode
    layout: dict[str, Any]
    panes: list[str] = field(default_factory=list)
    removing: bool = False


@dataclass
class Pane:
    """A pane's record: what callers see of it and what its exit fixed. What the daemon
    holds of its processes is the pane owner's ``Link``."""

    id: str
    window: str
    session: str
    node: AuthNode
    principal: str
    pid: int
    argv0: str
    cols: int
    rows: int
    sentinel_pid: int
    state: str = "running"
    exit_code: int | None = None
    signal: str | None = None
    run: str | None = None
    created_at: str = field(default_factory=now_iso)
    exited_at: str | None = None
    exited_mono: float = 0.0
    final: Snapshot | None = None
    fault: str | None = None  # "sentinel_lost": venomx failed, not the program
    told_epoch: int = 1  # the last row epoch and offset the sentinel reported
    told_offset: int = 0
    escapee_pids: set[int] = field(default_factory=set)

    @property
    def live(self) -> bool:
        return self.state != "exited"

    @property
    def sentinel_lost(self) -> bool:
        return self.fault == "sentinel_lost"

    def record(self) -> dict[str, Any]:
        rec: dict[str, Any] = {
            "pane": self.id,
            "window": self.window,
            "session": self.session,
            "principal": self.principal,
            "pid": self.pid,
            "argv0": self.argv0,
            "cols": self.cols,
            "rows": self.rows,
            "state": self.state,
        }
        if self.exit_code is not None:
            rec["exit_code"] = self.exit_code
        if self.signal is not None:
            rec["signal"] = self.signal
        if self.run is not None:
            rec["run"] = self.run
        rec["created_at"] = self.created_at
        if self.exited_at is not None:
            rec["exited_at"] = self.exited_at
        return rec


class Registry:
    """All live entities of one daemon start, and the counters their IDs come from."""

    def __init__(self) -> None:
        self.source = f"venomx/{uuid.uuid4()}"
        self.counters = {"s": 0, "w": 0, "p": 0, "g": 0, "r": 0}
        self.sessions: dict[str, Session] = {}
        self.windows: dict[str, Window] = {}
        self.panes: dict[str, Pane] = {}
        # Principals not revoked: a revoked one is forgotten at once (what outlives it
        # holds its Lineage), else every spawn would keep one for the daemon's lifetime.
        self.principals: dict[str, Principal] = {}
        # parent ID -> its children's IDs: revoking one walks its own subtree, never
        # every principal (a session of a thousand panes is removed in one turn)
        self.children: dict[str, dict[str, None]] = {}
        # the most recently revoked, oldest first: who may name them (their lineage)
        self.forgotten: dict[str, Lineage] = {}
        self.tokens: dict[str, str] = {}  # SHA-256 of token -> principal ID
        self.trees: dict[str, list[int]] = {}  # tree -> [live principals, their grants]
        self.sentinels: dict[int, str] = {}  # sentinel pid -> pane
        self.leaders: dict[int, str] = {}  # leader pid -> live (or committing) pane
        self.early_exits: dict[int, int] = {}  # leader pid -> status, reaped before commit
        # sentinel pid -> leader pid: exited panes whose sentinel reaps the leader as soon
        # as the daemon closes the channel (until then the zombie pins the group ID)
        self.reaps_after_exit: dict[int, int] = {}
        # leader pids of starts rolled back after exec, for the daemon to reap quietly;
        # the oldest are forgotten past UNDONE_MAX (a sentinel may have reaped one itself)
        self.undone_leaders: dict[int, None] = {}
        # told the principals each revocation revoked (the daemon ends their requests)
        self.on_revoked: Callable[[list[str]], None] | None = None
        self.runs: dict[str, AuthNode] = {}  # run ID -> node, while its record is retained

    def undone(self, pid: int) -> None:
        self.undone_leaders[pid] = None
        if len(self.undone_leaders) > UNDONE_MAX:
            del self.undone_leaders[next(iter(self.undone_leaders))]

    def next_id(self, prefix: str) -> str:
        n = self.counters[prefix]
        self.counters[prefix] = n + 1
        return f"{prefix}{n}"

    def new_principal(
        self,
        parent: str | None,
        grants: list[Grant],
        *,
        name: str | None = None,
        pane: str | None = None,
        with_token: bool = True,
    ) -> Principal:
        pid = self.next_id("g")
        token = secrets.token_hex(32) if with_token else None
        p = Principal(pid, parent, grants, token, name, pane)
        self.add_principal(p)
        return p

    def add_principal(self, p: Principal) -> None:
        """Make ``p`` known (its token too), under its parent; a child of a revoked
        parent (one no longer known) is born revoked and never known, as revocation
        covers every descendant."""
        parent = self.principals.get(p.parent) if p.parent is not None else None
        p.lineage = Lineage(p.id, parent.lineage if parent is not None else None)
        if p.parent is not None and (parent is None or parent.revoked):
            p.revoked = True
            return
        self.principals[p.id] = p
        if p.parent is not None:
            self.children.setdefault(p.parent, {})[p.id] = None
            held = self.trees.setdefault(p.lineage.top, [0, 0])
            held[0] += 1
            held[1] += len(p.grants)
        if p.token:
            self.tokens[token_key(p.token)] = p.id

    def revoke(self, pid: str) -> list[str]:
        """Revoke a principal and every descendant, and forget them; returns the IDs
        revoked, in the order the principals were made."""
        top = self.principals.get(pid)
        if top is None:
            return []
        siblings = self.children.get(top.parent or "", {})
        siblings.pop(pid, None)
        if not siblings:
            self.children.pop(top.parent or "", None)
        subtree: list[str] = []
        todo = [pid]
        while todo:  # a tree: each principal is under the one parent it was made with
            cur = todo.pop()
            subtree.append(cur)
            todo.extend(self.children.pop(cur, ()))
        subtree.sort(key=lambda cid: int(cid[1:]))  # g<n>: the order they were made
        for cid in subtree:
            p = self.principals.pop(cid)
            p.revoked = True
            if p.lineage is not None and p.parent is not None:
                tree = p.lineage.top
                held = self.trees[tree]
                held[0] -= 1
                held[1] -= len(p.grants)
                if not held[0]:
                    del self.trees[tree]
            if p.token:
                self.tokens.pop(token_key(p.token), None)
            if p.lineage is not None:
                self.forgotten[cid] = p.lineage
        while len(self.forgotten) > FORGOTTEN_MAX:
            del self.forgotten[next(iter(self.forgotten))]
        if self.on_revoked is not None:
            self.on_revoked(subtree)
        return subtree

    def container(self, kind: str, rid: str) -> Session | Window | Pane | None:
        """The live session, window or pane of that kind and ID (None for any other kind)."""
        tables: dict[str, dict[str, Any]] = {
            "session": self.sessions,
            "window": self.windows,
            "pane": self.panes,
        }
        found: Session | Window | Pane | None = tables.get(kind, {}).get(rid)
        return found

    def node_of(self, resource: str) -> AuthNode | None:
        kind, _, rid = resource.partition(":")
        if kind == "run":
            return self.runs.get(rid)
        entity = self.container(kind, rid)
        return entity.node if entity is not None else None
