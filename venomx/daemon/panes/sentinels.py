"""The daemon side of the fork server and of each sentinel's channel.

The fork server is started once at boot; each pane start asks it for a sentinel by
passing one end of a fresh socketpair. A ``Channel`` carries msgpack frames both ways
without ever blocking the reactor; messages that arrive before the pane is committed are
held and replayed to the pane's handler afterwards, in order.
"""

from __future__ import annotations

import asyncio
import errno
import logging
import os
import resource
import signal
import socket
import sys
from collections import deque
from collections.abc import Awaitable, Callable, Container, Iterable
from typing import TYPE_CHECKING, TypeVar

from venomx.daemon.cgroups import children
from venomx.daemon.panes.reaps import Reaps
from venomx.daemon.procfs import PPID, SESSION, session_of, stat_fields, stopped
from venomx.daemon.readbuf import ReadsShared
from workers import inherited
from workers import protocol as P

if TYPE_CHECKING:
    from venomx.daemon.registry import Pane

log = logging.getLogger(__name__)
# How long a request may wait for a pane's sentinel (capture, resize, attach, doctor's
# ping) before it fails unavailable.sentinel: a busy VT answers well within this.
SENTINEL_BOUND = 5.0
# Spare sentinels kept ready at rest (``spawn.spares_min``'s default), and the count at
# which a batch refills a pool of that size: enough slack that spares made at low
# priority keep up with back-to-back starts (measured). A burst that finds the pool short
# grows it, one spare per start forked on demand, up to ``spawn.spares_max`` (and one
# spare per 16 descriptors the daemon may open); each ``spawn.spares_idle_ms`` without
# such a start halves the growth and stops the surplus.
SPARES, LOW_WATER = 6, 3
# Out of descriptors, the pool (and a fork server that died) is tried again this often,
# so it recovers on its own once descriptors are free; a start forks on demand meanwhile.
RETRY = 1.0
# How long a restart waits for the reserve to report the fork server it made (a few
# forks; longer only if a program stopped it).
PROMOTE_WAIT = 1.0
# A pool left short of its size, but above its low-water mark, is topped up this long
# after the start that took a spare: the starts of that moment then share one batch.
TOP_UP = 0.5
FD_ERRNOS = frozenset({errno.EMFILE, errno.ENFILE})
# How often a start looks whether its sentinel has been stopped while it waits on it.
STOP_CHECK = 0.5
# How long a start waits on its sentinel's answer (HELLO, READY, STARTED) in all, then
# gives up on it whatever holds it: a healthy one answers in milliseconds, under a burst
# of a thousand starts in seconds.
START_BOUND = 30.0
T = TypeVar("T")


# A process a start waits on: its pid, what it is (for the log), and how to end it.
Watched = tuple[int, str, Callable[[int], object]]


async def unstopped(
    watched: Callable[[], Iterable[Watched]],
    aw: Awaitable[T],
    give_up: Callable[[], object] | None = None,
    bound: float = START_BOUND,
) -> T:
    """``aw``, a sentinel's answer during a start, while nothing keeps what it waits on
    stopped. Any program of our uid can SIGSTOP a sentinel (the new leader itself before
    the sentinel reports STARTED, or another pane's program at any moment) or, before the
    sentinel exists, the fork server, its intermediate or the new sentinel before HELLO,
    and a start must never wait on it forever. Each found stopped (looked at every
    ``STOP_CHECK`` seconds of waiting, so a quick answer costs one timer) is continued
    once; found stopped again, it is taken as lost and ended: the channel it holds
    closes, and ``aw`` fails as for a sentinel that died. ``watched`` gives what to look
    at now: the sentinel once it said HELLO, else ``ForkServer.forking``. Past ``bound``
    in all, ``give_up`` is called once (it must make ``aw`` fail): what holds a sentinel
    need not be a stop (a frozen cgroup, a leader stopped out of sight: helper-147)."""
    loop = asyncio.get_running_loop()
    continued: set[int] = set()
    handle: asyncio.TimerHandle | None = None
    until = loop.time() + bound

    def check() -> None:
        nonlocal handle, give_up
        if give_up is not None and loop.time() >= until:
            log.error("a start's sentinel did not answer within %.0f s: given up", bound)
            give_up()
            give_up = None
        for pid, what, end in watched():
            if not stopped(pid):
                continue
            if pid in continued:
                log.error("the %s (pid %d) was stopped again: ended", what, pid)
                end(pid)
                continue
            continued.add(pid)
            log.warning("the %s (pid %d) was stopped: continued", what, pid)
            try:
                os.kill(pid, signal.SIGCONT)
            except OSError:
                pass  # gone since
        handle = loop.call_later(STOP_CHECK, check)

    handle = loop.call_later(STOP_CHECK, check)
    try:
        return await aw
    finally:
        if handle is not None:
            handle.cancel()


