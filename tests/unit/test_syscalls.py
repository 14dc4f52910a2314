"""Raw system call numbers only where this interpreter's ABI is the machine's own."""

from __future__ import annotations

from workers import inherited, leader, syscalls


def test_a_32_bit_interpreter_on_a_64_bit_kernel_knows_no_number() -> None:
    # 252 is ioprio_get on x86_64 and exit_group on i386: never guess
    assert syscalls._numbers("x86_64", 8) == (247, 251, 252)
    assert syscalls._numbers("x86_64", 4) is None
    assert syscalls._numbers("aarch64", 4) is None
    assert syscalls._numbers("i686", 4) == (284, 289, 290)
    assert syscalls._numbers("sparc64", 8) is None


def test_this_machine_is_known() -> None:
    # the suite's hosts (x86_64, aarch64): waitid's usage and the I/O priority work
    assert syscalls.NUMBERS is not None
    assert leader.SYS_WAITID == syscalls.WAITID
    assert inherited.ioprio() >= 0
