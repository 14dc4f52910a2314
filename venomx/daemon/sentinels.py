"""The daemon side of the fork server and of each sentinel's channel.

The fork server is started once at boot; each pane start asks it for a sentinel by
passing one end of a fresh socketpair. A ``Channel`` carries msgpack frames both ways
without ever blocking the reactor; messages that arrive before the pane is committed are
held and replayed to the pane's handler afterwards, in order.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import sys
from collections.abc import Callable
from typing import Any

from workers import protocol as P

log = logging.getLogger(__name__)


class ForkServer:
    """The fork server process, and one spare sentinel forked ahead of the next start."""

    def __init__(self) -> None:
        self.pid = 0
        self.control: socket.socket | None = None
        self.spare: Channel | None = None
        self.spare_task: asyncio.Task[None] | None = None

    def start(self) -> None:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        os.set_inheritable(theirs.fileno(), True)
        env = dict(os.environ)
        root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        env["PYTHONPATH"] = root + (":" + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
        self.pid = os.posix_spawn(sys.executable,
                                  [sys.executable, "-m", "workers.forkserver",
                                   str(theirs.fileno())], env)
        theirs.close()
        ours.setblocking(True)
        self.control = ours

    def fork(self) -> socket.socket:
        """A channel to a brand-new sentinel (which will send HELLO first)."""
        assert self.control is not None
        daemon_end, sentinel_end = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            # One byte and one fd: the fork server's socket buffer never fills with these.
            socket.send_fds(self.control, [b"F"], [sentinel_end.fileno()])
        finally:
            sentinel_end.close()
        return daemon_end

    @property
    def spare_pid(self) -> int:
        return self.spare.sentinel_pid if self.spare is not None else 0

    def refill(self) -> None:
        """Fork the next spare in the background (it answers HELLO when ready)."""
        if self.control is None or self.spare is not None or (
                self.spare_task is not None and not self.spare_task.done()):
            return

        async def make() -> None:
            chan: Channel | None = None
            try:
                chan = await Channel.open(self.fork())
                hello = await chan.expect(P.Hello)
                if isinstance(hello, P.Hello) and self.control is not None:
                    chan.sentinel_pid = hello.pid
                    self.spare, chan = chan, None
            except (OSError, ConnectionError) as exc:  # starts fork on demand instead
                log.warning("could not fork a spare sentinel: %s", exc)
            finally:
                if chan is not None:
                    chan.close()
        self.spare_task = asyncio.ensure_future(make())

    def take(self) -> Channel | None:
        """The spare, if one is ready and alive; a new one is forked behind it."""
        chan, self.spare = self.spare, None
        self.refill()
        if chan is not None and chan.closed.done():
            return None
        return chan

    def restart(self) -> None:
        """A new fork server after the old one died; a spare sentinel does not need it."""
        if self.control is not None:
            self.control.close()
            self.control = None
        self.start()
        self.refill()

    def stop(self) -> None:
        if self.spare is not None:
            self.spare.close()
            self.spare = None
        if self.spare_task is not None:
            self.spare_task.cancel()
        if self.control is not None:
            self.control.close()
            self.control = None


class Channel(asyncio.Protocol):
    """One sentinel's channel; ``handler`` receives messages once the pane exists."""

    def __init__(self) -> None:
        self.decoder = P.Decoder()
        self.transport: asyncio.Transport | None = None
        self.handler: Callable[[P.Message], None] | None = None
        self.held: list[P.Message] = []
        self.waiters: list[tuple[tuple[type[P.Message], ...], asyncio.Future[P.Message]]] = []
        self.closed = asyncio.get_running_loop().create_future()
        self.sentinel_pid = 0

    @classmethod
    async def open(cls, sock: socket.socket) -> Channel:
        loop = asyncio.get_running_loop()
        _, proto = await loop.create_unix_connection(cls, sock=sock)
        return proto

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        try:
            msgs = self.decoder.feed(data)
        except P.ProtocolError as exc:
            log.error("bad sentinel frame: %s", exc)
            self.close()
            return
        for m in msgs:
            self.deliver(m)

    def deliver(self, m: P.Message) -> None:
        for i, (kinds, fut) in enumerate(self.waiters):
            if isinstance(m, kinds) and not fut.done():
                del self.waiters[i]
                fut.set_result(m)
                return
        if self.handler is not None:
            self.handler(m)
        else:
            self.held.append(m)

    def connection_lost(self, exc: Exception | None) -> None:
        for _, fut in self.waiters:
            if not fut.done():
                fut.set_exception(ConnectionError("sentinel channel closed"))
        self.waiters.clear()
        if not self.closed.done():
            self.closed.set_result(None)

    async def expect(self, *kinds: type[P.Message]) -> P.Message:
        """The next message of one of these kinds (FAILED always counts), including one that
        arrived before anyone asked (a fast leader can send STARTED and EXIT at once)."""
        wanted = (*kinds, P.Failed)
        for i, m in enumerate(self.held):
            if isinstance(m, wanted):
                del self.held[i]
                return m
        if self.closed.done():
            raise ConnectionError("sentinel channel closed")
        fut: asyncio.Future[P.Message] = asyncio.get_running_loop().create_future()
        self.waiters.append((wanted, fut))
        return await fut

    def attach(self, handler: Callable[[P.Message], None]) -> None:
        """Route messages to the committed pane from the next turn on, held ones first and
        in order (messages arriving meanwhile keep being held), so the commit's own turn
        never also carries the pane's exit."""
        def replay() -> None:
            while self.held:
                handler(self.held.pop(0))
            self.handler = handler
        asyncio.get_running_loop().call_soon(replay)

    def send(self, msg: P.Message) -> None:
        if self.transport is not None and not self.transport.is_closing():
            self.transport.write(P.encode(msg))

    def close(self) -> None:
        if self.transport is not None:
            self.transport.close()


def waitstatus_fields(status: int) -> dict[str, Any]:

    if os.WIFEXITED(status):
        return {"exit_code": os.WEXITSTATUS(status)}
    if os.WIFSIGNALED(status):
        n = os.WTERMSIG(status)
        return {"signal": signal_name(n), "signum": n}
    return {}


def signal_name(n: int) -> str:
    import signal as _signal

    if _signal.SIGRTMIN <= n <= _signal.SIGRTMAX:
        return "SIGRTMIN" if n == _signal.SIGRTMIN else f"SIGRTMIN+{n - _signal.SIGRTMIN}"
    try:
        return _signal.Signals(n).name
    except ValueError:
        return f"SIG{n}"


def signal_number(name: str) -> int | None:
    import signal as _signal

    if name.startswith("SIGRTMIN"):
        return int(_signal.SIGRTMIN) + (int(name[9:]) if name[8:9] == "+" else 0)
    try:
        return int(_signal.Signals[name])
    except KeyError:
        return int(name[3:]) if name[3:].isdigit() else None
