"""Doctor (§11, RFC-0015 "Doctor"): is every worker where it should be, and what escaped?

Process facts come from psutil in a worker thread (bounded /proc reads, never a wait on
a process); they are judged against the registry on the reactor. The report holds IDs,
counts and states only: never argv, shell text, keys, output, env values, cwd or tokens.
"""

from __future__ import annotations

import asyncio
import concurrent.futures.thread  # noqa: F401  (imported by to_thread on first use: now)
import errno
import os
import resource
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import psutil

from venomx import __version__, unixdiag
from venomx.daemon.auth import AuditLog
from venomx.daemon.cgroups import dying, members
from venomx.daemon.collector import Collector
from venomx.daemon.config import Config
from venomx.daemon.events import EventLog
from venomx.daemon.fdreserve import reserve
from venomx.daemon.inflight import InFlight
from venomx.daemon.panes import Panes
from venomx.daemon.panes.termination import KILL_WAIT
from venomx.daemon.paths import holder_text
from venomx.daemon.priority import Priority
from venomx.daemon.reaper import Reaper
from venomx.daemon.registry import Registry
from venomx.daemon.runs import RunTable
from workers.protocol import SENTINEL_TITLE, SPARE_TITLE
from workers.tracer import tracer_of

ORPHAN_AFTER = 2.0  # the sentinel's drain (1 s) plus time to deliver EXIT and exit
FDS_WARN, FDS_FAIL = 0.80, 0.95  # of the soft RLIMIT_NOFILE
FD_ERRNOS = frozenset({errno.EMFILE, errno.ENFILE})
ESCAPEES_LISTED = 100  # doctor names this many escaped processes by pid


@dataclass
class Doctor:
    """What the report reads: the services, and facts the daemon sets as it starts
    (the socket file it bound, whether it is a subreaper) and its live connections."""

    source: str
    registry: Registry
    config: Config
    events: EventLog
    audit: AuditLog
    runs: RunTable
    panes: Panes
    reaper: Reaper
    socket_path: str
    connections: set[Any]
    priority: Priority
    collector: Collector
    in_flight: InFlight
    socket_ino: int = -1  # the socket file we bound, to notice it being replaced
    squatter: int | None = None  # uid of another user holding our abstract address
    subreaper: bool = False
    started: float = field(default_factory=time.monotonic)

    async def report(self) -> dict[str, Any]:
        return await report(self)


@dataclass
class Seen:
    """What the registry held while /proc was read, taken before and after: /proc is read
    over up to a second (the pings wait for slow sentinels meanwhile), and a pane started
    or ended in that time must not be judged on facts read at the other moment."""

    live: dict[str, int] = field(default_factory=dict)  # pane live at either -> its leader
    steady: set[str] = field(default_factory=set)  # live at both: may be missing a sentinel
    panes: set[str] = field(default_factory=set)  # known or preparing at either
    # sentinels not yet reaped at either moment (an exited pane's old sentinel pid names
    # nothing: a process that left that pane may have taken it, and any title)
    sentinels: set[int] = field(default_factory=set)

    @classmethod
    def now(cls, d: Doctor) -> Seen:
        reg = d.registry
        live = {p.id: p.pid for p in reg.panes.values() if p.live}
        return cls(live, set(live), set(reg.panes) | d.panes.preparing, set(reg.sentinels))

    def merge(self, later: Seen) -> Seen:
        return Seen(
            self.live | later.live,
            self.steady & later.steady,
            self.panes | later.panes,
            self.sentinels | later.sentinels,
        )


@dataclass
class ProcFacts:
    """What /proc says about the daemon's children, read in a worker thread."""

    children: dict[int, tuple[str, str]] = field(default_factory=dict)  # pid -> (title, status)
    session: dict[int, int] = field(default_factory=dict)  # child pid -> its session
    pane_env: dict[int, str] = field(default_factory=dict)  # pid -> VENOMX_PANE
    group: dict[int, int] = field(default_factory=dict)  # pid -> pgid
    in_cgroup: dict[int, str] = field(default_factory=dict)  # pid -> pane, from its cgroup
    fds: int = -1  # -1: could not be counted
    short: str | None = None  # EMFILE or ENFILE: /proc could not be read (all of it)


