"""``AsyncClient``: the asyncio client the MCP adapter uses (concurrent requests on one
connection). Apart from ``venomx.client`` so the CLI never imports asyncio."""

from __future__ import annotations

import asyncio
import functools
import itertools
import socket
import threading
from collections import OrderedDict
from typing import Any

from venomx import PROTOCOL, __version__
from venomx.client import (
    Pin,
    at_abstract,
    check_server,
    connect,
    default_socket,
    peer_pid,
    transport_error,
)
from venomx.wire import (
    DEFAULT_MAX_FRAME,
    MAX_MAX_FRAME,
    Malformed,
    VenomxError,
    dumps,
    greeting,
    reply_frame,
)

STARTED_KEPT = 4096  # runs started through one client that it remembers the daemon of


async def connected(sock: socket.socket, path: str) -> socket.socket:
    """``connect``, off the event loop: it blocks while our daemon's queue is full until
    the daemon accepts, which a stopped daemon never does, and the adapter must still
    answer its host (ping, cancellation, the end of its input) meanwhile. A daemon
    thread, not the loop's executor, so a connect that never returns cannot hold up the
    adapter's exit; a call cancelled meanwhile closes what it returns."""
    loop = asyncio.get_running_loop()
    done: asyncio.Future[socket.socket] = loop.create_future()

    def succeeded(result: socket.socket) -> None:
        if done.cancelled():
            result.close()
        else:
            done.set_result(result)

    def failed(exc: BaseException) -> None:
        sock.close()
        if not done.cancelled():
            done.set_exception(exc)

    def work() -> None:
        try:
            result = connect(sock, path)
        except BaseException as exc:  # handed to the waiting call
            outcome = functools.partial(failed, exc)
        else:
            outcome = functools.partial(succeeded, result)
        try:
            loop.call_soon_threadsafe(outcome)
        except RuntimeError:  # the loop is gone: the adapter is ending
            sock.close()

    threading.Thread(target=work, name="venomx-connect", daemon=True).start()
    return await done


