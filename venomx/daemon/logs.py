"""The daemon's log: one line format, a size-rotated file reopened on SIGHUP, and a limiter.

The limiter keeps a flood from filling the disk: records at warning and above from one
call site (and one exception cause) pass at most once per second, the rest are counted
into the next line of that site (``suppressed=N``); a traceback is written once per
distinct cause (exception type and the line that raised it), later records of that cause
carry only ``cause=…``. Info and debug records (audit lines among them) are never held
back. The file is opened through ``venomx.daemon.paths`` (O_NOFOLLOW, in a checked
directory). Imports nothing from the daemon but ``paths``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import re
import sys
import threading
import time
import traceback
from collections import OrderedDict
from collections.abc import Callable
from types import TracebackType
from typing import Any

from venomx.daemon import paths

log = logging.getLogger("venomx.daemon")

INTERVAL = 1.0  # seconds between two lines of one call site
MAX_KEYS = 4096  # call sites and causes remembered; bounds the limiter's memory

ExcInfo = tuple[type[BaseException], BaseException, TracebackType | None]


class KeyValueFormatter(logging.Formatter):
    """One structured line per record; the only formatting point for daemon logs."""

    converter = time.gmtime  # type: ignore[assignment]

    def format(self, record: logging.LogRecord) -> str:
        ts = self.formatTime(record, "%Y-%m-%dT%H:%M:%S")
        line = (
            f"{ts}.{int(record.msecs):03d}Z level={record.levelname.lower()} "
            f"logger={record.name} msg={json.dumps(record.getMessage())}"
        )
        suppressed = getattr(record, "suppressed", 0)
        if suppressed:
            line += f" suppressed={suppressed}"
        cause = getattr(record, "cause", None)
        if cause:
            line += f" cause={json.dumps(cause)}"
        if record.exc_info:
            line += " trace=" + json.dumps(self.formatException(record.exc_info))
        return line


BARE = re.compile(r"[A-Za-z0-9_.:*@/-]*")


def logfmt(value: str | None) -> str:
    """A caller's string as one value inside a message of ``key=value`` fields: quoted
    (JSON) unless it is a plain word, as logfmt quotes values, so a resource such as
    ``p0 verb=shutdown code=ok`` cannot read as fields of its own."""
    if value is None:
        return "None"
    return value if BARE.fullmatch(value) else json.dumps(value)


def cause_of(exc_info: ExcInfo) -> str:
    """``Type@file:line`` of the innermost frame: what makes two tracebacks the same bug."""
    etype, _, tb = exc_info
    where = "?"
    if tb is not None:
        last = traceback.extract_tb(tb)[-1]
        where = f"{os.path.basename(last.filename)}:{last.lineno}"
    return f"{etype.__qualname__}@{where}"


class _Site:
    __slots__ = ("last", "pending", "suppressed")

    def __init__(self, now: float) -> None:
        self.last = now
        self.suppressed = 0
        self.pending: logging.LogRecord | None = None


class Limiter(logging.Filter):
    """Rate limit per call site and cause; one traceback per cause. Thread-safe."""

    def __init__(
        self, interval: float = INTERVAL, clock: Callable[[], float] = time.monotonic
    ) -> None:
        super().__init__()
        self.interval = interval
        self.clock = clock
        self.sites: OrderedDict[tuple[Any, ...], _Site] = OrderedDict()
        self.traced: OrderedDict[str, None] = OrderedDict()
        self.lock = threading.Lock()

    def filter(self, record: logging.LogRecord) -> bool:
        if getattr(record, "summary", False):
            return True
        with self.lock:
            cause = None
            if record.exc_info and record.exc_info[0] is not None:
                cause = cause_of(record.exc_info)  # type: ignore[arg-type]
                record.cause = cause
            if record.levelno >= logging.WARNING:
                key = (record.name, record.pathname, record.lineno, record.levelno, cause)
                now = self.clock()
                site = self.sites.get(key)
                if site is not None and now - site.last < self.interval:
                    site.suppressed += 1
                    record.exc_info = None  # do not keep frames alive for a count
                    record.exc_text = None
                    site.pending = record
                    return False
                if site is None:
                    site = self.sites[key] = _Site(now)
                    if len(self.sites) > MAX_KEYS:
                        self.sites.popitem(last=False)
                else:
                    self.sites.move_to_end(key)
                    record.suppressed = site.suppressed
                    site.last, site.suppressed, site.pending = now, 0, None
            if cause is not None:
                if cause in self.traced or len(self.traced) >= MAX_KEYS:
                    record.exc_info = None
                    record.exc_text = None
                else:
                    self.traced[cause] = None
            return True

    def due(self, force: bool = False) -> list[logging.LogRecord]:
        """Summary records for call sites whose counted repeats are no longer reported."""
        out: list[logging.LogRecord] = []
        now = self.clock()
        with self.lock:
            for site in self.sites.values():
                if site.pending is None or not (force or now - site.last >= self.interval):
                    continue
                summary = logging.makeLogRecord(dict(site.pending.__dict__))
                summary.suppressed = site.suppressed
                summary.summary = True
                out.append(summary)
                site.last, site.suppressed, site.pending = now, 0, None
        return out


class FileHandler(logging.Handler):
    """Appends to ``name`` in a checked directory (held open by fd); rotates by size.

    Rotation renames ``name`` to ``name.1`` (``.1`` to ``.2``, …, dropping any past ``keep``)
    and opens a new file; ``reopen`` only opens ``name`` again, for an external logrotate.
    With ``stderr`` the current file is also the process's fd 2, so stray output of
    Python itself lands in the log too. Write errors (disk full) are counted, never raised.
    """

    def __init__(
        self, dir_fd: int, directory: str, name: str, max_bytes: int, keep: int, stderr: bool
    ) -> None:
        super().__init__()
        self.dir_fd = dir_fd
        self.directory = directory
        self.name_ = name
        self.max_bytes = max_bytes
        self.keep = keep
        self.stderr = stderr
        self.write_errors = 0
        self.fd = -1
        self.size = 0
        self._open()

    @property
    def path(self) -> str:
        return os.path.join(self.directory, self.name_)

    def _open(self) -> None:
        fd = paths.open_append(self.dir_fd, self.directory, self.name_)
        if self.stderr:
            os.dup2(fd, 2)
        if self.fd >= 0:
            os.close(self.fd)
        self.fd = fd
        self.size = os.fstat(fd).st_size

    def reopen(self) -> None:
        """Open the file by name again; on failure the old file stays in use."""
        with self.lock:  # type: ignore[union-attr]
            self._open()

    def rotate(self) -> None:
        """A step that fails (something else in the way of a name) is skipped: logging
        goes on in a newly opened file whatever became of the old ones."""
        for i in range(self.keep, 0, -1):
            src = self.name_ if i == 1 else f"{self.name_}.{i - 1}"
            with contextlib.suppress(OSError):
                os.rename(src, f"{self.name_}.{i}", src_dir_fd=self.dir_fd, dst_dir_fd=self.dir_fd)
        if self.keep == 0:
            with contextlib.suppress(OSError):
                os.unlink(self.name_, dir_fd=self.dir_fd)
        with contextlib.suppress(OSError):
            self._drop_beyond_keep()
        self._open()

    def _drop_beyond_keep(self) -> None:
        """Old files numbered past ``keep``: a larger ``log.keep`` before it was lowered
        left them, and nothing else would ever drop them."""
        prefix = self.name_ + "."
        for entry in os.listdir(self.dir_fd):
            number = entry[len(prefix) :]
            if (
                entry.startswith(prefix)
                and number.isascii()
                and number.isdigit()
                and not number.startswith("0")
                and int(number) > self.keep
            ):
                with contextlib.suppress(OSError):  # gone already, or not a file
                    os.unlink(entry, dir_fd=self.dir_fd)

    def emit(self, record: logging.LogRecord) -> None:
        try:
            data = (self.format(record) + "\n").encode("utf-8", "replace")
            if self.max_bytes and self.size and self.size + len(data) > self.max_bytes:
                self.rotate()
            view = memoryview(data)
            while view:
                n = os.write(self.fd, view)
                view = view[n:]
                self.size += n
        except Exception:
            self.write_errors += 1

    def close(self) -> None:
        with self.lock:  # type: ignore[union-attr]
            if self.fd >= 0:
                os.close(self.fd)
                self.fd = -1
            os.close(self.dir_fd)
        super().close()


class DaemonLog:
    """The root logger's one handler (stderr, then perhaps a file) and its limiter."""

    def __init__(self, level: str) -> None:
        self.limiter = Limiter()
        self.file: FileHandler | None = None
        self.flusher: asyncio.TimerHandle | None = None
        handler = logging.StreamHandler(sys.stderr)
        self._install(handler)
        logging.getLogger().setLevel(level.upper())

    def _install(self, handler: logging.Handler) -> None:
        handler.setFormatter(KeyValueFormatter())
        handler.addFilter(self.limiter)
        root = logging.getLogger()
        old = list(root.handlers)
        root.handlers[:] = [handler]
        for h in old:
            if h is not handler:
                h.close()
        self.handler = handler

    def to_file(
        self, dir_fd: int, directory: str, name: str, max_bytes: int, keep: int, stderr: bool
    ) -> None:
        """Log to ``name`` in a checked directory from now on (raises ``VenomxError``)."""
        try:
            self.file = FileHandler(dir_fd, directory, name, max_bytes, keep, stderr)
        except BaseException:
            os.close(dir_fd)
            raise
        self._install(self.file)

    def configure(self, max_bytes: int, keep: int) -> None:
        if self.file is not None:
            self.file.max_bytes, self.file.keep = max_bytes, keep

    def reopen(self) -> None:
        """SIGHUP: open the log file by name again (after logrotate moved it away)."""
        if self.file is None:
            log.info("SIGHUP: logging to stderr, no log file to reopen")
            return
        try:
            self.file.reopen()
        except Exception as exc:
            log.error(
                "SIGHUP: cannot reopen the log file %s: %s",
                self.file.path,
                getattr(exc, "message", exc),
            )
            return
        log.info("SIGHUP: log file reopened")

    def flush(self, force: bool = False) -> None:
        for record in self.limiter.due(force):
            self.handler.handle(record)

    def start_flusher(self, loop: asyncio.AbstractEventLoop) -> None:
        def tick() -> None:
            self.flush()
            self.flusher = loop.call_later(INTERVAL, tick)

        self.flusher = loop.call_later(INTERVAL, tick)

    def stop_flusher(self) -> None:
        if self.flusher is not None:
            self.flusher.cancel()
            self.flusher = None
        self.flush(force=True)
