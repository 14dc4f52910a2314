"""A fair event log (issue 15.6): one pane flooding OSC markers cannot evict the rest.

Observations (``command.*``, ``program.status_changed``) have a per-pane budget; the
excess is reported as counted ``pane.observations_coalesced`` events. Lifecycle and run
events are never limited, and a cursor taken before the flood stays usable.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime
from typing import Any

import pytest

from tests.helpers import Daemon, start_daemon, stop_daemon, wait_for
from venomx.client import Client

FLOODS = 20000  # each loop prints command.started and command.finished: 40,000 markers
FLOOD = (
    f'i=0; while [ $i -lt {FLOODS} ]; do printf "\\033]133;C\\007\\033]133;D;0\\007"; '
    'i=$((i+1)); done; printf "\\033]7501;state=done\\007"; exit 0'
)
OBSERVATIONS = {"command.started", "command.finished", "program.status_changed"}


@pytest.fixture
def small_log() -> Iterator[Daemon]:
    # 4000 retained events: without a budget the flood alone would evict them ten times
    d = start_daemon(config="[events]\nretain_count = 4000\n")
    try:
        yield d
    finally:
        stop_daemon(d)


def read_all(d: Daemon, after: int) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    while True:
        r = d.call("events.read", {"after": after, "limit": 1024})
        if not r["events"]:
            return out
        out += r["events"]
        after = r["next"]


def state(d: Daemon, pane: str) -> str:
    return next(str(p["state"]) for p in d.call("pane.list")["panes"] if p["pane"] == pane)


def ts(e: dict[str, Any]) -> float:
    return datetime.strptime(e["ts"], "%Y-%m-%dT%H:%M:%S.%fZ").timestamp()


def of(evs: list[dict[str, Any]], pane: str) -> list[dict[str, Any]]:
    return [e for e in evs if e["resource"] == f"pane:{pane}"]


@pytest.mark.timeout(120)
def test_flood_is_coalesced_and_others_survive(small_log: Daemon) -> None:
    d = small_log
    s = d.call("session.create")["session"]
    cursor = d.call("events.read", {"limit": 1024})["next"]
    sub = Client(d.socket, "@owner")
    sub.sock.settimeout(60)
    stream = sub.stream("events.subscribe", {"after": cursor})  # not read until the end
    flood = d.call("window.create", {"session": s, "argv": ["sh", "-c", FLOOD]})
    wait_for(
        lambda: any(e["type"] == "command.started" for e in of(read_all(d, cursor), flood["pane"])),
        20,
        "the flood",
    )
    run = d.call("run", {"key": "other", "session": s, "argv": ["sh", "-c", "exit 3"]})
    rec = d.wait_exit(run["run"], 30)
    assert rec["outcome"] == "failed" and rec["exit_code"] == 3
    wait_for(lambda: state(d, flood["pane"]) == "exited", 60, "the flood's end")

    evs = read_all(d, cursor)  # the cursor from before the flood is still good
    assert evs[0]["seq"] == cursor + 1
    assert [e["seq"] for e in evs] == list(range(cursor + 1, cursor + 1 + len(evs)))
    other = [e["type"] for e in of(evs, run["pane"])]
    assert other[0] == "pane.created" and other[-1] == "pane.exited"
    runs = [e for e in evs if e["resource"] == f"run:{run['run']}"]
    assert [e["type"] for e in runs] == ["run.started", "run.completed"]
    assert runs[1]["data"]["exit_code"] == 3

    mine = of(evs, flood["pane"])
    coalesced = [e for e in mine if e["type"] == "pane.observations_coalesced"]
    kept = [e for e in mine if e["type"] in OBSERVATIONS]
    assert coalesced, "a flood of 40,000 markers was not limited"
    held = sum(e["data"]["count"] for e in coalesced)
    for e in coalesced:
        assert e["data"]["count"] == sum(e["data"]["types"].values()) > 0
        assert set(e["data"]["types"]) <= OBSERVATIONS
    # exact: every marker is either an event or counted, and the exit adds one cleanup
    assert len(kept) + held == 2 * FLOODS + 1 + 1
    assert kept[-1]["data"] == {"pane": flood["pane"], "state": None}  # the pane's exit
    assert mine[-1]["type"] == "pane.exited"
    # the budget: 200 at once, then 100 a second; about one coalesced event a second
    span = ts(mine[-1]) - ts(mine[0]) + 0.002
    assert len(kept) <= 200 + 100 * span + 1
    assert len(coalesced) <= span + 2
    # what a consumer reconstructs from the log: the last status before the exit was done
    last = None
    for e in mine[:-2]:
        if e["type"] in ("program.status_changed", "pane.observations_coalesced"):
            last = e["data"]["state"]
    assert last == "done"
    print(
        f"flood: {len(kept)} observations kept, {held} held in {len(coalesced)} "
        f"coalesced events over {span:.2f} s"
    )

    # the subscriber that never read kept its place, and sees the same events in order
    seen = []
    for item in stream:
        seen.append(item["event"]["seq"])
        if len(seen) == len(evs):
            break
    assert seen == [e["seq"] for e in evs]
    sub.close()


def test_budget_is_config_and_applies_at_once(daemon: Daemon) -> None:
    for bad in ("0", "1000001", "true", "1.5"):
        for key in ("events.observe_rate", "events.observe_burst"):
            e = daemon.error("config.set", {"path": key, "value": bad})
            assert e.code == "invalid_params.config" and e.data["path"] == key
    got = daemon.call("config.get", {"path": "events.observe_rate"})["config"]
    assert got == {"events.observe_rate": 100}
    for key in ("events.observe_rate", "events.observe_burst"):
        daemon.call("config.set", {"path": key, "value": "1000000"})
    s = daemon.call("session.create")["session"]
    cursor = daemon.call("events.read", {"limit": 1024})["next"]
    n = 1500
    shell = FLOOD.replace(str(FLOODS), str(n))
    w = daemon.call("window.create", {"session": s, "argv": ["sh", "-c", shell]})
    wait_for(lambda: state(daemon, w["pane"]) == "exited", 30, "exit")
    types = [e["type"] for e in of(read_all(daemon, cursor), w["pane"])]
    assert types.count("command.started") == types.count("command.finished") == n
    assert "pane.observations_coalesced" not in types
    daemon.call("config.set", {"path": "events.observe_burst", "value": "1"})  # lower edge
    assert daemon.call("config.get", {"path": "events.observe_burst"})["config"] == {
        "events.observe_burst": 1
    }
