"""Readable output for a person (the CLI without ``--json``, which prints results as they
are). Tables show the columns a person scans for; durations and sizes are in units a
person reads; a tail says what it leaves out and how to read it."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

Panes = Callable[[], dict[str, dict[str, Any]]]  # pane ID -> pane record, fetched on demand
SHOWN_LOSSES = 5  # doctor lists this many recent lost sentinels; --json has them all


def scalar(v: Any) -> str:
    """One cell or field value on one line: a newline in a string a program chose (the
    argv0 of a split it started, a resource it named) is written ``\\x0a``, as
    ``visible`` writes every other control character, or it would forge a row."""
    if v is None:
        return ""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (dict, list)):
        return json.dumps(v, separators=(",", ":"))
    return str(v).replace("\n", "\\x0a")


def plural(n: int, word: str, many: str | None = None) -> str:
    return f"{n} {word if n == 1 else (many or word + 's')}"


def human_duration(ms: int) -> str:
    """``850ms``, ``4.2s``, ``3m 12s``, ``2h 5m``, ``5d 0h``: the two largest units."""
    if ms < 1000:
        return f"{ms}ms"
    if ms < 60_000:
        return f"{ms / 1000:.1f}s"
    s = ms // 1000
    if s < 3600:
        return f"{s // 60}m {s % 60}s"
    if s < 86400:
        return f"{s // 3600}h {s % 3600 // 60}m"
    return f"{s // 86400}d {s % 86400 // 3600}h"


def human_bytes(n: int) -> str:
    size = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if size < 1024 or unit == "GiB":
            return f"{n} B" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{n} B"  # pragma: no cover


def table(
    rows: list[dict[str, Any]], cols: list[str] | None = None, headers: list[str] | None = None
) -> str:
    """Aligned columns under upper-case headers (every scalar field unless ``cols``)."""
    if cols is None:
        cols = []
        for r in rows:
            for k, v in r.items():
                if k not in cols and not isinstance(v, (dict, list)):
                    cols.append(k)
        if not cols:
            return "\n".join(json.dumps(r) for r in rows)
    heads = headers or [c.upper() for c in cols]
    cells = [heads] + [[scalar(r.get(c)) for c in cols] for r in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(cols))]
    return "\n".join(
        "  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip()
        for row in cells
    )


def trimmed(lines: list[str]) -> list[str]:
    """Rows as a terminal shows them: no padding, no blank rows after the last text."""
    out = [ln.rstrip() for ln in lines]
    while out and not out[-1]:
        out.pop()
    return out


def render_fields(result: dict[str, Any], panes: Panes) -> str:
    """Scalars as ``key: value``, lists of records as tables, rows and output as text."""
    if "lines" in result and isinstance(result["lines"], list):  # pane capture-rows
        return "\n".join(trimmed(result["lines"]))
    lists = [
        (k, v)
        for k, v in result.items()
        if isinstance(v, list) and v and all(isinstance(x, dict) for x in v)
    ]
    out = []
    usage = usage_text(result)
    for k, v in result.items():
        if isinstance(v, list) and v and all(isinstance(x, dict) for x in v):
            continue
        if k == "output" and isinstance(v, dict):
            continue
        if usage is not None and k in USAGE_FIELDS:
            if usage:
                out.append(f"usage: {usage}")
                usage = ""  # once, where the first of its fields was
            continue
        if k == "principal" and v is None:
            out.append("principal: (anonymous: no token)")
            continue
        out.append(f"{k}: {scalar(v)}")
    for _, v in lists:
        out.append(table(v))
    if isinstance(result.get("output"), dict):
        out.append(output_header(result["output"], result.get("pane")))
        out += ["  " + ln.rstrip() for ln in result["output"].get("lines", [])]
    return "\n".join(out)


USAGE_FIELDS = ("cpu_ms", "max_rss_kib", "cgroup_cpu_usec", "memory_peak_kib", "oom", "cleanup")


def usage_text(record: dict[str, Any]) -> str | None:
    """A run record's usage for a person: ``cpu 1.2s, max rss 5.3 MiB`` from the wait
    status, then what the pane's cgroup saw and what was left behind; None when the record
    has none (not completed, or not known)."""
    parts = []
    cpu, rss = record.get("cpu_ms"), record.get("max_rss_kib")
    if type(cpu) is int and type(rss) is int:
        parts.append(f"cpu {human_duration(cpu)}, max rss {human_bytes(rss * 1024)}")
    tree_cpu, peak = record.get("cgroup_cpu_usec"), record.get("memory_peak_kib")
    if type(tree_cpu) is int:
        parts.append(f"tree cpu {human_duration(tree_cpu // 1000)}")
    if type(peak) is int:
        parts.append(f"tree memory peak {human_bytes(peak * 1024)}")
    if record.get("oom") is True:
        parts.append("killed by the OOM killer")
    cleanup = record.get("cleanup")
    if isinstance(cleanup, dict):
        left = cleanup.get("escapees")
        if left:
            parts.append(f"{plural(int(left), 'process', 'processes')} left behind")
        elif cleanup.get("verified"):
            parts.append("nothing left behind (verified)")
    return ", ".join(parts) if parts else None


def output_header(output: dict[str, Any], pane: Any) -> str:
    """``output:``, and when the tail is not every row the pane had, what is left out."""
    start, oldest = output.get("start"), output.get("oldest")
    if (
        output.get("complete") is not False
        or not isinstance(start, int)
        or not isinstance(oldest, int)
    ):
        return "output:"
    notes = []
    if start > oldest:
        notes.append(
            f"{plural(start - oldest, 'earlier row')} omitted; read them with "
            f"venomx pane capture-rows --pane {pane} --epoch {output.get('epoch')} "
            f"--end {start}"
        )
    if oldest > 0:
        notes.append(
            f"{plural(oldest, 'row')} before {'those' if notes else 'these'} left the scrollback"
        )
    if not notes:
        notes.append("rows from before the pane was resized are gone")
    return f"output ({'; '.join(notes)}):"


RUN_COLUMNS = ["run", "key", "state", "outcome", "status", "duration", "argv0"]


def run_duration(run: dict[str, Any], now_ms: int | None) -> str:
    if isinstance(run.get("duration_ms"), int):
        return human_duration(run["duration_ms"])
    started = started_ms(run.get("started_at"))
    if started is None or now_ms is None:
        return ""
    return human_duration(max(0, now_ms - started))


def started_ms(stamp: Any) -> int | None:
    from datetime import datetime

    if not isinstance(stamp, str):
        return None
    try:
        return int(datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp() * 1000)
    except ValueError:
        return None


def render_runs(result: dict[str, Any], panes: Panes) -> str:
    """run list: one row per run with what a person scans for; ``--json`` has the rest."""
    import time

    runs = [r for r in result.get("runs", []) if isinstance(r, dict)]
    by_pane = panes() if runs else {}
    now_ms = int(time.time() * 1000)
    rows = []
    for r in runs:
        pane = by_pane.get(str(r.get("pane")), {})
        argv0 = pane.get("argv0") or ("sh" if r.get("shell") else "")
        rows.append(
            {
                "run": r.get("run"),
                "key": r.get("key"),
                "state": r.get("state"),
                "outcome": r.get("outcome"),
                "status": r.get("status"),
                "duration": run_duration(r, now_ms),
                "argv0": argv0,
            }
        )
    out = [table(rows, RUN_COLUMNS)]
    if result.get("next"):
        out.append(f"(more runs follow: venomx run list --after {result['next']})")
    return "\n".join(out)


def mapping(v: Any) -> dict[str, Any]:
    return v if isinstance(v, dict) else {}


def pane_name(pane: str, run: Any, panes: dict[str, dict[str, Any]]) -> str:
    run = run or panes.get(pane, {}).get("run")
    return f"pane {pane}" + (f" (run {run})" if run else "")


def doctor_notes(name: str, result: dict[str, Any], panes: Panes) -> tuple[str | None, list[str]]:
    """A check's detail said for a person, and lines naming what it found."""
    if name == "sentinels" and isinstance(result.get("sentinels"), dict):
        return None, sentinel_notes(result["sentinels"], panes)
    if name == "escapees" and isinstance(result.get("escapees"), dict):
        return escapee_notes(result["escapees"], panes)
    if name == "fork_server" and isinstance(result.get("fork_server"), dict):
        return None, fork_server_notes(result["fork_server"])
    if name == "exited_panes" and isinstance(result.get("exited_panes"), dict):
        x = result["exited_panes"]
        n, held = int(x.get("count", 0)), int(x.get("bytes", 0))
        return f"{plural(n, 'exited pane')} {'holds' if n == 1 else 'hold'} {human_bytes(held)}", []
    return None, []