def kill_stopped(
    pid: int, sessions: Container[int], greeted: Container[int] = ()
) -> list[int] | None:
    """End a stopped sentinel and the process groups of its children (its leader leads
    its own): while it is stopped it reaps nothing, so their IDs are pinned and safe to
    signal. Its channel then closes; the daemon reaps what re-parents to it. Returns its
    children: a leader forked before the daemon heard of it (STARTED, or HELLO for a
    sentinel that read its SPAWN first), whose reap must not be taken for an escapee.

    None, and nothing signalled, unless ``pid`` is, now, stopped, in one of ``sessions``
    (a fork server's, ``ForkServer.live_sessions``) and either a child of ours or a
    sentinel ``greeted`` (said HELLO, not reaped since): the number was looked at up to a
    check ago, and a program may have had the process continued, killed and its number
    given to one of its own since (helper-144). Neither can be reaped but by us (an
    intermediate, a greeted sentinel's other parent, reaps nothing), so what is checked
    here is what is signalled."""
    ours = _stopped_child(pid) or (pid in greeted and stopped(pid))
    if not ours or session_of(pid) not in sessions:
        return None
    found = children(pid)
    for child in found:
        try:
            os.killpg(child, signal.SIGKILL)
        except OSError:
            pass  # not a group leader (nothing of a leader's yet): killed alone below
        _kill(child)
    _kill(pid)
    return found


def end_before_exec(sentinel: int, child: int, greeted: Container[int]) -> bool:
    """End a sentinel's child that was kept stopped before its exec, and the sentinel.
    The sentinel's ``posix_spawn`` (a vfork) waits for that exec, so it answers nothing,
    is never itself stopped, and the child holds a copy of its channel: a start would
    wait for ever (helper-146). The child is signalled through a pidfd that shows it is
    still the sentinel's, the sentinel only while ``greeted`` (its number its own). False
    if nothing was done."""
    if sentinel not in greeted or not _kill_child_of(child, sentinel):
        return False
    _kill(sentinel)
    return True


def _kill_child_of(pid: int, parent: int, session: int | None = None) -> bool:
    """SIGKILL ``pid`` only while it is, now, ``parent``'s child (and in ``session``):
    checked and signalled through one pidfd, so both are of the same process, whatever
    the number was before. False if it was not."""
    try:
        fd = os.pidfd_open(pid)
    except OSError:
        return False
    try:
        fields = stat_fields(pid)
        if int(fields[PPID]) != parent or (session is not None and int(fields[SESSION]) != session):
            return False
        signal.pidfd_send_signal(fd, signal.SIGKILL)
        return True
    except (OSError, ValueError):
        return False
    finally:
        os.close(fd)


def _stopped_child(pid: int) -> bool:
    """Whether our child ``pid`` is stopped, as our wait would report it without taking
    the report: a system call, where reading its ``/proc`` stat costs 25 times more (a
    burst has hundreds of new sentinels)."""
    try:
        return os.waitid(os.P_PID, pid, os.WSTOPPED | os.WNOHANG | os.WNOWAIT) is not None
    except OSError:
        return False  # not ours (any more)


def descendants(pid: int) -> list[int]:
    """Every process below ``pid``, children before their own."""
    found: list[int] = []
    todo = children(pid)
    while todo and len(found) < 64:
        found.append(child := todo.pop(0))
        todo += children(child)
    return found


def in_session(session: int, pids: Iterable[int]) -> set[int]:
    """Those of ``pids`` (our unreaped children: what is read of them holds) that are in
    ``session`` now."""
    return {pid for pid in pids if session_of(pid) == session}


def _kill(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGKILL)
    except OSError:
        pass


async def read_exactly(sock: socket.socket, size: int) -> bytes:
    """``size`` bytes from a non-blocking ``sock``; ConnectionError if it closes first."""
    loop = asyncio.get_running_loop()
    got = b""
    while len(got) < size:
        part = await loop.sock_recv(sock, size - len(got))
        if not part:
            raise ConnectionError("the reserve is gone")
        got += part
    return got


