"""Ending a leader's tracers follows the chain of tracers up, never into ourselves or a
process above us (a program can make the daemon the tracer of a process of its own)."""

from __future__ import annotations

import subprocess
import sys

from tests.helpers import ROOT

# T runs C (in the sentinel's place) and X. C starts the leader L; X traces L and then
# makes T, its parent and C's, its own tracer (PTRACE_TRACEME). C kills L, whose exit X
# hides, and ends L's tracers: X, never T.
SCENARIO = """
import ctypes, os, signal, sys, time
sys.path.insert(0, sys.argv[1])
from workers import tracer
libc = ctypes.CDLL(None, use_errno=True)
libc.ptrace.argtypes = [ctypes.c_long, ctypes.c_long, ctypes.c_void_p, ctypes.c_void_p]
r, w = os.pipe()
r2, w2 = os.pipe()
c = os.fork()
if c == 0:
    leader = os.fork()
    if leader == 0:
        time.sleep(60)
        os._exit(0)
    os.write(w, str(leader).encode() + b"\\n")
    if os.read(r2, 1) != b"g":
        os._exit(3)
    os.kill(leader, signal.SIGKILL)
    flags = os.WEXITED | os.WNOHANG | os.WNOWAIT
    end = time.monotonic() + 0.3
    while time.monotonic() < end and os.waitid(os.P_PID, leader, flags) is None:
        time.sleep(0.01)
    hidden = os.waitid(os.P_PID, leader, flags) is None
    ended = tracer.end_tracers(leader)
    end = time.monotonic() + 10
    while time.monotonic() < end and os.waitid(os.P_PID, leader, flags) is None:
        time.sleep(0.01)
    seen = os.waitid(os.P_PID, leader, flags) is not None
    print("hidden", hidden, "ended", ended, "seen", seen, flush=True)
    os._exit(0)
x = os.fork()
if x == 0:
    leader = int(os.read(r, 32))
    if libc.ptrace(0x4206, leader, None, None) != 0:  # PTRACE_SEIZE
        os.write(w2, b"E")
        os._exit(1)
    libc.ptrace(0, 0, None, None)  # PTRACE_TRACEME: our parent, T, traces us
    os.write(w2, b"g")
    time.sleep(60)
    os._exit(0)
_, status = os.waitpid(c, 0)
os.kill(x, signal.SIGKILL)
print("T alive", status, flush=True)
"""


def test_the_chain_of_tracers_stops_below_ourselves() -> None:
    out = subprocess.run(
        [sys.executable, "-c", SCENARIO, str(ROOT)], capture_output=True, text=True, timeout=30
    )
    assert out.returncode == 0, (out.returncode, out.stdout, out.stderr)
    assert "hidden True ended 1 seen True" in out.stdout, out.stdout
    assert "T alive 0" in out.stdout, out.stdout
