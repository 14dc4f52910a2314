"""Per-pane cgroups (cgroup v2): every process a pane starts is accounted for, limits apply.

At start the daemon finds the cgroup v2 hierarchy it is in through ``/proc/self/cgroup``
and ``/proc/self/mountinfo`` (never assuming ``/sys/fs/cgroup``: hybrid hosts mount v2 at
``/sys/fs/cgroup/unified``), and, where it may write there, makes its own subtree::

    <the cgroup it started in>/venomx-<socket key>/      one per socket path and uid
        daemon/                                         the daemon, fork server, sentinels
        <source uuid>.<pane>/                           one per pane of this start

The subtree is named by the socket, so the next start on the same socket (after a
``kill -9``) finds what the last one left and ends it; pane cgroups are named by the
daemon's source, so two daemons never touch each other's. The daemon moves itself into
``daemon/`` first (cgroup v2's no-internal-processes rule: a cgroup that hands
controllers to its children holds no processes of its own). A pane's leader is put in its
cgroup by its sentinel, which joins it, spawns, and moves back (``workers.leader``).

Everything here is a read or write of a small cgroupfs file: no call waits on a process.
"""

from __future__ import annotations

import asyncio
import errno
import hashlib
import logging
import os
import re
import signal as _signal
import time
from collections.abc import Callable, Container
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from venomx.daemon import procfs
from venomx.wire import VenomxError

log = logging.getLogger(__name__)

MODES = ("auto", "required", "off")
CONTROLLERS = ("memory", "pids")  # what limits and usage need, enabled where available
DAEMON_LEAF = "daemon"
PREFIX = "venomx-"
KILL_WAIT = 1.0  # after SIGKILL, how long ending a cgroup waits for it to empty
BELOW_MAX = 1024  # cgroups below a pane's that are read; past it, nothing is proven
POLL = 0.02
SIGKILL_BIT = 1 << (_signal.SIGKILL - 1)


def _unescape(s: str) -> str:
    """A mountinfo field: spaces, tabs, newlines and backslashes are octal escapes."""
    return re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), s)


def _read(path: str) -> str:
    """A whole small kernel file. The descriptor itself, not ``open()``: a pane's exit
    reads five cgroup files on the reactor, and the text layer's set-up cost twice what
    the kernel's open and read do (~37 against ~13 µs per file)."""
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        chunks = []
        while chunk := os.read(fd, 65536):
            chunks.append(chunk)
    finally:
        os.close(fd)
    return b"".join(chunks).decode("utf-8", "replace")


def _write(path: str, text: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CLOEXEC)
    try:
        os.write(fd, text.encode())
    finally:
        os.close(fd)


def _why(exc: OSError) -> str:
    return errno.errorcode.get(exc.errno or 0, "EIO")


@dataclass
class Located:
    """Where this process's cgroup v2 is: its directory, or why there is none; and the
    controllers a cgroup v1 hierarchy holds (a hybrid host), which v2 then cannot have."""

    directory: str | None
    mount: str | None
    why: str | None
    v1: set[str] = field(default_factory=set)
    path: str = ""  # ``directory`` as /proc/<pid>/cgroup names it


def locate(
    proc_cgroup: str = "/proc/self/cgroup", mountinfo: str = "/proc/self/mountinfo"
) -> Located:
    """Our cgroup v2 directory from the ``0::`` line and the cgroup2 mount that shows it."""
    try:
        own = _v2_path(_read(proc_cgroup))
        mounts = _read(mountinfo).splitlines()
    except OSError as exc:
        return Located(None, None, f"cannot read /proc: {_why(exc)}")
    v1: set[str] = set()
    found: list[tuple[str, str]] = []  # (mount root, mount point)
    for line in mounts:
        left, _, right = line.partition(" - ")
        a, b = left.split(), right.split()
        if len(a) < 5 or len(b) < 3:
            continue
        if b[0] == "cgroup2":
            found.append((_unescape(a[3]), _unescape(a[4])))
        elif b[0] == "cgroup":
            v1 |= set(b[2].split(","))
    if own is None:
        return Located(None, None, "this process is in no cgroup v2 hierarchy", v1)
    if own.endswith(" (deleted)"):
        return Located(None, None, f"our cgroup {own} was removed", v1)
    if not found:
        return Located(None, None, "no cgroup2 file system is mounted", v1)
    for root, point in found:
        if own == root or own.startswith(root.rstrip("/") + "/"):
            rel = own[len(root.rstrip("/")) :] if root != "/" else own
            directory = point.rstrip("/") + rel if rel != "/" else point
            if os.path.isdir(directory):
                return Located(directory, point, None, v1, own)
    return Located(None, None, f"our cgroup {own} is not visible under any cgroup2 mount", v1)


