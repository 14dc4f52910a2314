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


def serve(control: socket.socket) -> None:
    while True:
        try:
            msg, fds, _flags, _addr = socket.recv_fds(control, 16, 1)
        except OSError:
            return
        if not msg:
            return
        for fd in fds:
            try:
                pid = os.fork()
            except OSError:
                os.close(fd)  # the daemon sees the channel close: the start fails cleanly
                continue
            if pid == 0:
                control.close()
                try:
                    if os.fork() == 0:
                        sentinel.main(fd)
                finally:
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
