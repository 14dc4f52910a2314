"""One sentinel per pane: the PTY, the leader, its wait status and the pane's VT.

Lifecycle: HELLO -> (SPAWN) open the PTY and hold the barrier -> READY -> (RELEASE)
posix_spawn the leader as a session leader on the PTY -> STARTED or FAILED -> read loop
-> leader exit: waitid(WNOWAIT) while the group is still pinned, SIGKILL sweep of the
group, drain the PTY, reap, EXIT with the final state -> exit. If the daemon's channel
closes, the pane's group gets SIGHUP, then SIGKILL after 2 s, and the sentinel exits.
Everything that can block or burn CPU for a pane happens here, never in the daemon.
Must not import ``venomx``.
"""

from __future__ import annotations

import errno
import fcntl
import os
import selectors
import signal
import socket
import struct
import sys
import termios
import time
from typing import NoReturn

from workers import protocol as P
from workers.osc import Scanner
from workers.vt import EpochConflict, Terminal, capture, repaint

DRAIN_SILENCE = 0.05
DRAIN_MAX = 1.0
LOSS_GRACE = 2.0
READ_SIZE = 1 << 17


def set_title(pane: str) -> None:
    try:
        import setproctitle

        setproctitle.setproctitle(f"venomx-sentinel {pane}")
    except Exception:  # pragma: no cover - the title is advisory
        pass


def resolve(argv0: str, env: dict[str, str]) -> list[str]:
    """Candidate paths for argv0, searched like execvpe in the *child's* PATH."""
    if "/" in argv0:
        return [argv0]
    path = env.get("PATH", os.defpath)
    return [os.path.join(d or ".", argv0) for d in path.split(":")]


def spawn_leader(argv: list[str], env: dict[str, str], slave: str) -> int:
    """posix_spawn the leader: new session, the PTY slave opened as fd 0 (controlling tty).

    Raises OSError with the exec errno; follows execvpe's rules for PATH search (EACCES
    is remembered and reported only if nothing else runs). Never falls back to a shell.
    """
    actions = [(os.POSIX_SPAWN_OPEN, 0, slave, os.O_RDWR, 0),
               (os.POSIX_SPAWN_DUP2, 0, 1), (os.POSIX_SPAWN_DUP2, 0, 2)]
    sigdef = [s for s in signal.valid_signals()
              if s not in (signal.SIGKILL, signal.SIGSTOP) and s < signal.SIGRTMIN]
    seen_eacces = False
    last: OSError | None = None
    for path in resolve(argv[0], env):
        try:
            return os.posix_spawn(path, argv, env, file_actions=actions, setsid=True,
                                  setsigdef=sigdef, setsigmask=())
        except OSError as exc:
            last = exc
            if exc.errno == errno.EACCES:
                seen_eacces = True
                continue
            if exc.errno in (errno.ENOENT, errno.ENOTDIR, errno.ESTALE, errno.ENODEV,
                             errno.ETIMEDOUT):
                continue
            raise
    if seen_eacces:
        raise OSError(errno.EACCES, os.strerror(errno.EACCES))
    raise last or OSError(errno.ENOENT, os.strerror(errno.ENOENT))


def set_winsize(fd: int, cols: int, rows: int) -> None:
    fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))


