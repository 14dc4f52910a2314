"""The daemon's share of the CPU: ahead of the panes it serves, where the host permits.

Every pane's leader starts a session of its own, and Linux's autogroups give each session
an equal share of the CPU. During a burst of 1000 starts on 2 cores the daemon, one
session among hundreds, waited for a core: its whoami latency had a p90 of 8-13 ms and a
p99 of 31-59 ms. With its own session's autogroup at nice -5 (weight 3121 against 1024)
they were ~2 ms and 16-30 ms, and the burst was no slower. The daemon is idle most of
the time and never uses more than one core, so the panes lose little.

Raising a priority takes privilege (root, CAP_SYS_NICE, or an RLIMIT_NICE that allows it:
``LimitNICE=`` in a unit); without it nothing changes and doctor says why. It is done only
when the daemon is alone in its session, because an autogroup belongs to the whole
session: a daemon in the foreground of a shell would raise the shell's priority too.
Panes never inherit it: the fork server starts a session of its own, whose autogroup
starts at nice 0, and every leader starts another.
"""

from __future__ import annotations

import asyncio
import errno
import logging
import os
from dataclasses import dataclass

from venomx.daemon import procfs

log = logging.getLogger(__name__)

AUTOGROUP = "/proc/self/autogroup"
# An unprivileged caller gets one autogroup change per 100 ms, host-wide (EAGAIN).
RETRIES = 10
RETRY_AFTER = 0.2


def autogroup_nice(pid: int | str = "self") -> int | None:
    """A process's autogroup nice value (``/autogroup-42 nice -5``), ours by default, or
    None without one."""
    try:
        with open(f"/proc/{pid}/autogroup", "rb") as f:
            return int(f.read().split()[-1])
    except (OSError, ValueError, IndexError):
        return None


def alone_in_session() -> bool:
    """Whether no other live process shares our session (threads are not listed in
    /proc). Anything unreadable but a process that is gone counts as sharing it."""
    me, sid = os.getpid(), os.getsid(0)
    try:
        names = os.listdir("/proc")
    except OSError:
        return False
    for name in names:
        if not name.isdigit() or int(name) == me:
            continue
        try:
            fields = procfs.stat_fields(name)
        except (FileNotFoundError, ProcessLookupError):
            continue  # gone meanwhile
        except (OSError, ValueError):
            return False
        # a zombie (the session leader ``--detach`` leaves behind, until its parent
        # reaps it) no longer runs
        if int(fields[procfs.SESSION]) == sid and fields[procfs.STATE] != b"Z":
            return False
    return True


@dataclass
class Priority:
    """What the daemon asked for (``daemon.nice``) and what its autogroup has."""

    asked: int = 0
    nice: int | None = None
    detail: str = "not asked"
    raised: bool = False  # we changed our autogroup: 0 puts it back
    fd: int = -1  # our autogroup file, opened by ``open``
    cannot: str | None = None  # why it could not be opened
    alone: bool = False
    retry: asyncio.TimerHandle | None = None

    def open(self) -> None:
        """Before the daemon makes itself undumpable, which gives its /proc files to root:
        the file then opens only for root, while the kernel checks each write (the right
        to raise a priority, the rate limit) all the same. And see once whether we are
        alone in our session: no process can join it later, and none of ours stays in it."""
        self.alone = alone_in_session()
        try:
            self.fd = os.open(AUTOGROUP, os.O_WRONLY | os.O_CLOEXEC)
        except OSError as exc:
            self.cannot = errno.errorcode.get(exc.errno or 0, "EIO")

    def close(self) -> None:
        if self.retry is not None:
            self.retry.cancel()
            self.retry = None
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def report(self) -> dict[str, object]:
        return {"asked": self.asked, "autogroup_nice": self.nice, "detail": self.detail}

    def apply(self, asked: int, loop: asyncio.AbstractEventLoop | None = None) -> None:
        """Ask for ``asked`` (0: leave the autogroup as the session started it, or put
        back what we changed); ``loop`` retries while the kernel says to try later."""
        self.asked = asked
        if self.retry is not None:
            self.retry.cancel()
            self.retry = None
        self._try(loop, RETRIES)

    def _try(self, loop: asyncio.AbstractEventLoop | None, retries: int) -> None:
        self.retry = None
        self.nice = autogroup_nice()
        if self.nice is None:
            self.detail = "no autogroups on this host: CPUWeight= in a unit sets the share"
            return
        want = self.asked if self.asked or self.raised else self.nice
        if want == self.nice:
            self.detail = f"autogroup nice {self.nice}"
            return
        if not (self.raised or self.alone):
            self.detail = "left as it was: the daemon shares its session with other processes"
            return
        if self.fd < 0:
            self.detail = f"cannot open {AUTOGROUP}: {self.cannot or 'not opened'}"
            return
        try:
            os.write(self.fd, str(want).encode())
        except OSError as exc:
            if exc.errno == errno.EAGAIN and loop is not None and retries > 0:
                self.detail = "asked; the kernel said to try again"
                self.retry = loop.call_later(RETRY_AFTER, self._try, loop, retries - 1)
                return
            self.detail = (
                "not permitted: raising a priority takes root, CAP_SYS_NICE or RLIMIT_NICE"
                if exc.errno in (errno.EPERM, errno.EACCES)
                else f"cannot set: {errno.errorcode.get(exc.errno or 0, 'EIO')}"
            )
            log.info("daemon priority: %s", self.detail)
            return
        self.raised = want != 0
        self.nice = autogroup_nice()
        self.detail = f"autogroup nice {self.nice}"
        log.info("daemon priority: %s", self.detail)
