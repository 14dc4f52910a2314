"""``venomx exec`` and the get-or-create session it starts in, against a real daemon."""

from __future__ import annotations

import threading

from tests.helpers import Daemon


def test_session_reuse_is_get_or_create_in_one_step(daemon: Daemon) -> None:
    first = daemon.call("session.create", {"name": "ci", "reuse": True})
    assert first["created"] is True and first["name"] == "ci"
    again = daemon.call("session.create", {"name": "ci", "reuse": True})
    assert again == {"session": first["session"], "name": "ci", "created": False}
    plain = daemon.call("session.create", {"name": "ci"})
    assert plain["session"] != first["session"] and "created" not in plain
    results: list[str] = []

    def create() -> None:
        results.append(daemon.call("session.create", {"name": "race", "reuse": True})["session"])

    threads = [threading.Thread(target=create) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    assert len(results) == 8 and len(set(results)) == 1
    named = [s for s in daemon.call("session.list")["sessions"] if s.get("name") == "race"]
    assert len(named) == 1