class Sentinel:
    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.decoder = P.Decoder()
        self.pending: list[P.Message] = []
        self.pane = "?"
        self.master = -1
        self.leader = 0
        self.term: Terminal | None = None
        self.scanner = Scanner()
        self.streaming = False
        self.input = bytearray()
        self.sel = selectors.DefaultSelector()
        self.wake_r, self.wake_w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        self.channel_open = True

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
    def run(self) -> NoReturn:
        set_title("(spare)")
        self.send(P.Hello(os.getpid()))
        msg = self.next_message()
        if not isinstance(msg, P.Spawn):
            os._exit(0)
        self.pane = msg.pane
        set_title(msg.pane)
        try:
            os.chdir(msg.cwd)
            self.master, slave_fd = os.openpty()
            set_winsize(self.master, msg.cols, msg.rows)
            slave = os.ttyname(slave_fd)
        except OSError as exc:
            self.send(P.Failed(errno.errorcode.get(exc.errno or 0, "EIO")))
            os._exit(0)
        self.term = Terminal(msg.cols, msg.rows, msg.scrollback)
        self.send(P.Ready())
        if not msg.release:
            go = self.next_message()
            if not isinstance(go, P.Release):
                os._exit(0)
        signal.signal(signal.SIGCHLD, lambda *_: None)
        signal.set_wakeup_fd(self.wake_w, warn_on_full_buffer=False)
        try:
            self.leader = spawn_leader(msg.argv, msg.env, slave)
        except OSError as exc:
            self.send(P.Failed(errno.errorcode.get(exc.errno or 0, "EIO")))
            os._exit(0)
        finally:
            os.close(slave_fd)
        self.send(P.Started(self.leader))
        os.set_blocking(self.master, False)
        self.loop()

    def loop(self) -> NoReturn:
        sel = self.sel
        sel.register(self.sock, selectors.EVENT_READ, "chan")
        sel.register(self.master, selectors.EVENT_READ, "pty")
        sel.register(self.wake_r, selectors.EVENT_READ, "wake")
        for m in self.pending:
            self.handle(m)
        self.pending.clear()
        while True:
            if self.leader_exited():
                self.finish()
            if not self.channel_open:
                self.daemon_lost()
            for key, ev in sel.select():
                if key.data == "chan":
                    for m in self.recv():
                        self.handle(m)
                elif key.data == "pty":
                    if ev & selectors.EVENT_READ:
                        self.read_pty()
                    if ev & selectors.EVENT_WRITE:
                        self.write_pty()
                else:
                    self.drain_wake()

    def drain_wake(self) -> None:
        try:
            while os.read(self.wake_r, 512):
                pass
        except OSError:
            pass

    def leader_exited(self) -> bool:
        try:
            info = os.waitid(os.P_PID, self.leader, os.WEXITED | os.WNOHANG | os.WNOWAIT)
        except ChildProcessError:
            return True
        return info is not None

    def read_pty(self) -> bool:
        """Read one chunk; False at EOF/EIO (every slave fd closed) or nothing to read."""
        try:
            data = os.read(self.master, READ_SIZE)
        except BlockingIOError:
            return False
        except OSError:
            data = b""
        if not data:
            try:
                self.sel.unregister(self.master)
            except (KeyError, ValueError):
                pass
            self.master_eof = True
            return False
        self.consume(data)
        return True

    master_eof = False

    def consume(self, data: bytes) -> None:
        assert self.term is not None
        self.term.feed(data)
        off = self.term.offset
        for ob in self.scanner.feed(data, off):
            self.send(P.Marker(ob.what, ob.offset, ob.exit_code, ob.state))
        if self.streaming:
            self.send(P.Output(data, off))

    def write_pty(self) -> None:
        if self.input:
            try:
                n = os.write(self.master, self.input)
                del self.input[:n]
            except BlockingIOError:
                pass
            except OSError:
                self.input.clear()
        if not self.input and not self.master_eof:
            self.sel.modify(self.master, selectors.EVENT_READ, "pty")

    def handle(self, m: P.Message) -> None:
        term = self.term
        assert term is not None
        if isinstance(m, P.Input):
            if self.master_eof:
                return
            self.input += m.data
            self.sel.modify(self.master, selectors.EVENT_READ | selectors.EVENT_WRITE, "pty")
        elif isinstance(m, P.Resize):
            set_winsize(self.master, m.cols, m.rows)
            term.resize(m.cols, m.rows)
            self.send(P.Resized(m.cols, m.rows, term.epoch))
        elif isinstance(m, P.Signal):
            for sig in m.signals:
                self.signal_group(sig)
        elif isinstance(m, P.Stream):
            self.streaming = m.on
            if m.on:
                self.send(P.Screen(m.req, term.cols, term.rows, term.offset, repaint(term)))
        elif isinstance(m, P.Capture):
            try:
                res = capture(term, m.epoch, m.start, m.end, m.limit)
                self.send(P.Rows(m.req, res))
            except EpochConflict as exc:
                self.send(P.Rows(m.req, {}, {"code": "conflict.epoch", "epoch": exc.epoch}))

    def signal_group(self, sig: int) -> None:
        # Only while the leader is unreaped: its zombie pins the group ID.
        try:
            os.killpg(self.leader, sig)
        except OSError:
            pass

    def drain(self) -> None:
        """Read what the PTY holds now: until EIO, 50 ms of silence, or 1 s in all."""
        if self.master_eof:
            return
        os.set_blocking(self.master, False)
        deadline = time.monotonic() + DRAIN_MAX
        quiet_since = time.monotonic()
        while not self.master_eof:
            now = time.monotonic()
            if now >= deadline or now - quiet_since >= DRAIN_SILENCE:
                return
            if self.read_pty():
                quiet_since = time.monotonic()
            else:
                sel = selectors.DefaultSelector()
                sel.register(self.master, selectors.EVENT_READ)
                sel.select(min(DRAIN_SILENCE - (now - quiet_since), deadline - now))
                sel.close()

    def finish(self) -> NoReturn:
        self.signal_group(signal.SIGKILL)
        self.drain()
        _, status = os.waitpid(self.leader, 0)
        code = os.WEXITSTATUS(status) if os.WIFEXITED(status) else None
        sig = os.WTERMSIG(status) if os.WIFSIGNALED(status) else None
        assert self.term is not None
        self.send(P.Exit(status, code, sig, self.term.offset, self.term.snapshot()))
        os._exit(0)

    def daemon_lost(self) -> NoReturn:
        """The daemon is gone: stop the pane's group (HUP, 2 s, KILL), reap, exit."""
        self.signal_group(signal.SIGCONT)
        self.signal_group(signal.SIGHUP)
        deadline = time.monotonic() + LOSS_GRACE
        while time.monotonic() < deadline and not self.leader_exited():
            self.sel.select(0.05)
            self.drain_wake()
            if not self.master_eof:
                self.read_pty()
        self.signal_group(signal.SIGKILL)
        try:
            os.waitpid(self.leader, 0)
        except ChildProcessError:
            pass
        os._exit(0)


def main(fd: int) -> NoReturn:
    """Entry point in the freshly forked sentinel; ``fd`` is its channel to the daemon."""
    try:
        os.setpgid(0, 0)  # terminal signals aimed at the daemon's group must not hit us
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        signal.signal(signal.SIGPIPE, signal.SIG_IGN)
        sock = socket.socket(fileno=fd)
        Sentinel(sock).run()
    except BaseException:  # pragma: no cover - last resort: never return into the fork server
        import traceback

        traceback.print_exc(file=sys.stderr)
    finally:
        os._exit(1)
