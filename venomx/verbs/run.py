"""Handlers for run, run.wait, run.get, run.list and run.cancel (RFC-0015).

``run`` follows RFC-0015 §11's validation order exactly; steps 1-3 (schema, dispatch
gate, target form, spawn check before lookup) are the dispatcher's, from the manifest.
"""

from __future__ import annotations

import asyncio
from typing import Any

from venomx.daemon.auth import child_grants
from venomx.daemon.dispatch import Context, handler
from venomx.daemon.runs import Pending, Run
from venomx.daemon.spawn import (
    CancelledAfter,
    SpawnRequest,
    check_cwd,
    pane_must_run,
    spawn,
)
from venomx.daemon.termination import terminate, wait_terminated
from venomx.verbs.common import (
    check_params,
    get_pane,
    get_session,
    not_found,
    parse_optional_grants,
    refuse_if_shutting_down,
)
from venomx.wire import VenomxError, id_number

SHELL = "/bin/sh"


@handler("run")
async def run(ctx: Context, key: str, cols: int, rows: int, output_rows: int,
              output_bytes: int, session: str | None = None, pane: str | None = None,
              axis: str | None = None, argv: list[str] | None = None, shell: str | None = None,
              name: str | None = None, deadline_ms: int | None = None,
              source: str | None = None, grants: list[Any] | None = None,
              cwd: str | None = None, env: dict[str, Any] | None = None,
              env_unset: list[str] | None = None) -> dict[str, Any]:
    """Start a trusted run; see RFC-0015 §8 for keys, joining and reuse.

    Cancellation: before the barrier the start rolls back and nothing ran; after it the
    start completes (or rolls back on exec failure) and only then ends ``cancelled``.
    """
    d = ctx.d
    params = {"key": key, "session": session, "pane": pane, "axis": axis, "argv": argv,
              "shell": shell, "name": name, "cols": cols, "rows": rows,
              "deadline_ms": deadline_ms, "output_rows": output_rows,
              "output_bytes": output_bytes, "grants": grants, "cwd": cwd, "env": env,
              "env_unset": env_unset}
    # 4. source, then shutdown
    if source is not None and source != d.source:
        raise VenomxError("conflict.source", "the daemon's source differs",
                          {"source": d.source})
    refuse_if_shutting_down(ctx)
    # 5. grants coverage
    new_grants = child_grants(d.registry, ctx.principal, parse_optional_grants(grants))
    # 6. remaining parameter rules, in the manifest's order
    check_params(ctx, **params)
    command = argv if argv is not None else [SHELL, "-c", shell or ""]
    # 7. key lookup
    runs = d.runs
    owner = ctx.principal.id
    digest = runs.digest(params)
    found = runs.lookup_key(owner, key, digest)
    if isinstance(found, Run):
        runs.reused += 1
        return found.result(d.source, reused=True)
    if isinstance(found, Pending):
        runs.joined += 1
        joined = await asyncio.shield(found.future)
        return joined.result(d.source, reused=True)
    # 8. target lookup and state
    if session is not None:
        s = get_session(ctx, session)
        if s.removing:
            raise VenomxError("conflict.removing", f"session {s.id} is being removed", {})
    else:
        assert pane is not None
        target = get_pane(ctx, pane)
        pane_must_run(target)
        reg = d.registry
        if reg.windows[target.window].removing or reg.sessions[target.session].removing:
            raise VenomxError("conflict.removing", f"window {target.window} is being removed",
                              {})
    # 9. run limit, cwd resolution, preparation and exec
    if runs.active >= d.config["run.max_active"]:
        raise VenomxError("unavailable.run_limit", "too many runs are not yet completed",
                          {"max_active": d.config["run.max_active"]})
    check_cwd(cwd)
    run_id = d.registry.next_id("r")
    record = Run(run_id, key, owner, digest, shell is not None, output_rows, output_bytes)
    future: asyncio.Future[Run] = asyncio.get_running_loop().create_future()
    runs.pending[(owner, key)] = Pending(run_id, digest, future)
    req = SpawnRequest(ctx.principal, command, cols, rows, new_grants, cwd, env, env_unset,
                       session=session, split=pane, axis=axis or "cols", name=name,
                       run=run_id)
    try:
        await spawn(d, req, on_commit=lambda p: runs.commit(record, p, deadline_ms))
    except BaseException as exc:
        runs.pending.pop((owner, key), None)
        if record.pane:
            future.set_result(record)
        else:
            if isinstance(exc, CancelledAfter):
                exc = exc.error
            err = exc if isinstance(exc, VenomxError) else VenomxError(
                "cancelled", "the start this request joined was cancelled", {})
            future.set_exception(err)
            future.exception()  # joiners may be none; the error must not be reported as lost
        raise
    runs.pending.pop((owner, key), None)
    future.set_result(record)
    return record.result(d.source, reused=False)


def get_run(ctx: Context, run_id: str) -> Run:
    r = ctx.d.runs.runs.get(run_id)
    if r is None:
        raise ctx.d.runs.missing(run_id)
    return r


@handler("run.wait")
async def wait(ctx: Context, run: str, output: bool, timeout_ms: int | None = None
               ) -> dict[str, Any]:
    """Wait for completion; never acts on the run.

    Cancellation: ends only this wait (``cancelled``); the command keeps running.
    """
    r = get_run(ctx, run)
    if r.state != "completed":
        if timeout_ms != 0:
            ctx.d.runs.waiters += 1
            try:
                await asyncio.wait([r.done], timeout=None if timeout_ms is None
                                   else timeout_ms / 1000.0)
            finally:
                ctx.d.runs.waiters -= 1
        if r.state != "completed":
            raise VenomxError("timeout.wait", f"run {r.id} is still {r.state}",
                              {"run": r.id, "state": r.state})
    return r.record(ctx.d.source, output)


@handler("run.get")
async def get(ctx: Context, run: str, output: bool) -> dict[str, Any]:
    return get_run(ctx, run).record(ctx.d.source, output)


def _num(run_id: str) -> int:
    n = id_number(run_id, "r")
    return -1 if n is None else n


@handler("run.list")
async def run_list(ctx: Context, limit: int, pane: str | None = None, key: str | None = None,
                   after: str | None = None) -> dict[str, Any]:
    d = ctx.d
    if pane is not None and pane not in d.registry.panes and not any(
            r.pane == pane for r in d.runs.runs.values()):
        raise not_found("pane", pane)
    floor = _num(after) if after is not None else -1
    picked: list[Run] = []
    more = False
    for r in sorted(d.runs.runs.values(), key=lambda r: _num(r.id)):
        if _num(r.id) <= floor or (pane is not None and r.pane != pane):
            continue
        if key is not None and (r.owner != ctx.principal.id or r.key != key):
            continue
        if not ctx.can("read", f"run:{r.id}", r.node):
            continue
        if len(picked) == limit:
            more = True
            break
        picked.append(r)
    out: dict[str, Any] = {"source": d.source,
                           "runs": [r.record(d.source, False) for r in picked]}
    if more:
        out["next"] = picked[-1].id
    return out


@handler("run.cancel")
async def cancel(ctx: Context, run: str, signal: str, grace_ms: int) -> dict[str, Any]:
    """Terminate the run's pane (cause ``cancel``) and return the completed record.

    Cancellation: ends only this request; signals sent are not undone.
    """
    r = get_run(ctx, run)
    if r.state != "completed":
        p = ctx.d.registry.panes.get(r.pane)
        if p is not None:
            terminate(ctx.d, p, signal, grace_ms, "cancel")
            await wait_terminated(p)
    return r.record(ctx.d.source, False)
