"""The one client library: connect, hello, request, stream, cancel.

Used by the CLI, the MCP adapter and the tests. ``Client`` is blocking (the CLI needs
nothing more, and imports no asyncio); ``venomx.aclient.AsyncClient`` serves the MCP
adapter. A lost or unreachable daemon is a
``VenomxError`` with code ``transport`` (CLI exit 9). So is a server that runs as another
uid (neither ours nor root): it is checked with ``SO_PEERCRED`` right after connect, before
``hello``, so a token never reaches whoever swapped the socket.
"""

from __future__ import annotations

import _socket
import errno
import itertools
import os
import sys
import time
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

from venomx import PROTOCOL, __version__
from venomx.paths import abstract_address, socket_path
from venomx.wire import MAX_MAX_FRAME, Malformed, VenomxError, dumps, greeting, reply_frame

QUEUE_WAIT = 5.0  # seconds a full queue whose holder the kernel cannot name is tried

T = TypeVar("T")


def reconnecting(
    open_client: Callable[[], Client], work: Callable[[Client], T], bound: float, pause: float
) -> T:
    """``work`` on a fresh connection, again on another one each time the daemon cannot be
    reached or the connection is lost (``transport``), for up to ``bound`` seconds after
    the last connection that worked; then the error."""
    lost_at: float | None = None
    while True:
        try:
            with open_client() as c:
                lost_at = None
                return work(c)
        except VenomxError as err:
            now = time.monotonic()
            lost_at = lost_at or now
            if not retryable(err) or now - lost_at >= bound:
                raise
            time.sleep(pause)  # a CLI waiting for its daemon to come back


def retryable(err: VenomxError) -> bool:
    """Whether connecting again may help: a lost or unreachable daemon, not a server that
    is not our daemon at all, nor a reply that cannot be read."""
    return err.code == "transport" and not isinstance(err, (NotTheDaemon, Malformed))


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


def server_uid(sock: Any) -> int:
    creds = sock.getsockopt(_socket.SOL_SOCKET, _socket.SO_PEERCRED, 12)
    return int.from_bytes(creds[4:8], sys.byteorder, signed=True)  # ucred: pid, uid, gid


def peer_pid(sock: Any) -> int:
    """The pid ``SO_PEERCRED`` gives for the server: of the process that made its socket
    listen (the daemon; systemd under socket activation); 0 in a pid namespace we cannot
    see."""
    creds = sock.getsockopt(_socket.SOL_SOCKET, _socket.SO_PEERCRED, 12)
    return int.from_bytes(creds[0:4], sys.byteorder, signed=True)


def at_abstract(sock: Any) -> bool:
    """Whether ``sock`` reached the daemon at its abstract address (not at the path)."""
    name = sock.getpeername()
    return isinstance(name, bytes) and name[:1] == b"\0"


def _pidfd(pid: int) -> int:
    """A pidfd for ``pid`` (close-on-exec), or -1 where there is none to open."""
    try:
        return os.pidfd_open(pid) if pid > 0 else -1
    except OSError:
        return -1


def _exited(pidfd: int) -> bool:
    """Whether the process has exited (a pidfd turns readable then). -1, a process we could
    not open one for (pid 0 from a pid namespace we cannot see), proves nothing either
    way: it is not counted as exited, so it is taken for itself again."""
    if pidfd < 0:
        return False
    import select  # only for the clients that reconnect

    poll = select.poll()  # not select(): a pidfd may be numbered past 1023
    poll.register(pidfd, select.POLLIN)
    return bool(poll.poll(0))


class NotTheDaemon(VenomxError):
    """``transport``, and final: the server claims the source of the daemon a client began
    with, but is another process, and not the one way a daemon's second process comes
    (see ``Pin``). A daemon's source is new at each start, so this is a program of our uid
    that killed or stopped the daemon and listens in its place, answering with whatever it
    likes; connecting again reaches it again."""

    def __init__(self, path: str, pid: int, first: int | None) -> None:
        claim = (
            f"the source of the daemon this client began with (pid {first})"
            if first is not None
            else "the source of a daemon this client left behind when it restarted"
        )
        super().__init__(
            "transport",
            f"refusing the server at {path}: it claims {claim}, but it is pid {pid}: not "
            "that daemon",
            {"socket": path, "server_pid": pid},
        )