def socket_key(socket_path: str) -> str:
    """The subtree's name for this socket and uid: the same on every start."""
    text = f"{os.getuid()}:{os.path.abspath(socket_path)}"
    return PREFIX + hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:16]


def members(directory: str) -> list[int]:
    """The processes in a cgroup and the cgroups below it now; [] once it is gone (or
    when it cannot be read: callers that must not take that for empty use ``census``)."""
    return census(directory) or []


def census(directory: str) -> list[int] | None:
    """The processes in a cgroup and in every cgroup below it, now. A pane's programs may
    make cgroups below their own (a rootless container runtime does) and move into them,
    and ``cgroup.procs`` lists only the cgroup's own processes; ``populated`` in
    ``cgroup.events`` covers the whole subtree at once. [] when nothing lives in it or
    it is gone (a cgroup with processes cannot be removed); None when it would not say:
    no descriptor left, more than ``BELOW_MAX`` cgroups below it, or ``populated`` while
    no process was found (they moved from one cgroup to another as we looked)."""
    try:
        if not _populated(directory):
            return []
        below = _below(directory)
        if below is None:
            return None
        found = _procs(directory)
        for d in below:
            try:
                found += _procs(d)
            except (FileNotFoundError, ProcessLookupError):
                continue  # removed meanwhile, so empty when it went
            except OSError as exc:
                if exc.errno != errno.EOPNOTSUPP:
                    raise
                # a threaded cgroup: its threads' processes are listed at its thread
                # root, the nearest domain cgroup above, which is read too
        if found or not _populated(directory):
            return found
        return None
    except (FileNotFoundError, ProcessLookupError):
        return []
    except (OSError, ValueError):
        return None


def _populated(directory: str) -> bool:
    """Whether any process lives in the cgroup or below it."""
    for line in _read(os.path.join(directory, "cgroup.events")).splitlines():
        key, _, value = line.partition(" ")
        if key == "populated":
            return value.strip() != "0"
    raise ValueError(f"no populated in {directory}/cgroup.events")


def _procs(directory: str) -> list[int]:
    return [int(x) for x in _read(os.path.join(directory, "cgroup.procs")).split()]


def _below(directory: str, most: int | None = BELOW_MAX) -> list[str] | None:
    """Every cgroup below ``directory``, parents before their children; None past
    ``most`` (None: no bound, off the reactor). A loop, not recursion: a program may nest
    cgroups thousands deep."""
    found: list[str] = []
    todo = [directory]
    while todo:
        try:
            with os.scandir(todo.pop()) as entries:
                subs = [e.path for e in entries if e.is_dir(follow_symlinks=False)]
        except (FileNotFoundError, NotADirectoryError):
            continue  # removed meanwhile
        found += subs
        todo += subs
        if most is not None and len(found) > most:
            return None
    return found


def left_behind(first: list[int] | None, again: list[int] | None) -> dict[str, Any]:
    """``cleanup`` {verified, escapees} from two ``census`` of a pane's cgroup at its exit
    (the second taken only when the first found processes). ``verified`` only when one
    of them found the cgroup empty, which the kernel's ``populated`` proves at once for
    the whole subtree. Processes that are only ending count as no escapee but prove
    nothing: a process that is stuck in its exit (held by a tracer) can stand beside one
    that moves from cgroup to cgroup faster than a walk reads them. A cgroup that could
    not be read proves nothing and counts no escapee it did not see."""
    if first is None:
        return {"verified": False, "escapees": 0}
    alive = [p for p in sorted(set(first) | set(again or ())) if not dying(p)]
    return {"verified": first == [] or again == [], "escapees": len(alive)}


