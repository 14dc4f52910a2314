"""What systemd tells ``venomx serve`` and what it tells systemd back, without libsystemd.

Readiness (``Type=notify``): ``READY=1`` once the socket accepts connections,
``STOPPING=1`` when shutdown begins, sent as datagrams to ``$NOTIFY_SOCKET`` (a path, or
``@name`` for the abstract namespace), as ``sd_notify(3)`` does. Socket activation
(``sd_listen_fds(3)``): when ``$LISTEN_PID`` is our pid, ``$LISTEN_FDS`` sockets start at
fd 3; venomx serves exactly one. ``take_environment`` removes these variables from our
environment before anything reads it, so no pane ever inherits them (a program in a pane
could otherwise report readiness or stopping for the daemon, or believe fd 3 is a socket
for it). A failed notification is logged and never stops the daemon.
"""

from __future__ import annotations

import logging
import os
import socket
from dataclasses import dataclass

from venomx.wire import VenomxError

log = logging.getLogger("venomx.daemon")

LISTEN_FDS_START = 3  # SD_LISTEN_FDS_START
VARIABLES = ("NOTIFY_SOCKET", "LISTEN_PID", "LISTEN_FDS", "LISTEN_FDNAMES")


def activation_error(reason: str) -> VenomxError:
    return VenomxError("invalid_params.socket", f"socket activation: {reason}", {"reason": reason})


@dataclass
class Environment:
    """What systemd passed in our environment, taken out of it."""

    notify_socket: str | None = None
    listen_pid: str | None = None
    listen_fds: str | None = None

    def listen_fd(self) -> int | None:
        """The socket passed to us (fd 3), or None when none was passed to this process.

        Raises ``invalid_params.socket`` when sockets are meant for us but are not one
        socket (``LISTEN_FDS`` other than 1, or not a number)."""
        if self.listen_pid is None or self.listen_pid.strip() != str(os.getpid()):
            return None  # absent, or meant for the process that started us
        fds = self.listen_fds
        if fds is None or not fds.isdigit():
            raise activation_error(f"LISTEN_FDS is {fds!r}, not a number of sockets")
        count = int(fds)
        if count == 0:
            return None
        if count != 1:
            raise activation_error(
                f"{count} sockets were passed (LISTEN_FDS); venomx serves one: "
                "give the socket unit one ListenStream="
            )
        return LISTEN_FDS_START


def take_environment() -> Environment:
    """Remove NOTIFY_SOCKET and LISTEN_* from ``os.environ`` (and so from the environment
    of every process we start) and return what they said."""
    values = {name: os.environ.pop(name, None) for name in VARIABLES}
    return Environment(
        notify_socket=values["NOTIFY_SOCKET"] or None,
        listen_pid=values["LISTEN_PID"],
        listen_fds=values["LISTEN_FDS"],
    )


def notify_address(value: str) -> str:
    """The address of ``$NOTIFY_SOCKET``: ``@name`` is abstract, otherwise a path."""
    return "\0" + value[1:] if value.startswith("@") else value


class Notifier:
    """Sends state changes to the service manager; does nothing without NOTIFY_SOCKET."""

    def __init__(self, notify_socket: str | None) -> None:
        self.address: str | None = None
        if notify_socket is None:
            return
        if not notify_socket.startswith(("/", "@")) or len(notify_socket) < 2:
            log.warning("ignoring NOTIFY_SOCKET %r: not a path or @name", notify_socket)
            return
        self.address = notify_address(notify_socket)

    def send(self, *fields: str) -> bool:
        """Send ``fields`` (``READY=1``, …) as one datagram; never blocks the reactor.
        Whether it was sent (a failure is logged)."""
        if self.address is None:
            return False
        message = "\n".join(fields).encode()
        try:
            with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
                sock.sendto(message, socket.MSG_DONTWAIT, self.address)
        except OSError as exc:
            log.warning(
                "cannot notify the service manager (%s): %s",
                fields[0],
                exc.strerror or exc,
            )
            return False
        return True

    def ready(self, socket_path: str) -> None:
        self.send("READY=1", f"STATUS=serving on {socket_path}", f"MAINPID={os.getpid()}")

    def stopping(self) -> None:
        self.send("STOPPING=1", "STATUS=shutting down")

    def failed(self, message: str) -> None:
        self.send(f"STATUS=cannot start: {message}")
