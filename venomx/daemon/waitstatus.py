"""Decoding a wait status, the one source of a run's outcome, and naming signals.

A status is decoded here and nowhere else: the sentinel sends the raw status it got
from its own wait on the leader, and the daemon's own reap hands over its raw status.
"""

from __future__ import annotations

import os
import signal as _signal
from typing import Any


def waitstatus_fields(status: int) -> dict[str, Any]:
    """``exit_code``, or ``signal`` and ``signum``, of a raw wait status."""
    if os.WIFEXITED(status):
        return {"exit_code": os.WEXITSTATUS(status)}
    if os.WIFSIGNALED(status):
        n = os.WTERMSIG(status)
        return {"signal": signal_name(n), "signum": n}
    return {}


def signal_name(n: int) -> str:
    if _signal.SIGRTMIN <= n <= _signal.SIGRTMAX:
        return "SIGRTMIN" if n == _signal.SIGRTMIN else f"SIGRTMIN+{n - _signal.SIGRTMIN}"
    try:
        return _signal.Signals(n).name
    except ValueError:
        return f"SIG{n}"


def signal_number(name: str) -> int | None:
    if name.startswith("SIGRTMIN"):
        return int(_signal.SIGRTMIN) + (int(name[9:]) if name[8:9] == "+" else 0)
    try:
        return int(_signal.Signals[name])
    except KeyError:
        return int(name[3:]) if name[3:].isdigit() else None