def dying(pid: int) -> bool:
    """Whether every thread of ``pid`` is ending: SIGKILL pending (the sentinel's sweep,
    or a fatal signal such as a hangup's SIGHUP, which the kernel turns into SIGKILL) or
    its exit begun with that SIGKILL already taken. Such a process is ending, not an
    escapee. A process that is already gone counts as dying; one whose main thread
    alone has exited does not, as its other threads still run, and one /proc will not
    show (hidden, or no descriptor left) does not either: that proves nothing."""
    try:
        first = _threads(pid)
        if first is None:
            return True
        if not all(_thread_dying(pid, t) for t in first):
            return False
        # Two looks, each at every thread. One is not proof: a thread that starts
        # another and exits while we look passes for ending with its successor unseen
        # (an ending process starts no thread, so a new one is proof it is not), and an
        # execve from a thread other than the first sends SIGKILL to all the others,
        # then takes the first one's ID: the ID read as ending now runs the new program.
        again = _threads(pid)
        if again is None:
            return True
        return again <= first and all(_thread_dying(pid, t) for t in again)
    except OSError:
        return False


def _threads(pid: int) -> frozenset[str] | None:
    """The thread IDs of ``pid``; None once it is gone."""
    try:
        return frozenset(os.listdir(f"/proc/{pid}/task"))
    except (FileNotFoundError, ProcessLookupError):
        return None


def _thread_dying(pid: int, tid: str) -> bool:
    """Whether the thread has begun its exit, has SIGKILL pending, or is gone."""
    task = f"{pid}/task/{tid}"
    try:
        if procfs.exiting(task):
            return True
        status = _read(f"/proc/{task}/status")
    except (FileNotFoundError, ProcessLookupError):
        return True
    for line in status.splitlines():
        if line.startswith(("SigPnd:", "ShdPnd:")) and int(line.split()[1], 16) & SIGKILL_BIT:
            return True
    return False


# How much of a process's environment is read for its VENOMX_PANE. Every pane exit
# without a cgroup reads it for each process the panes left behind: a program that left
# 300 with 1 MiB environments held the reactor 0.44 s per exit (helper-142), and one that
# hides its pane can clear the variable anyway.
ENVIRON_READ = 64 * 1024


def pane_of(pid: int) -> str | None:
    """The VENOMX_PANE a process carries in its environment (the program may change it),
    within its first ENVIRON_READ bytes, where a pane's leader has it first."""
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            env = f.read(ENVIRON_READ)
    except OSError:
        return None
    for item in env.split(b"\0"):
        if item.startswith(b"VENOMX_PANE="):
            return item[12:].decode("utf-8", "replace")
    return None


def children(pid: int) -> list[int]:
    """A process's children, over all its threads (a subreaper's orphans may go to any)."""
    out: list[int] = []
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return out
    for t in tasks:
        try:
            out += [int(x) for x in _read(f"/proc/{pid}/task/{t}/children").split()]
        except (OSError, ValueError):
            continue
    return out


def strangers(ours: set[int]) -> list[int]:
    """The daemon's children that are none of ``ours``: orphans it adopted as subreaper."""
    return [p for p in children(os.getpid()) if p not in ours]


def accounted(pane_id: str, orphans: list[int]) -> list[int]:
    """Without a cgroup: the pane's processes still alive as the subreaper sees them, the
    ``orphans`` re-parented to the daemon (``strangers``) and their descendants that carry
    its VENOMX_PANE and are not already being killed. A process that cleared its
    environment is missed: only a cgroup proves a pane empty."""
    found: list[int] = []
    todo = list(orphans)
    seen: set[int] = set()
    while todo and len(seen) < 65536:
        pid = todo.pop()
        if pid in seen:
            continue
        seen.add(pid)
        todo += children(pid)
        if pane_of(pid) == pane_id and not dying(pid):
            found.append(pid)
    return sorted(found)


def _v2_path(proc_cgroup: str) -> str | None:
    """The cgroup v2 path of a ``/proc/PID/cgroup`` text (its ``0::`` line), if any."""
    for line in proc_cgroup.splitlines():
        if line.startswith("0::"):
            return line[3:]
    return None


