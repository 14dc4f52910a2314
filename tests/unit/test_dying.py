"""Which of a pane's processes count as ending rather than as escapees."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from pathlib import Path

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


# Over and over, a thread other than the first replaces the program: execve sends
# SIGKILL to every other thread, then the exec'ing thread takes the first one's ID.
EXECING = """
import os, sys, threading
os.write(1, b"x")
def again():
    os.execv(sys.executable, [sys.executable, "-S", "-I", "-c", sys.argv[1], sys.argv[1]])
threading.Thread(target=again).start()
"""


def test_a_process_that_execs_from_a_thread_is_never_dying() -> None:
    """Each execve leaves, for a moment, the first thread's ID read with SIGKILL pending
    and the exec'ing thread's ID gone: one look at each counted the process as ending
    about once in 450 looks while the new program ran."""
    argv = [sys.executable, "-S", "-I", "-c", EXECING, EXECING]
    child = subprocess.Popen(argv, stdout=subprocess.PIPE)
    assert child.stdout is not None
    os.set_blocking(child.stdout.fileno(), False)
    execs = 0
    ending = 0

    def looked_through_100_execs() -> bool:
        nonlocal execs, ending
        for _ in range(200):
            ending += cgroups.dying(child.pid)
        with contextlib.suppress(BlockingIOError):
            execs += len(os.read(child.stdout.fileno(), 4096))  # type: ignore[union-attr]
        return execs >= 100

    try:
        wait_for(looked_through_100_execs, 120, "a hundred execs")
        assert ending == 0
        assert child.poll() is None
    finally:
        child.kill()
        child.wait()


# Uses every descriptor it may have, then looks at a live process.
NO_DESCRIPTORS = """
import os, resource, sys
from venomx.daemon import cgroups
resource.setrlimit(resource.RLIMIT_NOFILE, (64, 64))
try:
    while True:
        os.dup(0)
except OSError:
    pass
print(cgroups.dying(int(sys.argv[1])))
"""


def test_a_process_proc_will_not_show_is_not_dying() -> None:
    """Out of descriptors (or with /proc hiding it) nothing about the process can be
    read: that is no proof it is ending, and counting it so would hide an escapee."""
    child = subprocess.Popen(["sleep", "30"])
    try:
        out = subprocess.run(
            [sys.executable, "-c", NO_DESCRIPTORS, str(child.pid)],
            capture_output=True,
            check=True,
            timeout=60,
        )
        assert out.stdout == b"False\n"
    finally:
        child.kill()
        child.wait()


def fake_cgroup(d: Path, pids: list[int], populated: bool = True) -> None:
    """A directory laid out as a cgroup's: its process list and its events."""
    d.mkdir(parents=True, exist_ok=True)
    (d / "cgroup.procs").write_text("".join(f"{p}\n" for p in pids))
    (d / "cgroup.events").write_text(f"populated {int(populated)}\nfrozen 0\n")


def test_a_cgroup_that_will_not_say_proves_nothing(tmp_path: Path) -> None:
    """An empty cgroup (or one removed, which only an empty one can be) is verified; one
    whose process list cannot be read is not, and counts no escapee it did not see."""
    live = subprocess.Popen(["sleep", "30"])
    try:
        fake_cgroup(tmp_path, [live.pid])
        first = cgroups.census(str(tmp_path))
        assert first == [live.pid]
        assert cgroups.left_behind(first, first) == {"verified": False, "escapees": 1}
    finally:
        live.kill()
        live.wait()
    fake_cgroup(tmp_path, [live.pid])  # gone since: ending, yet no proof of an empty cgroup
    first = cgroups.census(str(tmp_path))
    assert cgroups.left_behind(first, first) == {"verified": False, "escapees": 0}
    assert cgroups.left_behind(first, []) == {"verified": True, "escapees": 0}
    gone = tmp_path / "removed"
    assert cgroups.census(str(gone)) == []
    assert cgroups.left_behind([], []) == {"verified": True, "escapees": 0}
    unreadable = tmp_path / "unreadable"
    fake_cgroup(unreadable, [])
    (unreadable / "cgroup.procs").unlink()
    (unreadable / "cgroup.procs").mkdir()  # EISDIR: neither gone nor empty
    assert cgroups.census(str(unreadable)) is None
    assert cgroups.members(str(unreadable)) == []
    assert cgroups.left_behind(None, None) == {"verified": False, "escapees": 0}


