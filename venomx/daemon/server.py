"""The socket server: accept, peer credentials, NDJSON frames, hello, cancel, replies.

Each connection is an ``asyncio.Protocol``: frames are split on newlines with max_frame
enforced while reading (an oversized frame is answered and discarded up to its newline),
bad frames are answered and survived, a request that waits runs as its own task so
``cancel`` and disconnect can end it (one that never waits is answered as it is read,
``dispatch``), and a client that does not read its replies is dropped
before its backlog can grow without bound. ``Listener`` accepts, and backs off while the
daemon is out of descriptors.
"""

from __future__ import annotations

import asyncio
import errno
import functools
import hmac
import logging
import math
import os
import re
import signal
import socket
from typing import TYPE_CHECKING, Any

from venomx import PROTOCOL, __version__, unixdiag
from venomx.daemon import ancestry
from venomx.daemon.dispatch import Context, dispatch, result_size, revoked
from venomx.daemon.readbuf import ReadsShared
from venomx.daemon.registry import Principal, token_key
from venomx.manifest.schema import validate
from venomx.manifest.verbs import verb_by_name
from venomx.wire import (
    DEFAULT_MAX_FRAME,
    ID_SCAN_BYTES,
    MAX_DEPTH,
    MIN_MAX_FRAME,
    JsonError,
    VenomxError,
    dumps,
    frame_id,
    loads,
)

if TYPE_CHECKING:
    from venomx.daemon.services import Services

log = logging.getLogger(__name__)
FRAMES_PER_TURN = 16  # frames of one connection handled in one reactor turn
TOKEN = re.compile(r"[0-9a-f]{64}")
BACKLOG_MIN = 8 * 1024 * 1024
# Peers of another uid at once. They reach only the abstract address (the path's
# directory is ours alone) and can never get past hello (denied.owner), so each gets one
# small frame answered and a few at a time may wait: none can tie up descriptors,
# memory or turns that our own clients need.
FOREIGN_MAX = 8
# Connections of another uid served per second on one listener; past that they are
# closed as they are accepted, which keeps the queue moving for our own clients.
FOREIGN_RATE = 32
ACCEPT_BATCH = 100  # connections accepted per wake-up, as asyncio's own server does
PAUSE_FIRST, PAUSE_MAX = 0.1, 1.0  # seconds without accepting after a failed accept
# The pending connection stays in the backlog: trying again at once fails the same way.
TRANSIENT = (BlockingIOError, InterruptedError, ConnectionAbortedError)
SO_PEERPIDFD = getattr(socket, "SO_PEERPIDFD", 77)  # Linux 6.5; Python 3.11 has no name


def connector_in_pane(sock: Any, pid: int, launched_in: frozenset[ancestry.Pane]) -> bool:
    """Whether the process that connected is a program started in a pane (``ancestry``),
    or cannot be told from one. ``SO_PEERCRED``'s pid is the connector's as of its connect, and once
    that process is gone the number may name another (a program could connect from a
    child that exits, and wait for an outsider to get its pid). The pidfd of
    ``SO_PEERPIDFD`` (Linux 6.5) names the connector itself, so the ancestry walk counts
    only if the connector is still there after it; a connector that has gone counts as
    a pane's. Kernels without it are left with the walk alone."""

    def in_a_pane(pid: int) -> bool:
        return ancestry.in_a_pane(pid, os.getpid(), launched_in)

    try:
        pidfd = sock.getsockopt(socket.SOL_SOCKET, SO_PEERPIDFD)
    except OSError as exc:
        if exc.errno in (errno.ESRCH, errno.EINVAL):
            return True  # the connector has gone
        return in_a_pane(pid)  # no SO_PEERPIDFD here, or out of descriptors
    try:
        if in_a_pane(pid):
            return True
        signal.pidfd_send_signal(pidfd, 0)
    except ProcessLookupError:
        return True  # gone since
    except PermissionError:
        pass  # there, but not ours to signal (a root client of a daemon that is not root)
    except OSError:
        return True  # cannot tell: as if gone
    finally:
        os.close(pidfd)
    return False