def fork_server_notes(f: dict[str, Any]) -> list[str]:
    """Its deaths since the daemon started, which the check (the fork server now) hides."""
    n, last = int(f.get("restarts", 0)), mapping(f.get("last_exit"))
    if not n:
        return []
    code = f"exit code {last.get('exit_code')}"
    how = f"killed by {last['signal']}" if "signal" in last else code
    return [f"restarted {plural(n, 'time')}; last exit {last.get('at', '')}: {how}"]


def sentinel_notes(s: dict[str, Any], panes: Panes) -> list[str]:
    out = []
    for key, label in (
        ("missing_panes", "missing"),
        ("stopped", "stopped"),
        ("unresponsive", "unresponsive"),
    ):
        ids = [p for p in s.get(key) or [] if isinstance(p, str)]
        if ids:
            known = panes()
            out.append(f"{label}: " + ", ".join(pane_name(p, None, known) for p in ids))
    orphans = s.get("orphaned_pids")
    if isinstance(orphans, list) and orphans:
        out.append("orphaned: " + ", ".join(f"pid {pid}" for pid in orphans))
    lost = mapping(s.get("lost"))
    recent = [e for e in lost.get("recent") or [] if isinstance(e, dict)]
    for e in reversed(recent[-SHOWN_LOSSES:]):
        pid = f", sentinel pid {e['pid']}" if "pid" in e else ""
        out.append(
            f"lost {e.get('at', '')}: {pane_name(str(e.get('pane')), e.get('run'), {})}"
            f"{pid}, {e.get('reason', '')}"
        )
    if len(recent) > SHOWN_LOSSES:
        out.append(f"... {len(recent) - SHOWN_LOSSES} earlier losses (--json lists them)")
    return out


