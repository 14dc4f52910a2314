"""How the CLI shows an error: the error object with ``--json`` (unchanged, for programs);
for a person, ``venomx: <code>: <message>`` and, where the CLI knows more than the daemon
said, a line or two of what to do next (``hint: …``) on stderr."""

from __future__ import annotations

import errno
import os
import sys
from typing import Any, NoReturn

from venomx.cli.out import echo
from venomx.paths import socket_path
from venomx.visible import for_terminal, json_line, visible
from venomx.wire import SPAWN_OURS, VenomxError

NOT_LISTENING = (errno.ENOENT, errno.ECONNREFUSED)


class Asked:
    """What the caller asked for, as far as the hints need it. (A plain class: a
    NamedTuple's definition costs every CLI call ~0.5 ms.)"""

    __slots__ = ("program", "socket", "token")

    def __init__(
        self, socket: str | None = None, token: str | None = None, program: str | None = None
    ) -> None:
        self.socket = socket  # --socket as given (None: the default or $VENOMX_SOCKET)
        self.token = token  # the token sent (None: the anonymous caller)
        self.program = program  # what a spawn starts, as shown: 'make', the default shell


def quote(word: str) -> str:
    import shlex

    return shlex.quote(word)


def owns_daemon(path: str) -> bool:
    """Whether @owner would be accepted from us: our uid (or root) owns the daemon's socket
    and we are not inside a pane (where @owner is refused)."""
    if os.environ.get("VENOMX_PANE"):
        return False
    try:
        owner = os.stat(path).st_uid
    except OSError:
        return False
    return owner == os.getuid() or os.getuid() == 0


def venomx_failed(err: VenomxError) -> bool:
    """Whether a failed start failed on venomx's own side (its fork server or the pane's
    sentinel lost, out of descriptors), which the daemon's message says: the errno is
    then not an exec's, and blaming the program would send a person looking at it."""
    return err.code == "unavailable.spawn" and err.message.startswith(SPAWN_OURS)


def spawn_message(err: VenomxError, program: str) -> str:
    """``cannot start the program: ENOENT`` said with the program and the errno's words."""
    if venomx_failed(err):
        return f"venomx's side of the start failed, not an exec of {program}; see venomx doctor"
    name = err.data.get("errno")
    words = ""
    if isinstance(name, str) and isinstance(getattr(errno, name, None), int):
        words = f" ({os.strerror(getattr(errno, name))})"
        return f"cannot start {program}: {name}{words}"
    return f"{err.message} (program {program})"


def hints(err: VenomxError, asked: Asked) -> list[str]:
    client = sys.modules.get("venomx.client")  # not loaded: no connection was tried
    path = asked.socket or socket_path(None)
    if client is not None and isinstance(err, client.Unreachable) and err.errno in NOT_LISTENING:
        start = "venomx serve --detach"
        if asked.socket:
            start += f" --socket {quote(asked.socket)}"
        return [f"no daemon is listening at {err.path}; start one with: {start}"]
    if (
        err.code.startswith("denied.")
        and err.code != "denied.owner"
        and asked.token is None
        and owns_daemon(path)
    ):
        return [
            "you called without a token, as the anonymous caller (read only by default); "
            "as the daemon's owner add --token @owner (or export VENOMX_TOKEN=@owner)"
        ]
    return []


def human(err: VenomxError, asked: Asked) -> str:
    """``venomx: <code>: <message>`` exactly as foundation §4 has it, then ``hint:`` lines:
    the program a failed start named, or what to do."""
    lines = [f"venomx: {err.code}: {err.message}"]
    if err.code == "unavailable.spawn" and asked.program is not None:
        lines.append(f"hint: {spawn_message(err, asked.program)}")
    lines += [f"hint: {h}" for h in hints(err, asked)]
    return for_terminal(visible("\n".join(lines)), sys.stderr)


def emit_error(err: VenomxError, as_json: bool, asked: Asked | None = None) -> NoReturn:
    if as_json:
        echo(json_line({"error": err.to_dict()}).decode())
    else:
        echo(human(err, asked or Asked()), err=True)
    sys.exit(err.exit_code)


def program_of(verb: str, params: dict[str, Any]) -> str | None:
    """What a spawn verb starts: argv[0], /bin/sh for a shell run, else the daemon's
    default shell (which the CLI cannot name)."""
    argv = params.get("argv")
    if isinstance(argv, list) and argv and isinstance(argv[0], str):
        return repr(argv[0])
    if verb == "run" and isinstance(params.get("shell"), str):
        return "'/bin/sh'"
    if verb in ("window.create", "pane.split"):
        return "the default shell"
    return None


__all__ = ["Asked", "emit_error", "hints", "human", "program_of"]
