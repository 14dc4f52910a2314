from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from typing import Any

import pytest

from tests.adapters import CliApi, McpApi
from tests.helpers import MADE, Daemon, start_daemon, stop_daemon, wait_for


class WarmAdapters:
    """The next MCP row's adapter, started while the row before it runs. An adapter only
    reaches its daemon at its first listing or call, so it can be started for a daemon
    that does not exist yet; its SDK import (1-1.5 s, most of an MCP row's set-up) then
    overlaps the previous row instead of adding to this one. Each adapter still serves
    one row, and each row still has a daemon of its own."""

    def __init__(self) -> None:
        self.spare: tuple[str, McpApi] | None = None
        self.taken: dict[str, McpApi] = {}
        self.closing: list[McpApi] = []

    def refill(self) -> None:
        if self.spare is None:
            directory = tempfile.mkdtemp(prefix="vx", dir="/tmp")
            MADE.append(directory)  # removed with start_daemon's at the session's end
            self.spare = directory, McpApi(os.path.join(directory, "s.sock"), wait=False)

    def take_directory(self) -> str:
        """A directory for the row's daemon, whose adapter ``take`` then hands out."""
        self.refill()
        assert self.spare is not None
        directory, adapter = self.spare
        self.spare = None
        self.taken[directory] = adapter
        return directory

    def retire(self, adapter: McpApi) -> None:
        """Stop a row's adapter without waiting for it to exit; the next ``take`` waits."""
        adapter.close(wait=False)
        self.closing.append(adapter)

    def take(self, d: Daemon) -> McpApi:
        while self.closing:
            self.closing.pop().join()
        adapter = self.taken.pop(os.path.dirname(d.socket))
        adapter.wait_ready()
        return adapter

    def close(self) -> None:
        """Stop the spare, and any adapter whose row failed before it took it."""
        while self.closing:
            self.closing.pop().join()
        for adapter in self.taken.values():
            adapter.close()
        if self.spare is not None:
            self.spare[1].close()


@pytest.fixture(scope="session")
def warm() -> Iterator[WarmAdapters]:
    w = WarmAdapters()
    try:
        yield w
    finally:
        w.close()


def wants_mcp(request: pytest.FixtureRequest) -> bool:
    callspec = getattr(request.node, "callspec", None)
    return callspec is not None and callspec.params.get("api") == "mcp"


@pytest.fixture
def daemon(request: pytest.FixtureRequest, warm: WarmAdapters) -> Iterator[Daemon]:
    """The row's own daemon; an MCP row's, in the directory its warm adapter expects."""
    d = start_daemon(directory=warm.take_directory() if wants_mcp(request) else None)
    try:
        yield d
    finally:
        stop_daemon(d)


@pytest.fixture(params=["cli", "mcp"])
def api(
    request: pytest.FixtureRequest, daemon: Daemon, warm: WarmAdapters
) -> Iterator[CliApi | McpApi]:
    if request.param == "cli":
        a: CliApi | McpApi = CliApi(daemon)
    else:
        a = warm.take(daemon)
        warm.refill()  # for the next MCP row, while this one runs
    try:
        yield a
    finally:
        if isinstance(a, McpApi):
            warm.retire(a)
        else:
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
