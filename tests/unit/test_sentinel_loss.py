"""A sentinel whose channel closes before EXIT (foundation §9, architecture invariant 2):
it stops its pane's group, and leaves the leader to a daemon that still lives, so that
the daemon reaps it with its real wait status and its group is never reused meanwhile."""

from __future__ import annotations

import json
import subprocess

from tests.helpers import PY, ROOT

FAKE_DAEMON = """
import json, os, socket, sys
from workers import prctl, protocol as P, sentinel

assert prctl.set_child_subreaper()
ours, theirs = socket.socketpair()
sentinel.DAEMON_PID = os.getpid() if sys.argv[1] == "alive" else -1
pid = os.fork()
if pid == 0:
    ours.close()
    sentinel.main(theirs.detach())
theirs.close()
decoder = P.Decoder()

def expect(kind):
    while True:
        for m in decoder.feed(ours.recv(65536)):
            if isinstance(m, kind):
                return m

expect(P.Hello)
ours.sendall(P.encode(P.Spawn("p1", ["sleep", "100"], {"PATH": os.environ["PATH"]}, "/",
                              80, 24, 100, True)))
leader = expect(P.Started).pid
ours.close()
_, sentinel_status = os.waitpid(pid, 0)
try:
    _, status = os.waitpid(leader, 0)
    reaped = os.WTERMSIG(status) if os.WIFSIGNALED(status) else -os.WEXITSTATUS(status)
except ChildProcessError:
    reaped = None
print(json.dumps([os.waitstatus_to_exitcode(sentinel_status), reaped]))
"""


def lost(daemon: str) -> list[int | None]:
    out = subprocess.run(
        [PY, "-c", FAKE_DAEMON, daemon], capture_output=True, text=True, cwd=ROOT, timeout=30
    )
    assert out.returncode == 0, out.stderr
    result: list[int | None] = json.loads(out.stdout)
    return result


def test_a_living_daemon_reaps_the_leader_itself() -> None:
    assert lost("alive") == [0, 1]  # SIGHUP, seen by the daemon's own reap


def test_without_its_daemon_the_sentinel_reaps_its_leader() -> None:
    assert lost("gone") == [0, None]
