"""``crowd.Crowd``'s choices, with stand-in connections (the bounds themselves are
exercised against a real daemon in tests/integration/test_crowd.py)."""

from __future__ import annotations

import resource

from venomx.daemon import crowd
from venomx.daemon.crowd import Crowd


class Peer:
    def __init__(self, backlog: int = 0, busy: bool = False, held: bool = False) -> None:
        self.size, self.busy, self.held, self.why = backlog, busy, held, ""

    def backlog(self) -> int:
        return self.size

    def idle(self) -> bool:
        return not self.busy and not self.held

    def waiting(self) -> bool:
        return self.busy

    def drop(self, why: str) -> None:
        self.why = why


def test_slow_readers_together_pass_the_write_budget_and_the_slowest_is_named() -> None:
    c = Crowd()
    each = 8 * crowd.MIB
    fits = crowd.WRITE_BUDGET // each
    peers = [Peer(each) for _ in range(fits + 1)]
    peers[3].size = each + 1  # it has read the least
    assert not any(c.over_write(p, p.size) for p in peers[: fits - 1])
    assert c.over_write(peers[fits], each) is peers[3]
    # one that read its replies since is no longer counted
    peers[0].size = 0
    peers[3].size = 0
    assert c.over_write(peers[fits], each) is None
    assert peers[0] not in c.slow and peers[3] not in c.slow


def test_past_the_read_budget_the_quietest_connection_holding_part_of_a_frame_is_named() -> None:
    c = Crowd()
    budget = crowd.read_budget(crowd.MIB)
    hoarder, short, reader = Peer(), Peer(), Peer()
    for p in (hoarder, short, reader):
        c.opened(p)
    c.held(hoarder, budget - 10, True)
    c.held(short, 10, True)
    assert c.over_read(crowd.MIB) is None
    c.heard_from(reader)
    c.held(reader, 700 * 1024, True)  # a large request, read as it comes
    assert c.over_read(crowd.MIB) is hoarder  # not the reader, whose bytes crossed it
    c.held(hoarder, 10 - budget, False)  # dropped
    c.held(short, budget, True)
    assert c.over_read(crowd.MIB) is short
    c.heard_from(short)
    assert c.over_read(crowd.MIB) is reader  # now the one heard from longest ago
    c.held(reader, 0, False)  # its frame is whole and waits its turn: not chosen
    c.closed(short)
    assert c.over_read(crowd.MIB) is None


def test_at_the_limit_the_quietest_idle_connection_makes_room() -> None:
    c = Crowd()
    most = crowd.most_connections()
    soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    assert most == max(64, soft // crowd.SHARE)
    peers = [Peer(busy=i == 0) for i in range(most)]  # the first heard has a wait in flight
    assert all(c.opened(p) for p in peers)
    c.heard_from(peers[1])  # heard again: now the last to go
    new = Peer()
    assert c.opened(new)
    assert peers[2].why and not peers[0].why and not peers[1].why
    assert peers[2] not in c.heard and new in c.heard
    for p in [*peers[1:], new]:
        p.busy = p is not peers[5]
    peers[5].held = True  # only part of a frame: closed when none holds nothing
    last = Peer(busy=True)
    assert c.opened(last)
    assert peers[5].why and not peers[0].why
    assert not c.opened(Peer())  # every one waits on an answer: the new one is refused
