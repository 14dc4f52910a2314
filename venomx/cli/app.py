"""The ``venomx`` command: a well-formed call of a generated verb is parsed without
click (``venomx.cli.quick``: about one interpreter start); everything else (help, usage
errors, the hand-written commands) goes to the click tree (``venomx.cli.tree``)."""

from __future__ import annotations

import io
import os
import sys


def main() -> None:
    std_descriptors()
    utf8_streams()
    from venomx.cli import quick

    call = quick.parse(sys.argv[1:])
    if call is not None:
        quick.run(call)
    from venomx.cli.tree import build

    build().main(prog_name="venomx")


def std_descriptors() -> None:
    """Descriptors 0-2 that were closed become /dev/null, as OpenSSH's
    ``sanitise_stdfd`` does: output with nowhere to go is dropped instead of ending in a
    traceback and exit 1 where the command's status belonged, and a socket the CLI opens
    never lands on 1 or 2 to be written to as output. A closed stdin stays
    ``sys.stdin is None``, which ``exec --stdin`` reads as end of file."""
    while True:
        try:
            fd = os.open(os.devnull, os.O_RDWR)
        except OSError:
            return
        if fd > 2:
            os.close(fd)
            break
    if sys.stdout is None:
        sys.stdout = open(1, "w", closefd=False)
    if sys.stderr is None:
        sys.stderr = open(2, "w", closefd=False)


def utf8_streams() -> None:
    """Write UTF-8 to files and pipes whatever the locale (a log keeps every character;
    a Latin-1 locale made an astral character in a row a traceback), and never fail on
    a terminal whose charset lacks one (what goes there is made ASCII where it matters)."""
    for stream in (sys.stdout, sys.stderr):
        if not isinstance(stream, io.TextIOWrapper) or stream.encoding.lower() in UTF8_NAMES:
            continue
        try:
            if stream.isatty():
                stream.reconfigure(errors="replace")
            else:
                stream.reconfigure(encoding="utf-8", errors=stream.errors)
        except (OSError, ValueError):
            pass


UTF8_NAMES = ("utf-8", "utf8")


__all__ = ["main"]
