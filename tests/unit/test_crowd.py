"""``crowd.Crowd``'s choices, with stand-in connections (the bounds themselves are
exercised against a real daemon in tests/integration/test_crowd.py)."""

from __future__ import annotations

import itertools
import resource

from venomx.daemon import crowd
from venomx.daemon.crowd import Crowd


def chosen(c: Crowd) -> object:
    over = c.over_read(crowd.MIB)
    return None if over is None else over[0]


class Peer:
    def __init__(self, backlog: int = 0, busy: bool = False) -> None:
        self.size, self.busy, self.why, self.asked = backlog, busy, "", 0

    def backlog(self) -> int:
        return self.size

    def waiting(self) -> bool:
        self.asked += 1
        return self.busy

    def drop(self, why: str) -> None:
        self.why = why


def test_every_backlog_counts_and_past_the_write_budget_the_longest_behind_go() -> None:
    """Backlogs under 1 MiB were never counted: 3,000 connections each leaving 0.8 MiB
    unread held 2.5 GB. Every backlog counts now; past the budget the connections that
    have been behind on their replies for longest are named until an eighth of it is
    free, not the largest: a client reading normally whose one large reply was just
    written would be that among connections that never read (helper-133)."""
    c = Crowd()
    each = 400 * 1024
    fits = crowd.WRITE_BUDGET // each
    peers = [Peer(each) for _ in range(fits)]
    for p in peers:
        c.wrote(p, p.size)
        assert c.over_write() == []
    peers[0].size = each - 1  # it took part of its replies: still behind since first
    victim = Peer(3 * each)  # one large reply, written just now
    c.wrote(victim, victim.size)
    gone = c.over_write()
    assert gone == peers[: len(gone)]
    left = c.writing - (len(gone) - 1) * each + 1
    assert left - each <= crowd.WRITE_BUDGET * 7 // 8 < left  # room made, no more
    for q in gone:
        c.closed(q)
    rest = peers[len(gone) :]
    # two that took everything since (and did not say so) are not counted again
    rest[0].size = rest[1].size = 0
    c.wrote(rest[2], crowd.WRITE_BUDGET // 8 + 2 * each - 1)
    assert c.over_write() == []
    assert rest[0] not in c.backlogs and c.writing == sum(c.backlogs.values())
    c.wrote(victim, 0)  # it took everything: told at once
    assert victim not in c.backlogs
    assert next(iter(c.backlogs)) is rest[2]  # a write to one behind keeps its place


def test_past_the_read_budget_the_quietest_connection_holding_part_of_a_frame_is_named() -> None:
    c = Crowd()
    budget = crowd.read_budget(crowd.MIB)
    hoarder, short, reader = Peer(), Peer(), Peer()
    for p in (hoarder, short, reader):
        c.opened(p)
    c.held(hoarder, budget - 10, True)
    c.held(short, 10, True)
    assert chosen(c) is None
    c.heard_from(reader)
    c.held(reader, 700 * 1024, True)  # a large request, read as it comes
    assert chosen(c) is hoarder  # not the reader, whose bytes crossed it
    c.held(hoarder, 0, False)  # dropped
    c.held(short, budget, True)
    assert chosen(c) is short
    c.heard_from(short)
    assert chosen(c) is reader  # now the one heard from longest ago
    c.held(reader, 700 * 1024, False)  # its frame is whole and waits its turn: not chosen
    c.closed(short)
    assert chosen(c) is None
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
    assert chosen(c) is pipes[7]
    c.closed(pipes[7])
    assert chosen(c) is None
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
    assert next(iter(c.heard)) is peers[3] and peers[0] in c.parked  # passed over, parked
    churned = [Peer() for _ in range(20)]
    for i, again in enumerate(churned):  # opened again and again at the limit
        assert c.opened(again) and peers[3 + i].why
    c.heard_from(peers[0])  # heard from: back among the rest, as heard now
    assert peers[0] in c.heard and peers[0] not in c.parked
    idle = peers[-1]
    for p in [*peers, new, *churned]:
        p.busy = p is not idle
    last = Peer(busy=True)
    assert c.opened(last)
    assert idle.why and not peers[0].why
    assert not c.opened(Peer())  # every one waits on an answer: the new one is refused


def test_connections_waiting_on_a_request_are_passed_over_once() -> None:
    """With every connection but one waiting on a request, each new connection at the
    limit walked past all of them again (842 µs a connection at 8,192; helper-133)."""
    c = Crowd()
    most = crowd.most_connections()
    busy = [Peer(busy=True) for _ in range(most - 1)]
    for p in busy:
        c.opened(p)
    churned = [Peer() for _ in range(51)]
    c.opened(churned[0])
    for before, again in itertools.pairwise(churned):
        assert c.opened(again) and before.why
    assert sum(p.asked for p in busy) == most - 1  # each once, parked
    churned[-1].busy = True
    busy[7].busy = False  # its request answered: looked at again once no other is left
    assert c.opened(Peer(busy=True)) and busy[7].why
    assert not c.opened(Peer())  # every one waits on an answer: the new one is refused


class Counted(Peer):
    looks = 0

    def backlog(self) -> int:
        Counted.looks += 1
        return self.size


def test_a_look_at_every_backlog_is_paid_for_by_an_eighth_of_the_budget() -> None:
    """Connections that take part of their replies without saying so keep the total as
    last seen above the real one. Held within one reply of the budget, every reply
    passed it as last seen, and each looked at every backlog again and found room
    (105-945 µs a reply at 1,000-9,000 connections; helper-134). A look now either
    finds an eighth of the budget free or makes it so."""
    c = Crowd()
    n = 1000
    each = (crowd.WRITE_BUDGET - 64 * 1024) // n
    trickle = [Counted(each) for _ in range(n)]
    for p in trickle:
        c.wrote(p, p.size)
    victim = Peer()
    Counted.looks = 0
    for i in range(200):
        took, refill = trickle[i % n], trickle[(i + 1) % n]
        if took.size > 0:
            took.size -= 128 * 1024  # part of its replies, not said
        victim.size = 128 * 1024  # a client reading normally: one reply, all taken
        c.wrote(victim, victim.size)
        for slow in c.over_write():
            assert isinstance(slow, Counted)  # the victim has never been behind longest
            c.closed(slow)
            slow.size = -1
        c.wrote(victim, 0)
        if refill.size > 0:
            refill.size += 128 * 1024  # a reply it asked for
            c.wrote(refill, refill.size)
    assert Counted.looks <= 2 * n  # was 200 looks at every backlog
    assert not victim.why
    assert c.writing <= crowd.WRITE_BUDGET
