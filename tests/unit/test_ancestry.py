"""Which venomx panes a process is inside, read from real processes' ancestry."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

from tests.helpers import wait_for
from venomx.daemon import ancestry, procfs

# A stand-in daemon: it takes the daemon's name and starts a child (a "pane"), which
# starts a grandchild (the "program").
FAKE_DAEMON = """
import subprocess, sys
from workers import prctl
assert prctl.set_name(b"venomx-daemon")
pane = subprocess.Popen(["sh", "-c", "sleep 60 & echo $!; wait"], stdout=subprocess.PIPE)
print(pane.pid, pane.stdout.readline().decode().strip(), flush=True)
pane.wait()
"""


def start(pid: int) -> int:
    return int(procfs.stat_fields(pid)[procfs.STARTTIME])


def test_a_program_is_inside_the_pane_of_the_daemon_above_it() -> None:
    fake = subprocess.Popen(
        [sys.executable, "-c", FAKE_DAEMON], stdout=subprocess.PIPE, start_new_session=True
    )
    try:
        assert fake.stdout is not None
        pane, program = map(int, fake.stdout.readline().split())
        wait_for(lambda: open(f"/proc/{fake.pid}/comm").read() == "venomx-daemon\n", 10, "named")
        inside = (fake.pid, start(fake.pid), pane, start(pane))
        assert ancestry.panes_of(program) == frozenset({inside})
        assert ancestry.panes_of(pane) == frozenset({inside})
        assert ancestry.panes_of(fake.pid) == frozenset()  # a daemon is in no pane of its own
        assert ancestry.panes_of(os.getpid()) == frozenset()
        # the daemon itself: everything below it is its pane's, whatever it was given
        assert ancestry.panes_of(program, me=fake.pid) is None
        assert ancestry.in_a_pane(program, fake.pid, frozenset({inside}))
        # another daemon: a pane it was started from is its owner's, any other is not
        assert not ancestry.in_a_pane(program, -1, frozenset({inside}))
        assert ancestry.in_a_pane(program, -1, frozenset())
        elsewhere = (fake.pid, start(fake.pid), pane, start(pane) + 1)  # a reused pid
        assert ancestry.in_a_pane(program, -1, frozenset({elsewhere}))
        assert not ancestry.in_a_pane(os.getpid(), -1, frozenset())
    finally:
        os.killpg(fake.pid, signal.SIGKILL)  # with its pane and program
        fake.wait()
    assert ancestry.panes_of(2**22 + 1) is None  # gone: cannot be told from a pane's
