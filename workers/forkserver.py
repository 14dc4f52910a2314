"""The fork server: a warm, pre-imported process that forks one sentinel per request.

The daemon starts it once at boot (``forkserver CONTROL_FD BASELINE [RESERVE_FD]``,
BASELINE being what every sentinel inherits, see ``baseline``, and RESERVE_FD the socket
of the reserve it keeps, see ``keep_reserve``). Each request is one byte on the
control socket with a channel socket passed by SCM_RIGHTS; the fork server forks twice so
the sentinel's parent becomes the daemon (a child subreaper), and the sentinel introduces
itself on its channel with HELLO. Heavy imports and ``gc.freeze()`` happen once, here, so
a pane start costs a fork, not an interpreter. Must not import ``venomx``.
"""

from __future__ import annotations

import gc
import os
import signal
import socket
import struct
import sys

from workers import deferred  # noqa: F401  (before pyte: see its docstring)

# isort: split
import msgpack  # noqa: F401  (pre-import for the sentinels)
import pyte  # noqa: F401

from workers import inherited, prctl, protocol, sentinel, title
from workers.vt import Terminal

LOWEST = 19  # nice value of a spare batch while it is being made


def serve(control: socket.socket, base: inherited.Baseline) -> None:
    while True:
        try:
            # Close-on-exec from birth: no channel may ever reach a pane program.
            msg, fds, _flags, _addr = socket.recv_fds(
                control, 16, protocol.FORK_BATCH_MAX, socket.MSG_CMSG_CLOEXEC
            )
        except OSError:
            return
        if not msg:
            return
        if not inherited.restore(base):
            sys.exit(inherited.CHANGED)  # the daemon starts another, with its own values
        if fds:
            fork_batch(control, fds, spare=msg == b"S")


def fork_batch(control: socket.socket, fds: list[int], spare: bool = False) -> None:
    """One sentinel per channel fd, all through one short-lived intermediate process;
    ``spare`` (request byte ``S``, not ``F``) when nobody is waiting for them.

    The intermediate's exit is what makes the daemon (a subreaper) their parent; sharing
    it across a batch pays its fork and exit, the dearest part of a start, once.
    """
    try:
        pid = os.fork()
    except OSError:
        pid = -1
    if pid == 0:
        control.close()
        # Titled as spares before they exist: they become the daemon's children when this
        # process exits, possibly before they run at all, and doctor must know them then.
        title.set_title(protocol.SPARE_TITLE)
        # Not the fork server's reaping handler: it would reap the sentinels made here
        # (which must become the daemon's children), and they would inherit it, and reap
        # their leaders. Once here, not in each sentinel.
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        if spare and sentinel.SERVE_NICE is not None:
            # Spares are made at the lowest priority, so a refill hardly slows a start in
            # progress on the same cores; each returns to SERVE_NICE before HELLO.
            os.setpriority(os.PRIO_PROCESS, 0, LOWEST)
        try:
            for i, fd in enumerate(fds):
                try:
                    if os.fork() == 0:
                        for other in fds[i + 1 :]:  # the earlier ones are closed already
                            os.close(other)
                        sentinel.main(fd)
                except OSError:
                    pass  # the daemon sees this channel close: that start fails cleanly
                os.close(fd)
        finally:
            os._exit(0)
    for fd in fds:
        os.close(fd)
    # Not waited for here: a low-priority intermediate must never hold up the next
    # request, which may be a start waiting for a sentinel. SIGCHLD reaps it (main).


def lowering_is_reversible() -> int | None:
    """Our nice value, if a process may return to it from the lowest priority (root,
    CAP_SYS_NICE, or a high enough RLIMIT_NICE allow that); else None. Probed in a child."""
    nice = os.getpriority(os.PRIO_PROCESS, 0)
    if nice >= LOWEST:
        return None
    pid = os.fork()
    if pid == 0:
        try:
            os.setpriority(os.PRIO_PROCESS, 0, LOWEST)
            os.setpriority(os.PRIO_PROCESS, 0, nice)
            os._exit(0)
        finally:
            os._exit(1)
    _, status = os.waitpid(pid, 0)
    return nice if os.waitstatus_to_exitcode(status) == 0 else None


def reap(_signum: int, _frame: object) -> None:
    """Reap every intermediate that has exited (the fork server has no other children).
    Each intermediate puts SIGCHLD back to its default before it forks a sentinel."""
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def close_strays(keep: set[int]) -> None:
    """Close every fd above 2 but those in ``keep``: whatever the daemon's exec let
    through (nothing, by design) must not live on in every sentinel."""
    for name in os.listdir("/proc/self/fd"):
        fd = int(name)
        if fd > 2 and fd not in keep:
            try:
                os.close(fd)
            except OSError:
                pass  # the listing's own directory fd


def baseline() -> inherited.Baseline:
    """What every sentinel, and so every pane's leader, inherits: what the daemon says
    (its own values when it started, with the soft RLIMIT_NOFILE it was started with),
    put back here first, not what we inherited: a program of our uid may change a new
    fork server's values while it imports, before it could take them as its own."""
    want = inherited.decode(sys.argv[2])
    if not inherited.restore(want):
        sys.exit(inherited.CHANGED)
    return want