def cgroup_of(pid: int) -> str | None:
    """A process's cgroup v2 path, as /proc names it (None once it is gone)."""
    try:
        return _v2_path(_read(f"/proc/{pid}/cgroup"))
    except OSError:
        return None


def _signal_pid(pid: int, *sigs: int, within: str | None = None) -> bool:
    """Signal through a pidfd, so a pid reused under us is never hit; with ``within``
    (a cgroup path), only a process in that cgroup or below it. The pid came from a
    census of that cgroup, and between the census and the pidfd its process may have
    been reaped and the pid handed to anyone, of any uid when we are root."""
    try:
        fd = os.pidfd_open(pid)
    except OSError:
        return False
    try:
        if within is not None:
            # Read while the pidfd holds the process: if the signal below reaches it,
            # it held the pid all along, so this was its cgroup.
            path = cgroup_of(pid)
            if path is None or not (path == within or path.startswith(within.rstrip("/") + "/")):
                return False
        for sig in sigs:
            _signal.pidfd_send_signal(fd, sig)
        return True
    except OSError:
        return False
    finally:
        os.close(fd)


@dataclass
class PaneGroup:
    """One pane's cgroup: its directory and the run it served, kept until it is empty."""

    pane: str
    directory: str
    run: str | None = None


class Cgroups:
    """The daemon's cgroup subtree: mode, controllers, one cgroup per pane, and what the
    start found left over. Inactive (``active`` False, ``why`` says why) with ``off`` or
    where no writable v2 hierarchy exists; then every pane is accounted for by the
    subreaper alone and limits fail ``unsupported.cgroups``."""

    def __init__(self, mode: str = "off", configured: str | None = None) -> None:
        self.mode = mode
        self.configured = configured or mode
        self.active = False
        self.why: str | None = 'cgroups = "off"' if mode == "off" else None
        self.hierarchy: str | None = None
        self.parent = ""  # the cgroup the daemon started in
        self.parent_path = ""  # the same, as /proc/<pid>/cgroup names it
        self.base = ""
        self.leaf = ""
        self.tag = ""
        self.controllers: list[str] = []  # enabled in every pane's cgroup
        self.missing: dict[str, str] = {}  # controller -> why not
        self.groups: dict[str, PaneGroup] = {}  # pane ID -> its cgroup, until removed
        # Empty pane cgroups being removed, by a thread of their own (``remove``).
        self.removing: dict[str, asyncio.Future[bool]] = {}
        self.remover: ThreadPoolExecutor | None = None
        self.recovered = {"cgroups": 0, "processes": 0, "remaining": 0}
        self.ended = 0  # processes ended by cleanup and shutdown

    # -- start and stop ----------------------------------------------------------------------
    @classmethod
    def setup(cls, mode: str, socket_path: str, source: str) -> Cgroups:
        """Find and take our subtree (``required``: or raise ``unsupported.cgroups``)."""
        cg = cls(mode)
        if mode == "off":
            return cg
        found = locate()
        try:
            if found.directory is None:
                raise _Unusable(found.why or "no cgroup v2 hierarchy")
            cg._take(found, socket_path, source)
        except _Unusable as exc:
            cg.why = str(exc)
            if mode == "required":
                raise VenomxError(
                    "unsupported.cgroups",
                    f'cgroups = "required", but {cg.why}',
                    {"reason": cg.why},
                ) from None
            log.warning("no per-pane cgroups: %s", cg.why)
            return cg
        for c in CONTROLLERS:
            if c not in cg.controllers:
                cg.missing[c] = cg.missing.get(c, "not available")
                if c in found.v1 and found.directory is not None:
                    cg.missing[c] += " (it is bound to a cgroup v1 hierarchy: a hybrid host)"
        return cg

    def _take(self, found: Located, socket_path: str, source: str) -> None:
        assert found.directory is not None
        self.hierarchy, self.parent = found.mount, found.directory
        self.parent_path = found.path
        self.base = os.path.join(found.directory, socket_key(socket_path))
        self.leaf = os.path.join(self.base, DAEMON_LEAF)
        self.tag = source.rsplit("/", 1)[-1]
        for attempt in range(2):
            try:
                self._enter(found.directory)
                break
            except FileNotFoundError:  # a neighbour's sweep removed it as we made it
                if attempt:
                    raise _Unusable(f"cannot move the daemon into {self.leaf}: ENOENT") from None
        self.active = True
        self.recover()
        sweep_empty(found.directory, self.base)
        self._enable(found.directory)

    def path(self, directory: str) -> str:
        """A cgroup directory of our subtree as /proc/<pid>/cgroup names it."""
        return self.parent_path.rstrip("/") + directory[len(self.parent.rstrip("/")) :]

    def _kill(self, directory: str, pids: list[int] | None = None) -> None:
        """SIGKILL everything in a cgroup: ``cgroup.kill`` (Linux 5.14), else each process
        still in it of ``pids`` (by default its members, read only then)."""
        try:
            _write(os.path.join(directory, "cgroup.kill"), "1")
            return
        except OSError:
            pass
        within = self.path(directory)
        for pid in members(directory) if pids is None else pids:
            _signal_pid(pid, _signal.SIGKILL, within=within)

    def _enter(self, parent: str) -> None:
        for d in (self.base, self.leaf):
            try:
                os.mkdir(d, 0o755)
            except FileExistsError:
                pass
            except OSError as exc:
                raise _Unusable(
                    f"cannot create a cgroup in {parent}: {_why(exc)} (not delegated "
                    "to uid %d: run venomx under a unit with Delegate=yes)" % os.getuid()
                ) from None
        try:
            _write(os.path.join(self.leaf, "cgroup.procs"), "0")
        except FileNotFoundError:
            raise
        except OSError as exc:
            raise _Unusable(f"cannot move the daemon into {self.leaf}: {_why(exc)}") from None

    def _enable(self, parent: str) -> None:
        """Hand each wanted controller down to the pane cgroups, or say why not."""
        try:
            available = set(_read(os.path.join(parent, "cgroup.controllers")).split())
        except OSError as exc:
            available = set()
            self.why = f"cannot read cgroup.controllers: {_why(exc)}"
        for c in CONTROLLERS:
            if c not in available:
                self.missing[c] = f"not available in {parent}"
                continue
            for d in (parent, self.base):
                try:
                    enabled = _read(os.path.join(d, "cgroup.subtree_control")).split()
                    if c not in enabled:
                        _write(os.path.join(d, "cgroup.subtree_control"), "+" + c)
                except OSError as exc:
                    why = _why(exc)
                    if exc.errno == errno.EBUSY:
                        why += " (that cgroup holds processes: the no-internal-processes rule)"
                    self.missing[c] = f"cannot enable it in {d}: {why}"
                    break
            else:
                self.controllers.append(c)

    def recover(self) -> None:
        """End and remove pane cgroups a previous start on this socket left behind."""
        try:
            names = os.listdir(self.base)
        except OSError:
            return
        for name in names:
            d = os.path.join(self.base, name)
            if name == DAEMON_LEAF or not os.path.isdir(d):
                continue
            found = members(d)
            self._kill(d, found)
            deadline = time.monotonic() + KILL_WAIT
            while members(d) and time.monotonic() < deadline:
                time.sleep(POLL)  # at start, before the reactor runs
            left = len(members(d))
            self.recovered["processes"] += len(found) - left
            self.recovered["remaining"] += left
            if _rmdir(d, None):
                self.recovered["cgroups"] += 1
        if self.recovered["cgroups"]:
            log.warning(
                "ended %d leftover pane cgroups of an earlier daemon on this socket (%d processes)",
                self.recovered["cgroups"],
                self.recovered["processes"],
            )

    async def stop(self) -> None:
        """Leave our subtree as we found it where we can: move back, remove what is empty."""
        if not self.active:
            return
        if self.removing:
            await asyncio.gather(*self.removing.values(), return_exceptions=True)
        if self.remover is not None:
            self.remover.shutdown(wait=False)
            self.remover = None
        self._remove_groups()
        try:
            _write(os.path.join(self.parent, "cgroup.procs"), "0")
        except OSError:
            return  # e.g. the parent hands controllers down: systemd removes it all
        # Every pane has ended: what is left in our leaf is ours alone, the fork server,
        # spares and the sentinels of ended panes. Ended now rather than waited for: a
        # spare made at the lowest priority may take a quarter of a second to see its
        # channel close, which every stop soon after a start paid.
        self._kill(self.leaf)
        deadline = time.monotonic() + KILL_WAIT
        # The fork server and the last sentinels are exiting; so may the last processes of
        # a pane's cgroup be, if ``end_all`` stopped waiting for them.
        while True:
            leaf_gone = _rmdir(self.leaf, None)
            if (self._remove_groups() and leaf_gone) or time.monotonic() >= deadline:
                break
            await asyncio.sleep(POLL)
        if not _rmdir(self.base, None):
            log.debug("cgroup %s left: %s", self.leaf, members(self.leaf))

    def _remove_groups(self) -> bool:
        """Remove every pane cgroup that can be now, at shutdown; True once none is left."""
        for g in list(self.groups.values()):
            if _rmdir(g.directory, None):
                del self.groups[g.pane]
        return not self.groups

    # -- a pane's cgroup ---------------------------------------------------------------------
    def check_limits(self, memory_max: int | None, pids_max: int | None) -> None:
        """Refuse limits this daemon cannot apply: ``unsupported.cgroups``."""
        for name, value in (("memory", memory_max), ("pids", pids_max)):
            if value is None or name in self.controllers:
                continue
            why = self.missing.get(name) if self.active else self.why
            raise VenomxError(
                "unsupported.cgroups",
                f"cannot limit {name}: the {name} controller is not available "
                f"({why or 'no cgroups'})",
                {"controller": name},
            )

    def make(self, pane_id: str, memory_max: int | None, pids_max: int | None) -> str:
        """The pane's cgroup directory with its limits written, before anything runs in
        it; only the file system changes, so it may run off the reactor (``adopt`` then
        records it there). Raises OSError when it cannot be made (nothing is left behind)."""
        d = os.path.join(self.base, f"{self.tag}.{pane_id}")
        os.mkdir(d, 0o755)
        try:
            if memory_max is not None:
                _write(os.path.join(d, "memory.max"), str(memory_max))
                if os.path.exists(os.path.join(d, "memory.swap.max")):
                    _write(os.path.join(d, "memory.swap.max"), "0")
            if pids_max is not None:
                _write(os.path.join(d, "pids.max"), str(pids_max))
        except OSError:
            _rmdir(d)
            raise
        return d

    def adopt(self, pane_id: str, directory: str, run: str | None) -> None:
        """Account for the pane's cgroup, made by ``make``."""
        self.groups[pane_id] = PaneGroup(pane_id, directory, run)

    def kill(self, pane_id: str) -> None:
        """SIGKILL whatever a pane's cgroup holds: a start that fails after its program
        may have started (its sentinel died before STARTED) leaves nothing running."""
        g = self.groups.get(pane_id)
        if g is not None:
            self._kill(g.directory)

    def discard(self, pane_id: str) -> None:
        """The start rolled back before anything ran: remove its cgroup."""
        g = self.groups.pop(pane_id, None)
        if g is not None and not _rmdir(g.directory):
            self.groups[pane_id] = g  # something did run: keep it accounted for

    def settle(
        self, pane_id: str, orphans: Callable[[], list[int]]
    ) -> tuple[dict[str, Any], dict[str, Any]]:
        """At the pane's exit (its completing turn): ``cleanup`` {verified, escapees} and
        the cgroup's usage {cgroup_cpu_usec, memory_peak_kib, oom}. ``verified`` only when
        the cgroup proved the pane empty; an empty cgroup is removed at once. ``orphans``
        (``strangers``) is asked only for a pane without a cgroup."""
        g = self.groups.get(pane_id)
        if g is None:
            found = accounted(pane_id, orphans())
            return {"verified": False, "escapees": len(found)}, {}
        procs = census(g.directory)
        again = census(g.directory) if procs else procs  # the dying may have gone since
        cleanup = left_behind(procs, again)
        usage = read_usage(g.directory, "memory" in self.controllers)
        if again == []:
            self.remove(g)
        return cleanup, usage

    def remove(self, g: PaneGroup) -> None:
        """Remove an empty pane cgroup in a thread, then forget it here. An rmdir waits
        for the kernel's cgroup lock, which every start moving its leader into a cgroup
        takes too: during a burst of a thousand starts the reactor once waited 0.9 s for
        one. One thread of their own, in order: they would wait for that lock in any
        number of threads, and must not queue ahead of starts making their cgroups."""
        if g.pane in self.removing:
            return
        if self.remover is None:
            self.remover = ThreadPoolExecutor(1, thread_name_prefix="cgroup-rmdir")
        loop = asyncio.get_running_loop()
        removed = loop.run_in_executor(self.remover, _rmdir, g.directory)
        self.removing[g.pane] = removed

        def done(fut: asyncio.Future[bool]) -> None:
            if self.removing.get(g.pane) is fut:
                del self.removing[g.pane]
            if fut.cancelled() or fut.exception() is not None or not fut.result():
                return  # kept, and accounted for: ``tidy`` tries again
            if self.groups.get(g.pane) is g:
                del self.groups[g.pane]

        removed.add_done_callback(done)

    def tidy(self, busy: Container[str] = ()) -> None:
        """Remove kept cgroups whose processes have all exited since; not those of the
        panes ``busy``: starting ones, empty until their leader joins, and live ones,
        whose exit still reads the cgroup once the leader is gone."""
        for g in list(self.groups.values()):
            if g.pane in self.removing or g.pane in busy:
                continue  # its thread is on it, or its pane still needs it
            if not members(g.directory) and _rmdir(g.directory):
                del self.groups[g.pane]

    async def end(self, pane_id: str, ours: set[int], sig: int, grace_ms: int) -> tuple[int, int]:
        """End what the pane left: ``sig`` (after SIGCONT) to each process, at most
        ``grace_ms`` for them to go, then SIGKILL (``cgroup.kill``: forks cannot slip
        through) and at most KILL_WAIT more. Returns (ended, remaining); a cgroup that
        will not say what is left counts at least one remaining, never a clean end."""
        g = self.groups.get(pane_id)

        def now() -> list[int] | None:
            if g is not None:
                return census(g.directory)
            return accounted(pane_id, strangers(ours))

        first = now()
        seen = set(first or ())
        if first != []:
            within = self.path(g.directory) if g is not None else None
            for pid in sorted(seen):
                _signal_pid(pid, _signal.SIGCONT, sig, within=within)
            await _until_empty(now, grace_ms / 1000.0, seen)
            left = now()
            if left != []:
                if g is not None:
                    self._kill(g.directory, left or [])
                else:
                    for pid in left or ():
                        _signal_pid(pid, _signal.SIGKILL)
                await _until_empty(now, KILL_WAIT, seen)
        remaining = now()
        if remaining is None:
            alive = sum(1 for pid in seen if procfs.state(pid) not in (None, "Z"))
            self.ended += len(seen) - alive
            return len(seen) - alive, max(1, alive)
        ended = len(seen - set(remaining))
        self.ended += ended
        if g is not None and not remaining and _rmdir(g.directory):
            self.groups.pop(pane_id, None)
        return ended, len(remaining)

    async def end_all(self) -> None:
        """Shutdown: SIGKILL every pane cgroup of ours (its panes have been terminated)."""
        for g in list(self.groups.values()):
            self._kill(g.directory)
        deadline = time.monotonic() + KILL_WAIT
        while any(members(g.directory) for g in self.groups.values()):
            if time.monotonic() > deadline:
                break
            await asyncio.sleep(POLL)
        self.tidy()

    # -- doctor ------------------------------------------------------------------------------
    def report(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "mode": self.mode,
            "configured": self.configured,
            "active": self.active,
            "controllers": list(self.controllers),
            "missing": dict(self.missing),
            "recovered": dict(self.recovered),
            "ended": self.ended,
            "kept": len(self.groups),
        }
        if self.hierarchy is not None:
            out["hierarchy"] = self.hierarchy
        if self.active:
            out["cgroup"] = self.base
        if self.why is not None:
            out["why"] = self.why
        return out

    def check(self) -> dict[str, str]:
        if self.mode == "off":
            status, detail = "ok", 'off (cgroups = "off"): escapees are found by environment only'
        elif not self.active:
            status, detail = "warn", f"inactive: {self.why}"
        else:
            status = "ok"
            detail = f"{self.mode}: one cgroup per pane under {self.base}"
            if self.missing:
                detail += "; no " + ", ".join(
                    f"{c} ({why})" for c, why in sorted(self.missing.items())
                )
        if self.configured != self.mode:
            detail += f'; configured "{self.configured}" applies at the next start'
        if self.recovered["cgroups"]:
            detail += (
                f"; ended {self.recovered['cgroups']} leftover cgroups "
                f"({self.recovered['processes']} processes) at start"
            )
        return {"name": "cgroups", "status": status, "detail": detail}


