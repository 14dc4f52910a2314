"""``venomx serve``: start the daemon, serve until shutdown, clean up the socket."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import signal
import sys

from venomx.daemon.config import Config, config_path
from venomx.daemon.core import Daemon
from venomx.daemon.server import Connection, prepare_socket
from venomx.wire import VenomxError

log = logging.getLogger("venomx.daemon")


class KeyValueFormatter(logging.Formatter):
    """One structured line per record; the only formatting point for daemon logs."""

    def format(self, record: logging.LogRecord) -> str:
        ts = self.formatTime(record, "%Y-%m-%dT%H:%M:%S")
        line = (f"{ts}.{int(record.msecs):03d}Z level={record.levelname.lower()} "
                f"logger={record.name} msg={json.dumps(record.getMessage())}")
        if record.exc_info:
            line += " trace=" + json.dumps(self.formatException(record.exc_info))
        return line


def setup_logging(level: str) -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(KeyValueFormatter())
    import time as _time

    handler.formatter.converter = _time.gmtime  # type: ignore[union-attr]
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())


async def serve(path: str, config: Config, test_seams: bool, ready_fd: int | None) -> int:
    import venomx.verbs  # noqa: F401  (register the handlers)

    d = Daemon(path, config, test_seams)
    d.start()
    loop = asyncio.get_running_loop()
    old_umask = os.umask(0o177)
    try:
        server = await loop.create_unix_server(lambda: Connection(d), path=path)
    finally:
        os.umask(old_umask)
    os.chmod(path, 0o600)
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, d.begin_shutdown)
    log.info("listening socket=%s source=%s pid=%d", path, d.source, os.getpid())
    if ready_fd is not None:
        os.write(ready_fd, json.dumps({"socket": path, "source": d.source,
                                       "pid": os.getpid()}).encode() + b"\n")
        os.close(ready_fd)
    try:
        await d.stopped
    finally:
        server.close()
        for conn in list(d.connections):
            if conn.transport is not None:
                conn.transport.close()
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass
        d.stop()
        log.info("stopped source=%s", d.source)
    return 0


def run_daemon(path: str, config_file: str | None, test_seams: bool, log_level: str,
               ready_fd: int | None = None) -> int:
    setup_logging(log_level)
    config = Config(config_path(config_file))
    try:
        config.values = config.read_file()
        prepare_socket(path)
    except VenomxError as exc:
        log.error("cannot start: %s", exc.message)
        if ready_fd is not None:
            os.write(ready_fd, json.dumps({"error": exc.to_dict()}).encode() + b"\n")
            os.close(ready_fd)
        else:
            print(f"venomx: {exc.code}: {exc.message}", file=sys.stderr)
        return exc.exit_code
    return asyncio.run(serve(path, config, test_seams, ready_fd))
