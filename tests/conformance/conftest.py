from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.adapters import CliApi, McpApi
from tests.helpers import Daemon, wait_for


@pytest.fixture(params=["cli", "mcp"])
def api(request: pytest.FixtureRequest, daemon: Daemon) -> Iterator[CliApi | McpApi]:
    a: CliApi | McpApi = CliApi(daemon) if request.param == "cli" else McpApi(daemon)
    try:
        yield a
    finally:
        a.close()


def world(d: Daemon) -> dict[str, Any]:
    """Everything "no side effects" (RFC-0015 §13) talks about, as one comparable value."""
    doc = d.call("doctor")
    counters = doc["counters"]
    runs = d.call("run.list", {"limit": 1024})["runs"]
    return {
        "panes": counters["panes"],
        "sessions": counters["sessions"],
        "windows": counters["windows"],
        "principals": counters["principals"],
        "events": counters["events"],
        "bindings": doc["run"]["key_bindings"],
        "runs": [r["run"] for r in runs],
        "children": wait_for(lambda: _settled(d), 10, "children to settle"),
    }


def _settled(d: Daemon) -> int | None:
    """Children other than spare sentinels, once no spare is still being forked: the fork
    server and one sentinel per live pane (the spare pool's size varies with use)."""
    kids = d.children()
    doc = d.call("doctor")
    live = doc["counters"]["panes"]["running"] + doc["counters"]["panes"]["terminating"]
    spares = doc["sentinels"]["spares"]
    if spares != doc["sentinels"]["spares_target"]:  # a refill is under way
        return None
    return len(kids) - spares if spares and len(kids) == 1 + spares + live else None