def sweep_empty(parent: str, ours: str) -> None:
    """Remove the subtrees of daemons that are gone (killed, so they could not): a
    ``venomx-*`` cgroup with no process anywhere in it. A live daemon is always in its own
    leaf, so this never removes a neighbour's; one that is making its subtree right now
    finds it gone and makes it again."""
    try:
        names = [n for n in os.listdir(parent) if n.startswith(PREFIX)]
    except OSError:
        return
    for name in names:
        d = os.path.join(parent, name)
        if d == ours:
            continue
        try:
            if _populated(d):
                continue  # something lives in it
        except (OSError, ValueError):
            continue
        _rmdir(d, None)  # with its leaf and the empty pane cgroups a kill -9 left in it


class _Unusable(Exception):
    """Why this daemon cannot have its subtree."""


def read_usage(directory: str, memory: bool = True) -> dict[str, Any]:
    """What the whole cgroup used: CPU from ``cpu.stat``, the memory peak (page cache
    included) from ``memory.peak``, and whether the OOM killer struck (``memory.events``).
    ``memory``: whether the memory controller is enabled there (without it, neither file
    exists: two failed opens per pane exit, on the reactor)."""
    out: dict[str, Any] = {}
    try:
        for line in _read(os.path.join(directory, "cpu.stat")).splitlines():
            k, _, v = line.partition(" ")
            if k == "usage_usec":
                out["cgroup_cpu_usec"] = int(v)
    except (OSError, ValueError):
        pass
    if not memory:
        return out
    try:
        out["memory_peak_kib"] = int(_read(os.path.join(directory, "memory.peak"))) // 1024
    except (OSError, ValueError):
        pass
    try:
        for line in _read(os.path.join(directory, "memory.events")).splitlines():
            k, _, v = line.partition(" ")
            if k == "oom_kill" and int(v) > 0:
                out["oom"] = True
    except (OSError, ValueError):
        pass
    return out