def keep_reserve(reserve: socket.socket, control: socket.socket, base: inherited.Baseline) -> None:
    """Fork the reserve: a copy of this fork server made before it serves, which waits
    on ``reserve`` for the daemon and, when this one has died, becomes the next fork
    server. It is never exec'd, so it is never dumpable: a fork server started afresh
    is dumpable from its exec until its imports are done, and a program that killed
    the last one could trace it in that window. Without a reserve (this fork failed,
    or a program killed it) the daemon falls back to starting one."""
    try:
        pid = os.fork()
    except OSError:
        pid = -1
    if pid != 0:
        reserve.close()
        return
    try:
        control.close()
        title.set_title(protocol.RESERVE_TITLE)
        # Its child is never waited for: its number stays its own until the daemon has
        # read the report and killed both (an intermediate's never waits either).
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        msg, fds, _flags, _addr = socket.recv_fds(reserve, 16, 2, socket.MSG_CMSG_CLOEXEC)
        if msg != b"R" or len(fds) != 2:
            os._exit(0)  # the daemon closed it: it stopped, or made a new fork server
        report_r, report_w = os.pipe()
        mid = os.fork()
        if mid == 0:  # an intermediate, whose exit makes the daemon the new one's parent
            os.close(report_r)
            new = os.fork()
            if new == 0:
                os.close(report_w)
                reserve.close()
                take_over(fds, base)
            for fd in fds:
                os.close(fd)
            os.write(report_w, struct.pack("q", new))
            # Held until the daemon, having read the report, kills it (or is gone): the
            # new one's exit cannot reach the daemon before its pid has.
            reserve.recv(1)
            os._exit(0)
        for fd in fds:
            os.close(fd)
        os.close(report_w)
        new_pid = struct.unpack("q", os.read(report_r, 8))[0]
        reserve.sendall(protocol.RESERVE_REPORT.pack(os.getpid(), mid, new_pid))
        reserve.recv(1)  # so is this one: its exit is known as ours before it comes
    finally:
        os._exit(0)


def take_over(fds: list[int], base: inherited.Baseline) -> None:
    """The reserve's grandchild becomes the fork server: a session of its own, the
    baseline put back (a program may have changed the reserve's), a reserve of its own,
    then the requests on the new control socket. Only once the daemon says so, having
    read the reserve's report: until then the daemon does not know this process, which
    stays in the dead fork server's session under the reserve's title, where the daemon
    finds and ends it should the promotion fail."""
    try:
        control = socket.socket(fileno=fds[0])
        reserve = socket.socket(fileno=fds[1])
        if control.recv(1) != protocol.TAKE_OVER:  # the daemon gave up on it, or is gone
            os._exit(0)
        os.setsid()
        title.set_title(protocol.FORKSERVER_TITLE)
        signal.signal(signal.SIGCHLD, reap)
        if not inherited.restore(base):
            os._exit(inherited.CHANGED)
        keep_reserve(reserve, control, base)
        serve(control, base)
    finally:
        os._exit(0)


def main() -> None:
    base = baseline()
    title.set_title(protocol.FORKSERVER_TITLE)
    # Inherited by every sentinel: a Ctrl-C at the daemon's terminal or a closed channel
    # must not kill one; SIGTERM keeps its default. Nor SIGHUP: when an intermediate
    # exits, the group of each sentinel it forked is orphaned, and the kernel sends an
    # orphaned group that has a stopped member SIGHUP, then SIGCONT. A sentinel a program
    # of our uid stopped there died of it, before HELLO: its start failed, and its reap
    # was counted as a process that escaped a pane. Ignored, it is continued instead.
    # Every leader starts with every signal at its default (workers.leader.SIGDEF).
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGPIPE, signal.SIG_IGN)
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    # A session of our own, not only a process group: the scheduler's autogroups are per
    # session, so sentinels starting by the hundred share one group's CPU share instead
    # of crowding the daemon's (its request latency during a 1000-start burst: p90
    # 40-48 -> 16-23 ms, p99 109-135 -> 43-57 ms). No controlling terminal either.
    # The daemon spawns us in one already (setsid), before our imports run.
    if os.getsid(0) != os.getpid():
        os.setsid()
    prctl.set_undumpable()  # reset by our exec; sentinels inherit it from here
    control = socket.socket(fileno=int(sys.argv[1]))
    os.set_inheritable(control.fileno(), False)
    reserve = socket.socket(fileno=int(sys.argv[3])) if len(sys.argv) > 3 else None
    if reserve is not None:
        os.set_inheritable(reserve.fileno(), False)
    close_strays(keep={control.fileno()} | ({reserve.fileno()} if reserve else set()))
    sentinel.SERVE_NICE = lowering_is_reversible()
    sentinel.DAEMON_PID = os.getppid()  # the daemon spawned us
    sentinel.BASELINE = base
    signal.signal(signal.SIGCHLD, reap)  # after the probe, which waits for its own child
    sentinel.warm_up()
    sentinel.BLANK_TERMINAL = Terminal(
        sentinel.DEFAULT_COLS, sentinel.DEFAULT_ROWS, sentinel.DEFAULT_SCROLLBACK
    )
    sentinel.BLANK_DECODER = protocol.Decoder()
    gc.collect()
    gc.freeze()
    if reserve is not None:
        keep_reserve(reserve, control, base)
    serve(control, base)


if __name__ == "__main__":
    main()