def gather(groups: dict[str, str] | None = None) -> ProcFacts:
    """Read /proc for the daemon's children and descendants, and the members of each
    pane's cgroup in ``groups`` (pane -> directory), leaving out those being killed
    (runs in a thread)."""
    facts = ProcFacts()
    with reserve.spent():
        try:
            read_proc(facts)
            # Every process of a pane descends from the daemon (a subreaper): a member not
            # seen by read_proc was born or gone meanwhile, and is not counted.
            for pane_id, directory in (groups or {}).items():
                for pid in members(directory):
                    if pid in facts.group and not dying(pid):
                        facts.in_cgroup[pid] = pane_id
        except OSError as exc:
            if exc.errno not in FD_ERRNOS:
                raise
            facts.short = errno.errorcode[exc.errno]
    return facts


def read_proc(facts: ProcFacts) -> None:
    me = psutil.Process()
    try:
        facts.fds = me.num_fds()
    except psutil.Error:
        pass
    for child in me.children(recursive=True):
        try:
            with child.oneshot():
                status = child.status()
                if child.ppid() == me.pid:
                    cmd = child.cmdline()
                    title = " ".join(c for c in cmd if c) if cmd else child.name()
                    facts.children[child.pid] = (title, status)
                    facts.session[child.pid] = os.getsid(child.pid)
                if status == psutil.STATUS_ZOMBIE:
                    continue
                facts.group[child.pid] = os.getpgid(child.pid)
                pane = child.environ().get("VENOMX_PANE")
                if pane:
                    facts.pane_env[child.pid] = pane
        except psutil.Error:
            continue
        except OSError as exc:
            if exc.errno in FD_ERRNOS:
                raise
            continue


def fds_check(facts: ProcFacts, limit: int) -> tuple[dict[str, str], int]:
    """Warn at FDS_WARN of the soft limit, fail at FDS_FAIL; and the count to report.

    Out of descriptors the count may be impossible: EMFILE means every descriptor below
    the limit is taken, so the count is the limit; ENFILE (the system's table is full)
    leaves it unknown. Either fails.
    """
    n = facts.fds
    if n < 0 and facts.short == "EMFILE":
        n = limit
    if n < 0:
        why = (
            "the system's file table is full (ENFILE)"
            if facts.short == "ENFILE"
            else "cannot count open descriptors"
        )
        return check("fds", "fail" if facts.short else "warn", f"{why}, limit {limit}"), n
    detail = f"{n} of {limit} open"
    if facts.short is not None:
        detail += f"; out of descriptors ({facts.short}), process checks incomplete"
    if limit == resource.RLIM_INFINITY:
        return check("fds", "ok", f"{n} open, no limit"), n
    if facts.short is not None or n >= FDS_FAIL * limit:
        status = "fail"
    elif n >= FDS_WARN * limit:
        status = "warn"
    else:
        status = "ok"
    return check("fds", status, detail), n


def check(name: str, status: str, detail: str) -> dict[str, str]:
    return {"name": name, "status": status, "detail": detail}


async def unresponsive(d: Doctor) -> list[str]:
    """Panes whose sentinel does not answer a ping in time (all pinged at once)."""
    panes = [
        p
        for p in d.registry.panes.values()
        if p.live and d.panes.link(p).channel is not None and not p.sentinel_lost
    ]
    answers = await asyncio.gather(*map(d.panes.responsive, panes))
    return [p.id for p, ok in zip(panes, answers, strict=True) if not ok]


Section = tuple[dict[str, str], Any]  # a check, and what the report shows for it


STOPPED = (psutil.STATUS_STOPPED, psutil.STATUS_TRACING_STOP)


def fork_server(d: Doctor, facts: ProcFacts) -> dict[str, str]:
    pid = d.panes.forkserver.pid
    state = facts.children[pid][1] if pid in facts.children else psutil.STATUS_ZOMBIE
    if state == psutil.STATUS_ZOMBIE:
        down = d.panes.forkserver.down
        why = f": {down.strerror}" if down is not None and down.strerror else ""
        if d.panes.forkserver.promoting is not None:
            why = ": its reserve is taking over"
        return check("fork_server", "fail", f"fork server not running{why}")
    if state in STOPPED:  # it forks no sentinel: starts that need one wait for it
        return check("fork_server", "fail", f"pid {pid} is stopped")
    if (tracer := tracer_of(pid)) != 0:  # whoever traces it decides every later run
        return check("fork_server", "fail", f"pid {pid} is traced by pid {tracer}")
    return check("fork_server", "ok", f"pid {pid}")