def _rmdir(directory: str, most: int | None = BELOW_MAX) -> bool:
    """Remove a cgroup; when it will not go (EBUSY), the cgroups below it first, deepest
    first (those a pane's programs made, or a gone daemon's). False while any of them
    holds a process, or there are more than ``most`` to walk (None: no bound, for the
    start and the shutdown, which run before and after the reactor)."""
    try:
        os.rmdir(directory)
        return True
    except FileNotFoundError:
        return True
    except OSError as exc:
        if exc.errno != errno.EBUSY:
            return False
    try:
        below = _below(directory, most)
    except OSError:
        return False  # out of descriptors, say
    if not below:
        return False  # it holds processes itself
    for d in reversed(below):
        try:
            os.rmdir(d)
        except OSError:
            pass  # still populated: the last rmdir fails and says so
    try:
        os.rmdir(directory)
        return True
    except FileNotFoundError:
        return True
    except OSError:
        return False


async def _until_empty(now: Callable[[], list[int] | None], seconds: float, seen: set[int]) -> None:
    """Until ``now()`` shows nothing left (not merely nothing readable), or ``seconds``."""
    deadline = time.monotonic() + seconds
    while True:
        left = now()
        seen.update(left or ())
        if left == [] or time.monotonic() >= deadline:
            return
        await asyncio.sleep(POLL)
