"""``crowd.Crowd``'s choices, with stand-in connections (the bounds themselves are
exercised against a real daemon in tests/integration/test_crowd.py)."""

from __future__ import annotations

import resource

from venomx.daemon import crowd
from venomx.daemon.crowd import Crowd


class Peer:
    def __init__(self, backlog: int = 0, idle: bool = True) -> None:
        self.size, self.quiet, self.why = backlog, idle, ""

    def backlog(self) -> int:
        return self.size

    def idle(self) -> bool:
        return self.quiet

    def drop(self, why: str) -> None:
        self.why = why


def test_slow_readers_together_pass_the_write_budget_and_the_next_is_told() -> None:
    c = Crowd()
    each = 8 * crowd.MIB
    fits = crowd.WRITE_BUDGET // each
    peers = [Peer(each) for _ in range(fits + 1)]
    assert not any(c.over_write(p, each) for p in peers[:fits])
    assert c.over_write(peers[fits], each)
    # one that read its replies since is no longer counted
    peers[0].size = 0
    assert not c.over_write(peers[fits], each)
    assert peers[0] not in c.slow


def test_at_the_limit_the_quietest_idle_connection_makes_room() -> None:
    c = Crowd()
    most = crowd.most_connections()
    soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    assert most == max(64, soft // crowd.SHARE)
    peers = [Peer(idle=i != 0) for i in range(most)]  # the first heard has a wait in flight
    assert all(c.opened(p) for p in peers)
    c.heard_from(peers[1])  # heard again: now the last to go
    new = Peer()
    assert c.opened(new)
    assert peers[2].why and not peers[0].why and not peers[1].why
    assert peers[2] not in c.heard and new in c.heard
    for p in [*peers, new]:
        p.quiet = False
    assert not c.opened(Peer())  # every one busy: the new one is refused