def sentinel_panes(facts: ProcFacts, seen: Seen) -> dict[int, str]:
    """Our live, titled sentinels (spares aside), by pid: the pane each serves."""
    ours = seen.sentinels
    return {
        pid: (t[len(SENTINEL_TITLE) :].split() or ["?"])[0]
        for pid, (t, st) in facts.children.items()
        if pid in ours
        and t.startswith(SENTINEL_TITLE)
        and t != SPARE_TITLE
        and st != psutil.STATUS_ZOMBIE
    }


def sentinels(
    d: Doctor, facts: ProcFacts, sentinel_of: dict[int, str], silent: list[str], seen: Seen
) -> Section:
    """Each live pane has exactly one live, running, answering sentinel; none outlives its
    pane by more than its drain; and the losses since start."""
    reg = d.registry
    live = [p for p in reg.panes.values() if p.live]
    missing = [
        p.id for p in live if p.id in seen.steady and sentinel_of.get(p.sentinel_pid) != p.id
    ]
    alive = len(live) - len(missing)
    now = time.monotonic()
    orphaned = [
        pid
        for pid, pane in sentinel_of.items()
        if (
            pane in reg.panes
            and not reg.panes[pane].live
            and now - reg.panes[pane].exited_mono > ORPHAN_AFTER
        )
        or pane not in seen.panes
    ]
    # A stopped sentinel reads no output and answers nothing: its pane is wedged; a
    # stopped spare wedges the start that takes it.
    stopped = [
        p.id
        for p in live
        if p.id not in missing and facts.children.get(p.sentinel_pid, ("", ""))[1] in STOPPED
    ]
    spares_stopped = sorted(
        pid
        for pid in d.panes.forkserver.spare_pids
        if facts.children.get(pid, ("", ""))[1] in STOPPED
    )
    section = {
        "expected": len(live),
        "alive": alive,
        "missing": len(missing),
        "missing_panes": missing,
        "orphaned": len(orphaned),
        "orphaned_pids": sorted(orphaned),
        "spares": len(d.panes.forkserver.spares),
        "spares_target": d.panes.forkserver.size,
        "stopped": stopped,
        "spares_stopped": spares_stopped,
        "unresponsive": silent,
        "lost": {"count": d.panes.losses.count, "recent": list(d.panes.losses.recent)},
    }
    failing = missing or stopped or spares_stopped or silent
    status = "fail" if failing else ("warn" if orphaned else "ok")
    return check(
        "sentinels",
        status,
        f"{alive}/{len(live)} alive, {len(missing)} missing, {len(stopped)} stopped, "
        f"{len(spares_stopped)} spares stopped, "
        f"{len(silent)} unresponsive, {len(orphaned)} orphaned, "
        f"{d.panes.losses.count} lost since start",
    ), section


