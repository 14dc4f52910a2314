"""``crowd.Crowd``'s choices, with stand-in connections (the bounds themselves are
exercised against a real daemon in tests/integration/test_crowd.py)."""

from __future__ import annotations

import resource

from venomx.daemon import crowd
from venomx.daemon.crowd import Crowd


class Peer:
    def __init__(self, backlog: int = 0, busy: bool = False) -> None:
        self.size, self.busy, self.why = backlog, busy, ""

    def backlog(self) -> int:
        return self.size

    def waiting(self) -> bool:
        return self.busy

    def drop(self, why: str) -> None:
        self.why = why


def test_every_backlog_counts_and_past_the_write_budget_the_largest_go() -> None:
    """Backlogs under 1 MiB were never counted: 3,000 connections each leaving 0.8 MiB
    unread held 2.5 GB. Every backlog counts now; past the budget the slow readers
    holding the most are named until the rest fit."""
    c = Crowd()
    each = 800 * 1024
    fits = crowd.WRITE_BUDGET // each
    peers = [Peer(each) for _ in range(fits + 2)]
    peers[3].size = each + 1  # it has read the least
    for p in peers[:fits]:
        c.wrote(p, p.size)
        assert c.over_write() == []
    c.wrote(peers[fits], each)
    assert c.over_write() == [peers[3]]
    c.closed(peers[3])
    # two that read their replies since (and did not say so) are not counted again
    peers[0].size = peers[1].size = 0
    c.wrote(peers[fits + 1], 3 * each)
    assert c.over_write() == []
    assert peers[0] not in c.backlogs and c.writing == sum(c.backlogs.values())
    c.wrote(peers[fits + 1], 0)  # it took everything: told at once
    assert peers[fits + 1] not in c.backlogs


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
    c.held(hoarder, 0, False)  # dropped
    c.held(short, budget, True)
    assert c.over_read(crowd.MIB) is short
    c.heard_from(short)
    assert c.over_read(crowd.MIB) is reader  # now the one heard from longest ago
    c.held(reader, 700 * 1024, False)  # its frame is whole and waits its turn: not chosen
    c.closed(short)
    assert c.over_read(crowd.MIB) is None
    assert c.partial == 0 and c.queued_bytes == 700 * 1024


def test_whole_frames_waiting_their_turn_are_bounded_apart() -> None:
    """420 connections with ~240 KiB of pipelined frames each counted in the budget of
    parts of frames, but none was ever chosen: a client's one 700 KiB request was pushed
    out. Waiting frames have a budget of their own; past it the connection with the most
    of them goes, and the part of a frame is untouched."""
    c = Crowd()
    budget = crowd.read_budget(crowd.MIB)
    reader = Peer()
    c.held(reader, 700 * 1024, True)
    pipes = [Peer() for _ in range(budget // (240 * 1024) + 1)]
    for i, p in enumerate(pipes):
        c.held(p, 240 * 1024 + (i == 7), False)
    assert c.over_read(crowd.MIB) is pipes[7]
    c.closed(pipes[7])
    assert c.over_read(crowd.MIB) is None
    assert c.partial == 700 * 1024


def test_at_the_limit_the_quietest_connection_with_nothing_in_flight_makes_room() -> None:
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
    assert next(iter(c.heard)) is peers[3]  # the busy one was passed over: heard as now
    for p in [*peers[1:], new]:
        p.busy = p is not peers[5]
    last = Peer(busy=True)
    assert c.opened(last)
    assert peers[5].why and not peers[0].why
    assert not c.opened(Peer())  # every one waits on an answer: the new one is refused
