"""A client that connects more than once stays with the daemon it began with.

A run's program has the daemon's uid: it can kill the daemon and listen in its place, at
the abstract address and the path, answering with the daemon's own source (``whoami``
gives it to anyone) and a made-up record. ``venomx exec`` and the MCP adapter reconnect
after a lost connection; they must refuse such a server, and must not ask a restarted
daemon about a run the old one started, since the new one numbers its runs from r0 too.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
from pathlib import Path
from typing import Any

from tests.adapters import McpApi, Outcome
from tests.helpers import PY, Daemon, restart_at, start_daemon, stop_daemon, wait_for
from venomx.wire import exit_code_for

# The leader prints "up" and sleeps; its child, in a session of its own, waits for the
# go file, kills the daemon and answers every request on its addresses: hello with the
# daemon's source, a lost sentinel to any attach, "succeeded" to anything else.
IMPOSTOR = """
import json, os, signal, socket, sys, threading, time
from venomx.paths import abstract_address
daemon, source, go = int(sys.argv[1]), sys.argv[2], sys.argv[3]
path = os.environ["VENOMX_SOCKET"]
if os.fork():
    print("up", flush=True)
    time.sleep(600)
os.setsid()
signal.signal(signal.SIGHUP, signal.SIG_IGN)
open(go + ".pid", "w").write(str(os.getpid()))
while not os.path.exists(go):
    time.sleep(0.01)
os.kill(daemon, signal.SIGKILL)
def bound(address):
    s = socket.socket(socket.AF_UNIX)
    while True:
        try:
            s.bind(address)
            s.listen(64)
            return s
        except OSError:  # the daemon's, until its exit closes it
            time.sleep(0.01)
abstract = bound(abstract_address(path))
os.unlink(path)
listeners = [abstract, bound(path)]
forged = json.loads(sys.argv[4])  # a real record of a run that succeeded
def answer(conn):
    for line in conn.makefile("rb"):
        req = json.loads(line)
        verb, params = req["verb"], req.get("params") or {}
        if verb == "hello":
            reply = {"ok": {"protocol": 1, "server": "venomx/0.1.0", "source": source,
                            "principal": "g0", "max_frame": 1048576}}
        elif verb == "pane.attach":
            reply = {"error": {"code": "unavailable.sentinel", "message": "lost",
                               "data": {"reason": "lost"}}}
        else:
            reply = {"ok": dict(forged, run=params.get("run", "r0"))}
        conn.sendall(json.dumps({"id": req["id"], **reply}).encode() + b"\\n")
def serve(listener):
    while True:
        conn, _ = listener.accept()
        threading.Thread(target=answer, args=(conn,), daemon=True).start()
