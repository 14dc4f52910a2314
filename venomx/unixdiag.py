"""Who holds an abstract Unix socket address, asked of the kernel (``sock_diag``) rather
than by connecting: a holder that never accepts fills its queue, and then a connect
learns nothing (or waits forever), while a socket bound without ``listen`` cannot be
connected to at all.
"""

from __future__ import annotations

import os
import socket
import struct

NETLINK_SOCK_DIAG = 4
SOCK_DIAG_BY_FAMILY = 20
NLM_F_REQUEST, NLM_F_DUMP = 0x1, 0x300
NLMSG_ERROR, NLMSG_DONE = 2, 3
UDIAG_SHOW_NAME, UDIAG_SHOW_UID = 0x1, 0x40
UNIX_DIAG_NAME, UNIX_DIAG_UID = 0, 7
ALL_STATES = 0xFFFFFFFF
HEADER = struct.Struct("=IHHII")  # nlmsghdr: len, type, flags, seq, pid
REQUEST = struct.Struct("=BBHIII8x")  # unix_diag_req: family, protocol, pad, states, ino, show
MESSAGE = 16  # unix_diag_msg: family, type, state, pad, ino, cookie[2]
ATTR = struct.Struct("=HH")  # rtattr: len, type


def holder_uid(name: bytes) -> int | None:
    """The uid owning the socket bound at abstract address ``name`` (its leading NUL
    included), or None if no socket holds it or the kernel cannot say (no sock_diag,
    or a kernel before 5.3, which reports no uid)."""
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
                    if kind in (NLMSG_DONE, NLMSG_ERROR) or length < HEADER.size:
                        return None
                    uid = _match(data[at + HEADER.size : at + length], name)
                    if uid is not None:
                        return uid
                    at += (length + 3) & ~3
    except OSError:
        return None


def _match(msg: bytes, name: bytes) -> int | None:
    """The uid in one unix_diag_msg whose name is ``name``, else None."""
    at, found, uid = MESSAGE, False, None
    while at + ATTR.size <= len(msg):
        length, kind = ATTR.unpack_from(msg, at)
        if length < ATTR.size:
            break
        value = msg[at + ATTR.size : at + length]
        if kind == UNIX_DIAG_NAME:
            found = value == name
        elif kind == UNIX_DIAG_UID and len(value) >= 4:
            uid = struct.unpack_from("=I", value)[0]
        at += (length + 3) & ~3
    return uid if found else None


def mine(uid: int | None, unknown: bool = False) -> bool:
    """Whether ``uid`` is ours or root's; ``unknown`` is the answer for None."""
    return unknown if uid is None else uid in (os.getuid(), 0)
