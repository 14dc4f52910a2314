"""``venomx exec -- COMMAND``: one command under venomx, the way a CI step runs one.

It starts a trusted run (a key of its own, retried with the same key and the daemon's
``source`` after a lost connection, so a retry never runs the command twice and a
restarted daemon answers ``conflict.source``), streams the pane's output live while the
command runs, feeds or closes its terminal's input, turns SIGINT/SIGTERM into
``run.cancel`` with that signal, and exits with the run's RFC-0015 status. The outcome
comes from the run record, never from the output.
"""

from __future__ import annotations

import base64
import codecs
import os
import re
import select
import signal
import sys
import threading
import time
from collections.abc import Callable
from typing import Any, BinaryIO, NoReturn

from venomx.cli.errors import Asked, human, venomx_failed
from venomx.cli.facts_data import ENV_NAME_PATTERN, MAX_ENV_VALUE
from venomx.cli.render import human_duration, usage_text
from venomx.cli.runlog import RowLog
from venomx.cli.termguard import TermGuard
from venomx.cli.textlog import TextLines
from venomx.cli.typed import Typed, ends_typing
from venomx.cli.values import cli_int
from venomx.client import Client, Pin, reconnecting, retryable
from venomx.visible import for_terminal, json_line
from venomx.wire import Malformed, Reading, VenomxError, exit_status

DEFAULT_SESSION = "default"
# Variables that describe the caller's shell or service manager, not the command's
# context: never passed (TERM and the size come from the pane).
VOLATILE = frozenset({"_", "SHLVL", "OLDPWD", "PWD", "TERM", "COLUMNS", "LINES", "NOTIFY_SOCKET"})
VOLATILE_PREFIXES = ("VENOMX_", "LISTEN_")
# The shell's own bookkeeping, which the daemon's environment has too: not passed, and
# removed from what the command inherits from the daemon (its PWD names another directory).
SHELL_STATE = ("OLDPWD", "PWD", "SHLVL", "_")
EOF_KEY = "\x04"  # VEOF: the terminal's end of file at the start of a line
START_RETRY = 10.0  # seconds a start is retried across a lost connection
LOG_COLS, LOG_ROWS = 200, 50  # a pane for a log that is not a terminal: wide, no wrapping
SEND_CHUNK = 32768
EXIT_NOT_FOUND, EXIT_NOT_EXECUTABLE = 127, 126
SESSION_ID = re.compile(r"s[0-9]+")


class ExecOptions:
    """What the caller asked for on the command line. (A plain class: a dataclass would
    load ``dataclasses`` and ``inspect``, ~10 ms of every exec.)"""

    def __init__(
        self,
        argv: list[str],
        session: str | None = None,
        key: str | None = None,
        cwd: str | None = None,
        env: list[str] | None = None,
        clean_env: bool = False,
        stdin: bool = False,
        detach_on_interrupt: bool = False,
        keep_escapees: bool = False,
        as_json: bool = False,
        socket: str | None = None,
        token: str | None = None,
    ) -> None:
        self.argv = argv
        self.session = session
        self.key = key
        self.cwd = cwd
        self.env = env if env is not None else []
        self.clean_env = clean_env
        self.stdin = stdin
        self.detach_on_interrupt = detach_on_interrupt
        self.deadline_ms: int | None = None
        self.cols: int | None = None
        self.rows: int | None = None
        self.keep_escapees = keep_escapees
        self.as_json = as_json
        self.socket = socket
        self.token = token


def caller_env(environ: dict[str, str]) -> tuple[dict[str, str], list[str]]:
    """The caller's environment as the command gets it, and the names dropped with a
    note (those the spec's env rule or size limit refuses); volatile ones go silently."""
    keep: dict[str, str] = {}
    refused: list[str] = []
    for name, value in environ.items():
        if name in VOLATILE or name.startswith(VOLATILE_PREFIXES):
            continue
        if not re.fullmatch(ENV_NAME_PATTERN, name) or len(value.encode()) > MAX_ENV_VALUE:
            refused.append(name)
            continue
        keep[name] = value
    return keep, sorted(refused)


def spawn_exit(err: VenomxError) -> int:
    """127 when the program is not there, 126 when it cannot be executed, as shells do."""
    if err.code != "unavailable.spawn":
        return err.exit_code
    return EXIT_NOT_FOUND if err.data.get("errno") == "ENOENT" else EXIT_NOT_EXECUTABLE


