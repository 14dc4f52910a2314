"""The one buffer the reactor reads every socket into (sentinel channels and clients), and
the protocol base that reads into it.

asyncio's plain protocols get a new bytes object of 256 KiB per read, shrunk to what
arrived: in a burst of a thousand starts that was 12% of the reactor's time (measured).
One buffer is enough: the reactor reads one socket at a time, and each protocol copies
or decodes what it read before the next read; nothing keeps a view of it.
"""

from __future__ import annotations

import asyncio

READ_BUFFER = memoryview(bytearray(256 * 1024))


class ReadsShared(asyncio.BufferedProtocol):
    """A stream protocol whose reads land in ``READ_BUFFER``: ``data_received`` gets a
    view of each, valid only until it returns (it copies or decodes what it keeps)."""

    def get_buffer(self, sizehint: int) -> memoryview:
        return READ_BUFFER

    def buffer_updated(self, nbytes: int) -> None:
        self.data_received(READ_BUFFER[:nbytes])

    def data_received(self, data: memoryview) -> None:
        raise NotImplementedError