class Listener:
    """Accepts connections on the bound socket and makes each a ``Connection``.

    A failed accept (out of descriptors: ``EMFILE``, ``ENFILE``; or of kernel memory)
    stops accepting for PAUSE_FIRST seconds, doubling up to PAUSE_MAX while it keeps
    failing: the socket stays readable while a connection waits, so trying on every
    reactor turn would spin. Waiting clients stay in the backlog and are accepted once
    descriptors are free again (at most PAUSE_MAX later). The failure is logged as a
    warning, which the log's limiter lets through once a second.
    """

    def __init__(self, services: Services, sock: socket.socket) -> None:
        self.services = services
        self.sock = sock
        self.loop = asyncio.get_running_loop()
        self.pause = PAUSE_FIRST
        self.resuming: asyncio.TimerHandle | None = None
        self.opening: set[asyncio.Task[None]] = set()
        self.closed = False
        self.window, self.foreign = 0.0, 0  # this second's start, and its foreign accepts
        self.loop.add_reader(sock.fileno(), self.accept)

    def accept(self) -> None:
        for _ in range(ACCEPT_BATCH):
            try:
                conn, _ = self.sock.accept()
            except TRANSIENT:
                return  # nothing (more) waiting
            except OSError as exc:
                self.back_off(exc)
                return
            self.pause = PAUSE_FIRST
            try:
                pid, uid = unixdiag.peer_credentials(conn)
            except OSError:
                pid, uid = 0, -1
            if not self.admitted(uid):
                conn.close()
                continue
            task = self.loop.create_task(self.open(conn, pid, uid))
            self.opening.add(task)
            task.add_done_callback(self.opening.discard)

    async def open(self, conn: socket.socket, pid: int, uid: int) -> None:
        try:
            await self.loop.connect_accepted_socket(
                lambda: Connection(self.services, pid, uid), conn
            )
        except asyncio.CancelledError:
            conn.close()
            raise
        except Exception as exc:
            conn.close()
            log.warning("could not set up a connection: %s", exc)

    def admitted(self, uid: int) -> bool:
        """Whether to serve a connection from ``uid``: always for our uid and root; for
        another uid (who can never pass hello) only within ``FOREIGN_RATE`` a second,
        checked at accept, where refusing costs a close, not a transport and a task."""
        if unixdiag.mine(uid):
            return True
        now = self.loop.time()
        if now - self.window >= 1.0:
            self.window, self.foreign = now, 0
        self.foreign += 1
        return self.foreign <= FOREIGN_RATE

    def back_off(self, exc: OSError) -> None:
        self.loop.remove_reader(self.sock.fileno())
        log.warning(
            "accept failed: %s; accepting again in %d ms",
            errno.errorcode.get(exc.errno or 0, str(exc.errno)),
            self.pause * 1000,
        )
        self.resuming = self.loop.call_later(self.pause, self.resume)
        self.pause = min(self.pause * 2, PAUSE_MAX)

    def resume(self) -> None:
        self.resuming = None
        if not self.closed:
            self.loop.add_reader(self.sock.fileno(), self.accept)

    def close(self) -> None:
        """Stop accepting and close the socket; connections being set up are dropped."""
        if self.closed:
            return
        self.closed = True
        if self.resuming is not None:
            self.resuming.cancel()
            self.resuming = None
        self.loop.remove_reader(self.sock.fileno())
        self.sock.close()
        for task in self.opening:
            task.cancel()


