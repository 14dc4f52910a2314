"""The daemon's stop and reopen signals survive a full wakeup socket.

asyncio hears of a signal from one byte per delivery in a socket of a few hundred bytes'
room; a burst of SIGCHLD (a pane's orphans exiting together while the reactor is busy)
fills it, and a SIGTERM's byte is then dropped. The daemon's own handler must still run.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

SCRIPT = """
import asyncio, os, signal, sys
from venomx.serve import on_signal

async def main(ours):
    loop = asyncio.get_running_loop()
    heard = loop.create_future()
    stop = lambda: heard.done() or heard.set_result("stopped")
    if ours:
        on_signal(loop, signal.SIGTERM, stop)
    else:
        loop.add_signal_handler(signal.SIGTERM, stop)
    loop.add_signal_handler(signal.SIGCHLD, lambda: None)
    wakeup = signal.set_wakeup_fd(-1)
    signal.set_wakeup_fd(wakeup, warn_on_full_buffer=False)  # as the daemon sets it
    for _ in range(5000):  # the reactor is busy while children exit
        os.kill(os.getpid(), signal.SIGCHLD)
    try:
        os.write(wakeup, b"x")
        full = False
    except BlockingIOError:
        full = True
    os.kill(os.getpid(), signal.SIGTERM)
    try:
        print(full, await asyncio.wait_for(heard, 3))
    except TimeoutError:
        print(full, "lost")

asyncio.run(main(sys.argv[1] == "ours"))
"""


def outcome(which: str) -> str:
    out = subprocess.run(
        [sys.executable, "-c", SCRIPT, which],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    )
    return out.stdout.strip()


def test_sigterm_past_a_full_wakeup_socket_still_stops_the_daemon() -> None:
    assert outcome("ours") == "True stopped"


def test_asyncios_own_handler_loses_it_which_is_why_ours_is_not_asyncios() -> None:
    # the premise of the test above: the socket was full and asyncio's way drops the byte
    assert outcome("asyncio") == "True lost"