def test_a_cgroup_counts_the_cgroups_below_it(tmp_path: Path) -> None:
    """A pane's program may make cgroups below its own and move into them (rootless
    container runtimes do): its cgroup's own process list is then empty, and the
    pane is not."""
    live = subprocess.Popen(["sleep", "30"])
    try:
        fake_cgroup(tmp_path, [])
        fake_cgroup(tmp_path / "a", [])
        fake_cgroup(tmp_path / "a" / "b", [live.pid])
        first = cgroups.census(str(tmp_path))
        assert first == [live.pid]
        assert cgroups.left_behind(first, first) == {"verified": False, "escapees": 1}
        # the second look finds one the first missed (it moved between cgroups)
        gone = 2**22 + 1  # above pid_max: never a live process
        assert cgroups.left_behind([gone], [live.pid]) == {"verified": False, "escapees": 1}
        # or cannot be read: what the first saw still counts
        assert cgroups.left_behind([live.pid], None) == {"verified": False, "escapees": 1}
        # nothing anywhere, says the subtree's own count: no process list is read
        fake_cgroup(tmp_path, [live.pid], populated=False)
        assert cgroups.census(str(tmp_path)) == []
        # populated, yet no process found: they moved while we looked
        fake_cgroup(tmp_path, [])
        fake_cgroup(tmp_path / "a" / "b", [])
        assert cgroups.census(str(tmp_path)) is None
    finally:
        live.kill()
        live.wait()


def test_cgroups_nested_past_the_bound_prove_nothing(tmp_path: Path) -> None:
    """Thousands of nested cgroups are walked without recursion and past BELOW_MAX are
    not read at all (the walk runs on the reactor): the census says it would not say."""
    d = tmp_path
    fake_cgroup(d, [])
    chain = []
    try:
        for _ in range(cgroups.BELOW_MAX + 1):
            d = d / "n"
            d.mkdir()
            chain.append(d)
        assert len(str(d)) < 4000
        assert cgroups.census(str(tmp_path)) is None
        assert cgroups.members(str(tmp_path)) == []
        assert cgroups._below(str(tmp_path)) is None
        assert len(cgroups._below(str(tmp_path / "n" / "n")) or []) == cgroups.BELOW_MAX - 1
    finally:
        for n in reversed(chain):  # deeper than shutil.rmtree's recursion goes
            n.rmdir()


def test_a_cleanup_signals_only_a_process_still_in_the_cgroup() -> None:
    """A pid from a census may be reaped and handed to another process before it is
    signalled: a process not in the cgroup the census read is left alone."""
    live = subprocess.Popen(["sleep", "30"])
    try:
        here = cgroups.cgroup_of(live.pid)
        assert here is not None and here == cgroups.cgroup_of(os.getpid())
        assert not cgroups._signal_pid(live.pid, 15, within=here.rstrip("/") + "/elsewhere")
        assert not cgroups._signal_pid(live.pid, 15, within=here.rstrip("/") + "x")
        assert live.poll() is None
        above = here.rsplit("/", 1)[0] or "/"
        assert cgroups._signal_pid(live.pid, 15, within=above)  # a cgroup below counts
        assert live.wait(timeout=10) == -15
        assert not cgroups._signal_pid(live.pid, 15, within=here)  # reaped: no pidfd
    finally:
        live.kill()
        live.wait()


def test_a_cgroup_directory_maps_to_the_path_proc_shows() -> None:
    cg = cgroups.Cgroups("auto")
    cg.parent, cg.parent_path = "/sys/fs/cgroup/user.slice/u", "/user.slice/u"
    assert cg.path("/sys/fs/cgroup/user.slice/u/venomx-ab/p3") == "/user.slice/u/venomx-ab/p3"
    cg.parent, cg.parent_path = "/sys/fs/cgroup/", "/"
    assert cg.path("/sys/fs/cgroup/venomx-ab/p3") == "/venomx-ab/p3"