class Pin:
    """The daemon a client that connects more than once began with: ``venomx exec`` and
    ``run log --follow`` (``follow`` False: their run lives on that daemon only) and the MCP
    adapter (``follow`` True: it goes on with a restarted daemon, whose source is new).

    Held as the source and, for each process seen serving it, a pidfd and whether it was
    reached at the abstract address. A program of our uid that killed the daemon, or
    stopped it once its shutdown let the address go, can copy the source, which anyone may
    read, not the process. One process more is taken for a source only in the one way a
    daemon has two: under socket activation the manager's socket at the path first, then
    the daemon's own abstract address, while every process seen lives on. A pidfd also
    tells a reused pid apart.
    """

    def __init__(self, follow: bool) -> None:
        import _thread  # exec's input threads connect too

        self.follow = follow
        self.source: str | None = None
        # following: the sources of daemons that restarted since, each never taken again
        self.left: set[str] = set()
        # pid -> (its pidfd, -1 where none could be opened; reached at the abstract address)
        self.seen: dict[int, tuple[int, bool]] = {}
        self.lock = _thread.allocate_lock()

    def check(self, path: str, pid: int, source: str, abstract: bool) -> None:
        """Raise unless this hello comes from the daemon we began with (or, following, from
        one that restarted since)."""
        with self.lock:
            self._check(path, pid, source, abstract)

    def _check(self, path: str, pid: int, source: str, abstract: bool) -> None:
        if source in self.left:  # a daemon's source is new at each start
            raise NotTheDaemon(path, pid, None)
        if self.source is None or (self.follow and source != self.source):
            self.close()
            if self.source is not None:
                self.left.add(self.source)
            self.source = source
        elif source != self.source:
            raise VenomxError(
                "conflict.source",
                f"the daemon at {path} is not the one this began with ({self.source}): it "
                "restarted, and the fate of what was started there is unknown",
                {"source": source},
            )
        else:
            known = self.seen.get(pid)
            if known is not None:  # seen: unless it has exited since (its pid reused)
                taken = not _exited(known[0])
            else:  # the daemon, at its address, after the manager's socket
                at_first = any(at for _, at in self.seen.values())
                taken = abstract and not at_first and not any(map(_exited, self.fds()))
            if not taken:
                raise NotTheDaemon(path, pid, next(iter(self.seen)))
        if pid not in self.seen:
            self.seen[pid] = (_pidfd(pid), abstract)
        elif abstract:
            self.seen[pid] = (self.seen[pid][0], True)

    def fds(self) -> list[int]:
        return [fd for fd, _ in self.seen.values()]

    def close(self) -> None:
        for fd, _ in self.seen.values():
            if fd >= 0:
                os.close(fd)
        self.seen.clear()


def check_server(sock: Any, path: str) -> None:
    """Refuse a server that is neither our uid nor root (raises ``transport``)."""
    try:
        uid = server_uid(sock)
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


def connect(sock: Any, path: str) -> Any:
    """Connect ``sock`` to the daemon of ``path`` and return the connected socket: at its
    abstract address when our daemon holds it (a program of our uid may have swapped the
    file, not that), else at the path. A holder of another uid is passed over
    (``connect_abstract``): anyone can take the address first, but not reach the path's
    private directory."""
    if connect_abstract(sock, path):
        return sock
    sock.close()
    sock = type(sock)(_socket.AF_UNIX, _socket.SOCK_STREAM)
    try:
        sock.connect(path)
    except OSError:
        sock.close()
        raise
    return sock


def connect_abstract(sock: Any, path: str) -> bool:
    """Whether ``sock`` is now connected to a daemon of our uid (or root) at ``path``'s
    abstract address. A full queue there is waited out only for a listener the kernel
    says is ours: another user's is passed over for the path, and one the kernel cannot
    name is tried for ``QUEUE_WAIT`` seconds, then given up (the path would let a program
    of our uid that swapped the file and filled the queue answer for the daemon)."""
    name = abstract_address(path)
    sock.setblocking(False)
    try:
        deadline = time.monotonic() + QUEUE_WAIT
        while True:
            try:
                sock.connect(name)
                break
            except BlockingIOError:
                whose = queue_holder(name)
                if whose is False:
                    return False
                if whose is True:
                    sock.setblocking(True)
                    sock.connect(name)  # our daemon: it accepts in time
                    break
                if time.monotonic() >= deadline:
                    raise OSError(
                        errno.EAGAIN, "the daemon's address stays full and its holder is unknown"
                    ) from None
                time.sleep(0.05)
    except OSError as exc:
        if exc.errno in (errno.ECONNREFUSED, errno.ENOENT):
            return False
        raise
    finally:
        if sock.fileno() >= 0:
            sock.setblocking(True)
    try:
        if server_uid(sock) in (os.getuid(), 0):
            return True
    except OSError:
        pass
    return False