class Connection(ReadsShared):
    """One client's conversation: framing, hello, cancel, a task per request that waits,
    and the peer's credentials."""

    def __init__(self, services: Services, peer_pid: int = 0, peer_uid: int = -1) -> None:
        """``peer_pid`` and ``peer_uid``: the connector, as ``SO_PEERCRED`` gave them at
        accept (uid -1: unknown, which is treated as another user's)."""
        self.services = services
        self.transport: asyncio.Transport | None = None
        self.buf = bytearray()
        self.scanned = 0  # bytes at the start of ``buf`` known to hold no newline
        self.discarding = False
        self.max_frame: int = min(DEFAULT_MAX_FRAME, services.config["protocol.max_frame"])
        self.principal: Principal | None = None
        self.peer_pid, self.peer_uid = peer_pid, peer_uid
        self.tasks: dict[int, asyncio.Task[None]] = {}
        self.closed = False
        self.draining = False  # a drain of the buffered frames is scheduled
        self.paused = False  # reading paused while buffered frames wait
        self.deferring = False  # this drain made a task: later requests wait their turn too

    # -- transport ---------------------------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        if not self.same_user:
            self.max_frame = MIN_MAX_FRAME
            if sum(not c.same_user for c in self.services.connections) >= FOREIGN_MAX:
                transport.abort()
                return
        elif not self.services.crowd.opened(self):
            log.warning("refusing a connection: the daemon is at its connection limit")
            transport.abort()
            return
        # told (resume_writing) when every reply written has been taken: the crowd
        # counts each connection's backlog
        transport.set_write_buffer_limits(high=0)
        self.services.connections.add(self)

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self.services.connections.discard(self)
        self.services.crowd.closed(self)
        self.buf.clear()
        self.account()
        for task in list(self.tasks.values()):
            task.cancel()

    def connector_in_pane(self) -> bool:
        assert self.transport is not None
        sock = self.transport.get_extra_info("socket")
        return connector_in_pane(sock, self.peer_pid, self.services.launched_in)

    @property
    def same_user(self) -> bool:
        return unixdiag.mine(self.peer_uid)

    def send(self, obj: dict[str, Any]) -> None:
        self.send_frame(dumps(obj))

    def send_frame(self, frame: bytes) -> None:
        """Write one frame, already encoded (``dumps``), and its newline; or several
        joined by newlines, in one write."""
        if self.closed or self.transport is None or self.transport.is_closing():
            return
        self.transport.write(frame + b"\n")
        backlog = self.transport.get_write_buffer_size()
        if backlog > max(BACKLOG_MIN, 4 * self.max_frame):
            self.drop("it does not read its replies")
            return
        if backlog:
            self.services.crowd.wrote(self, backlog)
            for slow in self.services.crowd.over_write():
                slow.drop(
                    "it has been behind on its replies for longest, and all together hold too much"
                )

    def resume_writing(self) -> None:
        """Every reply written has been taken by the client."""
        self.services.crowd.wrote(self, 0)

    # -- what the crowd asks of a connection ----------------------------------------------------
    def backlog(self) -> int:
        """Bytes written to this client and not yet taken by it (beyond the socket's)."""
        t = self.transport
        return 0 if t is None or t.is_closing() else t.get_write_buffer_size()

    def waiting(self) -> bool:
        """A request of its in flight or waiting its turn (closing it loses an answer);
        true of a closed one too, which there is no point in closing again."""
        return bool(self.tasks) or self.draining or self.closed

    def drop(self, why: str) -> None:
        log.warning("dropping a connection: %s", why)
        if self.transport is not None:
            self.transport.abort()
        self.closed = True
        self.buf.clear()
        self.account()
        self.services.crowd.closed(self)

    def account(self) -> None:
        """Tell the crowd how many bytes ``buf`` holds now."""
        self.services.crowd.held(self, 0 if self.closed else len(self.buf), not self.draining)

    def reply(self, rid: int | None, result: dict[str, Any]) -> None:
        self.tasks.pop(rid, None) if rid is not None else None
        frame = dumps({"id": rid, "ok": result})
        if len(frame) > self.max_frame:
            self.reply_error(rid, result_size(len(frame) - len(str(rid)) + 1, self.max_frame))
            return
        self.send_frame(frame)

    def reply_error(self, rid: int | None, err: VenomxError) -> None:
        if rid is not None:
            self.tasks.pop(rid, None)
        self.refuse_frame(rid, err)

    def refuse_frame(self, rid: int | None, err: VenomxError) -> None:
        """Answer without touching the table of requests in flight: a frame that is no
        request of its own (a bad one, a duplicate id, hello, cancel), whose id may be
        an in-flight request's, or a request already taken out of the table.

        An error is a reply too (foundation §2: ``max_frame`` bounds every frame, and a
        reply over it is never truncated): one that does not fit fails
        ``unsupported.result_size`` instead, as a result would."""
        frame = dumps({"id": rid, "error": err.to_dict()})
        if len(frame) > self.max_frame:
            size = result_size(len(frame) - len(str(rid)) + 1, self.max_frame)
            frame = dumps({"id": rid, "error": size.to_dict()})
        self.send_frame(frame)

    # -- framing ------------------------------------------------------------------------------
    def data_received(self, data: bytes | memoryview) -> None:
        if self.closed:
            return
        self.services.crowd.heard_from(self)
        self.buf += data
        if self.discarding:  # buf held nothing else: drop the rest of an over-long frame
            nl = self.buf.find(b"\n")
            if nl < 0:
                self.buf.clear()
                return
            del self.buf[: nl + 1]
            self.discarding = False
        if not self.draining:
            self.drain()
        else:
            self.account()
        # after the drain: the complete frames just read are handled and held no more
        most = self.services.config["protocol.max_frame"]
        while (over := self.services.crowd.over_read(most)) is not None:
            quiet, why = over
            quiet.drop(why)

    def drain(self) -> None:
        """Handle the complete frames buffered, at most ``FRAMES_PER_TURN`` per reactor
        turn: a client that pipelines a thousand starts must not hold up every other
        connection for the whole batch. Reading pauses while a backlog is left."""
        try:
            self.handle_buffered()
        finally:
            self.account()

    def handle_buffered(self) -> None:
        self.draining = False
        self.deferring = False
        handled = 0
        while not self.closed and not (self.transport is None or self.transport.is_closing()):
            # from where the last look stopped: a frame sent in small writes is scanned once
            nl = self.buf.find(b"\n", self.scanned)
            if nl < 0:
                self.scanned = len(self.buf)
                if len(self.buf) > self.max_frame:
                    rid = frame_id(bytes(self.buf[:ID_SCAN_BYTES]), self.max_frame)
                    self.buf.clear()
                    self.scanned = 0
                    self.discarding = True
                    self.frame_too_big(rid)
                self.reading(True)
                return
            if handled == FRAMES_PER_TURN:
                self.reading(False)
                self.draining = True
                asyncio.get_running_loop().call_soon(self.drain)
                return
            frame = bytes(self.buf[:nl])
            del self.buf[: nl + 1]
            self.scanned = 0
            handled += 1
            if len(frame) > self.max_frame:
                self.frame_too_big(frame_id(frame, self.max_frame))
                continue
            try:
                self.handle_frame(frame)
            except Exception:  # nothing a client sends may crash the daemon
                log.exception("frame handling failed")
                self.reply_error(None, VenomxError("internal", "internal error", {}))
            if not self.same_user:
                self.hang_up()

    def reading(self, on: bool) -> None:
        t = self.transport
        if t is None or t.is_closing() or on != self.paused:
            return
        self.paused = not on
        if on:
            t.resume_reading()
        else:
            t.pause_reading()

    @staticmethod
    def echo_id(rid: Any) -> Any:
        """What a bad id is answered with: the frame's own id when it is a short string, a
        finite number written as a float, or a boolean; null for anything else, including
        ``1e999`` (infinite: JSON cannot carry it back) and integers out of 64-bit range."""
        if isinstance(rid, float) and not math.isfinite(rid):
            return None
        return rid if isinstance(rid, (str, float, bool)) and len(str(rid)) <= 64 else None

    def frame_too_big(self, rid: int | None) -> None:
        # its id (if one could be read) may be a request's in flight: answered, not popped
        self.refuse_frame(
            rid,
            VenomxError(
                "invalid_request.frame_size",
                f"frame exceeds max_frame {self.max_frame}",
                {"max_frame": self.max_frame},
            ),
        )
        if not self.same_user:
            self.hang_up()

    def hang_up(self) -> None:
        """Close once the answers written so far have gone out: a peer of another uid
        has had its one frame answered (it can never get further)."""
        if self.transport is not None:
            self.transport.close()

    def handle_frame(self, frame: bytes) -> None:
        try:
            obj = loads(frame)
        except JsonError as exc:
            data: dict[str, Any] = {"reason": exc.reason}
            if exc.reason == "depth":
                data["max_depth"] = MAX_DEPTH
            self.reply_error(None, VenomxError("invalid_request.json", f"frame is {exc}", data))
            return
        if not isinstance(obj, dict):
            self.reply_error(
                None, VenomxError("invalid_request.frame", "frame is not a JSON object", {})
            )
            return
        rid = obj.get("id")
        if type(rid) is not int or not -(2**63) <= rid < 2**63:
            self.send(
                {
                    "id": self.echo_id(rid),
                    "error": VenomxError(
                        "invalid_request.id", "id must be an integer of at most 64 bits", {}
                    ).to_dict(),
                }
            )
            return
        name = obj.get("verb")
        verb = verb_by_name(name) if isinstance(name, str) else None
        if verb is None:
            shown = name[:64] if isinstance(name, str) else None
            why = (
                f"unknown verb {shown}"
                if shown is not None
                else "verb missing"
                if name is None
                else "verb must be a string"
            )
            self.refuse_frame(rid, VenomxError("invalid_request.verb", why, {"verb": shown}))
            return
        params = obj.get("params", {})
        if verb.name == "hello":
            self.hello(rid, params)
            return
        if self.principal is None:
            self.refuse_frame(
                rid, VenomxError("invalid_request.hello", "hello must be the first request", {})
            )
            return
        if verb.name == "cancel":
            self.cancel(rid, params)
            return
        if rid in self.tasks:
            self.refuse_frame(
                rid, VenomxError("invalid_request.id", f"id {rid} is already in flight", {})
            )
            return
        self.services.collector.requests += 1
        pending = dispatch(Context(self.services, self, verb, rid), params, not self.deferring)
        if pending is None:  # answered already
            return
        self.deferring = True
        task = asyncio.get_running_loop().create_task(pending)
        self.tasks[rid] = task
        task.add_done_callback(functools.partial(self.request_done, rid, verb.name))
        if self.services.lifecycle.closing:  # past end_requests: ended as they were
            task.cancel()

    def request_done(self, rid: int, verb: str, task: asyncio.Task[None]) -> None:
        unanswered = self.tasks.get(rid) is task  # an answer takes it out of the table
        if unanswered:
            del self.tasks[rid]
        if task.cancelled() and unanswered:  # cancelled before its first step
            p = self.principal
            if p is not None and p.revoked:
                self.refuse_frame(rid, revoked(self.services.audit, p, verb, None))
            else:
                self.refuse_frame(rid, VenomxError("cancelled", "request cancelled", {}))

    # -- hello and cancel -----------------------------------------------------------------------
    def hello(self, rid: int, raw: Any) -> None:
        verb = verb_by_name("hello")
        assert verb is not None
        if self.principal is not None:
            self.refuse_frame(
                rid, VenomxError("invalid_request.hello", "hello was already sent", {})
            )
            return
        try:
            params = validate(verb, raw)
            principal = self.identify(params.get("token"))
        except VenomxError as exc:
            if exc.code.startswith("denied."):
                outsider = not self.same_user
                self.services.audit.append(None, "hello", exc.code, None, outsider)
            self.refuse_frame(rid, exc)
            return
        most = self.services.config["protocol.max_frame"]  # foundation §2: the default too
        self.max_frame = min(params.get("max_frame", most), most)
        self.principal = principal
        self.send(
            {
                "id": rid,
                "ok": {
                    "protocol": PROTOCOL,
                    "server": f"venomx/{__version__}",
                    "source": self.services.source,
                    "principal": None if principal.anonymous else principal.id,
                    "max_frame": self.max_frame,
                },
            }
        )

    def identify(self, token: str | None) -> Principal:
        reg = self.services.registry
        if not self.same_user:
            raise VenomxError("denied.owner", "peer is not the daemon's user", {})
        if token is None:
            # Without this, any run could read every other run by leaving its token out.
            return self.services.anonymous(in_pane=self.connector_in_pane())
        if token == "@owner":
            if self.connector_in_pane():
                # a program in a pane shares our uid; it acts with its pane's token
                raise VenomxError(
                    "denied.owner",
                    "@owner is not accepted from a process started in a pane "
                    "(of this daemon or another venomx daemon): use a token this "
                    "daemon issued, such as its pane's VENOMX_TOKEN",
                    {},
                )
            return self.services.owner
        pid = reg.tokens.get(token_key(token)) if TOKEN.fullmatch(token) else None
        p = reg.principals.get(pid) if pid else None
        if p is None or p.revoked or p.token is None or not hmac.compare_digest(p.token, token):
            raise VenomxError("denied.token", "unknown or revoked token", {})
        return p

    def cancel(self, rid: int, raw: Any) -> None:
        verb = verb_by_name("cancel")
        assert verb is not None
        try:
            params = validate(verb, raw)
        except VenomxError as exc:
            self.refuse_frame(rid, exc)
            return
        task = self.tasks.get(params["id"])
        if task is not None and not task.done():
            task.cancel()
            self.send({"id": rid, "ok": {"cancelled": True}})
        else:
            self.send({"id": rid, "ok": {"cancelled": False}})
