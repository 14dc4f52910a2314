"""Who holds an abstract Unix socket address, asked of the kernel (``sock_diag``) rather
than by connecting: a holder that never accepts fills its queue, and then a connect
learns nothing (or waits forever), while a socket bound without ``listen`` cannot be
connected to at all.
"""

from __future__ import annotations

import os
import socket
import struct
from typing import Any

NETLINK_SOCK_DIAG = 4
SOCK_DIAG_BY_FAMILY = 20
NLM_F_REQUEST, NLM_F_DUMP = 0x1, 0x300
NLMSG_ERROR, NLMSG_DONE = 2, 3
UDIAG_SHOW_NAME, UDIAG_SHOW_UID = 0x1, 0x40
UNIX_DIAG_NAME, UNIX_DIAG_UID = 0, 7
ALL_STATES = 0xFFFFFFFF
CLOSE, LISTEN = 7, 10  # socket states (as TCP's): bound but not listening; listening
HEADER = struct.Struct("=IHHII")  # nlmsghdr: len, type, flags, seq, pid
REQUEST = struct.Struct("=BBHIII8x")  # unix_diag_req: family, protocol, pad, states, ino, show
MESSAGE = 16  # unix_diag_msg: family, type, state, pad, ino, cookie[2]
ATTR = struct.Struct("=HH")  # rtattr: len, type
CREDENTIALS = struct.Struct("3i")  # ucred: pid, uid, gid


class Unknown(Exception):
    """The kernel cannot say who holds a name: no sock_diag here, a kernel before 5.3
    (no uids), or stream sockets of several uids in the same state."""


def holder_uid(name: bytes, listening: bool = False) -> int | None:
    """The uid that created the socket holding abstract address ``name`` (its leading NUL
    included), or None if no stream socket holds it now; ``Unknown`` if the kernel cannot
    say.

    Accepted connections carry their listener's name too (and outlive it), so the
    listener is believed first, then a socket bound without listening; connected ones
    only if they all agree. ``listening``: only a listener will do (the caller found a
    queue there).
    """
    found = dump(name)
    if found is None or any(uid < 0 for _, uid in found):
        raise Unknown(name)  # no sock_diag, or a kernel that gives no uids
    for state in (LISTEN, CLOSE):
        uids = {uid for s, uid in found if s == state}
        if len(uids) > 1:
            raise Unknown(name)
        if uids:
            return uids.pop()
        if listening:
            return None
    uids = {uid for _, uid in found}
    if len(uids) > 1:
        raise Unknown(name)
    return uids.pop() if uids else None


def dump(name: bytes) -> list[tuple[int, int]] | None:
    """(state, uid) of every Unix stream socket named ``name``; None if the kernel cannot
    say."""
    found: list[tuple[int, int]] = []
    try:
        with socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, NETLINK_SOCK_DIAG) as nl:
            nl.settimeout(2.0)
            show = UDIAG_SHOW_NAME | UDIAG_SHOW_UID
            body = REQUEST.pack(socket.AF_UNIX, 0, 0, ALL_STATES, 0, show)
            nl.sendall(
                HEADER.pack(
                    HEADER.size + len(body), SOCK_DIAG_BY_FAMILY, NLM_F_REQUEST | NLM_F_DUMP, 1, 0
                )
                + body
            )
            while True:
                data = nl.recv(1 << 16)
                at = 0
                while at + HEADER.size <= len(data):
                    length, kind = HEADER.unpack_from(data, at)[:2]
                    if kind == NLMSG_DONE:
                        return found
                    if kind == NLMSG_ERROR or length < HEADER.size:
                        return None
                    entry = _match(data[at + HEADER.size : at + length], name)
                    if entry is not None:
                        found.append(entry)
                    at += (length + 3) & ~3
    except OSError:
        return None


def _match(msg: bytes, name: bytes) -> tuple[int, int] | None:
    """(state, uid) of one unix_diag_msg named ``name`` (uid -1 if the kernel gave none),
    else None."""
    if len(msg) < MESSAGE or msg[1] != socket.SOCK_STREAM:
        return None  # names are per type: a datagram socket may share ours
    state = msg[2]
    at, named, uid = MESSAGE, False, None
    while at + ATTR.size <= len(msg):
        length, kind = ATTR.unpack_from(msg, at)
        if length < ATTR.size:
            break
        value = msg[at + ATTR.size : at + length]
        if kind == UNIX_DIAG_NAME:
            named = value == name
        elif kind == UNIX_DIAG_UID and len(value) >= 4:
            uid = struct.unpack_from("=I", value)[0]
        at += (length + 3) & ~3
    if not named:
        return None
    return (state, -1 if uid is None else uid)  # -1: this kernel gives no uid


def peer_credentials(sock: Any) -> tuple[int, int]:
    """The pid and uid of the process at the other end of a connected Unix socket, as the
    kernel recorded them at its connect (``SO_PEERCRED``); OSError if it cannot say."""
    creds = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, CREDENTIALS.size)
    pid, uid, _ = CREDENTIALS.unpack(creds)
    return pid, uid


def mine(uid: int | None, unknown: bool = False) -> bool:
    """Whether ``uid`` is ours or root's; ``unknown`` is the answer for None."""
    return unknown if uid is None else uid in (os.getuid(), 0)
