"""``venomx serve``: check the paths, start the daemon, serve until shutdown, clean up.

Everything that can refuse a start (config, socket directory and path, log file) is
checked before anything is created beyond a missing socket directory (and the log file,
which then records why), and each refusal is one line and an exit status (2 for a bad
path or config, 6 for a live socket).
Signals: SIGTERM and SIGINT shut down in order; SIGHUP only reopens the log file.
Under systemd (``venomx.daemon.systemd``) it serves on the socket passed to it, says
READY=1 once the socket accepts connections and STOPPING=1 when shutdown begins, and
takes NOTIFY_SOCKET and LISTEN_* out of its environment first, so no pane inherits them.
"""

from __future__ import annotations

import asyncio
import gc
import json
import logging
import os
import signal
import sys
import types
from collections.abc import Callable

from venomx import unixdiag
from venomx.daemon import ancestry, paths, systemd
from venomx.daemon.config import Config, config_path
from venomx.daemon.core import Daemon
from venomx.daemon.logs import DaemonLog
from venomx.daemon.server import Listener
from venomx.wire import VenomxError

log = logging.getLogger("venomx.daemon")
ABSTRACT_RETRY = 5  # seconds between tries for an abstract address another user holds
DETACHED_LOG = "venomx.log"


async def serve(
    place: paths.SocketPlace,
    config: Config,
    test_seams: bool,
    ready_fd: int | None,
    dlog: DaemonLog,
    notifier: systemd.Notifier,
    launched_in: frozenset[ancestry.Pane],
) -> int:
    import venomx.verbs  # noqa: F401  (register the handlers)

    loop = asyncio.get_running_loop()
    on_signal(loop, signal.SIGHUP, dlog.reopen)
    dlog.start_flusher(loop)
    try:
        d = Daemon(place.given, config, test_seams, launched_in)
        d.doctor.socket_ino = place.ino
        d.doctor.squatter = place.squatter
        stop_work = d.lifecycle.stop_work

        async def stopping() -> None:
            notifier.stopping()
            if stop_work is not None:
                await stop_work()

        d.lifecycle.stop_work = stopping
        for sig in (signal.SIGTERM, signal.SIGINT):
            on_signal(loop, sig, d.lifecycle.begin_shutdown)
        config.listeners.append(
            lambda changed: dlog.configure(config["log.max_bytes"], config["log.keep"])
        )
        d.start()
        assert place.sock is not None
        servers = [Listener(d.services, s) for s in (place.sock, place.abstract) if s is not None]
        reclaiming: asyncio.Future[None] | None = None
        if place.squatter is not None:
            log.warning(
                "%s holds this socket's abstract address; serving at the path only "
                "and trying for the address every %d s",
                paths.holder_text(place.squatter),
                ABSTRACT_RETRY,
            )
            reclaiming = asyncio.ensure_future(reclaim(place, d, servers))
    except VenomxError as exc:  # cgroups = "required" on a host without them
        paths.unlink_ours(place)
        default_signals(loop)
        refuse(exc, dlog, notifier, ready_fd)
        return exc.exit_code
    except BaseException:
        paths.unlink_ours(place)
        default_signals(loop)
        raise
    log.info(
        "listening socket=%s source=%s pid=%d%s",
        place.given,
        d.source,
        os.getpid(),
        " activated=systemd" if place.activated else "",
    )
    notifier.ready(place.given)
    if ready_fd is not None:
        info: dict[str, object] = {"socket": place.given, "source": d.source, "pid": os.getpid()}
        if dlog.file is not None:
            info["log"] = dlog.file.path
        os.write(ready_fd, json.dumps(info).encode() + b"\n")
        os.close(ready_fd)
    try:
        await d.lifecycle.stopped
    finally:
        if reclaiming is not None:
            reclaiming.cancel()
        for server in servers:
            server.close()
        for conn in list(d.connections):
            if conn.transport is not None:
                conn.transport.close()
        paths.unlink_ours(place)
        try:
            await d.stop()
            log.info("stopped source=%s", d.source)
            dlog.stop_flusher()
        finally:
            default_signals(loop)
    return 0


def default_signals(loop: asyncio.AbstractEventLoop) -> None:
    """Before the loop closes: the signals' handlers as they were before ``serve``, SIGHUP
    ignored. asyncio closes its wakeup pipe before it removes its own handlers, and a late
    SIGCHLD in between printed a traceback to the log; ours would do nothing once the loop
    is closed, leaving SIGTERM ignored."""
    loop.remove_signal_handler(signal.SIGCHLD)
    signal.signal(signal.SIGHUP, _ignore_hup)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.default_int_handler)


def refuse(
    exc: VenomxError, dlog: DaemonLog, notifier: systemd.Notifier, ready_fd: int | None
) -> None:
    """Say why the daemon cannot start: its log, systemd, the ready pipe or stderr."""
    if dlog.file is not None:
        log.error("cannot start: %s", exc.message)
    notifier.failed(exc.message)
    if ready_fd is not None:
        os.write(ready_fd, json.dumps({"error": exc.to_dict()}).encode() + b"\n")
        os.close(ready_fd)
    else:
        print(f"venomx: {exc.code}: {exc.message}", file=sys.stderr)


