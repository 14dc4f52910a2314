"""The one buffer the reactor reads every socket into (sentinel channels and clients).

asyncio's plain protocols get a new bytes object of 256 KiB per read, shrunk to what
arrived: in a burst of a thousand starts that was 12% of the reactor's time (measured).
One buffer is enough: the reactor reads one socket at a time, and each protocol copies
or decodes what it read before the next read; nothing keeps a view of it.
"""

from __future__ import annotations

READ_BUFFER = memoryview(bytearray(256 * 1024))
