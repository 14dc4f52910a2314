"""The one client library: connect, hello, request, stream, cancel.

Used by the CLI, the MCP adapter and the tests. ``Client`` is blocking (the CLI needs
nothing more); ``AsyncClient`` serves the MCP adapter. A lost or unreachable daemon is a
``VenomxError`` with code ``transport`` (CLI exit 9). So is a server that runs as another
uid (neither ours nor root): it is checked with ``SO_PEERCRED`` right after connect, before
``hello``, so a token never reaches whoever swapped the socket.
"""

from __future__ import annotations

import asyncio
import errno
import itertools
import json
import os
import socket
import struct
from collections.abc import Iterator
from typing import Any

from venomx import PROTOCOL, __version__
from venomx.paths import abstract_address, socket_path
from venomx.wire import DEFAULT_MAX_FRAME, VenomxError, dumps


def default_socket() -> str:
    return socket_path(None)


def transport_error(message: str, data: dict[str, Any] | None = None) -> VenomxError:
    return VenomxError("transport", message, data or {})


class Unreachable(VenomxError):
    """``transport``: nothing could be reached at the socket. The same error object as any
    other transport failure; ``errno`` tells the CLI whether to suggest starting a daemon."""

    def __init__(self, path: str, exc: OSError) -> None:
        super().__init__(
            "transport", f"cannot reach the daemon at {path}: {exc.strerror or exc}", {}
        )
        self.path = path
        self.errno = exc.errno


def check_server(sock: Any, path: str) -> None:
    """Refuse a server that is neither our uid nor root (raises ``transport``)."""
    try:
        creds = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
        _, uid, _ = struct.unpack("3i", creds)
    except OSError as exc:
        raise transport_error(
            f"cannot identify the server at {path}: {exc.strerror or exc}"
        ) from None
    me = os.getuid()
    if uid not in (me, 0):
        raise transport_error(
            f"refusing the server at {path}: it runs as uid {uid}, not as uid {me} or root",
            {"socket": path, "server_uid": uid},
        )


def connect(sock: socket.socket, path: str) -> None:
    """Connect to the daemon of ``path``: at its abstract address when it has one (a
    program of our uid may have swapped the file, not that), else at the path."""
    try:
        sock.connect(abstract_address(path))
        return
    except OSError as exc:
        if exc.errno not in (errno.ECONNREFUSED, errno.ENOENT):
            raise
    sock.connect(path)


class Client:
    """A synchronous connection to the daemon for one-request CLI commands: hello, then
    requests and their replies in order."""

    def __init__(
        self,
        path: str | None = None,
        token: str | None = None,
        max_frame: int = DEFAULT_MAX_FRAME,
        client: str = f"venomx-cli/{__version__}",
    ) -> None:
        self.path = path or default_socket()
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            connect(self.sock, self.path)
        except OSError as exc:
            self.sock.close()
            raise Unreachable(self.path, exc) from None
        try:
            check_server(self.sock, self.path)
        except VenomxError:
            self.sock.close()
            raise
        self.file = self.sock.makefile("rb")
        self.ids = itertools.count(1)
        params: dict[str, Any] = {"protocol": PROTOCOL, "client": client, "max_frame": max_frame}
        if token:
            params["token"] = token
        self.hello = self.call("hello", params, rid=0)

    def close(self) -> None:
        try:
            self.file.close()
            self.sock.close()
        except OSError:
            pass

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def send(self, frame: dict[str, Any]) -> None:
        try:
            self.sock.sendall(dumps(frame) + b"\n")
        except OSError as exc:
            raise transport_error(f"connection lost: {exc}") from None

    def read(self) -> dict[str, Any]:
        try:
            line = self.file.readline()
        except OSError as exc:
            raise transport_error(f"connection lost: {exc}") from None
        if not line:
            raise transport_error("connection closed by the daemon")
        frame: dict[str, Any] = json.loads(line)
        return frame

    def start(self, verb: str, params: dict[str, Any] | None = None, rid: int | None = None) -> int:
        rid = next(self.ids) if rid is None else rid
        self.send({"id": rid, "verb": verb, "params": params or {}})
        return rid

    def response(self, rid: int) -> dict[str, Any]:
        """Read until request ``rid`` is answered (stream items are skipped)."""
        while True:
            frame = self.read()
            if frame.get("id") is None and "error" in frame:
                raise VenomxError.from_dict(frame["error"])  # a frame the daemon could not read
            if frame.get("id") == rid and "item" not in frame:
                if "error" in frame:
                    raise VenomxError.from_dict(frame["error"])
                result: dict[str, Any] = frame["ok"]
                return result

    def call(
        self, verb: str, params: dict[str, Any] | None = None, rid: int | None = None
    ) -> dict[str, Any]:
        """One request, one result; ``KeyboardInterrupt`` sends ``cancel`` and re-raises."""
        rid = self.start(verb, params, rid)
        try:
            return self.response(rid)
        except KeyboardInterrupt:
            self.cancel(rid)
            return self.response(rid)

    def cancel(self, rid: int) -> None:
        self.start("cancel", {"id": rid})

    def stream(self, verb: str, params: dict[str, Any] | None = None) -> Iterator[dict[str, Any]]:
        """Yield items; the final result is yielded as ``{"result": …}``."""
        rid = self.start(verb, params)
        while True:
            frame = self.read()
            if frame.get("id") is None and "error" in frame:
                raise VenomxError.from_dict(frame["error"])
            if frame.get("id") != rid:
                continue
            if "item" in frame:
                yield frame["item"]
            elif "error" in frame:
                raise VenomxError.from_dict(frame["error"])
            else:
                yield {"result": frame["ok"]}
                return


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

    @property
    def connected(self) -> bool:
        return (
            self.writer is not None
            and not self.writer.is_closing()
            and self.pump is not None
            and not self.pump.done()
        )

    async def connect(self) -> None:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            connect(sock, self.path)  # a short local connect: blocking is fine here
            self.reader, self.writer = await asyncio.open_unix_connection(
                sock=sock, limit=2 * DEFAULT_MAX_FRAME + 1024
            )
        except OSError as exc:
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
        await self.call("hello", params)

    async def _pump(self) -> None:
        assert self.reader is not None
        try:
            while True:
                line = await self.reader.readline()
                if not line:
                    break
                frame = json.loads(line)
                if frame.get("id") is None and "error" in frame:
                    for waiter in self.waiting.values():  # unreadable frame: fail them all
                        if not waiter.done():
                            waiter.set_result(frame)
                    continue
                fut = self.waiting.get(frame.get("id"))
                if fut is not None and "item" not in frame and not fut.done():
                    fut.set_result(frame)
        finally:
            for fut in self.waiting.values():
                if not fut.done():
                    fut.set_exception(transport_error("connection to the daemon lost"))

    async def call(self, verb: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        """Cancellation: sends ``cancel`` for the request to the daemon, then re-raises."""
        if not self.connected and verb != "hello":
            await self.connect()
        assert self.writer is not None
        rid = next(self.ids)
        fut: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self.waiting[rid] = fut
        try:
            self.writer.write(dumps({"id": rid, "verb": verb, "params": params or {}}) + b"\n")
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
        return result

    async def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
        if self.pump is not None:
            self.pump.cancel()


def env_token() -> str | None:
    return os.environ.get("VENOMX_TOKEN") or None