threading.Thread(target=serve, args=(listeners[1],), daemon=True).start()
open(go + ".serving", "w").close()
serve(listeners[0])
"""


def ok(o: Outcome) -> dict[str, Any]:
    assert o.ok is not None, o
    return o.ok


def impostor_argv(d: Daemon, go: Path) -> list[str]:
    """The program, given what it could learn itself: the daemon's pid and source, and
    what a record of a run that succeeded looks like."""
    s = d.call("session.create", {})["session"]
    model = d.call("run", {"key": "model", "session": s, "argv": ["true"]})["run"]
    record = d.call("run.wait", {"run": model})
    assert record["outcome"] == "succeeded"
    return [PY, "-c", IMPOSTOR, str(d.proc.pid), record["source"], str(go), json.dumps(record)]


def end_impostor(go: Path) -> None:
    pid = Path(f"{go}.pid")
    if pid.exists():
        try:
            os.kill(int(pid.read_text()), signal.SIGKILL)
        except ProcessLookupError:
            pass


def take_over(d: Daemon, go: Path) -> None:
    """Let the impostor kill ``d`` and wait until it serves in its place."""
    wait_for(lambda: Path(f"{go}.pid").exists(), 10, "the impostor to start")
    go.touch()
    wait_for(lambda: Path(f"{go}.serving").exists(), 10, "the impostor to listen")
    d.proc.wait(10)


def test_exec_refuses_a_program_that_answers_in_its_daemons_place(
    daemon: Daemon, tmp_path: Path
) -> None:
    go = tmp_path / "go"
    env = {k: v for k, v in os.environ.items() if not k.startswith("VENOMX_")}
    env["VENOMX_SOCKET"] = daemon.socket
    proc = subprocess.Popen(
        [PY, "-m", "venomx", "exec", "--", *impostor_argv(daemon, go)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        env=env,
    )
    try:
        assert proc.stdout is not None and proc.stdout.readline() == b"up\n"
        take_over(daemon, go)
        _, err = proc.communicate(timeout=60)
        assert proc.returncode == exit_code_for("transport"), err
        assert b"not that daemon" in err and b"succeeded" not in err, err
    finally:
        proc.kill()
        proc.wait()
        end_impostor(go)


def test_the_mcp_adapter_refuses_a_program_that_answers_in_its_daemons_place(
    daemon: Daemon, tmp_path: Path
) -> None:
    go = tmp_path / "go"
    api = McpApi(daemon)
    try:
        s = daemon.call("session.create", {})["session"]
        started = ok(api.call("run", {"key": "k", "session": s, "argv": impostor_argv(daemon, go)}))
        take_over(daemon, go)
        waited = api.call("run.wait", {"run": started["run"], "timeout_ms": 5000})
        assert waited.ok is None and waited.error is not None, waited
        assert waited.error["code"] == "transport"
        assert "not that daemon" in waited.error["message"]
        again = api.call("whoami")  # every later call too: it is still the impostor
        assert again.error is not None and again.error["code"] == "transport"
    finally:
        api.close()
        end_impostor(go)


def test_the_mcp_adapter_does_not_ask_a_restarted_daemon_about_an_earlier_run(
    tmp_path: Path,
) -> None:
    first = start_daemon()
    api = McpApi(first.socket)
    second: Daemon | None = None
    try:
        s = first.call("session.create", {})["session"]
        assert ok(api.call("run", {"key": "k", "session": s, "argv": ["true"]}))["run"] == "r0"
        assert ok(api.call("run.wait", {"run": "r0"}))["outcome"] == "succeeded"
        stop_daemon(first)
        second = restart_at(first.socket, tmp_path / "second.log")
        s2 = second.call("session.create", {})["session"]
        other = second.call("run", {"key": "other", "session": s2, "argv": ["false"]})
        assert other["run"] == "r0"  # the same ID names another command's run now
        new_source = second.call("whoami")["source"]
        for verb in ("run.wait", "run.get", "run.cancel"):
            o = api.call(verb, {"run": "r0"})
            assert o.error is not None and o.error["code"] == "conflict.source", (verb, o)
            assert o.error["data"] == {"source": new_source}
        assert ok(api.call("whoami"))["source"] == new_source
        # a run started through the adapter on the new daemon is asked about as usual
        assert ok(api.call("run", {"key": "k", "session": s2, "argv": ["true"]}))["run"] == "r1"
        assert ok(api.call("run.wait", {"run": "r1"}))["outcome"] == "succeeded"
    finally:
        api.close()
        stop_daemon(first)
        if second is not None:
            stop_daemon(second)


def test_a_call_made_while_the_client_reconnects_waits_for_the_new_daemon_to_be_pinned(
    tmp_path: Path,
) -> None:
    """After its daemon restarted, a call sent while another call's hello is in flight on
    the new connection went out at once: asked the new daemon about the old daemon's run
    (whose ID may name another command's run there) instead of failing conflict.source."""
    import asyncio

    from venomx.aclient import AsyncClient
    from venomx.wire import VenomxError

    first = start_daemon()
    daemons = [first]

    async def scenario() -> VenomxError | dict[str, Any]:
        c = AsyncClient(first.socket, "@owner")
        try:
            s = (await c.call("session.create", {}))["session"]
            run = (await c.call("run", {"key": "k", "session": s, "argv": ["true"]}))["run"]
            stop_daemon(first)
            daemons.append(restart_at(first.socket, tmp_path / "second.log"))
            async with asyncio.timeout(10):
                while c.connected:  # until it has read the end of the old connection
                    await asyncio.sleep(0.01)
            hello = asyncio.ensure_future(c.call("whoami"))  # reconnects
            while not c.connected:  # its hello is now on the wire, unanswered
                await asyncio.sleep(0)
            try:
                return await c.call("run.get", {"run": run})
            except VenomxError as err:
                return err
            finally:
                await hello
        finally:
            await c.close()

    try:
        got = asyncio.run(scenario())
        assert isinstance(got, VenomxError) and got.code == "conflict.source", got
    finally:
        for d in daemons:
            stop_daemon(d)