async def reclaim(place: paths.SocketPlace, d: Daemon, servers: list[Listener]) -> None:
    """Take the abstract address once its other holder lets go: otherwise any program of
    our uid could take it next, and clients trust a holder of our uid. Asking the kernel
    who holds it reads every Unix socket on the host, so that runs in a thread."""
    while not d.lifecycle.shutting_down:
        await asyncio.sleep(ABSTRACT_RETRY)
        if d.lifecycle.shutting_down:
            return
        try:
            sock = paths.listen_abstract(place.path, paths.BACKLOG)
        except OSError:
            sock = None
        if sock is not None:
            place.abstract, place.squatter = sock, None
            d.doctor.squatter = None
            servers.append(Listener(d.services, sock))
            log.info("listening at the abstract address again")
            return
        try:
            holder = await asyncio.to_thread(paths.abstract_holder, place.path)
        except (OSError, unixdiag.Unknown):  # never let a failure here end the retries
            holder = None
        if holder is not None and holder != place.squatter:
            place.squatter = d.doctor.squatter = holder
            if unixdiag.mine(holder):
                log.error(
                    "a process of uid %d took this socket's abstract address; clients "
                    "may be talking to it instead of this daemon",
                    holder,
                )
            else:
                log.warning("uid %d holds this socket's abstract address now", holder)


def on_signal(loop: asyncio.AbstractEventLoop, sig: int, callback: Callable[[], object]) -> None:
    """Call ``callback`` in the loop's thread when ``sig`` arrives.

    Not ``loop.add_signal_handler``: asyncio learns of a signal from a byte in its wakeup
    socket, and a flood of SIGCHLD from a pane's orphans can fill that socket, so that a
    SIGTERM arriving then was lost and a service manager's stop ended in SIGKILL. The
    interpreter's own flag for the signal is never lost, and runs this handler once the
    loop wakes, which a full socket or the interrupted wait makes it do.
    """

    def handler(signum: int, frame: types.FrameType | None) -> None:
        if not loop.is_closed():  # between a failure before serve's try and the loop's end
            loop.call_soon_threadsafe(callback)

    signal.signal(sig, handler)
    signal.siginterrupt(sig, False)


def _ignore_hup(signum: int, frame: types.FrameType | None) -> None:
    """SIGHUP before the loop's handler exists: nothing to reopen yet."""


def run_daemon(
    path: str,
    config_file: str | None,
    test_seams: bool,
    log_level: str,
    ready_fd: int | None = None,
    log_file: str | None = None,
    detached: bool = False,
    launched_in: frozenset[ancestry.Pane] | None = None,
) -> int:
    """Check everything, then serve. ``log_file`` (or ``venomx.log`` beside the socket
    when ``detached``) receives the log, rotated by ``log.max_bytes``/``log.keep``.
    ``launched_in``: the venomx panes the daemon was started in (``ancestry``), when a
    detached start has left them; by default read here."""
    if launched_in is None:
        launched_in = ancestry.launched_from(os.getpid())
    ancestry.name_this_daemon()
    signal.signal(signal.SIGHUP, _ignore_hup)  # a Python handler: exec restores the default
    dlog = DaemonLog(log_level)
    manager = systemd.take_environment()  # before anything copies our environment
    notifier = systemd.Notifier(manager.notify_socket)
    place: paths.SocketPlace | None = None
    try:
        listen_fd = manager.listen_fd()
        config = Config(config_path(config_file), explicit=config_file is not None)
        config.values = config.read_file()
        if log_file is not None:  # checked before the socket's directory is made
            directory, dir_fd, name = paths.prepare_log(log_file)
        place = paths.prepare_socket(path, activated=listen_fd is not None)
        if log_file is None and detached:
            directory, dir_fd, name = place.directory, os.dup(place.dir_fd), DETACHED_LOG
        if log_file is not None or detached:
            dlog.to_file(
                dir_fd,
                directory,
                name,
                config["log.max_bytes"],
                config["log.keep"],
                stderr=detached,
            )
        place.sock = paths.bind(place) if listen_fd is None else paths.adopt(place, listen_fd)
    except VenomxError as exc:
        refuse(exc, dlog, notifier, ready_fd)
        return exc.exit_code
    finally:
        if place is not None:
            os.close(place.dir_fd)  # the log holds its own; the socket needs none now
    # Everything imported so far lives as long as the daemon: out of the collector's
    # generations, a full collection in a burst of starts scans only what the burst made
    # (it scanned every module, ~30 ms of one reactor turn).
    gc.collect()
    gc.freeze()
    return asyncio.run(serve(place, config, test_seams, ready_fd, dlog, notifier, launched_in))
