"""One sentinel per pane: the PTY, the leader, its wait status and the pane's VT.

Lifecycle: HELLO -> (SPAWN) open the PTY and hold the barrier -> READY -> (RELEASE)
posix_spawn the leader as a session leader on the PTY -> STARTED or FAILED -> read loop
-> leader exit: waitid(WNOWAIT) while the group is still pinned, SIGKILL sweep of the
group, drain the PTY, EXIT with the wait status, the final state and the leader's usage,
reap once the daemon closes the channel -> exit. If the daemon's channel closes while the
leader runs, the pane's group gets SIGHUP, then SIGKILL after 2 s, and the sentinel exits.
Everything that can block or burn CPU for a pane happens here, never in the daemon.
Must not import ``venomx``.
"""

from __future__ import annotations

import _socket
import errno
import os
import select
import signal
import socket
import sys
import time
from collections import deque
from typing import Any, NoReturn

from workers import inherited, title, tracer
from workers import protocol as P
from workers.leader import (
    end_of_file,
    exit_usage,
    open_fds,
    resolve,
    set_winsize,
    spawn_leader,
)
from workers.osc import Scanner
from workers.rows import EpochConflict, TooLarge, blank_snapshot, capture, repaint
from workers.screen import DECCKM
from workers.vt import ANSWERS_MAX, UNSTATE, Terminal

DRAIN_SILENCE = 0.05
DRAIN_MAX = 1.0
# Output a drain reads at most: several times what a PTY buffers (~68 KiB), so all the
# leader left, and bounded. The first DRAIN_KEPT bytes read (the leader's last output
# comes first) are always taken in; what an escaped writer added after them only for
# DRAIN_PARSE seconds, so the EXIT stays well inside the daemon's bound on it
# (watch.EXIT_BOUND) however slow that output is to parse.
DRAIN_BYTES = 1 << 18
DRAIN_KEPT = 1 << 17
DRAIN_PARSE = 1.0
LOSS_GRACE = 2.0
POLL_WITHOUT_PIDFD = 0.05
# An answer the program has not taken by then is dropped, as keystrokes are
# (requests.INPUT_BOUND): a late cursor report would be read as typing.
ANSWER_BOUND = 5.0
READ_SIZE = 1 << 17
# A plain int: ``|`` of the socket module's flag enums builds a new enum member in every
# sentinel (``Flag._missing_``): ~10 page faults of enum machinery for one peek.
PEEK_NOW = int(socket.MSG_PEEK | socket.MSG_DONTWAIT)
# The daemon's defaults: the size of a pane that never asked for another.
DEFAULT_COLS, DEFAULT_ROWS, DEFAULT_SCROLLBACK = 80, 24, 10000
# Set by the fork server: the nice value a spare returns to once prepared (spares are
# made at the lowest priority), or None where that return is not permitted (spares are
# then never lowered).
SERVE_NICE: int | None = None
# A terminal the fork server builds before it freezes its heap, never fed: the first
# pane of each sentinel takes it instead of building its own, because building one
# writes to (and so copies) hundreds of KiB of shared pages in every pane.
BLANK_TERMINAL: Terminal | None = None
# Likewise a decoder for the channel, never fed: building even a small one in each pane
# copied ~40 KiB more of shared pages there (measured, 100 panes).
BLANK_DECODER: P.Decoder | None = None
# The largest reply any client may agree to (hello's max_frame): a capture that would be
# larger is counted, not built, and never sent in a frame the channel would refuse.
CAPTURE_BUDGET = 16 * 1024 * 1024
# Set by the fork server: the daemon's pid, every sentinel's parent (its subreaper).
DAEMON_PID = 0
# Set by the fork server: the limits and scheduling it was started with, which every
# leader gets whatever another process of our uid set on us since (``inherited``).
BASELINE: inherited.Baseline | None = None


def set_title(pane: str) -> None:
    title.set_title(P.SENTINEL_TITLE + pane)


