"""A sentinel channel that sends anything malformed is a failed sentinel, never data."""

from __future__ import annotations

import asyncio
import socket

from venomx.daemon.panes.sentinels import Channel
from venomx.daemon.readbuf import READ_BUFFER
from workers import protocol as P


def test_a_malformed_frame_breaks_the_channel_and_tells_its_owner() -> None:
    async def scenario() -> tuple[list[P.Message], bool, bool, bool]:
        ours, theirs = socket.socketpair()
        chan = await Channel.open(ours, 0)
        got: list[P.Message] = []
        broken = asyncio.Event()
        chan.attach(got.append)
        chan.on_broken = broken.set
        theirs.sendall(P.encode(P.Pong(1)) + b"\xc1" + P.encode(P.Pong(2)))
        await asyncio.wait_for(broken.wait(), 5)
        closed_by_us = chan.closed.done()
        theirs.close()
        chan.close()
        return got, chan.broken, broken.is_set(), closed_by_us

    got, is_broken, told, closed_by_us = asyncio.run(scenario())
    assert is_broken and told
    assert P.Pong(2) not in got  # nothing after the bad byte is taken as data
    # the owner kills the sentinel first: the channel itself does not hang up on it
    assert not closed_by_us


def test_without_an_owner_a_malformed_frame_closes_the_channel() -> None:
    async def scenario() -> bool:
        ours, theirs = socket.socketpair()
        chan = await Channel.open(ours, 0)
        body = b"\x93\x01\x02\x03"  # [1, 2, 3]: a SPAWN with wrong fields
        theirs.sendall(len(body).to_bytes(P.HEADER, "big") + body)
        await asyncio.wait_for(chan.closed, 5)
        theirs.close()
        return chan.broken

    assert asyncio.run(scenario())


def test_a_frame_split_across_reads_survives_the_shared_buffer_being_reused() -> None:
    """Every socket is read into one buffer: the part of a frame one read brought must be
    kept by the channel, not viewed, since the next read (of any socket) overwrites it."""

    async def scenario() -> list[P.Message]:
        chan = Channel()
        got: list[P.Message] = []
        chan.handler = got.append
        frame = P.encode(P.Output(b"abc" * 1000, 7)) + P.encode(P.Pong(9))
        cut = len(frame) // 2
        READ_BUFFER[:cut] = frame[:cut]
        chan.buffer_updated(cut)
        READ_BUFFER[: len(frame)] = b"\xc1" * len(frame)  # another socket's read
        READ_BUFFER[: len(frame) - cut] = frame[cut:]
        chan.buffer_updated(len(frame) - cut)
        return got

    assert asyncio.run(scenario()) == [P.Output(b"abc" * 1000, 7), P.Pong(9)]
