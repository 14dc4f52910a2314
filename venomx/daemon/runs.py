"""Trusted runs (RFC-0015): records, key bindings, completion, waiting, retention.

A run completes only in the turn its pane's leader is reaped (``complete``): the outcome
comes from the wait status and from whether a termination was requested first, never
from output. Keys bind (principal, key) to a run and an HMAC digest of its parameters;
a binding lives exactly as long as the run's record.
"""

from __future__ import annotations

import asyncio
import bisect
import hashlib
import hmac
import json
import secrets
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from venomx.daemon.config import Config
from venomx.daemon.events import EventLog
from venomx.daemon.registry import AuthNode, Pane, Registry, monotonic_ms, now_iso
from venomx.daemon.waitstatus import signal_number
from venomx.wire import VenomxError, id_number
from workers.rows import tail


@dataclass
class Run:
    """A run's record: set at its start, fixed at its completion, kept until expiry."""

    id: str
    key: str
    owner: str
    digest: bytes
    shell: bool
    output_rows: int
    output_bytes: int
    pane: str = ""
    window: str = ""
    session: str = ""
    principal: str = ""
    pid: int = 0
    node: AuthNode | None = None
    state: str = "running"
    outcome: str | None = None
    exit_code: int | None = None
    signal: str | None = None
    cause: str | None = None
    status: int | None = None
    fault: str | None = None  # venomx failed (its sentinel was lost), not the program
    started_at: str = ""
    completed_at: str | None = None
    started_mono: float = 0.0
    completed_mono: float = 0.0
    duration_ms: int | None = None
    # The leader's usage, from the wait that gave its status (an extension of §3's record)
    cpu_ms: int | None = None
    max_rss_kib: int | None = None
    # What the pane left behind, fixed in the completing turn: {verified, escapees}
    cleanup: dict[str, Any] | None = None
    # The pane's cgroup as a whole (escapees included): cgroup_cpu_usec, memory_peak_kib
    tree: dict[str, int] = field(default_factory=dict)
    oom: bool = False  # signaled SIGKILL, and the cgroup's OOM killer struck
    output: dict[str, Any] | None = None
    output_size: int = 0
    deadline: asyncio.TimerHandle | None = None
    # A deadline whose time had come when the leader's exit was first seen: held until
    # the sentinel says when the exit was (``exit_seen``), else decided for at the
    # pane's exit (``exit_untold``).
    held_deadline: float | None = None
    done: asyncio.Future[None] = field(
        default_factory=lambda: asyncio.get_running_loop().create_future()
    )
    number: int = field(init=False)

    def __post_init__(self) -> None:
        self.number = id_number(self.id, "r") or 0

    def result(self, source: str, reused: bool) -> dict[str, Any]:
        return {
            "run": self.id,
            "source": source,
            "key": self.key,
            "pane": self.pane,
            "window": self.window,
            "session": self.session,
            "principal": self.principal,
            "pid": self.pid,
            "reused": reused,
        }

    def record(self, source: str, output: bool) -> dict[str, Any]:
        rec: dict[str, Any] = {
            "run": self.id,
            "source": source,
            "key": self.key,
            "pane": self.pane,
            "window": self.window,
            "session": self.session,
            "principal": self.principal,
            "pid": self.pid,
            "shell": self.shell,
            "state": self.state,
        }
        for name in ("outcome", "exit_code", "signal", "cause", "status", "fault"):
            value = getattr(self, name)
            if value is not None:
                rec[name] = value
        rec["started_at"] = self.started_at
        if self.completed_at is not None:
            rec["completed_at"] = self.completed_at
            rec["duration_ms"] = self.duration_ms
        if self.cpu_ms is not None and self.max_rss_kib is not None:
            rec["cpu_ms"] = self.cpu_ms
            rec["max_rss_kib"] = self.max_rss_kib
        rec.update(self.tree)
        if self.oom:
            rec["oom"] = True
        if self.cleanup is not None:
            rec["cleanup"] = dict(self.cleanup)
        if output and self.output is not None:
            rec["output"] = self.output
        return rec

    def entity(self) -> dict[str, Any]:
        e: dict[str, Any] = {"kind": "run", "run": self.id, "pane": self.pane, "state": self.state}
        if self.state != "completed":
            return e
        for name in ("outcome", "exit_code", "signal", "cause"):
            value = getattr(self, name)
            if value is not None:
                e[name] = value
        return e


