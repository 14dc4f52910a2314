"""One descriptor held back for doctor (issue 15 §3).

Out of descriptors is exactly when doctor's report matters, and reading /proc needs a
descriptor; the daemon keeps one open from start and doctor trades it for its reads.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager


class Reserve:
    """One descriptor held back so that doctor can still read /proc when the daemon is
    out of descriptors, which is when its report matters most. Doctor gives it up while
    it reads and takes it back after; the reactor may take it meanwhile (an accept), and
    then the report says which facts it could not read."""

    def __init__(self) -> None:
        self.fd = -1
        self.lock = threading.Lock()

    def fill(self) -> None:
        if self.fd < 0:
            try:
                self.fd = os.open("/dev/null", os.O_RDONLY | os.O_CLOEXEC)
            except OSError:
                pass  # out of descriptors now: the next report tries again

    @contextmanager
    def spent(self) -> Iterator[None]:
        with self.lock:
            if self.fd >= 0:
                os.close(self.fd)
                self.fd = -1
            try:
                yield
            finally:
                self.fill()


reserve = Reserve()  # filled at Daemon.start