def escapee_notes(e: dict[str, Any], panes: Panes) -> tuple[str, list[str]]:
    n = int(e.get("count", 0))
    detail = (
        f"{plural(n, 'process', 'processes')} left {'its' if n == 1 else 'their'} "
        "pane's process group"
    )
    if e.get("reaped"):
        detail += f" ({e['reaped']} reaped since start)"
    per_pane, pids = mapping(e.get("panes")), mapping(e.get("pids"))
    out = []
    known = panes() if per_pane else {}
    for pane, count in sorted(per_pane.items()):
        where = "outside any pane" if pane == "unknown" else pane_name(pane, None, known)
        listed = [str(p) for p in pids.get(pane) or []]
        what = (
            ("pid " + ", ".join(listed)) if listed else plural(int(count), "process", "processes")
        )
        out.append(f"{where}: {what}")
    return detail, out


def render_doctor(result: dict[str, Any], panes: Panes) -> str:
    head = f"venomx doctor: {result.get('status')} (daemon pid {result.get('pid')}"
    if isinstance(result.get("uptime_ms"), int):
        head += f", up {human_duration(result['uptime_ms'])}"
    if result.get("version"):
        head += f", version {result['version']}"
    out = [head + ")"]
    checks = [c for c in result.get("checks", []) if isinstance(c, dict)]
    width = max((len(str(c.get("name", ""))) for c in checks), default=0)
    for c in checks:
        name = str(c.get("name", ""))
        detail, notes = doctor_notes(name, result, panes)
        out.append(f"  {c.get('status', ''):<5} {name:<{width}}  {detail or c.get('detail', '')}")
        out += [" " * (width + 10) + note for note in notes]
    return "\n".join(out)


RENDERERS: dict[str, Callable[[dict[str, Any], Panes], str]] = {
    "fields": render_fields,
    "doctor": render_doctor,
    "runs": render_runs,
}

__all__ = [
    "RENDERERS",
    "human_bytes",
    "human_duration",
    "render_doctor",
    "render_fields",
    "render_runs",
    "table",
    "trimmed",
    "usage_text",
]