def run_number(run: Run) -> int:
    """The run's place in ID order (``r12`` -> 12)."""
    return run.number


@dataclass
class Pending:
    """A start still preparing: later identical requests join its future; others are
    told ``conflict.run_key`` naming the ID it will commit under (RFC-0015 §11: the key
    lookup is answered in the request's first reactor turn)."""

    run: str
    digest: bytes
    future: asyncio.Future[Run]


def status_of(run: Run) -> int:
    if run.outcome == "succeeded":
        return 0
    if run.outcome == "failed":
        return int(run.exit_code or 0)
    if run.outcome == "signaled":
        n = signal_number(run.signal or "")
        return 255 if n is None else min(255, 128 + n)
    return 124 if run.cause == "deadline" else 125


class RunTable:
    """Every run's record and key binding, from its start to its expiry.

    ``stop`` ends a run's pane (its deadline), ``exited_unseen`` says whether its leader
    has exited although the reactor has not seen it yet, ``sweep`` kills what is left of
    an exited leader's group, and ``evicted`` tells the pane owner that a record went
    (its exited pane may now be evicted too); the daemon wires all four.
    """

    def __init__(self, registry: Registry, events: EventLog, config: Config) -> None:
        self.registry = registry
        self.events = events
        self.config = config
        self.stop: Callable[[Pane, str, bool], None] = lambda pane, cause, exited: None
        self.exited_unseen: Callable[[Pane], bool] = lambda pane: False
        self.sweep: Callable[[Pane], None] = lambda pane: None
        self.evicted: Callable[[], None] = lambda: None
        self.runs: dict[str, Run] = {}
        # The same records in ID order, and by pane (a run is its pane's only run): run.list
        # pages through tens of thousands of them inside one reactor turn.
        self.ordered: list[Run] = []
        self.by_pane: dict[str, Run] = {}
        self.bindings: dict[tuple[str, str], Run] = {}
        self.pending: dict[tuple[str, str], Pending] = {}
        self.completed_order: list[str] = []
        self.retained_bytes = 0
        self.hmac_key = secrets.token_bytes(32)
        self.outcomes: Counter[str] = Counter()
        self.causes: Counter[str] = Counter()
        # doctor's evictions by limit, named after run.retain_count, _ms and _bytes
        self.evictions = {"count": 0, "ms": 0, "bytes": 0}
        self.joined = 0
        self.reused = 0
        self.waiters = 0  # run.wait requests blocked right now
        self.expiry: asyncio.TimerHandle | None = None

    # -- starting ------------------------------------------------------------------------
    def digest(self, params: dict[str, Any]) -> bytes:
        canon = {k: v for k, v in params.items() if k != "source" and v is not None}
        text = json.dumps(canon, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
        return hmac.new(
            self.hmac_key, text.encode("utf-8", "surrogatepass"), hashlib.sha256
        ).digest()

    @property
    def active(self) -> int:
        """Runs not yet completed, starting ones included (every retained run that is not
        in ``completed_order`` is running or terminating)."""
        return len(self.runs) - len(self.completed_order) + len(self.pending)

    def lookup_key(self, owner: str, key: str, digest: bytes) -> Run | Pending | None:
        """§8 lookup: the run bound to the key, else the start with the same digest still
        preparing under it; raises ``conflict.run_key`` for either with a different
        digest. A start still preparing is named by the ID it will commit under: if it
        fails, that ID never becomes a run and the key is free again."""
        found: Run | Pending | None = self.bindings.get((owner, key))
        if found is None:
            found = self.pending.get((owner, key))
        if found is not None and not hmac.compare_digest(found.digest, digest):
            run = found.run if isinstance(found, Pending) else found.id
            raise VenomxError(
                "conflict.run_key",
                f"key {key} is bound to run {run} with different parameters",
                {"run": run},
            )
        return found

    def commit(self, run: Run, pane: Pane, deadline_ms: int | None) -> None:
        """Called inside the spawn's commit turn: record, binding, run.started, deadline."""
        run.pane, run.window, run.session = pane.id, pane.window, pane.session
        run.principal, run.pid = pane.principal, pane.pid
        run.node = AuthNode(f"run:{run.id}", pane.node.lineage, pane.node)  # the same owner
        run.started_at = now_iso()
        run.started_mono = monotonic_ms()
        self.runs[run.id] = run
        bisect.insort(self.ordered, run, key=run_number)
        self.by_pane[run.pane] = run
        self.registry.runs[run.id] = run.node
        self.bindings[(run.owner, run.key)] = run
        self.events.emit("run.started", f"run:{run.id}", {"run": run.id, "pane": pane.id}, run.node)
        if deadline_ms is not None:
            loop = asyncio.get_running_loop()
            run.deadline = loop.call_later(deadline_ms / 1000.0, self.on_deadline, run)

    def on_deadline(self, run: Run) -> None:
        """The deadline's time came: start its termination, or cut short one already
        under way: the program itself may have cancelled its run (its pane principal may)
        with a long grace, and must not outlive its caller's deadline by more than the
        deadline's own grace. The first cause stays (RFC-0015 §7), and no signal is
        added. A leader that has exited unseen (a late turn whose wait for I/O was cut
        short) holds the deadline until its exit is seen (``exit_seen``)."""
        timer, run.deadline = run.deadline, None
        pane = self.registry.panes.get(run.pane)
        if run.state == "completed" or pane is None:
            return
        if timer is not None and self.exited_unseen(pane):
            self.hold(run, timer.when())
        else:
            self.stop(pane, "deadline", False)

    def exit_seen(self, run_id: str | None, ended_ns: int | None = None) -> None:
        """The leader's exit is seen: by its pidfd (``ended_ns`` None), or by its
        sentinel's EXIT, which says when, on the monotonic clock, the sentinel saw it
        (``ended_ns``; 0 if it does not know).

        Deadline is "deadline_ms elapsed since commit, on the monotonic clock" (RFC-0015
        §7), so the deadline applies only to an exit after its time. An exit seen before
        that time was before it. One seen after it may still have been before it: a
        turn may run late, so the deadline is then held until the sentinel's time of the
        exit decides it. The sentinel sees the exit at or after the kernel's, never
        before: what is not exact errs towards the deadline, never towards a success."""
        run = self.runs.get(run_id) if run_id is not None else None
        if run is None:
            return
        if run.deadline is not None:
            when = run.deadline.when()
            if when > asyncio.get_running_loop().time():
                # seen, so it was, before the deadline's time: the deadline records
                # nothing now; its timer stays until EXIT, to sweep the leader's group
                # should its exit stay hidden from the sentinel (``terminate``)
                if ended_ns is not None:
                    run.deadline.cancel()
                    run.deadline = None
                return
            run.deadline.cancel()
            run.deadline = None
            self.hold(run, when)
        if run.held_deadline is not None and ended_ns is not None:
            when, run.held_deadline = run.held_deadline, None
            if ended_ns <= 0 or ended_ns / 1e9 >= when:
                self.deadline_after_exit(run)

    def hold(self, run: Run, when: float) -> None:
        """Hold the deadline until the exit's time decides it, and sweep the leader's
        group now, as its sentinel does at the exit: should that exit stay hidden from
        the sentinel for good (tracers that hold each other), nothing else would."""
        run.held_deadline = when
        if (pane := self.registry.panes.get(run.pane)) is not None:
            self.sweep(pane)

    def exit_untold(self, run_id: str | None) -> None:
        """The pane exits and its sentinel never said when the leader exited (it was
        lost): a deadline whose time has come, held or with its timer not yet run,
        applies. A venomx failure must not turn into the program's success."""
        self.exit_seen(run_id, 0)

    def deadline_after_exit(self, run: Run) -> None:
        """The deadline came before the leader's exit, which the reactor saw first: its
        termination is recorded, with nothing left to signal."""
        pane = self.registry.panes.get(run.pane)
        if run.state != "completed" and pane is not None:
            self.stop(pane, "deadline", True)

    # -- termination and completion --------------------------------------------------------
    def on_terminating(self, run_id: str, cause: str) -> None:
        run = self.runs.get(run_id)
        if run is None or run.state != "running":
            return
        run.state = "terminating"
        run.cause = cause
        self.events.emit(
            "run.terminating", f"run:{run.id}", {"run": run.id, "cause": cause}, run.node
        )

    def complete(
        self,
        run_id: str,
        pane: Pane,
        usage: dict[str, int] | None = None,
        cleanup: dict[str, Any] | None = None,
        tree: dict[str, Any] | None = None,
    ) -> None:
        """The leader was reaped: fix the outcome and, when the wait gave one, the usage;
        what the pane left (``cleanup``) and its cgroup's usage (``tree``) as they are in
        this turn (same turn as pane.exited). None of it changes afterwards."""
        run = self.runs.get(run_id)
        if run is None or run.state == "completed":
            return
        if run.deadline is not None:
            run.deadline.cancel()
            run.deadline = None
        terminating = run.state == "terminating"
        run.exit_code, run.signal = pane.exit_code, pane.signal
        if terminating:
            run.outcome = "terminated"
        elif pane.signal is not None:
            run.outcome = "signaled"
        else:
            run.outcome = "succeeded" if pane.exit_code == 0 else "failed"
        run.state = "completed"
        run.status = status_of(run)
        run.completed_at = now_iso()
        run.completed_mono = monotonic_ms()
        run.duration_ms = max(0, round(run.completed_mono - run.started_mono))
        if usage is not None:
            run.cpu_ms, run.max_rss_kib = usage["cpu_ms"], usage["max_rss_kib"]
        run.fault = pane.fault
        run.cleanup = dict(cleanup or {"verified": False, "escapees": 0})
        tree = dict(tree or {})
        run.oom = bool(tree.pop("oom", False)) and run.signal == "SIGKILL"
        run.tree = {
            k: int(v) for k, v in tree.items() if k in ("cgroup_cpu_usec", "memory_peak_kib")
        }
        if pane.final is not None:
            run.output = tail(pane.final, run.output_rows, run.output_bytes)
            run.output_size = sum(len(x.encode("utf-8")) for x in run.output["lines"])
        else:  # the sentinel and the rows it held are gone: say so, invent nothing
            run.output = {
                "screen": "primary",
                "epoch": pane.told_epoch,
                "offset": pane.told_offset,
                "cols": pane.cols,
                "rows": pane.rows,
                "oldest": 0,
                "start": 0,
                "end": 0,
                "complete": False,
                "lines": [],
            }
        if run.fault is not None:
            run.output["complete"] = False
        self.retained_bytes += run.output_size
        self.completed_order.append(run.id)
        self.outcomes[run.outcome] += 1
        if run.cause:
            self.causes[run.cause] += 1
        data: dict[str, Any] = {"run": run.id, "pane": run.pane, "outcome": run.outcome}
        for name in ("exit_code", "signal", "cause", "fault"):
            value = getattr(run, name)
            if value is not None:
                data[name] = value
        self.events.emit("run.completed", f"run:{run.id}", data, run.node)
        if not run.done.done():
            run.done.set_result(None)
        self.enforce()

    # -- retention -------------------------------------------------------------------------
    def enforce(self) -> None:
        """Evict oldest-completed records while any limit is exceeded (§12)."""
        cfg = self.config
        now = monotonic_ms()
        while self.completed_order:
            oldest = self.runs[self.completed_order[0]]
            if len(self.completed_order) > cfg["run.retain_count"]:
                self.evict(oldest, "count")
            elif self.retained_bytes > cfg["run.retain_bytes"]:
                self.evict(oldest, "bytes")
            elif now - oldest.completed_mono >= cfg["run.retain_ms"]:
                self.evict(oldest, "ms")
            else:
                break
        if self.expiry is not None:
            self.expiry.cancel()
            self.expiry = None
        if self.completed_order:
            oldest = self.runs[self.completed_order[0]]
            delay = (oldest.completed_mono + cfg["run.retain_ms"] - now) / 1000.0
            self.expiry = asyncio.get_running_loop().call_later(
                max(0.0, delay) + 0.001, self.enforce
            )

    def evict(self, run: Run, why: str) -> None:
        self.completed_order.remove(run.id)
        del self.runs[run.id]
        del self.ordered[bisect.bisect_left(self.ordered, run.number, key=run_number)]
        del self.by_pane[run.pane]
        self.registry.runs.pop(run.id, None)
        self.retained_bytes -= run.output_size
        if self.bindings.get((run.owner, run.key)) is run:
            del self.bindings[(run.owner, run.key)]
        self.evictions[why] += 1
        self.events.emit("run.expired", f"run:{run.id}", {"run": run.id}, run.node)
        self.evicted()  # its pane may be evicted now

    def missing(self, run_id: str) -> VenomxError:
        """``not_found.run`` with expired/unknown, for an authorized absent run."""
        n = id_number(run_id, "r")
        expired = n is not None and n < self.registry.counters["r"]
        return VenomxError(
            "not_found.run",
            f"run {run_id[:64]} not found",
            {"reason": "expired" if expired else "unknown"},
        )
