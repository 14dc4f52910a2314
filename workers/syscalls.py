"""System call numbers for the raw calls Python and the C library do not wrap.

Per architecture, and only where this interpreter's ABI is the machine's own: a 32-bit
Python on a 64-bit kernel (``platform.machine()`` still says ``x86_64``) would call a
different system call under the same number (252 is ``ioprio_get`` on x86_64 and
``exit_group`` on i386), so there the calls are reported unknown.

Must not import ``venomx``: the fork server and sentinels use it too.
"""

from __future__ import annotations

import platform
import struct

# machine: (pointer size, waitid, ioprio_set, ioprio_get)
_NUMBERS = {
    "x86_64": (8, 247, 251, 252),
    "aarch64": (8, 95, 30, 31),
    "riscv64": (8, 95, 30, 31),
    "loongarch64": (8, 95, 30, 31),
    "ppc64le": (8, 272, 273, 274),
    "ppc64": (8, 272, 273, 274),
    "s390x": (8, 281, 282, 283),
    "i686": (4, 284, 289, 290),
    "i386": (4, 284, 289, 290),
    "armv7l": (4, 280, 314, 315),
}


def _numbers(machine: str, pointer: int) -> tuple[int, int, int] | None:
    entry = _NUMBERS.get(machine)
    if entry is None or entry[0] != pointer:
        return None
    return entry[1], entry[2], entry[3]


NUMBERS = _numbers(platform.machine(), struct.calcsize("P"))
WAITID = None if NUMBERS is None else NUMBERS[0]
IOPRIO_SET = None if NUMBERS is None else NUMBERS[1]
IOPRIO_GET = None if NUMBERS is None else NUMBERS[2]
