"""What a left-behind process says of its pane: bounded work for each one."""

from __future__ import annotations

import subprocess

from venomx.daemon.cgroups import ENVIRON_READ, pane_of


def test_a_pane_is_looked_for_at_the_start_of_an_environment_only() -> None:
    """Each pane exit without a cgroup reads it for every process panes left behind: a
    program's 1 MiB environments held the reactor 0.44 s per exit (helper-142)."""
    pad = "x" * ENVIRON_READ
    found = []
    for env in ({"VENOMX_PANE": "p9", "PAD": pad}, {"PAD": pad, "VENOMX_PANE": "p9"}):
        proc = subprocess.Popen(["sleep", "60"], env=env)
        try:
            found.append(pane_of(proc.pid))
        finally:
            proc.kill()
            proc.wait()
    assert found == ["p9", None]
