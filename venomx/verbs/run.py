"""Handlers for run, run.wait, run.get, run.list and run.cancel (RFC-0015).

``run`` follows RFC-0015 §11's validation order exactly: steps 1-6 (schema, dispatch
gate, target form, spawn check before lookup, source, shutdown, grants, value rules)
are dispatch's, declared in the manifest; the key lookup (7) is the handler's, and only
then is the target resolved and its state checked (8, ``ctx.resolve``).
"""

from __future__ import annotations

import asyncio
import bisect
from collections.abc import Iterable
from typing import Any

from venomx.daemon.dispatch import Context, handler, not_found
from venomx.daemon.panes.spawn import CancelledAfter, SpawnRequest
from venomx.daemon.registry import Grant
from venomx.daemon.runs import Pending, Run, run_number
from venomx.daemon.states import check_cwd
from venomx.wire import VenomxError, id_number

SHELL = "/bin/sh"


@handler("run")
async def run(
    ctx: Context,
    key: str,
    cols: int,
    rows: int,
    output_rows: int,
    output_bytes: int,
    grants: list[Grant],
    input: str,
    session: str | None = None,
    pane: str | None = None,
    axis: str | None = None,
    argv: list[str] | None = None,
    shell: str | None = None,
    name: str | None = None,
    deadline_ms: int | None = None,
    source: str | None = None,
    cwd: str | None = None,
    env: dict[str, Any] | None = None,
    env_unset: list[str] | None = None,
    memory_max: int | None = None,
    pids_max: int | None = None,
) -> dict[str, Any]:
    """Start a trusted run; see RFC-0015 §8 for keys, joining and reuse.

    Cancellation: before the barrier the start rolls back and nothing ran; after it the
    start completes (or rolls back on exec failure) and only then ends ``cancelled``.
    """
    params = {
        "key": key,
        "session": session,
        "pane": pane,
        "axis": axis,
        "argv": argv,
        "shell": shell,
        "name": name,
        "cols": cols,
        "rows": rows,
        "deadline_ms": deadline_ms,
        "output_rows": output_rows,
        "output_bytes": output_bytes,
        # after default insertion (§8): absent grants and the defaults spelled out are one
        "grants": [g.to_dict() for g in grants],
        "cwd": cwd,
        "env": env,
        "env_unset": env_unset,
        "memory_max": memory_max,
        "pids_max": pids_max,
        "input": input,
    }
    command = argv if argv is not None else [SHELL, "-c", shell or ""]
    # 7. key lookup
    runs = ctx.runs
    owner = ctx.principal.id
    digest = runs.digest(params)
    while True:
        found = runs.lookup_key(owner, key, digest)
        if isinstance(found, Run):
            runs.reused += 1
            return found.result(ctx.source, reused=True)
        if not isinstance(found, Pending):
            break
        runs.joined += 1
        try:
            joined = await asyncio.shield(found.future)
        except Withdrawn:  # nothing ran and the key is free again: look it up afresh
            continue
        return joined.result(ctx.source, reused=True)
    # 8. target lookup and state
    ctx.resolve()
    # 9. run limit, cwd resolution, preparation and exec
    if runs.active >= ctx.config["run.max_active"]:
        raise VenomxError(
            "unavailable.run_limit",
            "too many runs are not yet completed",
            {"max_active": ctx.config["run.max_active"]},
        )
    check_cwd(cwd)
    run_id = ctx.registry.next_id("r")
    record = Run(run_id, key, owner, digest, shell is not None, output_rows, output_bytes)
    future: asyncio.Future[Run] = asyncio.get_running_loop().create_future()
    runs.pending[(owner, key)] = Pending(run_id, digest, future)
    req = SpawnRequest(
        ctx.principal,
        command,
        cols,
        rows,
        grants,
        cwd,
        env,
        env_unset,
        session=session,
        split=pane,
        axis=axis or "cols",
        name=name,
        run=run_id,
        memory_max=memory_max,
        pids_max=pids_max,
        eof=input == "eof",
        target=ctx.resolve,
    )
    try:
        await ctx.panes.spawn(req, on_commit=lambda p: runs.commit(record, p, deadline_ms))
    except BaseException as exc:
        runs.pending.pop((owner, key), None)
        if record.pane:
            future.set_result(record)
        else:
            if isinstance(exc, CancelledAfter):
                exc = exc.error
            err: BaseException
            if isinstance(exc, VenomxError):
                err = exc
            elif isinstance(exc, asyncio.CancelledError):
                # this request was cancelled before its barrier: requests that joined it
                # were not, and RFC-0015 §13 row 15 has a repeat start what never ran
                err = Withdrawn()
            else:
                err = VenomxError("cancelled", "the start this request joined was cancelled", {})
            future.set_exception(err)
            future.exception()  # joiners may be none; the error must not be reported as lost
        raise
    runs.pending.pop((owner, key), None)
    future.set_result(record)
    return record.result(ctx.source, reused=False)


