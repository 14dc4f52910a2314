"""``AsyncClient``'s connect, off the event loop, against a listener of our uid that never
accepts and whose queue is full (a stopped daemon): calls the host gives up on and
retries share the one connect in flight, not one blocked thread and socket each."""

from __future__ import annotations

import asyncio
import os
import socket
import threading
from pathlib import Path

from venomx.aclient import AsyncClient
from venomx.paths import abstract_address


def connects() -> int:
    return sum(t.name == "venomx-connect" for t in threading.enumerate())


def test_retried_calls_share_one_connect_in_flight(tmp_path: Path) -> None:
    path = str(tmp_path / "s.sock")
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(abstract_address(path))
    listener.listen(0)
    held: list[socket.socket] = []
    while True:  # fill its queue; it never accepts
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.setblocking(False)
        try:
            s.connect(abstract_address(path))
        except BlockingIOError:
            s.close()
            break
        held.append(s)

    async def scenario() -> tuple[int, int]:
        client = AsyncClient(path)
        fds = len(os.listdir("/proc/self/fd"))
        for _ in range(20):
            try:
                await asyncio.wait_for(client.call("whoami"), 0.05)
            except TimeoutError:
                pass
        return connects(), len(os.listdir("/proc/self/fd")) - fds

    try:
        threads, more_fds = asyncio.run(scenario())
        assert threads == 1, threads  # before: 20
        assert more_fds <= 1, more_fds  # before: 20 sockets
    finally:
        for s in held:
            s.close()
        listener.close()  # the blocked connect fails, and its thread ends
