"""Which of a pane's processes count as ending rather than as escapees."""

from __future__ import annotations

import subprocess
import sys

from tests.helpers import wait_for
from venomx.daemon import cgroups, procfs

# The main thread leaves with pthread_exit; the process runs on in its other thread.
HEADLESS = """
import ctypes, sys, threading, time
threading.Thread(target=lambda: time.sleep(60), daemon=False).start()
print("ready", flush=True)
ctypes.CDLL(None).pthread_exit(None)
"""


def test_a_process_whose_main_thread_exited_is_not_dying() -> None:
    """Its main thread reads as exiting, yet the process runs: counting it as ending
    would let a program hide an escapee (and make a pane's cleanup read verified)."""
    child = subprocess.Popen([sys.executable, "-c", HEADLESS], stdout=subprocess.PIPE)
    try:
        assert child.stdout is not None and child.stdout.readline() == b"ready\n"
        wait_for(lambda: procfs.state(child.pid) == "Z", 10, "the main thread's exit")
        assert procfs.exiting(child.pid)
        assert not cgroups.dying(child.pid)
    finally:
        child.kill()
        child.wait()
    assert cgroups.dying(child.pid)  # gone


def test_live_zombie_and_gone() -> None:
    child = subprocess.Popen(["sleep", "30"])
    assert not cgroups.dying(child.pid)
    child.kill()
    wait_for(lambda: procfs.state(child.pid) == "Z", 10, "the zombie")
    assert cgroups.dying(child.pid)
    child.wait()
    assert cgroups.dying(child.pid)


# Each thread starts its successor and exits at once: at any moment the process runs,
# yet a look at its threads one by one may find each already gone.
HOPPING = """
import ctypes, threading
def hop():
    threading.Thread(target=hop).start()
threading.Thread(target=hop).start()
print("ready", flush=True)
ctypes.CDLL(None).pthread_exit(None)
"""


def test_a_process_whose_threads_hop_is_never_dying() -> None:
    child = subprocess.Popen([sys.executable, "-c", HOPPING], stdout=subprocess.PIPE)
    try:
        assert child.stdout is not None and child.stdout.readline() == b"ready\n"
        wait_for(lambda: procfs.state(child.pid) == "Z", 10, "the main thread's exit")
        assert not any(cgroups.dying(child.pid) for _ in range(3000))
        assert child.poll() is None
    finally:
        child.kill()
        child.wait()