class Sentinel:
    """One pane's sentinel: its channel to the daemon, the PTY, the VT and the leader it
    waits for."""

    def __init__(self, sock: _socket.socket) -> None:
        global BLANK_DECODER
        self.sock = sock
        decoder, BLANK_DECODER = BLANK_DECODER, None
        self.decoder = decoder or P.Decoder()
        self.pending: list[P.Message] = []
        self.pane = "?"
        self.master = -1
        self.leader = 0
        self.term: Terminal | None = None  # built at the first byte or request (``vt``)
        self.size = (DEFAULT_COLS, DEFAULT_ROWS, DEFAULT_SCROLLBACK)
        self.scanner = Scanner()
        self.streaming = False
        self.replay = bytearray()  # the last output bytes, ending at the VT's offset
        # INPUT requests not yet fully written: [req, data, until_ms, written]
        self.input: deque[list[Any]] = deque()
        # The channel, the PTY and the leader's pidfd (readable once it has exited); epoll
        # itself rather than ``selectors``, whose Python layer copies pages in every pane.
        self.poll = select.epoll()
        self.pidfd = -1
        self.channel_open = True
        self.exited: os.waitid_result | None = None
        self.exited_ns = 0  # when we saw it (CLOCK_MONOTONIC); 0 until then
        # When the pidfd said the leader had exited but ``waitid`` did not show it: a
        # tracer holds its zombie (``tracer``), and is killed past tracer.GRACE.
        self.hidden_since: float | None = None

    # -- channel ---------------------------------------------------------------------------
    def send(self, msg: P.Message) -> None:
        if not self.channel_open:
            return
        try:
            self.sock.sendall(P.encode(msg))
        except OSError:
            self.channel_open = False

    def recv(self) -> list[P.Message]:
        """Messages available now; sets ``channel_open`` False on EOF or a bad frame."""
        try:
            data = self.sock.recv(1 << 16)
        except OSError:
            data = b""
        if not data:
            self.channel_open = False
            return []
        try:
            return self.decoder.feed(data)
        except P.ProtocolError:
            self.channel_open = False
            return []

    def next_message(self) -> P.Message | None:
        """Block until one message arrives (used before the leader exists)."""
        while not self.pending:
            if not self.channel_open:
                return None
            self.pending.extend(self.recv())
        return self.pending.pop(0)

    # -- lifecycle -------------------------------------------------------------------------
    @property
    def vt(self) -> Terminal:
        """The pane's terminal, built when first needed: a pane that never writes a byte
        (and is never resized or read) costs no pyte screen at all."""
        if self.term is None:
            global BLANK_TERMINAL
            term, BLANK_TERMINAL = BLANK_TERMINAL, None
            if term is None:
                term = Terminal(*self.size)
            else:
                term.reshape(*self.size)
            self.term = term
        return self.term

    def final_state(self) -> dict[str, Any]:
        if self.term is None:
            return blank_snapshot(*self.size[:2])
        return self.term.snapshot()

    def prepare(self) -> None:
        """As a spare, before HELLO: walk the paths a start takes, short of starting
        anything. After a fork each first write to a page copies it, and in a VM each
        such fault is costly; taking them here keeps them off the start itself."""
        sample = P.Spawn("p0", ["true"], {"PATH": "/"}, "/", 80, 24, 0, True)
        self.decoder.feed(P.encode(sample) + P.encode(P.Ready()) + P.encode(P.Started(0)))
        title.set_title(P.SPARE_TITLE)  # the title it already has
        resolve("true", sample.env)
        open_fds()
        try:
            set_winsize(self.poll.fileno(), 80, 24)  # not a terminal: fails, having run its code
        except OSError:
            pass

    def spawn_waiting(self) -> bool:
        """Whether a start is waiting on the channel already: this sentinel was forked for
        it, not as a spare. Warming up the start path first would only add to that start
        (~0.45 ms of CPU and ~23 more pages copied: ``prepare`` walks paths a start never
        takes, such as decoding the messages a sentinel only sends)."""
        try:
            return bool(self.sock.recv(1, PEEK_NOW))
        except OSError:  # nothing yet; anything worse, the start itself finds
            return False

    def run(self) -> NoReturn:
        # titled SPARE_TITLE from birth (the intermediate set it) until SPAWN
        if not self.spawn_waiting():
            self.prepare()
        if SERVE_NICE is not None and os.getpriority(os.PRIO_PROCESS, 0) != SERVE_NICE:
            os.setpriority(os.PRIO_PROCESS, 0, SERVE_NICE)
        while not self.start():
            pass  # that start failed before any process existed: a spare again
        os.set_blocking(self.master, False)
        self.loop()

    def start(self) -> bool:
        """HELLO, then one SPAWN: True once the leader runs; False after FAILED, when no
        process of the start ever existed (the sentinel is then a spare again)."""
        self.send(P.Hello(os.getpid()))
        msg = self.next_message()
        if not isinstance(msg, P.Spawn):
            os._exit(0)
        if BASELINE is not None and not inherited.restore(BASELINE):
            # changed by another process past repair, before anything started: our exit
            # makes the daemon retire us and fork a sentinel for this start
            os._exit(0)
        self.pane = msg.pane
        self.size = (msg.cols, msg.rows, msg.scrollback)
        set_title(msg.pane)
        slave_fd = -1
        try:
            try:
                os.chdir(msg.cwd)
                self.master, slave_fd = os.openpty()
                set_winsize(self.master, msg.cols, msg.rows)
                if msg.eof:
                    end_of_file(slave_fd)
                slave = os.ttyname(slave_fd)
            except OSError as exc:
                return self.failed(exc)
            self.send(P.Ready())
            if not msg.release:
                go = self.next_message()
                if not isinstance(go, P.Release):
                    os._exit(0)
            if BASELINE is not None and not inherited.restore(BASELINE):
                # changed while the start waited at its barrier
                self.failed(OSError(errno.EPERM, "limits lowered by another process"))
                os._exit(0)  # no spare again: the next start would find the same
            try:
                self.leader = spawn_leader(msg.argv, msg.env, slave, msg.cgroup, msg.cgroup_home)
            except OSError as exc:
                return self.failed(exc)
            try:
                # Our unreaped child, so its pid cannot be reused: the pidfd is its own.
                self.pidfd = os.pidfd_open(self.leader)
            except OSError:
                self.pidfd = -1  # the loop then looks for its exit every POLL_WITHOUT_PIDFD
        finally:
            if slave_fd >= 0:
                os.close(slave_fd)
        self.send(P.Started(self.leader))
        return True

    def failed(self, exc: OSError) -> bool:
        """Undo the start (nothing ran), become a spare again, then report FAILED."""
        if self.master >= 0:
            os.close(self.master)
            self.master = -1
        os.chdir("/")
        self.pane = "?"
        self.size = (DEFAULT_COLS, DEFAULT_ROWS, DEFAULT_SCROLLBACK)
        title.set_title(P.SPARE_TITLE)
        self.send(P.Failed(errno.errorcode.get(exc.errno or 0, "EIO")))
        return False

    def loop(self) -> NoReturn:
        chan, master, poll = self.sock.fileno(), self.master, self.poll
        poll.register(chan, select.EPOLLIN)
        poll.register(master, select.EPOLLIN)
        if self.pidfd >= 0:
            poll.register(self.pidfd, select.EPOLLIN)  # wakes us when the leader exits
        for m in self.pending:
            self.handle(m)
        self.pending.clear()
        while True:
            if self.leader_exited():
                self.finish()
            if not self.channel_open:
                self.daemon_lost()
            if self.hidden_since is not None:
                if time.monotonic() - self.hidden_since >= tracer.GRACE:
                    tracer.end_tracers(self.leader)
                    self.hidden_since = time.monotonic()
            timeout = self.input_timeout()
            if self.pidfd < 0 or self.hidden_since is not None:
                timeout = (
                    POLL_WITHOUT_PIDFD if timeout is None else min(timeout, POLL_WITHOUT_PIDFD)
                )
            events = poll.poll(timeout)
            # the daemon's messages first: a FREEZE must stop input before the terminal,
            # ready in the same pass, takes more of it
            for fd, _ in events:
                if fd == chan:
                    for m in self.recv():
                        self.handle(m)
            for fd, ev in events:
                if fd == master:
                    # a hang-up or an error wakes both sides, as ``selectors`` reports it
                    if ev & ~select.EPOLLOUT:
                        self.read_pty()
                    if ev & ~select.EPOLLIN:
                        self.write_pty()
                elif fd == self.pidfd and not self.leader_exited():
                    # exited, yet not there for us to wait on: it is traced. Looked at
                    # every POLL_WITHOUT_PIDFD from now on (the pidfd stays readable).
                    poll.unregister(fd)
                    self.hidden_since = time.monotonic()
            if self.input and self.input_timeout() == 0:
                self.write_pty()  # a deadline passed with the PTY still full

    def leader_exited(self) -> bool:
        """Whether the leader has exited (it stays an unreaped zombie: WNOWAIT)."""
        for _ in range(8):  # a few stops in a row at most, then the next pass
            if self.exited is not None:
                return True
            try:
                info = os.waitid(os.P_PID, self.leader, os.WEXITED | os.WNOHANG | os.WNOWAIT)
            except ChildProcessError:  # pragma: no cover - only we could have reaped it
                return True
            if info is None:
                return False
            if info.si_code in tracer.ENDED:
                self.exited = info
                self.exited_ns = time.monotonic_ns()
            else:
                tracer.let_go(self.leader, info)
        return self.exited is not None

    def read_pty(self) -> bool:
        """Read and take in one chunk; False at EOF/EIO (every slave fd closed) or nothing
        to read."""
        data = self.read_chunk()
        if data:
            self.consume(data)
        return bool(data)

    def read_chunk(self) -> bytes:
        """One chunk of output; empty at EOF/EIO (then ``master_eof``) or nothing to read."""
        try:
            data = os.read(self.master, READ_SIZE)
        except BlockingIOError:
            return b""
        except OSError:
            data = b""
        if not data:
            self.closed_terminal()
        elif self.master_eof:  # the terminal was opened again (``closed_terminal``)
            self.master_eof = False
            self.watch_master()
        return data

    def closed_terminal(self) -> None:
        """Every fd of the terminal's slave side is closed (EIO). The program may open it
        again (``/dev/tty``) while it lives: a program that closed fds 0-2 for a moment
        left its pane blind, its later output missing from a record that said
        ``complete`` (session 24). So the master stays watched, edge-triggered, which
        wakes us when output comes again instead of on every pass while it is hung up.
        (Modifying it again would report the hang-up again at once: only the first EIO
        does.)"""
        if self.master_eof:
            return
        self.master_eof = True
        try:
            self.poll.modify(self.master, select.EPOLLIN | select.EPOLLET)
        except OSError:
            pass

    def watch_master(self) -> None:
        events = select.EPOLLIN | (select.EPOLLOUT if self.input else 0)
        try:
            self.poll.modify(self.master, events)
        except OSError:
            pass

    master_eof = False  # no slave fd is open now (see ``closed_terminal``)
    answering = 0  # bytes of answers queued as input
    application_keys = False  # DECCKM, as last told to the daemon
    frozen = False  # FREEZE: the pane is terminating, nothing more reaches its program

    def consume(self, data: bytes) -> None:
        term = self.vt
        term.feed(data)
        if term.answers:
            self.answer(bytes(term.answers))
            term.answers.clear()
        application = DECCKM in term.screen.mode
        if application is not self.application_keys:
            self.application_keys = application
            self.send(P.Keypad(application))
        off = term.offset
        for ob in self.scanner.feed(data, off):
            self.send(P.Marker(ob.what, ob.offset, ob.exit_code, ob.state))
        if self.streaming:
            self.send(P.Output(data, off))
        # The latest output, for an attach that resumes after an offset; trimmed in halves
        # so each byte is moved at most once on average.
        replay = self.replay
        replay += data
        if len(replay) > 2 * P.REPLAY_BYTES:
            del replay[: len(replay) - P.REPLAY_BYTES]

    def answer(self, data: bytes) -> None:
        """Queue the terminal's answers to the program's queries as its input, in order
        with keystrokes and dropped at a deadline like them; never more than
        ``ANSWERS_MAX`` bytes of them at once, so a program that asks without reading
        cannot make the sentinel hold more."""
        if self.frozen or self.master_eof or self.answering + len(data) > ANSWERS_MAX:
            return
        self.answering += len(data)
        until_ms = int((time.monotonic() + ANSWER_BOUND) * 1000)
        self.input.append([None, data, until_ms, 0])
        self.write_pty()

    def input_timeout(self) -> float | None:
        """Until the oldest pending input's deadline, when it must be dropped."""
        if not self.input:
            return None
        until: int = self.input[0][2]
        return max(0.0, until / 1000.0 - time.monotonic())

    def write_pty(self) -> None:
        """Write pending input in order; each request is answered once it is all written,
        or at its deadline with what was written (the rest is dropped, never sent late)."""
        now_ms = time.monotonic() * 1000.0
        while self.input:
            entry = self.input[0]
            req, data, until_ms, written = entry
            if written < len(data) and now_ms < until_ms and not self.frozen:
                # tried while no slave is open too: one may be again (``closed_terminal``)
                try:
                    entry[3] = written + os.write(self.master, data[written : written + 65536])
                    self.master_eof = False
                    continue
                except BlockingIOError:
                    break
                except OSError:
                    self.closed_terminal()
            self.input.popleft()
            if req is None:
                self.answering -= len(data)
            else:
                self.send(P.Wrote(req, written))
        if not self.master_eof:
            self.watch_master()

    def handle(self, m: P.Message) -> None:
        if isinstance(m, P.Input):
            self.input.append([m.req, m.data, m.until_ms, 0])
            self.write_pty()
        elif isinstance(m, P.Freeze):
            self.frozen = True
            self.write_pty()
        elif isinstance(m, P.Resize):
            set_winsize(self.master, m.cols, m.rows)
            self.vt.resize(m.cols, m.rows)
            self.send(P.Resized(m.cols, m.rows, self.vt.epoch, m.req))
        elif isinstance(m, P.Ping):
            self.send(P.Pong(m.req))
        elif isinstance(m, P.Stream):
            self.streaming = m.on
            if m.on:
                term = self.vt
                held = term.offset - len(self.replay)
                if held <= m.after <= term.offset:
                    tail = bytes(self.replay[m.after - held :])
                    self.send(P.Screen(m.req, term.cols, term.rows, term.offset, tail, True))
                else:
                    # and its modes: the attached terminal then sends what the program
                    # expects and draws what follows as it does (the replayed bytes
                    # carry them themselves)
                    screen = UNSTATE + repaint(term) + term.restate()
                    self.send(P.Screen(m.req, term.cols, term.rows, term.offset, screen))
        elif isinstance(m, P.Capture):
            try:
                res = capture(self.vt, m.epoch, m.start, m.end, m.limit, CAPTURE_BUDGET)
                self.send(P.Rows(m.req, res))
            except EpochConflict as exc:
                self.send(P.Rows(m.req, {}, {"code": "conflict.epoch", "epoch": exc.epoch}))
            except TooLarge as exc:
                error = {"code": "unsupported.result_size", "lines": exc.lines}
                self.send(P.Rows(m.req, exc.result, error))

    def signal_group(self, sig: int) -> None:
        # Only while the leader is unreaped: its zombie pins the group ID.
        try:
            os.killpg(self.leader, sig)
        except OSError:
            pass

    def drain(self) -> None:
        """Read what the PTY holds now: until EIO, 50 ms of silence, 1 s in all or
        ``DRAIN_BYTES``; then take it in. The bound is on reading, not on the terminal's
        work: the leader's last bytes (at most what the kernel's buffers hold when it
        exits, read first) are never cut short by a slow parse, only an escaped
        process's endless writing is, and what it wrote past ``DRAIN_KEPT`` is taken in
        for ``DRAIN_PARSE`` at most."""
        # Read at least once even after an EIO: the program may have opened its terminal
        # again and written its last output since (``closed_terminal``).
        self.master_eof = False
        os.set_blocking(self.master, False)
        deadline = time.monotonic() + DRAIN_MAX
        quiet_since = time.monotonic()
        waiter = select.poll()
        waiter.register(self.master, select.POLLIN)
        held: list[bytes] = []
        size = 0
        while not self.master_eof and size < DRAIN_BYTES:
            now = time.monotonic()
            if now >= deadline or now - quiet_since >= DRAIN_SILENCE:
                break
            data = self.read_chunk()
            if data:
                held.append(data)
                size += len(data)
                quiet_since = time.monotonic()
            elif not self.master_eof:
                waiter.poll(1000 * min(DRAIN_SILENCE - (now - quiet_since), deadline - now))
        taken = 0
        until = time.monotonic() + DRAIN_PARSE
        for data in held:
            if taken >= DRAIN_KEPT and time.monotonic() >= until:
                break  # an escaped writer's output, too slow to take in: not the leader's
            self.consume(data)
            taken += len(data)

    def finish(self) -> NoReturn:
        """Sweep, drain, send EXIT, and reap the leader only once the daemon has taken it.

        Until the daemon closes the channel (it does so in the turn it ends the pane) the
        leader stays an unreaped zombie, so its pid, and its group ID, cannot be reused
        while the daemon may still signal the group itself. Its usage is therefore read
        from the zombie without reaping it; a zombie waits for nothing, so it is final.
        """
        usage = exit_usage(self.leader)
        self.signal_group(signal.SIGKILL)
        self.drain()
        for req, _data, _until, written in self.input:
            if req is not None:
                self.send(P.Wrote(req, written))
        replay = bytes(self.replay[-P.REPLAY_BYTES :])
        status = P.wait_status(self.exited)
        self.send(P.Exit(status, self.final_state(), usage, replay, self.exited_ns))
        self.sock.setblocking(True)
        while self.channel_open:
            self.recv()  # requests that crossed EXIT: the daemon answers them itself
        os.waitpid(self.leader, 0)
        os._exit(0)

    def daemon_lost(self) -> NoReturn:
        """The channel closed before EXIT: stop the pane's group (HUP, 2 s, KILL), reap the
        leader if the daemon is gone, exit."""
        self.signal_group(signal.SIGCONT)
        self.signal_group(signal.SIGHUP)
        deadline = time.monotonic() + LOSS_GRACE
        while time.monotonic() < deadline and not self.leader_exited():
            self.poll.poll(0.05)
            if not self.master_eof:
                self.read_pty()
        self.signal_group(signal.SIGKILL)
        if os.getppid() != DAEMON_PID:
            self.reap_killed_leader()
        # else the daemon lives and closed the channel of a live pane, which only a fault
        # of its own does: the leader is left for it to reap, so that the record has the
        # real wait status and the leader's group cannot be reused while it may signal it
        os._exit(0)

    def reap_killed_leader(self) -> None:
        """Reap the leader our SIGKILL ends, killing a tracer that hides its zombie."""
        waiter = select.poll()
        if self.pidfd >= 0:
            waiter.register(self.pidfd, select.POLLIN)
        while True:
            try:
                if os.waitpid(self.leader, os.WNOHANG)[0]:
                    return
            except ChildProcessError:
                return
            if self.pidfd < 0 or waiter.poll(1000 * tracer.GRACE):
                tracer.end_tracers(self.leader)  # exited, yet hidden from our wait
                time.sleep(POLL_WITHOUT_PIDFD)