def escapees(d: Doctor, facts: ProcFacts, sentinel_of: dict[int, str], seen: Seen) -> Section:
    """Live processes that left their pane's group: re-parented to the daemon, or still
    carrying VENOMX_PANE of a pane that exited or of another group, or (whatever their
    environment says) still in the cgroup of a pane that exited, or in a live pane's
    cgroup but outside its group. Listed by pane, with the run each pane served."""
    reg = d.registry
    # What is in a fork server's session is ours, not an escapee: a sentinel before we
    # know its pid, a reserve taking over, an intermediate a dead one left (none of a
    # pane's processes can join that session); so is what we are ending (``leftover``).
    fs = d.panes.forkserver
    live = fs.live_sessions()
    in_sessions = {pid for pid in facts.children if facts.session.get(pid) in live}
    known = {fs.pid, *fs.spare_pids, *seen.sentinels, *sentinel_of, *in_sessions}
    known |= fs.leftover()
    leaders = set(seen.live.values())
    # A child of ours still in the group of a pane live at either moment has not left
    # it: its leader exited (so it was re-parented to us) and the sentinel is about to
    # end that group, or /proc was read in between.
    found = {
        pid
        for pid, (_title, st) in facts.children.items()
        if pid not in known
        and pid not in leaders
        and st != psutil.STATUS_ZOMBIE
        and facts.group.get(pid) not in leaders
    }
    # a pane live at either moment is judged live: a process of a pane that exited
    # while /proc was read waits for the next report
    for pid, pane_id in facts.pane_env.items():
        if pid in leaders or pid in known:
            continue
        if pane_id not in seen.live or facts.group.get(pid) != seen.live[pane_id]:
            found.add(pid)
    groups = d.panes.cgroups.groups
    for pid, pane_id in facts.in_cgroup.items():
        if pid in known or pid in leaders:
            continue
        leader = seen.live.get(pane_id)
        if leader is None or facts.group.get(pid, leader) != leader:
            found.add(pid)
    per_pane: dict[str, int] = {}
    pids: dict[str, list[int]] = {}
    runs: dict[str, str] = {}
    for pid in sorted(found):
        pane_id = facts.in_cgroup.get(pid) or facts.pane_env.get(pid, "unknown")
        if pane_id not in reg.panes and pid not in facts.in_cgroup:
            pane_id = "unknown"  # a process's own environment is not ours to echo
        pane = reg.panes.get(pane_id)
        run = pane.run if pane is not None else (g.run if (g := groups.get(pane_id)) else None)
        if run is not None:
            runs[pane_id] = run
        per_pane[pane_id] = per_pane.get(pane_id, 0) + 1
        if sum(map(len, pids.values())) < ESCAPEES_LISTED:
            pids.setdefault(pane_id, []).append(pid)
    n = len(found)
    return (
        check(
            "escapees",
            "warn" if found else "ok",
            f"{n} process{'' if n == 1 else 'es'} left {'its' if n == 1 else 'their'} "
            "pane's process group",
        ),
        {
            "count": n,
            "panes": per_pane,
            "pids": pids,
            "runs": runs,
            "reaped": d.reaper.reaped_escapees,
        },
    )


def socket_file(d: Doctor) -> dict[str, str]:
    """Whether the socket path still leads here: any program of our uid can replace the
    file (clients still reach this daemon at its abstract address, but say so)."""
    try:
        ours = os.stat(d.socket_path, follow_symlinks=False).st_ino == d.socket_ino
    except OSError:
        ours = False
    if d.squatter is not None and unixdiag.mine(d.squatter):
        return check(
            "socket",
            "fail",
            f"a process of uid {d.squatter} holds this daemon's abstract address: clients "
            "may be talking to it instead",
        )
    if (ours or d.socket_ino < 0) and d.squatter is not None:
        return check(
            "socket",
            "warn",
            f"{d.socket_path}; its abstract address is held by {holder_text(d.squatter)}, "
            "so clients reach this daemon only at the path",
        )
    if ours or d.socket_ino < 0:
        return check("socket", "ok", d.socket_path)
    if d.squatter is not None:
        return check(
            "socket",
            "fail",
            "the socket file was removed or replaced and the abstract "
            "address is another's: clients cannot reach this daemon",
        )
    return check(
        "socket",
        "fail",
        "the socket file was removed or replaced; clients reach "
        "this daemon only at its abstract address",
    )


def zombies(facts: ProcFacts) -> Section:
    n = sum(1 for _, st in facts.children.values() if st == psutil.STATUS_ZOMBIE)
    return check("zombies", "warn" if n else "ok", f"{n} unreaped children"), n


def run_active(d: Doctor) -> Section:
    max_active = d.config["run.max_active"]
    active = d.runs.active
    return (
        check(
            "run.active",
            "warn" if active >= 0.9 * max_active else "ok",
            f"{active} of {max_active}",
        ),
        {"count": active, "max_active": max_active},
    )


def run_stuck(d: Doctor) -> Section:
    now = time.monotonic()
    stuck = []
    for p in d.registry.panes.values():
        t = d.panes.link(p).termination if p.run and p.live else None
        if t is not None and t.killed_at is not None and now > t.killed_at + KILL_WAIT:
            stuck.append(p.run)
    return (
        check(
            "run.stuck",
            "warn" if stuck else "ok",
            f"{len(stuck)} runs terminating past their kill-wait",
        ),
        stuck,
    )


def run_section(d: Doctor, active: Any, stuck: Any) -> dict[str, Any]:
    runs = d.runs
    return {
        "active": active,
        "retained": {
            "count": len(runs.completed_order),
            "bytes": runs.retained_bytes,
            "evictions": dict(runs.evictions),
        },
        "stuck": stuck,
        "outcomes": dict(runs.outcomes),
        "causes": dict(runs.causes),
        "key_bindings": len(runs.bindings),
        "joined": runs.joined,
        "reused": runs.reused,
        "waiters": runs.waiters,
    }