class ForkServer:
    """The fork server process, and spare sentinels forked ahead of the next starts.

    A fork of the (large, Python) fork server costs milliseconds of page-table and
    copy-on-write work; keeping spares means a start never waits for one, and keeping
    more than one means a burst of starts does not catch up with the refill. The pool is
    sized by demand: ``base`` at rest, grown by every start that had to fork its own
    sentinel (a CI runner's next burst then finds them ready, made while its last one
    ran), shrunk again after ``shrink_after`` seconds without one.
    """

    def __init__(self, most: int, idle_ms: int, least: int = SPARES) -> None:
        """``most``, ``idle_ms`` and ``least``: ``spawn.spares_max``,
        ``spawn.spares_idle_ms`` and ``spawn.spares_min``."""
        self.pid = 0
        # A dead fork server's session, and its members among our children: the session
        # is forgotten with its last member, as its number is then free for any process
        # to be given and to make a session of (``setsid``) once the pids wrap.
        self.draining: dict[int, set[int]] = {}
        self.control: socket.socket | None = None
        # Fork requests the fork server's socket has not taken yet, each with the
        # sentinels' ends it passes: a stopped fork server reads nothing, and a blocking
        # send would then hold the reactor, and with it the timer that ends the stop.
        self.outbox: deque[tuple[bytes, list[socket.socket]]] = deque()
        # Sentinels that said HELLO and that we have not reaped since: each number is
        # pinned to its sentinel until then (its parent is us, or an intermediate, which
        # reaps nothing), so only these are trusted as spares, or noted as retired.
        self.greeted: set[int] = set()
        # every reap, so that a number a HELLO gave is trusted only if not reaped since
        # its channel was made (``greet``)
        self.reaps = Reaps()
        # The soft RLIMIT_NOFILE every sentinel, and so every pane's leader, starts with
        # (the daemon's own, before it raised it); None: ours (``handed``).
        self.nofile: int | None = None
        # What the daemon hands each fork server (limits, nice value, policy, CPUs, I/O
        # priority): its own, as the first fork server was started; see ``start``.
        self.inherits: inherited.Baseline | None = None
        # Why a new fork server may not be started now, or None: set by the pane owner
        # (processes that panes started are alive); see ``start``.
        self.unsafe: Callable[[], str | None] = lambda: None
        self.waiting = False  # a restart waits on ``unsafe``: said once in the log
        # our end of the fork server's reserve (``workers.forkserver.keep_reserve``), and
        # the reserve of a dead one taking over (``promote``)
        self.reserve: socket.socket | None = None
        self.promoting: asyncio.Task[None] | None = None
        # children reaped while a promotion waits (pid: wait status): a program may kill
        # what the reserve made before its report names it
        self.meanwhile: dict[int, int] = {}
        # the pane owner's handler of a reaped child, for a new one found so
        self.exited: Callable[[int, int], object] = lambda pid, status: None
        self.size = self.base = SPARES
        self.shrinking: asyncio.TimerHandle | None = None
        # ours, ended on purpose, until they are reaped: surplus spares, and new sentinels
        # a start killed (with any leader they forked)
        self.retired: set[int] = set()
        self.looked_at, self.seen_forking = float("-inf"), list[Watched]()  # ``forking``
        self.spares: list[Channel] = []
        self.filling: asyncio.Task[None] | None = None
        self.again = False
        self.recycling: set[asyncio.Task[None]] = set()
        self.demand: list[asyncio.Future[socket.socket]] = []  # starts waiting for a fork
        self.retries: dict[str, asyncio.TimerHandle] = {}
        self.down: OSError | None = None  # why the fork server could not be restarted
        self.deaths = 0  # deaths while it served (killed, crashed, ended kept stopped)
        self.last_death: dict[str, object] | None = None  # when, and its exit_code or signal
        self.configure(most, idle_ms, least)

    def start(self) -> None:
        """Start the fork server (raises OSError, e.g. out of descriptors).

        A new one inherits the daemon's limits and scheduling as they are now, and any
        process of our uid may have changed them (``prlimit`` on the daemon, then a
        fork server made to exit): every later run would have started with them, its
        outcome decided by a program long gone (SIGXFSZ, a CPU limit's SIGKILL) and
        nothing saying so. So the daemon puts back its own values as the first fork
        server got them, and refuses (EPERM) while it cannot: starts then fail, doctor
        says why, and it is tried again every RETRY seconds.

        And a new fork server is dumpable from its exec until it makes itself not so,
        ~100 ms of imports later: a program of our uid that killed the last one could
        trace it or write its memory in that window, and so decide every later run
        (helper-139 did, 3 times of 3). So after the first, one is started only while no
        process a pane started is alive (``unsafe``); until then starts fail (EAGAIN)
        and doctor says why."""
        first = self.inherits is None
        if self.inherits is None:
            self.inherits = inherited.now()
        elif not inherited.restore(self.inherits):
            raise OSError(
                errno.EPERM,
                "the daemon's own limits or scheduling were changed by another process "
                "past repair (restart the daemon)",
            )
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        kept: socket.socket | None = None
        try:
            if not first and (why := self.unsafe()) is not None:
                raise OSError(errno.EAGAIN, f"a new fork server waits until {why}")
            kept, keeps = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
            os.set_inheritable(theirs.fileno(), True)
            os.set_inheritable(keeps.fileno(), True)
            env = dict(os.environ)
            root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
            env["PYTHONPATH"] = root + (":" + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
            # -P: ``-m`` would put our working directory (also panes' default cwd, which
            # a pane program may write to) first on the fork server's import path, and a
            # planted msgpack.py would run in every sentinel after the next restart.
            argv = [
                sys.executable,
                "-P",
                "-m",
                "workers.forkserver",
                str(theirs.fileno()),
                inherited.encode(self.handed()),
                str(keeps.fileno()),
            ]
            # A session of its own from the start, so its imports already run outside the
            # daemon's autogroup (venomx.daemon.priority) and no terminal reaches it.
            self.pid = os.posix_spawn(sys.executable, argv, env, setsid=True)
        except BaseException:
            ours.close()
            if kept is not None:
                kept.close()
            raise
        finally:
            theirs.close()
            if kept is not None:
                keeps.close()
        self.connect(ours)
        self.keep(kept)

    def connect(self, control: socket.socket) -> None:
        control.setblocking(False)
        self.control = control

    def disconnect(self) -> None:
        """Close the control socket (the fork server died, or the daemon stops)."""
        if self.control is not None:
            self.drop_outbox()
            self.control.close()
            self.control = None

    def drop_outbox(self) -> None:
        """What waits to be sent is never forked: each start sees its new channel close."""
        if self.outbox and self.control is not None:
            asyncio.get_running_loop().remove_writer(self.control.fileno())
        for _, socks in self.outbox:
            for sock in socks:
                sock.close()
        self.outbox.clear()

    def keep(self, reserve: socket.socket | None) -> None:
        if self.reserve is not None:
            self.reserve.close()
        self.reserve = reserve

    def end_reserves(self) -> None:
        """Kill the reserves among our children (a stopped one that could not take over:
        it would otherwise count as a process a pane left behind, and keep a fork server
        from being started afresh). Ours: titled so, in a fork server's session, which
        only our own code can be in."""
        live = self.live_sessions()
        for pid in children(os.getpid()):
            try:
                with open(f"/proc/{pid}/cmdline", "rb") as f:
                    title = f.read().rstrip(b"\0").decode(errors="replace")
            except OSError:
                continue
            if title == P.RESERVE_TITLE and session_of(pid) in live:
                # What it forked first (its intermediate, a fork server half made): a
                # program may have stopped them too, and a stopped one never exits. None
                # of them is reaped before the reserve is (neither waits for a child).
                for ours in [*descendants(pid), pid]:
                    self.retired.add(ours)
                    _kill(ours)

    async def promote(self, reserve: socket.socket) -> None:
        """Make the dead fork server's reserve the fork server: a copy of it made before
        it served, never exec'd and so never open to a tracer, unlike one started afresh
        (see ``start``). It is a few forks away, and a program may have stopped the
        reserve: the reactor goes on meanwhile, and starts that need a fork wait for it
        (``fork_demand``). One that does not report within PROMOTE_WAIT is ended, and a
        fork server started afresh by ``start``'s rules."""
        pairs: list[socket.socket] = []
        try:
            ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
            pairs += (ours, theirs)
            kept, keeps = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
            pairs += (kept, keeps)
            reserve.setblocking(False)
            socket.send_fds(reserve, [b"R"], [theirs.fileno(), keeps.fileno()])
            async with asyncio.timeout(PROMOTE_WAIT):
                report = await read_exactly(reserve, P.RESERVE_REPORT.size)
        except BaseException as exc:
            self.promoting = None
            self.meanwhile = {}
            failed = isinstance(exc, (OSError, TimeoutError))
            if failed:  # before its sockets close: what it made would exit, unseen as ours
                self.end_reserves()
            reserve.close()
            for sock in pairs:
                sock.close()
            if not failed:
                raise  # cancelled: the daemon stops
            log.error("the fork server's reserve cannot take over: %s", str(exc) or "no report")
            self.restart_afresh()
            return
        self.promoting = None
        gone, self.meanwhile = self.meanwhile, {}
        theirs.close()
        keeps.close()
        old, mid, new = P.RESERVE_REPORT.unpack(report)
        # Both wait to be ended (``keep_reserve``): the new one is our child from here.
        for pid in (mid, old):
            if pid not in gone:  # not reaped, so still this process: a program killed it
                self.retired.add(pid)
                _kill(pid)
        reserve.close()
        self.pid = new
        self.connect(ours)
        self.keep(kept)
        if new in gone:
            # Killed and reaped before the report named it, so before it was told to make
            # a session of its own: its pid has been free since, and a session of that
            # number may be any process's (helper-142 had its own made so, to be taken
            # for ours). Its death, with no session of its to wait out.
            self.exited(new, gone[new])
            return
        try:
            ours.send(P.TAKE_OVER)  # before any request: the socket is empty
        except OSError:
            pass  # dead already: its reap says so
        self.served()

    def handed(self) -> inherited.Baseline:
        """What a fork server is told to hand every sentinel: the daemon's baseline with
        the soft RLIMIT_NOFILE the daemon was started with (it raised its own to the hard
        limit, and a program using select() breaks with descriptors above 1024)."""
        assert self.inherits is not None
        if self.nofile is None:
            return self.inherits
        limits, nice, policy, cpus, io = self.inherits
        at = inherited.RESOURCES.index(resource.RLIMIT_NOFILE)
        soft, hard = self.nofile, limits[at][1]
        if hard != resource.RLIM_INFINITY and not 0 <= soft <= hard:
            soft = hard
        return ((*limits[:at], (soft, hard), *limits[at + 1 :]), nice, policy, cpus, io)

    def fork(self, n: int = 1, spare: bool = False) -> list[socket.socket]:
        """Channels to ``n`` brand-new sentinels (each will send HELLO first); ``spare``
        for the pool, which the fork server may make at low priority."""
        assert 1 <= n <= P.FORK_BATCH_MAX
        if self.control is None:
            if self.down is not None:  # a restart failed (out of descriptors): say why
                raise OSError(self.down.errno, self.down.strerror)
            raise ConnectionError("the fork server is not running")
        pairs: list[tuple[socket.socket, socket.socket]] = []
        try:
            for _ in range(n):  # out of descriptors, the pairs made so far are closed
                pairs.append(socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM))
            if not self.outbox and self.send(b"S" if spare else b"F", [t for _, t in pairs]):
                return [ours for ours, _ in pairs]
        except OSError:
            for pair in pairs:
                for sock in pair:
                    sock.close()
            raise
        if not self.outbox:  # the socket is full: the fork server reads no more for now
            asyncio.get_running_loop().add_writer(self.control.fileno(), self.flush)
        self.outbox.append((b"S" if spare else b"F", [theirs for _, theirs in pairs]))
        return [ours for ours, _ in pairs]

    def send(self, kind: bytes, theirs: list[socket.socket]) -> bool:
        """Pass ``theirs`` to the fork server (closing ours of them); False if its socket
        is full."""
        assert self.control is not None
        try:
            socket.send_fds(self.control, [kind], [sock.fileno() for sock in theirs])
        except BlockingIOError:
            return False
        for sock in theirs:
            sock.close()
        return True

    def flush(self) -> None:
        """The fork server's socket takes more: send what waits, in order (or drop it
        all, the fork server being gone: its reap restarts it)."""
        assert self.control is not None
        while self.outbox:
            kind, theirs = self.outbox[0]
            try:
                if not self.send(kind, theirs):
                    return
            except OSError:
                self.drop_outbox()
                return
            self.outbox.popleft()
        asyncio.get_running_loop().remove_writer(self.control.fileno())

    def fork_one(self) -> asyncio.Future[socket.socket]:
        """A channel to a brand-new sentinel for a start that found no spare. Every start
        of one reactor turn is forked in the same batches (one request to the fork server
        per ``FORK_BATCH_MAX``): a burst of N starts costs N/8 fork requests, not N."""
        fut: asyncio.Future[socket.socket] = asyncio.get_running_loop().create_future()
        self.grow()
        self.demand.append(fut)
        if len(self.demand) == 1:
            asyncio.get_running_loop().call_soon(self.fork_demand)
        return fut

    def fork_demand(self) -> None:
        if self.promoting is not None:  # a fork server comes soon: ``served`` forks these
            return
        demand, self.demand = self.demand, []
        demand = [f for f in demand if not f.done()]  # a start cancelled meanwhile
        for i in range(0, len(demand), P.FORK_BATCH_MAX):
            part = demand[i : i + P.FORK_BATCH_MAX]
            try:
                socks = self.fork(len(part), spare=len(demand) > 1)
            except OSError as exc:
                for f in part:
                    f.set_exception(exc)
                continue
            for f, sock in zip(part, socks, strict=True):
                if f.done():
                    sock.close()
                else:
                    f.set_result(sock)

    def configure(self, most: int, idle_ms: int, least: int = SPARES) -> None:
        """Apply ``spawn.spares_max``, ``spawn.spares_idle_ms`` and ``spawn.spares_min``:
        the pool rests at ``least`` spares (6), or at ``most`` if that is lower (0: every
        start forks its sentinel). Above 6, ``least`` is held to one spare per 16
        descriptors the daemon may open, as growth is. A pool now above ``most``, or a
        rest lowered, stops the surplus at once."""
        soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
        if least > SPARES and soft != resource.RLIM_INFINITY:
            least = max(SPARES, min(least, soft // 16))
        old, self.most = self.base, most
        self.base = min(least, most)
        if self.base < old:
            self.size = self.base
        self.shrink_after = idle_ms / 1000
        if self.shrinking is not None:  # the quiet spell now lasts the new time
            self.shrink_later()
        self.size = max(self.base, min(self.size, most))
        self.retire_surplus()
        if self.control is not None:
            self.refill()

    @property
    def low(self) -> int:
        """The count at which a batch refills the pool: half of it (3 of 6 at rest)."""
        return self.size * LOW_WATER // SPARES

    def grow(self) -> None:
        """A start found no spare: the pool holds one more from now on, up to ``most``
        and one per 16 descriptors we may open (spares hold one each, and panes need
        theirs), and shrinks only ``shrink_after`` seconds after the last such start."""
        soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
        most = self.most if soft == resource.RLIM_INFINITY else min(self.most, soft // 16)
        self.size = max(self.size, min(self.size + 1, most))
        self.shrink_later()

    def shrink_later(self) -> None:
        """Start the quiet spell again: a grown pool shrinks ``shrink_after`` from now."""
        if self.shrinking is not None:
            self.shrinking.cancel()
            self.shrinking = None
        if self.size > self.base:
            loop = asyncio.get_running_loop()
            self.shrinking = loop.call_later(self.shrink_after, self.shrink)

    def shrink(self) -> None:
        """Halve the growth after a quiet spell, and stop the spares beyond the new size:
        each holds ~1.4 MiB and a descriptor that nothing is likely to need soon."""
        self.shrinking = None
        self.size = (self.size + self.base) // 2
        self.retire_surplus()
        self.shrink_later()

    def retire_surplus(self) -> None:
        while len(self.spares) > self.size:
            self.retire(self.spares.pop())

    def greet(self, chan: Channel, pid: int) -> bool:
        """``chan``'s sentinel said HELLO as ``pid``: its own number until we reap it.
        False, and nothing noted, if ``pid`` may have been reaped since the channel was
        made: the HELLO is read turns before it is acted on, and by then the sentinel
        may be dead and its number a program's process (helper-146). Such a channel is
        one whose sentinel died."""
        if self.reaps.since(pid, chan.born):
            log.warning("a sentinel (pid %d) was reaped before its HELLO was taken", pid)
            return False
        chan.sentinel_pid = pid
        self.greeted.add(pid)
        return True

    def retire(self, chan: Channel) -> None:
        """Stop a spare on purpose (or let one go that died): it exits when its channel
        closes, before any SPAWN, and its reap is then known for what it is. Only a
        sentinel ``greeted`` and not reaped since is noted: its number is still its own,
        running or a zombie, our child or an intermediate's; one already reaped may be
        anyone's, a program's process handed to us included (helper-144, helper-145). A
        stopped one (SIGSTOP from a program of our uid) never sees its channel close, so
        it is killed: it is still ours."""
        pid = chan.sentinel_pid
        chan.close()
        if pid not in self.greeted:
            return
        if stopped(pid):
            _kill(pid)
        self.retired.add(pid)

    def live_sessions(self) -> set[int]:
        """The sessions only our own processes can be in, as they are now: the fork
        server's (its number is its pid, ours until we reap it), and each dead one's
        while a member of ours is still in it. A member is our unreaped child, so what
        is read of it holds; one that left (a leader a program stopped before its
        ``setsid`` and let go) is no member, and a session all have left may be free for
        any program to make (helper-145)."""
        live = {self.pid} if self.pid else set()
        live.update(s for s, members in self.draining.items() if in_session(s, members))
        return live

    def was_retired(self, pid: int) -> bool:
        """Whether ``pid``, just reaped, was ours and ended on purpose (``retire``,
        ``end_new``)."""
        if pid in self.retired:
            self.retired.discard(pid)
            return True
        return False

    @property
    def spare_pids(self) -> set[int]:
        return {chan.sentinel_pid for chan in self.spares}

    def forking(self, known: Container[int]) -> list[Watched]:
        """What a fork goes through until its sentinel says HELLO, where it is stopped
        now: the fork server, its intermediates, and the sentinels they made that have
        not said HELLO (neither a spare nor in ``known``) once their intermediate exited
        and they are ours (one stopped before is found then: a running intermediate
        exits when its batch is forked, and a stopped one is continued first). Looked
        for once per half ``STOP_CHECK`` for all starts waiting on a fork (a burst has
        hundreds, and nothing is stopped); a stopped process cannot fork, exit or be
        reaped, so its pid holds."""
        now = asyncio.get_running_loop().time()
        if now - self.looked_at < STOP_CHECK / 2:
            return self.seen_forking
        ours: list[Watched] = []
        if self.pid:
            ours.append((self.pid, "fork server", self.end_forkserver))
            ours += [
                (mid, "fork server's intermediate", self.end_intermediate)
                for mid in children(self.pid)
            ]
        found = [w for w in ours if stopped(w[0])]
        said = self.spare_pids
        live = self.live_sessions()
        for pid in children(os.getpid()):
            if pid == self.pid or pid in said or pid in known or pid in self.retired:
                continue
            if _stopped_child(pid) and session_of(pid) in live:
                found.append((pid, "new sentinel", self.end_new))
        self.looked_at, self.seen_forking = now, found
        return found

    def end_new(self, pid: int) -> None:
        """Kill a new sentinel, before the daemon read its HELLO, with any leader it forked
        (its SPAWN waits in the socket from the start): their reaps (ours) are then known
        as a spare's, not taken for processes that escaped a pane. (What ``forking``
        found may be another process by now: ``kill_stopped`` looks again.)"""
        ended = kill_stopped(pid, self.live_sessions())
        if ended is not None:
            self.retired.update([pid, *ended])

    def end_forkserver(self, pid: int) -> None:
        if pid == self.pid:  # still the one we have: our child, unreaped
            _kill(pid)

    def end_intermediate(self, pid: int) -> None:
        """Only while it is, now, the fork server's child in its session (the fork server
        reaps its intermediates: the number may be another process's by now)."""
        if self.pid:
            _kill_child_of(pid, self.pid, session=self.pid)

    def refill(self) -> None:
        """Fork spares in the background, a batch at a time, until there are enough."""
        if self.control is None or len(self.spares) >= self.size:
            return
        if self.filling is not None and not self.filling.done():
            self.again = True  # asked again meanwhile (a spare died): fill up once more
            return

        async def hello(chan: Channel) -> Channel:
            msg = await chan.expect(P.Hello)
            if not isinstance(msg, P.Hello):
                raise ConnectionError("the new sentinel failed")
            if not self.greet(chan, msg.pid):
                raise ConnectionError("the new sentinel died")
            return chan

        async def fill() -> None:
            while self.control is not None and len(self.spares) < self.size:
                # batches until the pool is full; a straggling start only adds another once
                # the pool is low again, so each intermediate process serves several
                self.again = False
                socks: list[socket.socket] = []
                chans: list[Channel] = []
                try:
                    born = self.reaps.count
                    socks = self.fork(
                        min(P.FORK_BATCH_MAX, self.size - len(self.spares)), spare=True
                    )
                    for sock in socks:
                        chans.append(await Channel.open(sock, born))
                    got = await asyncio.gather(*map(hello, chans), return_exceptions=True)
                except OSError as exc:
                    for sock in socks[len(chans) :]:
                        sock.close()
                    got = [exc]
                except asyncio.CancelledError:
                    # The pool stops (shutdown). None of these is a spare yet;
                    # each exits once its channel closes, which would otherwise wait for
                    # the daemon's own exit (and keep our cgroup subtree until then).
                    for chan in chans:
                        self.retire(chan)
                    for sock in socks[len(chans) :]:
                        sock.close()
                    raise
                failed = [g for g in got if not isinstance(g, Channel)]
                for chan in chans:
                    if chan in got and chan.sentinel_pid not in self.greeted:
                        chan.close()  # reaped since its HELLO: the number is anyone's now
                    elif chan in got and self.control is not None and len(self.spares) < self.size:
                        self.retired.discard(chan.sentinel_pid)
                        self.spares.append(chan)
                    elif chan in got:  # the pool shrank meanwhile
                        self.retire(chan)
                    else:
                        chan.close()
                if failed:  # starts fork on demand instead
                    log.warning("could not fork a spare sentinel: %s", failed[0])
                    if isinstance(failed[0], OSError) and failed[0].errno in FD_ERRNOS:
                        self.later("refill", self.refill)
                    return
                if len(self.spares) >= self.size and not self.again:
                    return

        self.filling = asyncio.ensure_future(fill())

    def take(self) -> Channel | None:
        """A live spare, if one is ready. The pool is refilled only once a spare is used
        up (``used``): one given back after a failed exec (``recycle``) costs nothing."""
        while self.spares:
            chan = self.spares.pop(0)
            if chan.closed.done():
                # died before its reap was seen: when it comes, it is this spare's, not an
                # escapee's
                log.warning("a spare sentinel (pid %d) died before use", chan.sentinel_pid)
            elif stopped(chan.sentinel_pid):  # it would never answer the start: retired
                log.warning("a spare sentinel (pid %d) is stopped: ended", chan.sentinel_pid)
            else:
                return chan
            self.retire(chan)
        return None

    def used(self) -> None:
        """A sentinel left the pool for good (it serves a pane, or was stopped): refill
        in one batch once few are left, else top it up shortly (in one batch with the
        starts of that moment), so a pool at rest always holds its size."""
        if len(self.spares) <= self.low:
            self.refill()
        elif len(self.spares) < self.size:
            self.later("top up", self.refill, TOP_UP)

    def recycle(self, chan: Channel) -> None:
        """Take back a sentinel whose start failed before any process existed: it says
        HELLO again and is a spare like any other (no process is replaced)."""

        async def back() -> None:
            # Whatever keeps it from the pool (it died, failed, the pool is full or
            # stopping), it is retired: it exits, and its reap is a spare's.
            try:
                hello = await chan.expect(P.Hello)
            except ConnectionError:
                self.retire(chan)
                return
            except asyncio.CancelledError:
                self.retire(chan)
                raise
            if (
                isinstance(hello, P.Hello)
                and self.greet(chan, hello.pid)
                and self.control is not None
                and len(self.spares) < self.size
            ):
                self.retired.discard(hello.pid)
                self.spares.append(chan)
                return
            self.retire(chan)  # died, failed, or surplus (the pool is full)

        task = asyncio.ensure_future(back())
        self.recycling.add(task)
        task.add_done_callback(self.recycling.discard)

    def lost(self, pid: int) -> bool:
        """Forget the spare with this pid, which exited; False if it was not a spare."""
        for chan in self.spares:
            if chan.sentinel_pid == pid:
                self.spares.remove(chan)
                chan.close()
                return True
        return False

    def later(self, name: str, what: Callable[[], None], delay: float = RETRY) -> None:
        """Run ``what`` in ``delay`` seconds (once, however often asked meanwhile)."""
        if name not in self.retries:

            def again() -> None:
                del self.retries[name]
                what()

            self.retries[name] = asyncio.get_running_loop().call_later(delay, again)

    def died(self, pid: int, fields: dict[str, object], at: str) -> None:
        """The fork server ``pid`` died while it served (``fields``: its exit_code or
        signal, ``at``: when), killed, crashed, or ended by us for being kept stopped:
        kept for doctor, which otherwise shows only the one that replaced it."""
        self.deaths += 1
        self.last_death = {"at": at, **fields}
        self.restart()

    def before_reap(self, pid: int) -> None:
        """``pid``, a child of ours, has exited and is not reaped yet. What hangs on a
        session number it holds is settled now, while it holds it: once reaped, the number
        may be free, and a program could make a session of it (``setsid``) before a look
        taken after the reap, and have its process counted as ours (helper-143 did).

        A fork server's session lasts as long as its members (intermediates, reserves,
        the sentinels of panes it started): all our children by now or children of one of
        them, since each was forked in it and one whose parent exited was re-parented to
        us (a subreaper) before that parent's exit could be reaped."""
        self.reaps.note(pid)
        if pid == self.pid:  # none if it never made its own (killed before TAKE_OVER)
            if others := self.members(pid, but=pid):
                self.draining[pid] = others
            return
        for session, members in self.draining.items():
            if pid not in members:
                continue
            if session_of(pid) != session:  # it left (``live_sessions``): no member
                members.discard(pid)
                if not members:
                    del self.draining[session]
                return
            # the last still in it, as we knew them: any other is one, for certain, now
            still = in_session(session, members - {pid})
            self.draining[session] = {pid, *(still or self.members(session, but=pid))}
            return

    def members(self, session: int, but: int) -> set[int]:
        return in_session(session, set(children(os.getpid())) - {but})

    def leftover(self) -> set[int]:
        """Processes of ours not yet reaped that serve nothing: those ended on purpose,
        and those a dead fork server left that are still in its session."""
        return self.retired.union(*(in_session(s, m) for s, m in self.draining.items()))

    def reaped(self, pid: int, status: int) -> bool:
        """A child of ours was reaped: its number is forgotten wherever it was trusted,
        whatever else it was reaped as (kept past its reap, it would make its next
        holder, any program's process, ours: helper-144). True if it was ours ended on
        purpose (``retired``) or a member of a dead fork server's session (an
        intermediate the fork server left forking, say, is no escapee); the last member
        ends the session."""
        if self.promoting is not None:
            self.meanwhile[pid] = status
        self.greeted.discard(pid)
        retired = self.was_retired(pid)
        for session, members in list(self.draining.items()):
            if pid in members:
                members.discard(pid)
                if not members:  # looked for others before this reap (``before_reap``)
                    del self.draining[session]
                return True
        return retired

    def report(self) -> dict[str, object]:
        """Doctor's ``fork_server`` section."""
        out: dict[str, object] = {"pid": self.pid, "restarts": self.deaths}
        if self.last_death is not None:
            out["last_exit"] = self.last_death
        return out

    def restart(self) -> None:
        """A new fork server after the old one died: its reserve, else one started afresh;
        spare sentinels do not need it."""
        self.disconnect()
        reserve, self.reserve = self.reserve, None
        if reserve is not None:
            self.promoting = asyncio.ensure_future(self.promote(reserve))
        else:
            self.restart_afresh()

    def restart_afresh(self) -> None:
        """Out of descriptors, or while a fresh one is not safe (``start``), it is tried
        again every RETRY seconds (starts fail meanwhile)."""
        try:
            self.start()
        except OSError as exc:
            if exc.errno != errno.EAGAIN:
                log.error("cannot restart the fork server: %s", exc)
            elif not self.waiting:
                log.warning("not restarting the fork server yet: %s", exc.strerror)
            self.waiting = exc.errno == errno.EAGAIN
            self.down = exc
            self.later("restart", self.restart_afresh)
            self.fork_demand()  # what waited on the reserve fails now, saying why
            return
        self.served()

    def served(self) -> None:
        """A fork server serves again: the pool refills, and waiting starts are forked."""
        self.down = None
        self.waiting = False
        self.refill()
        if self.demand:
            self.fork_demand()

    def stop(self) -> None:
        """The daemon stops: the fork server, its reserve and what they are forking are
        ended (each would exit once its socket closes, but a program may have stopped
        it, and it would then outlive the daemon), and so is a reserve taking over."""
        if self.pid:
            for pid in [*descendants(self.pid), self.pid]:
                _kill(pid)
        self.end_reserves()
        if self.shrinking is not None:
            self.shrinking.cancel()
            self.shrinking = None
        for handle in self.retries.values():
            handle.cancel()
        self.retries.clear()
        if self.promoting is not None:
            self.promoting.cancel()
        for task in self.recycling:
            task.cancel()
        for chan in self.spares:
            self.retire(chan)
        self.spares.clear()
        if self.filling is not None:
            self.filling.cancel()
        self.disconnect()
        self.keep(None)


class Channel(ReadsShared):
    """One sentinel's channel; ``handler`` receives messages once the pane exists."""

    def __init__(self) -> None:
        self.decoder = P.Decoder()
        self.transport: asyncio.Transport | None = None
        self.handler: Callable[[P.Message], None] | None = None
        self.held: list[P.Message] = []
        self.waiters: list[tuple[tuple[type[P.Message], ...], asyncio.Future[P.Message]]] = []
        self.closed = asyncio.get_running_loop().create_future()
        self.sentinel_pid = 0
        self.born = 0  # ``Reaps.count`` when its socketpair was made (``open``)
        # Told the leader's pid the moment STARTED arrives, before the start commits: the
        # leader may exit and be reaped by the daemon before the spawn resumes.
        self.on_started: Callable[[int], None] | None = None
        self.broken = False  # it sent something that is not a valid frame
        self.on_broken: Callable[[], None] | None = None

    @classmethod
    async def open(cls, sock: socket.socket, born: int) -> Channel:
        """A channel over ``sock``, which it now owns (closed if this fails); ``born``:
        ``Reaps.count`` from before ``sock``'s fork was asked for."""
        loop = asyncio.get_running_loop()
        try:
            _, proto = await loop.create_unix_connection(cls, sock=sock)
        except BaseException:
            sock.close()
            raise
        proto.born = born
        return proto

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport

    def data_received(self, data: P.Buffer) -> None:
        try:
            msgs = self.decoder.feed(data)
        except P.ProtocolError as exc:
            # Never data: the sentinel has failed, and whoever owns it must say so.
            log.error("bad sentinel frame: %s", exc)
            self.fail()
            return
        for m in msgs:
            try:
                self.deliver(m)
            except Exception:
                # A fault of ours; raised from here, asyncio would close the channel.
                log.exception("handling a sentinel's %s failed", type(m).__name__)
                self.fail()
                return

    def fail(self) -> None:
        """Stop reading a channel that can no longer be trusted. A pane's owner kills the
        sentinel first (``on_broken``), so the pane's record says venomx lost it: closing
        the channel would let a running sentinel reap its leader while the pane is live."""
        self.broken = True
        if self.on_broken is not None and self.transport is not None:
            self.transport.pause_reading()
            self.on_broken()
        else:
            self.close()

    def deliver(self, m: P.Message) -> None:
        if isinstance(m, P.Started) and self.on_started is not None:
            self.on_started(m.pid)
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


class PaneGone(Exception):
    """The pane exited or lost its sentinel while a request to it was in flight."""

    def __init__(self, pane: Pane) -> None:
        super().__init__(pane.id)
        self.pane = pane