def warm_up() -> None:
    """Run a pane's hot paths once, with no OS side effects, in the fork server.

    The first call of many Python paths (pyte's screen set-up and dispatch, msgpack,
    regular expressions) costs far more than later ones; paying it once before the fork
    server forks makes every sentinel start on warm code instead of paying it per pane.
    """
    term = Terminal(80, 24, 100)
    sample = (
        b"$ make\r\n\x1b[1;32mok\x1b[0m\tdone\r\n\x1b]133;A\x07\x1b[2J\x1b[H"
        b"\xe2\x94\x80 wide \xe4\xb8\xad\x1b[K\r\n"
        b"e\xcc\x81\xe2\x80\x8b zero-width\r\n"
    )
    for _ in range(30):
        term.feed(sample)
    term.feed(b"\n".join(b"%d" % i for i in range(100)) + b"\n")
    Scanner().feed(sample, len(sample))
    capture(term, None, None, None, 100)
    repaint(term)
    frames = [
        P.Hello(1),
        P.Spawn("p1", ["true"], {"A": "b"}, "/", 80, 24, 100, True),
        P.Ready(),
        P.Started(2),
        P.Exit(0, term.snapshot(), P.usage(1000, 1000, 1024)),
        P.Wrote(1, 1),
        P.Pong(1),
    ]
    P.Decoder().feed(b"".join(P.encode(m) for m in frames))


def main(fd: int) -> NoReturn:
    """Entry point in the freshly forked sentinel; ``fd`` is its channel to the daemon."""
    try:
        # Terminal signals aimed at the daemon's group must not hit us. The signal
        # dispositions (SIGINT, SIGPIPE and SIGHUP ignored, SIGCHLD at its default: our leader
        # must stay unreaped until we reap it) come from the intermediate process.
        os.setpgid(0, 0)
        # The C socket type with its family and type given: ``socket.socket``'s Python
        # layer and the three getsockopt calls that find them cost every pane.
        sock = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM, 0, fd)
        Sentinel(sock).run()
    except BaseException:  # pragma: no cover - last resort: never return into the fork server
        import traceback

        traceback.print_exc(file=sys.stderr)
    finally:
        os._exit(1)
