"""The bounds on requests that wait (``venomx.daemon.inflight``), daemon-wide and per
principal tree: tens of thousands of pipelined subscriptions grew the daemon without
bound and made every event cost the reactor seconds; now the request over a bound fails
``unavailable.in_flight`` after its own checks, does nothing, and the bound frees as
requests end."""

from __future__ import annotations

import json
import os
import signal
from typing import Any

import pytest

from tests.helpers import Daemon, wait_for
from venomx.client import Client
from venomx.daemon.inflight import REQUESTS_MAX, SHARE, WATCHERS_MAX
from venomx.wire import VenomxError

pytestmark = pytest.mark.timeout(120)


def pipelined(c: Client, verb: str, params: dict[str, Any], n: int) -> list[int]:
    """Send ``n`` requests in one write."""
    c.greeted()
    rids = list(range(1000, 1000 + n))
    frames = b"".join(
        b'{"id":%d,"verb":"%s","params":%s}\n' % (rid, verb.encode(), json.dumps(params).encode())
        for rid in rids
    )
    c.send_bytes(frames)
    return rids


def first_frames(c: Client, rids: list[int]) -> dict[int, dict[str, Any]]:
    """The first frame (an item, a result or an error) of each of ``rids``."""
    seen: dict[int, dict[str, Any]] = {}
    while len(seen) < len(rids):
        frame = c.read()
        rid = frame.get("id")
        if isinstance(rid, int) and rid not in seen:
            seen[rid] = frame
    return seen


def waiting(d: Daemon) -> dict[str, int]:
    counters = d.call("doctor")["counters"]
    return {k: counters[k] for k in ("requests_waiting", "watchers")}


def reader(d: Daemon, token: str = "@owner") -> str:
    """A token that reads everything: a tree of its own under the owner, or under the
    principal of ``token``."""
    grants = [{"right": "read", "scope": "*"}]
    return str(d.call("principal.create", {"grants": grants}, token=token)["token"])


def refusal(limit: int, whose: str, what: str) -> dict[str, Any]:
    return {
        "code": "unavailable.in_flight",
        "message": f"{whose} has {limit} {what} already",
        "data": {"limit": limit},
    }


WATCHES = "event streams, event polls and attaches"
TREE_WATCHERS = WATCHERS_MAX // SHARE
TREE_REQUESTS = REQUESTS_MAX // SHARE


def subscribe(c: Client, n: int) -> tuple[list[int], list[dict[str, Any]]]:
    """``n`` subscriptions pipelined: those live, and the refusals."""
    rids = pipelined(c, "events.subscribe", {"snapshot": True}, n)
    frames = first_frames(c, rids)
    return [r for r in rids if "item" in frames[r]], [
        frames[r]["error"] for r in rids if "error" in frames[r]
    ]


def test_a_principal_tree_holds_a_share_of_the_watchers(daemon: Daemon) -> None:
    token = reader(daemon)
    c = daemon.client(token=token)
    live, refused = subscribe(c, TREE_WATCHERS + 1)
    assert len(live) == TREE_WATCHERS
    assert refused == [refusal(TREE_WATCHERS, "this principal's tree", WATCHES)]
    minted = daemon.client(token=reader(daemon, token))  # a child: the same tree
    with pytest.raises(VenomxError) as e:
        minted.call("events.read", {"timeout_ms": 0})
    assert e.value.data == {"limit": TREE_WATCHERS}
    with pytest.raises(VenomxError) as e:
        minted.call("events.read", {"timeout_ms": -1})  # a bad request is told so first
    assert e.value.code == "invalid_params.range"
    assert "events" in daemon.client(token=reader(daemon)).call("events.read", {"timeout_ms": 0})
    c.cancel(live[0])  # one ends: one may start
    wait_for(lambda: waiting(daemon)["watchers"] == TREE_WATCHERS - 1)
    assert "events" in minted.call("events.read", {"timeout_ms": 0})


def test_watchers_are_bounded_daemon_wide_at_the_edge(daemon: Daemon) -> None:
    clients = [daemon.client(token=reader(daemon)) for _ in range(SHARE + 1)]
    for c in clients[:SHARE]:
        assert len(subscribe(c, TREE_WATCHERS)[0]) == TREE_WATCHERS
    assert waiting(daemon) == {"requests_waiting": WATCHERS_MAX + 1, "watchers": WATCHERS_MAX}
    assert subscribe(clients[SHARE], 1)[1] == [refusal(WATCHERS_MAX, "the daemon", WATCHES)]
    owners = daemon.client()  # the owner's reserve: still served
    assert "snapshot" in next(owners.stream("events.subscribe", {"snapshot": True}))
    owners.close()
    for c in clients:
        c.close()  # all end with their connections
    wait_for(lambda: waiting(daemon) == {"requests_waiting": 1, "watchers": 0})  # doctor's own
    assert len(subscribe(daemon.client(token=reader(daemon)), TREE_WATCHERS)[0]) == TREE_WATCHERS


def test_requests_waiting_are_bounded_at_the_edge(daemon: Daemon) -> None:
    s = daemon.call("session.create")["session"]
    r = daemon.call("run", {"key": "long", "session": s, "argv": ["sleep", "100"]})
    wait = {"run": r["run"], "timeout_ms": 100000}
    clients = [daemon.client(token=reader(daemon)) for _ in range(SHARE + 1)]
    rids: list[tuple[Client, int]] = []
    for c in clients[: SHARE - 1]:
        sent = pipelined(c, "run.wait", wait, TREE_REQUESTS + 1)
        with pytest.raises(VenomxError) as e:
            c.response(sent.pop())  # the others wait: nothing else was sent meanwhile
        assert e.value.to_dict() == refusal(
            TREE_REQUESTS, "this principal's tree", "requests waiting"
        )
        rids += [(c, rid) for rid in sent]
    last = clients[SHARE - 1]
    sent = pipelined(last, "run.wait", wait, TREE_REQUESTS + 1)
    with pytest.raises(VenomxError) as e:
        last.response(sent.pop())  # within its tree's share, over the daemon's
    assert e.value.to_dict() == refusal(REQUESTS_MAX, "the daemon", "requests waiting")
    rids += [(last, rid) for rid in sent]
    assert waiting(daemon)["requests_waiting"] == REQUESTS_MAX + 1  # doctor: owner's reserve
    with pytest.raises(VenomxError) as e:
        clients[SHARE].call("run.wait", wait)
    assert e.value.to_dict() == refusal(REQUESTS_MAX, "the daemon", "requests waiting")
    c = clients[SHARE]  # one that never waits is answered, even behind one refused
    behind = [c.start("run.wait", wait), c.start("run.get", {"run": r["run"]})]
    with pytest.raises(VenomxError):
        c.response(behind[0])
    assert c.response(behind[1])["state"] == "running"
    owners = daemon.client()
    owner_wait = owners.start("run.wait", wait)  # the owner's reserve
    os.kill(r["pid"], signal.SIGKILL)
    for c in clients[:SHARE]:
        frames = first_frames(c, [rid for cc, rid in rids if cc is c])
        assert {f["ok"]["signal"] for f in frames.values()} == {"SIGKILL"}
    assert owners.response(owner_wait)["signal"] == "SIGKILL"
    wait_for(lambda: waiting(daemon) == {"requests_waiting": 1, "watchers": 0})