class AsyncClient:
    """asyncio client for the MCP adapter: concurrent requests on one connection."""

    def __init__(self, path: str | None = None, token: str | None = None) -> None:
        self.path = path or default_socket()
        self.token = token
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None
        self.ids = itertools.count(1)
        self.waiting: dict[int, asyncio.Future[dict[str, Any]]] = {}
        self.pump: asyncio.Task[None] | None = None
        self.greeted = False  # hello answered and its daemon pinned, on this connection
        self.connecting = asyncio.Lock()  # concurrent first calls make one connection
        self.max_frame = DEFAULT_MAX_FRAME  # as agreed at hello
        self.pin = Pin(follow=True)
        self.dialing: asyncio.Future[socket.socket] | None = None  # a connect in flight
        # run ID -> the source of the daemon that started it through us, newest last
        self.started: OrderedDict[str, str] = OrderedDict()

    @property
    def connected(self) -> bool:
        return (
            self.writer is not None
            and not self.writer.is_closing()
            and self.pump is not None
            and not self.pump.done()
        )

    async def dial(self) -> socket.socket:
        """A socket connected to the daemon: the connect in flight if there is one, else
        a new one. A call cancelled while it waits leaves its connect to the next call,
        so a daemon that never accepts holds one thread and one socket, however often
        its host retries."""
        if self.dialing is None:
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            self.dialing = asyncio.ensure_future(connected(sock, self.path))
        dialing = self.dialing
        try:
            sock = await asyncio.shield(dialing)
        except asyncio.CancelledError:
            if dialing.cancelled():
                self.dialing = None
            raise  # this call was cancelled: the connect, or its socket, is the next one's
        except BaseException:
            self.dialing = None
            raise
        self.dialing = None
        return sock

    async def connect(self) -> None:
        self.greeted = False  # until this connection's hello is answered and pinned
        sock: socket.socket | None = None
        try:
            sock = await self.dial()
            self.reader, self.writer = await asyncio.open_unix_connection(
                sock=sock,
                limit=MAX_MAX_FRAME + 1024,  # whatever max_frame hello agrees
            )
        except OSError as exc:
            if sock is not None:
                sock.close()
            raise transport_error(
                f"cannot reach the daemon at {self.path}: {exc.strerror or exc}"
            ) from None
        try:
            check_server(self.writer.get_extra_info("socket"), self.path)
        except VenomxError:
            self.writer.close()
            self.reader = self.writer = None
            raise
        self.pump = asyncio.ensure_future(self._pump())
        params: dict[str, Any] = {"protocol": PROTOCOL, "client": f"venomx-mcp/{__version__}"}
        if self.token:
            params["token"] = self.token
        try:
            hello = greeting(await self.call("hello", params))
            sock = self.writer.get_extra_info("socket")
            self.pin.check(self.path, peer_pid(sock), hello["source"], at_abstract(sock))
        except BaseException:
            # the daemon keeps a connection whose hello it refused: without a new one every
            # later call would be answered "hello must be the first request"
            await self.close()
            raise
        self.max_frame = hello["max_frame"]
        self.greeted = True

    async def _pump(self) -> None:
        assert self.reader is not None
        lost: VenomxError = transport_error("connection to the daemon lost")
        try:
            while True:
                try:
                    line = await self.reader.readline()
                    if not line:
                        break
                    frame = reply_frame(line)
                except ValueError:  # asyncio's word for a line past its limit
                    lost = Malformed("a frame longer than any max_frame")
                    break
                except Malformed as err:
                    lost = err
                    break
                if frame.get("id") is None and "error" in frame:
                    for waiter in self.waiting.values():  # unreadable frame: fail them all
                        if not waiter.done():
                            waiter.set_result(frame)
                    continue
                rid = frame.get("id")
                fut = self.waiting.get(rid) if isinstance(rid, int) else None
                if fut is not None and "item" not in frame and not fut.done():
                    fut.set_result(frame)
        finally:
            if isinstance(lost, Malformed) and self.writer is not None:
                self.writer.close()  # whatever speaks there is not read from again
            for fut in self.waiting.values():
                if not fut.done():
                    fut.set_exception(lost)

    async def call(self, verb: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        """Cancellation: sends ``cancel`` for the request to the daemon, then re-raises."""
        if verb != "hello" and not (self.greeted and self.connected):
            async with self.connecting:
                if not (self.greeted and self.connected):
                    await self.connect()
        assert self.writer is not None
        self.check_run(params)
        rid = next(self.ids)
        request = dumps({"id": rid, "verb": verb, "params": params or {}})
        if len(request) > self.max_frame:
            # the daemon's answer to it, which it can only send with no id (it cannot read
            # one past max_frame): it would fail every call in flight on this connection
            raise VenomxError(
                "invalid_request.frame_size",
                f"frame exceeds max_frame {self.max_frame}",
                {"max_frame": self.max_frame},
            )
        fut: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self.waiting[rid] = fut
        try:
            self.writer.write(request + b"\n")
            await self.writer.drain()
            frame = await fut
        except asyncio.CancelledError:
            if self.connected:
                self.writer.write(
                    dumps({"id": next(self.ids), "verb": "cancel", "params": {"id": rid}}) + b"\n"
                )
            raise
        except OSError:
            raise transport_error("connection to the daemon lost") from None
        finally:
            self.waiting.pop(rid, None)
        if "error" in frame:
            raise VenomxError.from_dict(frame["error"])
        result: dict[str, Any] = frame["ok"]
        if verb == "run":
            run, source = result.get("run"), result.get("source")
            if not isinstance(run, str) or not isinstance(source, str):
                raise Malformed("a run result without its run and source")
            self.started[run] = source
            self.started.move_to_end(run)
            if len(self.started) > STARTED_KEPT:
                self.started.popitem(last=False)
        return result

    def check_run(self, params: dict[str, Any] | None) -> None:
        """A run started through us on a daemon that has since restarted is not asked
        about: the daemon there now numbers its own runs from r0, so the same ID would name
        another command's run (or a record made up by whatever answers in the daemon's
        place). ``conflict.source``, as RFC-0015 has a restarted daemon answer a retry."""
        run = (params or {}).get("run")
        source = self.started.get(run) if isinstance(run, str) else None
        if source is not None and source != self.pin.source:
            raise VenomxError(
                "conflict.source",
                f"run {run} was started on the daemon {source}; the daemon at {self.path} is "
                f"now {self.pin.source}, and the run's fate is unknown",
                {"source": self.pin.source},
            )

    async def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
        if self.pump is not None:
            self.pump.cancel()
        self.reader = self.writer = self.pump = None
        self.greeted = False
