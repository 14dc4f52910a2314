"""``run.list`` pages (RFC-0015 §3) against a plain filter of the retained records.

The daemon finds a page by its place in ID order and a key's or pane's run directly, so
these compare every filter and page boundary with the records read one by one, on runs
that committed in whatever order a pipelined burst gave and after evictions.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.helpers import Daemon, start_daemon, stop_daemon
from venomx.wire import VenomxError

RETAIN = 14


@dataclass
class World:
    daemon: Daemon
    tokens: dict[str, str]  # principal name -> token
    owners: dict[str, str]  # run ID -> principal name that started it
    keys: dict[str, str]  # run ID -> its key
    retained: list[dict[str, Any]]  # every retained record, in ID order
    readable: dict[str, set[str]]  # principal name -> run IDs it may read
    started: int  # run IDs r0 .. r{started-1} were allocated


@pytest.fixture(scope="module")
def world() -> Iterator[World]:
    d = start_daemon(config=f"[run]\nretain_count = {RETAIN}\n")
    try:
        shared = d.call("session.create")["session"]
        private = d.call("session.create")["session"]
        alice = d.call(
            "principal.create",
            {
                "grants": [
                    {"right": "spawn", "scope": f"session:{shared}"},
                    {"right": "read", "scope": f"session:{shared}"},
                ]
            },
        )["token"]
        tokens = {"owner": "@owner", "alice": alice}
        # The same key names in two namespaces; the owner's runs in both sessions.
        owner_runs = [
            {"key": f"k{i}", "session": shared if i % 3 else private, "argv": ["true"]}
            for i in range(16)
        ]
        alice_runs = [{"key": f"k{i}", "session": shared, "argv": ["true"]} for i in range(6)]
        owners: dict[str, str] = {}
        keys: dict[str, str] = {}
        for rid, p in zip(d.start_runs(owner_runs), owner_runs, strict=True):
            owners[rid], keys[rid] = "owner", p["key"]
        with d.client(alice) as c:
            reqs = [c.start("run", p) for p in alice_runs]
            got: dict[int, str] = {}
            while len(got) < len(reqs):
                frame = c.read()
                got[frame["id"]] = frame["ok"]["run"]
        for req, p in zip(reqs, alice_runs, strict=True):
            owners[got[req]], keys[got[req]] = "alice", p["key"]
        for rid in owners:
            try:
                d.wait_exit(rid)
            except VenomxError as e:
                assert e.code == "not_found.run", e  # evicted already
        started = len(owners)
        retained: list[dict[str, Any]] = []
        for n in range(started):
            try:
                retained.append(d.call("run.get", {"run": f"r{n}", "output": False}))
            except VenomxError as e:
                assert e.code == "not_found.run"
        assert len(retained) == RETAIN
        readable = {
            "owner": {r["run"] for r in retained},
            "alice": {r["run"] for r in retained if r["session"] == shared},
        }
        yield World(d, tokens, owners, keys, retained, readable, started)
    finally:
        stop_daemon(d)


def test_whole_listing_is_every_retained_record_in_id_order(world: World) -> None:
    listed = world.daemon.call("run.list", {"limit": 1024})["runs"]
    assert [r["run"] for r in listed] == [r["run"] for r in world.retained]
    assert "next" not in world.daemon.call("run.list", {"limit": 1024})


@settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
@given(
    who=st.sampled_from(["owner", "alice"]),
    after=st.none() | st.integers(-1, 30).map(lambda n: "x" if n < 0 else f"r{n}"),
    limit=st.integers(1, 6),
    key=st.none() | st.sampled_from(["k0", "k3", "k5", "k15", "nope"]),
    pane=st.none() | st.integers(0, 40).map(lambda n: f"p{n}"),
)
def test_a_page_is_the_plain_filter(
    world: World, who: str, after: str | None, limit: int, key: str | None, pane: str | None
) -> None:
    params: dict[str, Any] = {"limit": limit}
    for name, value in (("after", after), ("key", key), ("pane", pane)):
        if value is not None:
            params[name] = value
    floor = int(after[1:]) if after is not None and after.startswith("r") else -1
    if after == "x":  # not a run ID: the manifest's syntax, checked before any lookup
        err = world.daemon.error("run.list", params, token=world.tokens[who])
        assert (err.code, err.data) == (
            "invalid_params.after",
            {"param": "after", "reason": "syntax"},
        )
        return
    if pane is not None:
        mine = world.daemon.call("pane.list", {}, token=world.tokens[who])["panes"]
        seen = {p["pane"] for p in mine}
        if who == "owner":
            seen |= {r["pane"] for r in world.retained}
        if pane not in seen:
            # RFC-0015 §3: an explicit pane is authorized before lookup.
            code = "not_found.pane" if who == "owner" else "denied.read"
            assert world.daemon.error("run.list", params, token=world.tokens[who]).code == code
            return
    matching = [
        r["run"]
        for r in world.retained
        if int(r["run"][1:]) > floor
        and (pane is None or r["pane"] == pane)
        and (key is None or (world.owners[r["run"]] == who and world.keys[r["run"]] == key))
        and r["run"] in world.readable[who]
    ]
    got = world.daemon.call("run.list", params, token=world.tokens[who])
    assert [r["run"] for r in got["runs"]] == matching[:limit]
    if len(matching) > limit:
        assert got["next"] == matching[limit - 1]
    else:
        assert "next" not in got


def test_paging_by_next_visits_each_readable_record_once(world: World) -> None:
    for who in ("owner", "alice"):
        seen: list[str] = []
        params: dict[str, Any] = {"limit": 3}
        while True:
            page = world.daemon.call("run.list", params, token=world.tokens[who])
            seen += [r["run"] for r in page["runs"]]
            if "next" not in page:
                break
            params["after"] = page["next"]
        expected = [r["run"] for r in world.retained if r["run"] in world.readable[who]]
        assert seen == expected


@pytest.mark.parametrize(
    ("params", "code"),
    [
        ({"after": "r01"}, "invalid_params.after"),
        ({"after": "p3"}, "invalid_params.after"),
        ({"after": ""}, "invalid_params.after"),
        ({"key": "a b"}, "invalid_params.key"),
        ({"key": "k" * 129}, "invalid_params.key"),
    ],
)
def test_an_after_or_key_no_run_can_have_is_an_error(
    world: World, params: dict[str, Any], code: str
) -> None:
    # An `after` that was not a run ID listed from the start, and a key no run can have
    # listed nothing: both now say what is wrong (RFC-0015 §8's key syntax).
    err = world.daemon.error("run.list", params)
    assert err.code == code
    assert err.data == {"param": code.split(".")[1], "reason": "syntax"}
    assert world.daemon.call("run.list", {"after": "r" + "9" * 30})["runs"] == []