class Reader:
    """One of exec's outputs, whose reader may stop early (``venomx exec … | head``):
    past a broken pipe, what is written is dropped, and exec still waits for the run and
    exits with its status."""

    def __init__(self, raw: BinaryIO) -> None:
        self.raw = raw
        self.gone = False

    def write(self, data: bytes) -> None:
        if not self.gone:
            try:
                self.raw.write(data)
            except BrokenPipeError:
                self.drop()

    def flush(self) -> None:
        if not self.gone:
            try:
                self.raw.flush()
            except BrokenPipeError:
                self.drop()

    def drop(self) -> None:
        self.gone = True
        devnull = os.open(os.devnull, os.O_WRONLY)
        try:
            os.dup2(devnull, self.raw.fileno())  # for the flush at exit too
        except (OSError, ValueError):
            pass
        finally:
            os.close(devnull)

    def isatty(self) -> bool:
        return self.raw.isatty()

    def fileno(self) -> int:
        return self.raw.fileno()


class Exec:
    """One ``venomx exec``: start, stream, wait, and the exit status."""

    def __init__(self, opts: ExecOptions, out: BinaryIO, err: BinaryIO) -> None:
        self.opts = opts
        self.out = Reader(out)
        self.err = Reader(err)
        self.token = opts.token or os.environ.get("VENOMX_TOKEN") or None
        if self.token is None and not os.environ.get("VENOMX_PANE"):
            self.token = "@owner"  # the daemon checks it: our uid, not a pane's program
        self.asked = Asked(opts.socket, self.token, repr(opts.argv[0]) if opts.argv else None)
        self.tty_out = out.isatty() and not opts.as_json
        self.stream_to = self.err if opts.as_json else self.out
        self.run_id: str | None = None
        self.pane: str | None = None
        self.interrupted: int | None = None
        self.previous: dict[int, Any] = {}  # the signal handlers exec replaced
        self.started = time.monotonic()
        self.lines: TextLines | None = None  # text lines for a log; None: a terminal's view
        # what of the output reaches a terminal
        self.guard = (
            TermGuard.for_terminal(self.stream_to.fileno(), alternate=True)
            if self.tty_out
            else TermGuard()
        )
        self.put_back_done = False
        self.seen = 0  # output offset streamed so far
        self.pin = Pin(follow=False)  # the run lives on the daemon that started it

    # -- helpers -----------------------------------------------------------------------------
    def note(self, text: str) -> None:
        self.err.write(f"venomx: {for_terminal(text, self.err)}\n".encode())
        self.err.flush()

    def client(self) -> Client:
        return Client(self.opts.socket, self.token, client="venomx-exec", pin=self.pin)

    def fail(self, err: VenomxError) -> int:
        if self.opts.as_json:  # stdout has the record, or as for any verb, the error
            self.out.write(json_line({"error": err.to_dict()}) + b"\n")
            self.out.flush()
        if err.code == "unavailable.spawn" and not venomx_failed(err):
            self.note(f"cannot start {self.asked.program}: {err.data.get('errno', err.message)}")
            return spawn_exit(err)
        self.err.write((human(err, self.asked) + "\n").encode())
        self.err.flush()
        return err.exit_code

    # -- where and what ------------------------------------------------------------------------
    def target(self, c: Client) -> dict[str, Any]:
        """A session given by ID or name (found or created in one step), or by default the
        session named ``default``; inside a pane, a split of the caller's pane."""
        name = self.opts.session
        if name is None:
            pane = os.environ.get("VENOMX_PANE")
            if pane:
                return {"pane": pane, "axis": "rows"}
            name = DEFAULT_SESSION
        if SESSION_ID.fullmatch(name):
            return {"session": name}
        found = c.call("session.create", {"name": name, "reuse": True})
        return {"session": found["session"]}

    def params(self, c: Client) -> dict[str, Any]:
        o = self.opts
        env: dict[str, str] = {}
        if not o.clean_env:
            env, refused = caller_env(dict(os.environ))
            if refused:
                self.note("not passed to the command: " + ", ".join(refused))
        for pair in o.env:
            name, sep, value = pair.partition("=")
            if not sep:
                raise VenomxError(
                    "invalid_params.env",
                    f"--env takes NAME=VALUE, not {pair!r}",
                    {"reason": "syntax"},
                )
            env[name] = value
        cols, rows = LOG_COLS, LOG_ROWS
        if self.tty_out:
            try:
                size = os.get_terminal_size(self.out.fileno())
            except OSError:
                size = os.terminal_size((0, 0))
            if size.columns > 0 and size.lines > 0:  # a new pty may say 0x0: not known
                cols, rows = size.columns, size.lines
        if o.cwd is None:
            try:
                here = os.getcwd()
            except FileNotFoundError:
                raise VenomxError(
                    "invalid_params.cwd",
                    "the current directory no longer exists: give --cwd",
                    {"reason": "missing"},
                ) from None
        params: dict[str, Any] = {
            "key": o.key or f"exec-{os.urandom(16).hex()}",
            "argv": o.argv,
            "cwd": o.cwd if o.cwd is not None else here,
            "cols": o.cols or cols,
            "rows": o.rows or rows,
            **self.target(c),
        }
        if env:
            params["env"] = env
        params["env_unset"] = [n for n in SHELL_STATE if n not in env]  # --env wins
        if o.deadline_ms is not None:
            params["deadline_ms"] = o.deadline_ms
        if not o.stdin and not self.keys_in():
            params["input"] = "eof"  # every read gets end of file, as from /dev/null
        return params

    def keys_in(self) -> bool:
        """Whether the caller's keys go to the command: stdin is a terminal, no --stdin."""
        fd = sys.stdin.fileno() if sys.stdin is not None else -1
        return not self.opts.stdin and fd >= 0 and os.isatty(fd)

    def start(self) -> dict[str, Any]:
        """Start the run; after a lost connection, the same request again (same key, and the
        source of the first daemon, so a restarted one refuses instead of running it twice)."""
        c = self.client()
        try:
            params = self.params(c)
            params["source"] = c.hello["source"]
            deadline = time.monotonic() + START_RETRY
            pause = 0.05
            while True:
                try:
                    return c.call("run", params)
                except VenomxError as err:
                    if not retryable(err) or time.monotonic() > deadline:
                        raise
                c.close()
                while True:
                    time.sleep(pause)  # a CLI waiting for its daemon, not a test
                    pause = min(pause * 2, 1.0)
                    try:
                        c = self.client()
                        break
                    except VenomxError as err:
                        if not retryable(err) or time.monotonic() > deadline:
                            raise
        finally:
            c.close()

    # -- input -----------------------------------------------------------------------------------
    def send(self, c: Client, text: str) -> None:
        assert self.pane is not None
        c.call("pane.send", {"pane": self.pane, "text": text})

    def feed_stdin(self) -> None:
        """``--stdin``: the caller's input as terminal input, then end of file: a VEOF, and
        a second one after a last line with no newline (the first only hands that line to
        the reader). Without --stdin the run's terminal gives end of file to every read
        from the start (its ``input`` is "eof"), and nothing is typed.

        Input is typed as it arrives, so a program can answer a line while the pipe
        stays open. It is read from the descriptor, not ``sys.stdin``'s buffer, whose
        lock a read blocked at exit would hold while the interpreter finalises (a fatal
        error, exit 134, instead of the run's status)."""
        decode = codecs.getincrementaldecoder("utf-8")("replace").decode
        last = ""
        try:
            with self.client() as c:
                fd = sys.stdin.fileno() if sys.stdin is not None else -1
                while fd >= 0:
                    try:
                        data = os.read(fd, SEND_CHUNK)
                    except BlockingIOError:  # a non-blocking pipe: wait for more
                        select.select([fd], [], [])
                        continue
                    except OSError:
                        data = b""
                    text = decode(data, final=not data)
                    if text:
                        self.send(c, text)
                        last = text[-1]
                    if not data:
                        break
                self.send(c, EOF_KEY if last in ("", "\r", "\n") else EOF_KEY * 2)
        except VenomxError:
            pass  # the command may have ended already; its outcome says what happened

    def read_keys(self, fd: int, typed: Typed) -> None:
        """A terminal on stdin: keys go to the command as typed (Ctrl-C included). Reading
        never waits on a send, so keys typed while the command is not taking its input
        go after it (up to ``Typed.HELD_MAX``), not nowhere."""
        while True:
            try:
                data = os.read(fd, 4096)
            except OSError:
                data = b""
            if not data:  # the terminal hung up: nothing more will be typed
                typed.close()
                return
            typed.put(data)

    def send_keys(self, typed: Typed) -> None:
        """Send what ``read_keys`` read. A send the command did not take in time loses
        those keys only; after a refusal that ends typing (the run going) the rest wait
        for nobody."""
        try:
            with self.client() as c:
                while (data := typed.take()) is not None:
                    assert self.pane is not None
                    try:
                        c.call(
                            "pane.send",
                            {"pane": self.pane, "data": base64.b64encode(data).decode()},
                        )
                    except VenomxError as err:
                        if ends_typing(err.code):
                            return
        except VenomxError:
            return  # no connection for the keys: the command's outcome says what happened

    # -- output ----------------------------------------------------------------------------------
    def stream(self) -> None:
        """Every output byte from the start, live, until the pane exits: what draws to a terminal,
        text lines to anything else. A lost connection resumes where it stopped; bytes the
        pane no longer holds are reported as a gap, never skipped silently. A pane that
        ended before the stream began is shown by its rows."""
        self.lines = None if self.tty_out else TextLines()
        reconnecting(self.client, self.follow, START_RETRY, 0.1)
        if self.lines is not None:
            last = self.lines.close()
            if last is not None:
                self.stream_to.write(for_terminal(last, self.stream_to).encode() + b"\n")
        self.stream_to.flush()

    def emit(self, data: bytes) -> None:
        if self.lines is None:
            self.stream_to.write(self.guard.feed(data))
        else:
            for line in self.lines.feed(data):
                self.stream_to.write(for_terminal(line, self.stream_to).encode() + b"\n")
        self.stream_to.flush()

    def gap(self, text: str) -> None:
        eol = b"\r\n" if self.lines is None else b"\n"
        self.stream_to.write(f"[venomx: {text}]".encode() + eol)

    def follow(self, c: Client) -> None:
        """One attach, resuming after ``seen``, until the pane has exited (or lost its
        sentinel: its record, which the wait then reads, says so)."""
        try:
            self.attached(c)
        except VenomxError as err:
            if err.code != "unavailable.sentinel" or err.data.get("reason") != "lost":
                raise
            self.gap("venomx lost the pane's sentinel: no more output can be shown")

    def attached(self, c: Client) -> None:
        assert self.pane is not None
        held: bytes | None = None  # a repaint, shown only if the pane turns out live
        for item in c.stream("pane.attach", {"pane": self.pane, "after": self.seen}):
            if "screen" in item:
                screen = item["screen"]
                if screen.get("replay"):
                    self.seen = int(screen["offset"])
                else:
                    held = base64.b64decode(screen.get("data", ""))
                    offset = int(screen["offset"])
                continue
            if "data" in item:
                if held is not None:
                    self.gap(f"output before byte {offset} is no longer held; the screen then:")
                    self.emit(held + b"\r\n")
                    self.seen, held = offset, None
                data = base64.b64decode(item["data"])
                end = int(item["offset"])
                if end - len(data) > self.seen:
                    self.gap(f"{end - len(data) - self.seen} bytes of output were lost")
                self.emit(data[max(0, len(data) - (end - self.seen)) :])
                self.seen = end
        if held is not None and self.seen == 0:
            self.rows_instead(c)
        elif held is not None:
            self.gap("the command ended while the stream was away; its last screen:")
            self.emit(held + b"\r\n")

    def rows_instead(self, c: Client) -> None:
        """The pane's bytes were no longer held (it ended before the stream began): print
        its rows from the first retained one, saying if earlier ones are gone."""
        assert self.pane is not None and self.run_id is not None
        eol = b"\r\n" if self.lines is None else b"\n"
        out = self.stream_to
        RowLog(
            self.run_id, lambda text: out.write(for_terminal(text, out).encode() + eol), out.flush
        ).print_rows(c, self.pane, final=True)

    # -- interrupts ------------------------------------------------------------------------------
    def on_signal(self, signum: int, _frame: object) -> None:
        if self.interrupted is not None:
            if self.run_id is None:  # a second one while the start is stuck: give up
                signal.signal(signum, signal.SIG_DFL)
                os.kill(os.getpid(), signum)
            return
        self.interrupted = signum
        if self.run_id is None:  # the start is in flight: acted on once it is answered
            return
        if self.opts.detach_on_interrupt:
            raise Detached(signum)
        self.cancel_with(signum)

    def cancel_with(self, signum: int) -> None:
        """Cancel the run with the signal exec was sent; the wait reports its outcome."""
        name = signal.Signals(signum).name
        run = self.run_id

        def cancel() -> None:
            try:
                with self.client() as c:
                    c.call("run.cancel", {"run": run, "signal": name})
            except VenomxError as err:
                self.note(f"could not cancel {run}: {err.code}")

        threading.Thread(target=cancel, daemon=True).start()

    # -- the whole thing ---------------------------------------------------------------------------
    def run(self) -> int:
        # SIGHUP too: the terminal exec ran in went away, as for a shell's job; one that
        # exec was started ignoring (nohup, a background job) stays ignored. Taken before
        # the start: a signal while it is in flight (a CI timeout's SIGTERM) left the run
        # going unwatched, the daemon having started it before exec died or gave up.
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            if signal.getsignal(sig) is not signal.SIG_IGN:
                self.previous[sig] = signal.signal(sig, self.on_signal)
        try:
            return self.start_and_watch()
        finally:
            self.put_back_signals()

    def put_back_signals(self) -> None:
        """The handlers exec found, once nothing is left to cancel or detach from."""
        for signum, handler in self.previous.items():
            signal.signal(signum, handler)
        self.previous = {}

    def start_and_watch(self) -> int:
        try:
            started = self.start()
        except VenomxError as err:
            return self.fail(err)
        restore: Callable[[], None] | None = None
        try:
            # from here a signal is acted on at once, and one that came while the start
            # was in flight is acted on now (a second cancel of the same run is harmless)
            self.run_id, self.pane = started["run"], started["pane"]
            if self.interrupted is not None:
                if self.opts.detach_on_interrupt:
                    raise Detached(self.interrupted)
                self.cancel_with(self.interrupted)
            restore = self.input()
            self.stream()
            record = self.wait()
        except Detached as d:
            self.put_back()
            self.note(f"left {self.run_id} running (pane {self.pane})")
            return 128 + d.signum
        except VenomxError as err:
            self.put_back()
            return self.fail(err)
        except BaseException:
            self.put_back()
            # a fault of exec's own must not leave the command running unwatched, where a
            # CI retry would run it again
            if not self.opts.detach_on_interrupt:
                self.cancel_quietly()
            raise
        finally:
            if restore is not None:
                restore()
            self.put_back_signals()  # the run has ended: a signal now is exec's own
        if not self.opts.keep_escapees:
            self.cleanup()
        return self.finish(record)

    def cancel_quietly(self) -> None:
        try:
            with self.client() as c:
                c.call("run.cancel", {"run": self.run_id, "grace_ms": 1000})
        except VenomxError as err:
            self.note(f"could not cancel {self.run_id}: {err.code}")

    def cleanup(self) -> None:
        """End what the run left behind (systemd's KillMode=control-group); the record,
        fixed at completion, still says how many there were."""
        try:
            with self.client() as c:
                done = c.call("run.cleanup", {"run": self.run_id})
        except VenomxError as err:
            self.note(f"could not clean up after {self.run_id}: {err.code}")
            return
        if done.get("ended") or done.get("remaining"):
            self.note(
                f"ended {done.get('ended', 0)} processes {self.run_id} left behind"
                + (f", {done['remaining']} remain" if done.get("remaining") else "")
            )

    def input(self) -> Callable[[], None]:
        """Start feeding the command's input; returns what undoes the terminal's raw mode.
        A closed stdin (no ``sys.stdin`` at all) is end of file."""
        if self.keys_in():
            import termios
            import tty

            fd = sys.stdin.fileno()
            saved = termios.tcgetattr(fd)
            tty.setraw(fd)
            typed = Typed()
            threading.Thread(target=self.read_keys, args=(fd, typed), daemon=True).start()
            threading.Thread(target=self.send_keys, args=(typed,), daemon=True).start()

            def restore() -> None:
                typed.close()
                # typing not yet read was meant for the command, not the shell after us
                termios.tcflush(fd, termios.TCIFLUSH)
                termios.tcsetattr(fd, termios.TCSADRAIN, saved)
                if typed.dropped:
                    self.note(
                        f"{typed.dropped} bytes of typing were not sent: the command was "
                        "not taking its input"
                    )

            return restore
        if self.opts.stdin:
            threading.Thread(target=self.feed_stdin, daemon=True).start()
        return lambda: None

    def wait(self) -> dict[str, Any]:
        with self.client() as c:
            while True:
                try:
                    return c.call(
                        "run.wait",
                        {"run": self.run_id, "output": self.opts.as_json, "timeout_ms": 60000},
                    )
                except VenomxError as err:
                    if err.code != "timeout.wait":
                        raise

    def put_back(self) -> None:
        """Before exec's own line, however exec ends: put back what the program changed
        on this terminal (concealed text, a hidden cursor, its alternate screen or mouse
        reports would hide or garble the line) and erase what it drew below the cursor,
        where it could have drawn a false outcome line to stand last."""
        if not self.tty_out or self.put_back_done:
            return
        self.put_back_done = True
        fresh = "" if self.guard.line_start else "\r\n"  # the line starts at column 0
        try:
            self.stream_to.write((self.guard.restore() + fresh + "\r\x1b[J").encode())
            self.stream_to.flush()
        except OSError:  # a terminal gone (EIO) is no reason to lose the status
            pass

    def finish(self, record: dict[str, Any]) -> int:
        self.put_back()
        status = exit_status(record.get("status"))
        if self.opts.as_json:
            self.out.write(json_line(record) + b"\n")
            self.out.flush()
        self.note(summary(record))
        return status


