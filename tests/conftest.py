from __future__ import annotations

import os
import shutil
import signal
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import settings

from tests.helpers import MADE, Daemon, start_daemon, stop_daemon

# Timing is measured by scripts/bench, never here: an example that a loaded CI machine
# pauses is not a failure (an explicit @settings inherits this).
settings.register_profile("venomx", deadline=None)
settings.load_profile("venomx")


def pytest_configure(config: pytest.Config) -> None:
    """Children start with SIGINT and SIGHUP at their defaults. A suite started under
    nohup, or as a background job of a shell without job control, inherits them
    ignored, and exec rightly leaves an ignored signal ignored, so the tests that
    interrupt exec would wait out its run instead."""
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    if signal.getsignal(signal.SIGHUP) is signal.SIG_IGN:
        signal.signal(signal.SIGHUP, signal.SIG_DFL)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """Remove the directories the session's daemons lived in."""
    for d in MADE:
        shutil.rmtree(d, ignore_errors=True)


@pytest.fixture
def daemon() -> Iterator[Daemon]:
    d = start_daemon()
    try:
        yield d
    finally:
        stop_daemon(d)


@pytest.fixture(scope="module")
def shared_daemon() -> Iterator[Daemon]:
    """One daemon for a module of read-mostly tests (each test makes its own session)."""
    d = start_daemon()
    try:
        yield d
    finally:
        stop_daemon(d)


@pytest.fixture
def tmp() -> Iterator[Path]:
    """A fresh directory with a short path (a socket path must fit in 107 bytes, which
    pytest's own tmp_path may not); removed afterwards, whatever mode a test left it in."""
    d = Path(tempfile.mkdtemp(prefix="vx", dir="/tmp"))
    try:
        yield d
    finally:
        os.chmod(d, 0o700)
        shutil.rmtree(d, ignore_errors=True)
