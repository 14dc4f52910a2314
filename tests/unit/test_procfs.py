"""/proc/PID/stat read past a command name that looks like its own fields."""

from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path

import pytest

from tests.helpers import wait_for
from venomx.daemon import procfs


def test_fields_after_a_hostile_command_name(tmp_path: Path) -> None:
    # A program names itself: spaces and ")" in the name must not shift the fields.
    name = tmp_path / ") R 1 1 1 ("
    name.symlink_to("/bin/sleep")
    child = subprocess.Popen([str(name), "30"], start_new_session=True)
    try:
        fields = procfs.stat_fields(child.pid)
        assert int(fields[procfs.PPID]) == os.getpid()
        assert int(fields[procfs.PGRP]) == child.pid
        assert procfs.session_of(child.pid) == child.pid
        assert procfs.state(child.pid) in ("R", "S")
        assert not procfs.stopped(child.pid)
        os.kill(child.pid, signal.SIGSTOP)
        wait_for(lambda: procfs.stopped(child.pid), 10, "the child to stop")
    finally:
        child.kill()
        child.wait()


def test_a_process_that_is_gone() -> None:
    child = subprocess.Popen(["true"])
    child.wait()
    with pytest.raises((FileNotFoundError, ProcessLookupError)):
        procfs.stat_fields(child.pid)
    assert procfs.state(child.pid) is None
    assert procfs.session_of(child.pid) is None
    assert not procfs.stopped(child.pid)


def test_exiting_live_zombie_and_gone() -> None:
    child = subprocess.Popen(["sleep", "30"])
    assert not procfs.exiting(child.pid)
    assert not procfs.exiting(f"{child.pid}/task/{child.pid}")
    child.kill()
    wait_for(lambda: procfs.state(child.pid) == "Z", 10, "the zombie")
    assert procfs.exiting(child.pid)  # exited, not yet reaped
    child.wait()
    with pytest.raises((FileNotFoundError, ProcessLookupError)):
        procfs.exiting(child.pid)  # gone: the caller decides what that means
