"""The fork server: a warm, pre-imported process that forks one sentinel per request.

The daemon starts it once at boot. Each request is one byte on the control socket with a
channel socket passed by SCM_RIGHTS; the fork server forks twice so the sentinel's parent
becomes the daemon (a child subreaper), and the sentinel introduces itself on its channel
with HELLO. Heavy imports and ``gc.freeze()`` happen once, here, so a pane start costs a
fork, not an interpreter. Must not import ``venomx``.
"""

from __future__ import annotations

import gc
import os
import signal
import socket
import sys

import msgpack  # noqa: F401  (pre-import for the sentinels)
import pyte  # noqa: F401

from workers import sentinel

CLONE_PARENT = 0x00008000
SYS_CLONE = {"x86_64": 56, "aarch64": 220}.get(os.uname().machine)


def _fork_as_sibling() -> int:
    """fork(2), except the child's parent is our parent (the daemon): clone(CLONE_PARENT).

    One fork instead of the classic double fork. The interpreter is told about the fork
    exactly as os.fork does it. Returns -1 where the call is unavailable.
    """
    if SYS_CLONE is None:
        return -1
    import ctypes

    api = ctypes.pythonapi
    libc = ctypes.PyDLL(None, use_errno=True)  # PyDLL: the GIL stays held across the call
    libc.syscall.restype = ctypes.c_long
    api.PyOS_BeforeFork()
    if os.uname().machine == "x86_64":  # clone(flags, stack, ptid, ctid, tls)
        pid = libc.syscall(SYS_CLONE, CLONE_PARENT | signal.SIGCHLD, 0, 0, 0, 0)
    else:  # aarch64: clone(flags, stack, ptid, tls, ctid)
        pid = libc.syscall(SYS_CLONE, CLONE_PARENT | signal.SIGCHLD, 0, 0, 0, 0)
    if pid == 0:
        api.PyOS_AfterFork_Child()
    else:
        api.PyOS_AfterFork_Parent()
    return int(pid)


def serve(control: socket.socket) -> None:
    sibling = True
    while True:
        try:
            msg, fds, _flags, _addr = socket.recv_fds(control, 16, 1)
        except OSError:
            return
        if not msg:
            return
        for fd in fds:
            pid = _fork_as_sibling() if sibling else -1
            if pid == 0:
                control.close()
                sentinel.main(fd)
            if pid > 0:
                os.close(fd)
                continue
            sibling = False  # unavailable here: fall back to the double fork
            pid = os.fork()
            if pid == 0:
                control.close()
                if os.fork() == 0:
                    sentinel.main(fd)
                os._exit(0)
            os.close(fd)
            os.waitpid(pid, 0)


def main() -> None:
    import setproctitle

    setproctitle.setproctitle("venomx-forkserver")
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    os.setpgid(0, 0)
    control = socket.socket(fileno=int(sys.argv[1]))
    gc.collect()
    gc.freeze()
    serve(control)


if __name__ == "__main__":
    main()
