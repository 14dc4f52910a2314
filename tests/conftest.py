from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.helpers import Daemon, start_daemon, stop_daemon


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