class Withdrawn(Exception):
    """A start whose request was cancelled before its barrier: nothing ran, the key is
    free, and the requests that joined it look the key up again."""


@handler("run.wait")
async def wait(
    ctx: Context, run: Run, output: bool, timeout_ms: int | None = None
) -> dict[str, Any]:
    """Wait for completion; never acts on the run.

    Cancellation: ends only this wait (``cancelled``); the command keeps running.
    """
    if run.state != "completed":
        if timeout_ms != 0:
            ctx.runs.waiters += 1
            try:
                await asyncio.wait(
                    [run.done], timeout=None if timeout_ms is None else timeout_ms / 1000.0
                )
            finally:
                ctx.runs.waiters -= 1
        if run.state != "completed":
            raise VenomxError(
                "timeout.wait",
                f"run {run.id} is still {run.state}",
                {"run": run.id, "state": run.state},
            )
    return run.record(ctx.source, output)


@handler("run.get")
def get(ctx: Context, run: Run, output: bool) -> dict[str, Any]:
    return run.record(ctx.source, output)


@handler("run.list")
def run_list(
    ctx: Context,
    limit: int,
    pane: str | None = None,
    key: str | None = None,
    after: str | None = None,
) -> dict[str, Any]:
    """``pane`` filters: it names a pane that exists or that a retained run ran in.

    A key or a pane names at most one retained run, and a page starts where ``after``
    falls in ID order: no call sorts or walks the records a page does not reach.
    """
    runs = ctx.runs
    if pane is not None and pane not in ctx.registry.panes and pane not in runs.by_pane:
        raise not_found("pane", pane)
    floor = -1 if after is None else id_number(after, "r")
    assert floor is not None  # the manifest's pattern for after
    candidates: Iterable[Run]
    if key is not None:
        one = runs.bindings.get((ctx.principal.id, key))
        candidates = [] if one is None else [one]
    elif pane is not None:
        one = runs.by_pane.get(pane)
        candidates = [] if one is None else [one]
    else:
        ordered = runs.ordered
        start = bisect.bisect_right(ordered, floor, key=run_number)
        candidates = (ordered[i] for i in range(start, len(ordered)))
    picked: list[Run] = []
    more = False
    for r in candidates:
        if r.number <= floor or (pane is not None and r.pane != pane):
            continue
        if not ctx.can("read", f"run:{r.id}", r.node):
            continue
        if len(picked) == limit:
            more = True
            break
        picked.append(r)
    out: dict[str, Any] = {
        "source": ctx.source,
        "runs": [r.record(ctx.source, False) for r in picked],
    }
    if more:
        out["next"] = picked[-1].id
    return out


@handler("run.cancel")
async def cancel(ctx: Context, run: Run, signal: str, grace_ms: int) -> dict[str, Any]:
    """Terminate the run's pane (cause ``cancel``) and return the completed record.

    Cancellation: ends only this request; signals sent are not undone.
    """
    if run.state != "completed":
        p = ctx.registry.panes.get(run.pane)
        if p is not None:
            ctx.panes.terminate(p, signal, grace_ms, "cancel")
            await ctx.panes.wait_terminated(p)
    return run.record(ctx.source, False)


@handler("run.cleanup")
async def cleanup(ctx: Context, run: Run, signal: str, grace_ms: int) -> dict[str, Any]:
    """End what the completed run's pane left: {run, pane, ended, remaining}. The run's
    record (its ``cleanup`` included) was fixed at completion and stays as it is.

    Cancellation: ends only the request; signals sent are not undone.
    """
    if run.state != "completed":
        raise VenomxError(
            "conflict.pane_live",
            f"run {run.id} has not completed: its pane {run.pane} is still running",
            {"pane": run.pane},
        )
    return {"run": run.id, **await ctx.panes.cleanup(run.pane, signal, grace_ms)}