def queue_holder(name: str) -> bool | None:
    """Whether the listener with a full queue at ``name`` is ours (True), another user's
    (False), or the kernel cannot say or sees none (None)."""
    from venomx import unixdiag  # only when a queue is full

    try:
        uid = unixdiag.holder_uid(name.encode(), listening=True)
    except unixdiag.Unknown:
        return None
    return None if uid is None else unixdiag.mine(uid)


class Client:
    """A synchronous connection to the daemon for one-request CLI commands: hello, then
    requests and their replies in order.

    ``pipelined``: hello goes out with the first request, in one write, and its answer is
    read before that request's, saving a round trip (the daemon handles hello before it
    reads the next frame, so the request still comes after it). A refused hello then
    raises at the first call, not here.
    """

    def __init__(
        self,
        path: str | None = None,
        token: str | None = None,
        max_frame: int | None = None,
        client: str = f"venomx-cli/{__version__}",
        pipelined: bool = False,
        pin: Pin | None = None,
    ) -> None:
        self.path = path or default_socket()
        # The C socket: socket.py's wrapper imports selectors and builds its enums, a
        # cost every CLI call would pay for nothing a line reader needs.
        self.sock = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
        self.buf = bytearray()  # bytes read and not yet returned, from ``pos``
        self.pos = 0
        self.limit = MAX_MAX_FRAME  # the longest frame we read: max_frame, once agreed
        try:
            self.sock = connect(self.sock, self.path)
        except OSError as exc:
            self.sock.close()
            raise Unreachable(self.path, exc) from None
        try:
            check_server(self.sock, self.path)
        except VenomxError:
            self.sock.close()
            raise
        self.ids = itertools.count(1)
        params: dict[str, Any] = {"protocol": PROTOCOL, "client": client}
        if max_frame is not None:  # else the daemon's protocol.max_frame, as for MCP
            params["max_frame"] = max_frame
        if token:
            params["token"] = token
        self.unsent = b""  # hello, while it waits for the first request (pipelined)
        self.answered: dict[str, Any] | None = None
        if pipelined:
            self.unsent = dumps({"id": 0, "verb": "hello", "params": params}) + b"\n"
        else:
            self.answered = self.take_greeting(self.call("hello", params, rid=0))
        if pin is not None:
            try:
                source = self.greeted()["source"]
                pin.check(self.path, peer_pid(self.sock), source, at_abstract(self.sock))
            except (VenomxError, OSError):
                self.sock.close()
                raise

    @property
    def hello(self) -> dict[str, Any]:
        return self.greeted()

    def greeted(self) -> dict[str, Any]:
        """hello's answer (read first if hello was pipelined); raises its error."""
        if self.answered is None:
            if self.unsent:
                self.send_bytes(b"")
            self.answered = self.take_greeting(self.response(0))
        return self.answered

    def take_greeting(self, result: dict[str, Any]) -> dict[str, Any]:
        """hello's result, checked; from now on no frame may be longer than it agreed."""
        self.limit = greeting(result)["max_frame"]
        return result

    def close(self) -> None:
        try:
            self.sock.close()
        except OSError:
            pass

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def send(self, frame: dict[str, Any]) -> None:
        self.send_bytes(dumps(frame) + b"\n")

    def send_bytes(self, data: bytes) -> None:
        data, self.unsent = self.unsent + data, b""
        try:
            self.sock.sendall(data)
        except OSError as exc:
            raise transport_error(f"connection lost: {exc}") from None

    def read(self) -> dict[str, Any]:
        buf = self.buf
        scan = self.pos  # where a newline may still be
        while (end := buf.find(b"\n", scan)) < 0:
            if self.pos:  # keep only the unread part before reading more
                del buf[: self.pos]
                self.pos = 0
            scan = len(buf)
            if scan > self.limit:  # no frame is longer: whatever sends it is not our daemon
                raise Malformed(f"a frame longer than max_frame {self.limit}")
            try:
                chunk = self.sock.recv(1 << 16)
            except OSError as exc:
                raise transport_error(f"connection lost: {exc}") from None
            if not chunk:
                raise transport_error("connection closed by the daemon")
            buf += chunk
        line = bytes(buf[self.pos : end + 1])
        self.pos = end + 1
        return reply_frame(line)

    def start(self, verb: str, params: dict[str, Any] | None = None, rid: int | None = None) -> int:
        rid = next(self.ids) if rid is None else rid
        self.send({"id": rid, "verb": verb, "params": params or {}})
        return rid

    def response(self, rid: int) -> dict[str, Any]:
        """Read until request ``rid`` is answered (stream items are skipped)."""
        if self.answered is None and rid != 0:
            self.greeted()  # answered first; a refused hello raises here
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
        if self.answered is None:
            self.greeted()  # answered first; a refused hello raises here
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
