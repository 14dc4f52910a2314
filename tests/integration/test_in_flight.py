"""The daemon-wide bounds on requests that wait (``venomx.daemon.inflight``): tens of
thousands of pipelined subscriptions grew the daemon without bound and made every event
cost the reactor seconds; now the request over a bound fails ``unavailable.in_flight``,
leaves nothing behind, and the bound frees as requests end."""

from __future__ import annotations

import json
import os
import signal
from typing import Any

import pytest

from tests.helpers import Daemon, wait_for
from venomx.client import Client
from venomx.daemon.inflight import REQUESTS_MAX, WATCHERS_MAX
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


def reader(d: Daemon) -> str:
    """A token that reads everything and is not the owner's (who has a reserve)."""
    grants = [{"right": "read", "scope": "*"}]
    return str(d.call("principal.create", {"grants": grants})["token"])


def test_watchers_are_bounded_at_the_edge(daemon: Daemon) -> None:
    token = reader(daemon)
    c = daemon.client(token=token)
    rids = pipelined(c, "events.subscribe", {"snapshot": True}, WATCHERS_MAX + 1)
    frames = first_frames(c, rids)
    live = [r for r in rids if "item" in frames[r]]
    refused = [frames[r]["error"] for r in rids if "error" in frames[r]]
    assert len(live) == WATCHERS_MAX
    assert refused == [
        {
            "code": "unavailable.in_flight",
            "message": f"the daemon has {WATCHERS_MAX} event streams, event polls and attaches"
            " already",
            "data": {"limit": WATCHERS_MAX},
        }
    ]
    other = daemon.client(token=token)
    with pytest.raises(VenomxError) as e:
        other.call("events.read", {"timeout_ms": 0})
    assert e.value.code == "unavailable.in_flight"
    assert waiting(daemon) == {"requests_waiting": WATCHERS_MAX + 1, "watchers": WATCHERS_MAX}
    owners = daemon.client()  # the owner's reserve: still served
    assert "snapshot" in next(owners.stream("events.subscribe", {"snapshot": True}))
    owners.close()
    c.cancel(live[0])  # one ends: one may start
    wait_for(lambda: waiting(daemon)["watchers"] == WATCHERS_MAX - 1)
    assert "events" in other.call("events.read", {"timeout_ms": 0})
    c.close()  # all end with their connection
    wait_for(lambda: waiting(daemon) == {"requests_waiting": 1, "watchers": 0})  # doctor's own
    streams = [daemon.client(token=token) for _ in range(2)]
    for s in streams:
        rids = pipelined(s, "events.subscribe", {"snapshot": True}, WATCHERS_MAX // 2)
        assert all("item" in f for f in first_frames(s, rids).values())
    for s in streams:
        s.close()


def test_requests_waiting_are_bounded_at_the_edge(daemon: Daemon) -> None:
    s = daemon.call("session.create")["session"]
    r = daemon.call("run", {"key": "long", "session": s, "argv": ["sleep", "100"]})
    token = reader(daemon)
    c = daemon.client(token=token)
    wait = {"run": r["run"], "timeout_ms": 100000}
    rids = pipelined(c, "run.wait", wait, REQUESTS_MAX + 1)
    with pytest.raises(VenomxError) as e:
        c.response(rids.pop())  # the others wait: nothing else was sent meanwhile
    assert (e.value.code, e.value.data) == ("unavailable.in_flight", {"limit": REQUESTS_MAX})
    assert waiting(daemon)["requests_waiting"] == REQUESTS_MAX + 1  # doctor: owner's reserve
    other = daemon.client(token=token)
    with pytest.raises(VenomxError) as e:
        other.call("run.wait", wait)
    assert e.value.code == "unavailable.in_flight"
    assert other.call("whoami")["principal"]  # answered at once, never waits
    owners = daemon.client()
    owner_wait = owners.start("run.wait", wait)  # the owner's reserve
    os.kill(r["pid"], signal.SIGKILL)
    frames = first_frames(c, rids)
    assert {f["ok"]["signal"] for f in frames.values()} == {"SIGKILL"}
    assert owners.response(owner_wait)["signal"] == "SIGKILL"
    wait_for(lambda: waiting(daemon) == {"requests_waiting": 1, "watchers": 0})
