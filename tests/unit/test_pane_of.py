"""What a left-behind process says of its pane: bounded work for each one."""

from __future__ import annotations

import functools
import subprocess
from pathlib import Path

from tests.helpers import wait_for
from venomx.daemon.cgroups import ENVIRON_READ, pane_of


def _execed(pid: int) -> bool:
    """Until its exec, a child shows its parent's environment."""
    return Path(f"/proc/{pid}/cmdline").read_bytes().startswith(b"sleep\0")


def test_a_pane_is_looked_for_at_the_start_of_an_environment_only() -> None:
    """Each pane exit without a cgroup reads it for every process panes left behind: a
    program's 1 MiB environments held the reactor 0.44 s per exit (helper-142)."""
    pad = "x" * ENVIRON_READ
    found = []
    for env in ({"VENOMX_PANE": "p9", "PAD": pad}, {"PAD": pad, "VENOMX_PANE": "p9"}):
        proc = subprocess.Popen(["sleep", "60"], env=env)
        try:
            wait_for(functools.partial(_execed, proc.pid), 10, "its exec")  # its own env
            found.append(pane_of(proc.pid))
        finally:
            proc.kill()
            proc.wait()
    assert found == ["p9", None]