class Detached(BaseException):
    """SIGINT/SIGTERM with --detach-on-interrupt: leave the run going."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


def summary(rec: dict[str, Any]) -> str:
    """One line: run, outcome, exit code or signal, duration, usage when known."""
    parts = [f"{rec.get('run')} {rec.get('outcome')}"]
    if rec.get("signal") is not None:
        parts.append(f"signal {rec['signal']}")
    elif rec.get("exit_code") is not None:
        parts.append(f"exit {rec['exit_code']}")
    if rec.get("cause"):
        parts.append(f"cause {rec['cause']}")
    parts.append(f"in {human_duration(int(rec.get('duration_ms', 0)))}")
    usage = usage_text(rec)
    if usage is not None:
        parts.append(usage)
    if rec.get("fault"):
        parts.append(f"fault {rec['fault']}")
    return ", ".join(parts) + f" (status {rec.get('status')})"


def run_int(name: str, text: str | None) -> int | None:
    """An integer option of the run exec starts, checked as the daemon checks ``run``'s
    param of that name: ``invalid_params.type`` or ``.range``, not a usage error."""
    if text is None:
        return None
    from venomx.manifest.schema import check_param
    from venomx.manifest.verbs import verb_by_name

    value = cli_int(name, text)
    run = verb_by_name("run")
    p = run.param(name) if run is not None else None
    assert p is not None
    check_param(p, value)
    return value


def run_exec(opts: ExecOptions) -> int:
    ex = Exec(opts, sys.stdout.buffer, sys.stderr.buffer)
    try:
        with Reading():  # a reply of another shape than its verb's, as in call.shown
            return ex.run()
    except Malformed as err:
        return ex.fail(err)


def exec_main(
    command: tuple[str, ...],
    session: str | None = None,
    key: str | None = None,
    cwd: str | None = None,
    env: tuple[str, ...] = (),
    clean_env: bool = False,
    send_stdin: bool = False,
    detach_on_interrupt: bool = False,
    deadline_ms: str | None = None,
    cols: str | None = None,
    rows: str | None = None,
    keep_escapees: bool = False,
    as_json: bool = False,
    socket_: str | None = None,
    token: str | None = None,
) -> NoReturn:
    """``venomx exec`` as its command line asked (parsed by click or by
    ``venomx.cli.quick``): the integers checked as the daemon checks them, then the run."""
    opts = ExecOptions(
        list(command),
        session=session,
        key=key,
        cwd=os.path.abspath(cwd) if cwd else None,
        env=list(env),
        clean_env=clean_env,
        stdin=send_stdin,
        detach_on_interrupt=detach_on_interrupt,
        keep_escapees=keep_escapees,
        as_json=as_json,
        socket=socket_,
        token=token,
    )
    try:  # a bad value reads as the daemon's answer to it would (foundation §4)
        opts.deadline_ms = run_int("deadline_ms", deadline_ms)
        opts.cols = run_int("cols", cols)
        opts.rows = run_int("rows", rows)
    except VenomxError as err:
        sys.exit(Exec(opts, sys.stdout.buffer, sys.stderr.buffer).fail(err))
    sys.exit(run_exec(opts))
