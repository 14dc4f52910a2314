"""Where the daemon's socket lives (§1), shared by the daemon and every client."""

from __future__ import annotations

import os

FNV_PRIME, FNV_OFFSET, MASK = (1 << 88) + 0x13B, 0x6C62272E07BB014262B821756295C58D, (1 << 128) - 1


def socket_path(explicit: str | None) -> str:
    """--socket, else $VENOMX_SOCKET, else $XDG_RUNTIME_DIR/venomx/default.sock, else /tmp."""
    if explicit:
        return explicit
    env = os.environ.get("VENOMX_SOCKET")
    if env:
        return env
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    if runtime:
        return os.path.join(runtime, "venomx", "default.sock")
    return f"/tmp/venomx-{os.getuid()}/default.sock"


def abstract_address(path: str) -> str:
    """The Linux abstract-namespace address a daemon bound at ``path`` also listens on.

    A same-uid program can rename or replace the socket file (it may write the socket's
    directory), but it cannot take an abstract address while the daemon holds it, so
    clients try this first. Derived from the path with its directory resolved, so every
    client of one daemon computes the same address.
    """
    full = os.path.abspath(path)
    where = os.path.join(os.path.realpath(os.path.dirname(full)), os.path.basename(full))
    return f"\0venomx/{fnv1a_128(os.fsencode(where)):032x}"


def fnv1a_128(data: bytes) -> int:
    """FNV-1a, 128 bits: a name for a path, not a secret (anyone may compute it), and
    cheap to import, which hashlib's OpenSSL binding is not (every CLI call needs it)."""
    h = FNV_OFFSET
    for b in data:
        h = ((h ^ b) * FNV_PRIME) & MASK
    return h
