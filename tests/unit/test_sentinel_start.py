"""A sentinel forked for a start that is already waiting skips the spare's warm-up
(``prepare``), which would only add to that start; a spare still warms up."""

from __future__ import annotations

import socket

from workers import protocol as P
from workers.sentinel import Sentinel

SPAWN = P.Spawn("p1", ["true"], {"PATH": "/usr/bin"}, "/", 80, 24, 100, True)


def test_a_waiting_spawn_is_seen_and_left_for_the_start() -> None:
    ours, theirs = socket.socketpair()
    with ours, theirs:
        s = Sentinel(theirs)
        assert s.spawn_waiting() is False  # a spare: nothing asked of it yet
        ours.sendall(P.encode(SPAWN))
        assert s.spawn_waiting() is True
        assert s.spawn_waiting() is True  # looking consumed nothing
        assert s.next_message() == SPAWN


def test_a_closed_channel_is_no_start() -> None:
    ours, theirs = socket.socketpair()
    with theirs:
        s = Sentinel(theirs)
        ours.close()
        assert s.spawn_waiting() is False
        assert s.next_message() is None