def counters(d: Doctor) -> dict[str, Any]:
    reg = d.registry
    states: dict[str, int] = {"running": 0, "terminating": 0, "exited": 0}
    for p in reg.panes.values():
        states[p.state] += 1
    return {
        "panes": states,
        "sessions": len(reg.sessions),
        "windows": len(reg.windows),
        "principals": sum(1 for p in reg.principals.values() if not p.revoked),
        "events": len(d.events.events),
        "audit": len(d.audit),
        "observations_coalesced": d.events.coalesced,
        "vt_dropped": d.panes.exited_panes.vt_dropped,
        "connections": len(d.connections),
        "requests_waiting": d.in_flight.requests,
        "watchers": d.in_flight.watchers,
        "subreaper": d.subreaper,
    }


async def report(d: Doctor) -> dict[str, Any]:
    """Every check, each with its section, and the worst status over them."""
    cg = d.panes.cgroups
    cg.tidy(d.panes.preparing | {p.id for p in d.registry.panes.values() if p.live})
    groups = {g.pane: g.directory for g in cg.groups.values()}
    before = Seen.now(d)
    facts, silent = await asyncio.gather(asyncio.to_thread(gather, groups), unresponsive(d))
    seen = before.merge(Seen.now(d))
    sentinel_of = sentinel_panes(facts, seen)
    fds_limit = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    s_check, s_section = sentinels(d, facts, sentinel_of, silent, seen)
    e_check, e_section = escapees(d, facts, sentinel_of, seen)
    z_check, z_count = zombies(facts)
    f_check, fds = fds_check(facts, fds_limit)
    a_check, active = run_active(d)
    r_check, stuck = run_stuck(d)
    x_section, x_check = d.panes.exited_panes.report(d.config)
    x_section["replay_bytes"] = d.panes.replays.total
    checks = [
        socket_file(d),
        fork_server(d, facts),
        s_check,
        e_check,
        z_check,
        f_check,
        a_check,
        r_check,
        x_check,
        cg.check(),
        check("priority", "ok", d.priority.detail),  # says what it is, never a fault
    ]
    statuses = {c["status"] for c in checks}
    overall = "fail" if "fail" in statuses else ("warn" if "warn" in statuses else "ok")
    return {
        "source": d.source,
        "version": __version__,
        "pid": os.getpid(),
        "uptime_ms": int((time.monotonic() - d.started) * 1000),
        "status": overall,
        "checks": checks,
        "fork_server": d.panes.forkserver.report(),
        "sentinels": s_section,
        "escapees": e_section,
        "cgroups": cg.report(),
        "exited_panes": x_section,
        "zombies": z_count,
        "fds": fds,
        "fds_limit": fds_limit,
        "run": run_section(d, active, stuck),
        "counters": counters(d),
        "priority": d.priority.report(),
        "collector": d.collector.report(),
    }


def seen_by(report: dict[str, Any], readable: Callable[[str], bool]) -> dict[str, Any]:
    """The report as a caller sees it: every count, but a pane or run named (with what is
    listed under it) only where ``readable("pane:<id>")`` or ``readable("run:<id>")`` holds.
    Doctor needs no right on any resource, and foundation §5 promises that a caller cannot
    tell another principal's resources from absent ones; the owner's view is unchanged."""
    if readable("*"):
        return report

    def panes(ids: list[str]) -> list[str]:
        return [p for p in ids if readable(f"pane:{p}")]

    def by_pane(m: dict[str, Any]) -> dict[str, Any]:
        return {p: v for p, v in m.items() if readable(f"pane:{p}")}

    s, e = dict(report["sentinels"]), dict(report["escapees"])
    for key in ("missing_panes", "stopped", "unresponsive"):
        s[key] = panes(s[key])
    recent = [x for x in s["lost"]["recent"] if readable(f"pane:{x['pane']}")]
    s["lost"] = dict(s["lost"], recent=recent)
    for key in ("panes", "pids", "runs"):
        e[key] = by_pane(e[key])
    x = dict(report["exited_panes"], largest=by_pane(report["exited_panes"]["largest"]))
    run = dict(report["run"], stuck=[r for r in report["run"]["stuck"] if readable(f"run:{r}")])
    return dict(report, sentinels=s, escapees=e, exited_panes=x, run=run)
