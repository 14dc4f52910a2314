"""A reply the client cannot read is a transport error, never a traceback.

Whatever answers at the socket may not be our daemon (a run's program has the daemon's
uid and can listen in its place). A CLI that died with a traceback exited 1, which
``venomx run wait`` also exits for a run that failed; a reply of another shape than
foundation §2's, or than its verb's result, now exits 9 (``transport``) with one line.
"""

from __future__ import annotations

import asyncio
import io
import json
import os
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from venomx.aclient import AsyncClient
from venomx.cli.attach import run_attach
from venomx.wire import VenomxError

GREETING = {
    "protocol": 1,
    "server": "venomx/0.1.0",
    "source": "venomx/fake",
    "principal": "g0",
    "max_frame": 1048576,
}


class FakeDaemon:
    """A server at a path that answers each verb with the bytes it is given (hello gets a
    well-formed greeting unless told otherwise; ``*`` any other verb); everything else
    waits unanswered."""

    def __init__(self, path: str, replies: dict[str, bytes]) -> None:
        self.path = path
        self.replies = replies
        self.listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.listener.bind(path)
        self.listener.listen(8)
        self.thread = threading.Thread(target=self.serve, daemon=True)
        self.thread.start()

    def serve(self) -> None:
        while True:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            threading.Thread(target=self.answer, args=(conn,), daemon=True).start()

    def answer(self, conn: socket.socket) -> None:
        with conn:
            for line in conn.makefile("rb"):
                req = json.loads(line)
                verb = req["verb"]
                if verb in self.replies:
                    reply = self.replies[verb].replace(b"ID", str(req["id"]).encode())
                elif verb == "hello":
                    reply = json.dumps({"id": req["id"], "ok": GREETING}).encode() + b"\n"
                elif "*" in self.replies:
                    reply = self.replies["*"].replace(b"ID", str(req["id"]).encode())
                else:
                    continue
                try:
                    conn.sendall(reply)
                except OSError:
                    return

    def close(self) -> None:
        self.listener.shutdown(socket.SHUT_RDWR)
        self.listener.close()


@pytest.fixture
def fake(tmp_path: Path) -> Iterator[Any]:
    made: list[FakeDaemon] = []

    def make(replies: dict[str, bytes]) -> str:
        path = str(tmp_path / f"fake{len(made)}.sock")
        made.append(FakeDaemon(path, replies))
        return path

    yield make
    for f in made:
        f.close()


def cli(sock: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("VENOMX_")}
    return subprocess.run(
        [sys.executable, "-m", "venomx", *args, "--socket", sock],
        capture_output=True,
        stdin=subprocess.DEVNULL,
        text=True,
        timeout=30,
        env=env,
    )


def ok(result: object) -> bytes:
    return b'{"id":ID,"ok":' + json.dumps(result).encode() + b"}\n"


HOSTILE_FRAMES = {
    "not json": b"garbage\n",
    "not an object": b"[1,2]\n",
    "a string result": b'{"id":ID,"ok":"weird"}\n',
    "an id that is a string": b'{"id":"ID","ok":{}}\n',
    "an error that is a string": b'{"id":ID,"error":"denied"}\n',
    "an error without a code": b'{"id":ID,"error":{"message":"x","data":{}}}\n',
    "an error whose data is a list": b'{"id":ID,"error":{"code":"denied.read","data":[]}}\n',
    "neither ok nor error": b'{"id":ID}\n',
    "nested past any bound": b'{"id":ID,"ok":{"a":' + b"[" * 5000 + b"]" * 5000 + b"}}\n",
    "a number beyond a float": b'{"id":ID,"ok":{"principal":"g0","n":1e999}}\n',
    "an error of no class in foundation 3": b'{"id":ID,"error":{"code":"bogus","data":{}}}\n',
    "a frame past max_frame": b'{"id":ID,"ok":{"a":"' + b"x" * (2 << 20),
}


@pytest.mark.timeout(60)
@pytest.mark.parametrize("what", list(HOSTILE_FRAMES))
def test_a_frame_that_is_not_a_reply_is_a_transport_error(fake: Any, what: str) -> None:
    sock = fake({"whoami": HOSTILE_FRAMES[what]})
    shown = cli(sock, "whoami")
    assert shown.returncode == 9, shown
    assert shown.stderr.startswith("venomx: transport: a reply venomx cannot read"), shown
    assert "Traceback" not in shown.stderr
    as_json = cli(sock, "whoami", "--json")
    assert as_json.returncode == 9, as_json
    assert json.loads(as_json.stdout)["error"]["code"] == "transport"


GREETINGS = {
    "no source": {k: v for k, v in GREETING.items() if k != "source"},
    "a source that is a number": {**GREETING, "source": 7},
    "max_frame a string": {**GREETING, "max_frame": "big"},
    "max_frame past the protocol's": {**GREETING, "max_frame": 1 << 30},
}


@pytest.mark.timeout(60)
@pytest.mark.parametrize("what", list(GREETINGS))
def test_a_greeting_without_what_clients_take_from_it(fake: Any, what: str) -> None:
    sock = fake({"hello": ok(GREETINGS[what])})
    shown = cli(sock, "whoami")
    assert shown.returncode == 9, shown
    assert "a hello result without a source and a max_frame" in shown.stderr
    assert "Traceback" not in shown.stderr


# A run.wait result that is not a run's outcome: the CLI must not exit 0, nor 1 from a
# traceback, as if the run had told it so.
STATUSES = {
    "a string": "0",
    "a float": 0.0,
    "a boolean": False,
    "past 255": 256,
    "negative": -1,
    "null": None,
}


@pytest.mark.timeout(60)
@pytest.mark.parametrize("what", list(STATUSES))
@pytest.mark.parametrize("as_json", [False, True])
def test_run_wait_exits_with_no_status_that_is_not_one(fake: Any, what: str, as_json: bool) -> None:
    record = {"run": "r0", "state": "completed", "outcome": "succeeded", "status": STATUSES[what]}
    sock = fake({"run.wait": ok(record)})
    shown = cli(sock, "run", "wait", "--run", "r0", *(["--json"] if as_json else []))
    assert shown.returncode == 9, shown
    assert "Traceback" not in shown.stderr
    if as_json:
        assert json.loads(shown.stdout)["error"]["code"] == "transport"


@pytest.mark.timeout(60)
def test_run_wait_of_a_success_with_an_infinite_count(fake: Any) -> None:
    """``int()`` of the float ``1e999`` raised OverflowError in the renderer: exit 1."""
    record = b'{"run":"r0","outcome":"succeeded","status":0,"cleanup":{"escapees":1e999}}'
    shown = cli(
        fake({"run.wait": b'{"id":ID,"ok":' + record + b"}\n"}), "run", "wait", "--run", "r0"
    )
    assert shown.returncode == 9, shown
    assert "Traceback" not in shown.stderr


@pytest.mark.timeout(60)
def test_run_wait_without_a_status(fake: Any) -> None:
    sock = fake({"run.wait": ok({"run": "r0", "outcome": "succeeded"})})
    shown = cli(sock, "run", "wait", "--run", "r0")
    assert shown.returncode == 9, shown
    assert "run.wait's result" in shown.stderr
    assert "Traceback" not in shown.stderr


@pytest.mark.timeout(60)
def test_a_well_formed_outcome_is_still_taken(fake: Any) -> None:
    """The control: the same fake with a reply of the right shape gives its status."""
    record = {"run": "r0", "state": "completed", "outcome": "failed", "exit_code": 3, "status": 3}
    shown = cli(fake({"run.wait": ok(record)}), "run", "wait", "--run", "r0", "--json")
    assert shown.returncode == 3, shown
    assert json.loads(shown.stdout)["status"] == 3


def mcp_error(sock: str, verb: str) -> VenomxError:
    """The error the MCP adapter's client gets for one call (``hello``: connecting)."""

    async def call() -> VenomxError:
        client = AsyncClient(sock)
        try:
            await (client.connect() if verb == "hello" else client.call(verb, {}))
        except VenomxError as err:
            return err
        finally:
            await client.close()
        raise AssertionError(f"a malformed reply to {verb} was taken")

    return asyncio.run(asyncio.wait_for(call(), 20))


@pytest.mark.timeout(60)
@pytest.mark.parametrize("what", ["not json", "a string result", "an error that is a string"])
def test_the_mcp_client_fails_its_calls_with_transport(fake: Any, what: str) -> None:
    err = mcp_error(fake({"whoami": HOSTILE_FRAMES[what]}), "whoami")
    assert err.code == "transport"
    assert "a reply venomx cannot read" in err.message


@pytest.mark.timeout(60)
@pytest.mark.parametrize("result", [{"pane": "p0"}, {"run": 0, "source": "venomx/fake"}])
def test_the_mcp_client_takes_no_run_without_its_run_and_source(fake: Any, result: Any) -> None:
    err = mcp_error(fake({"run": ok(result)}), "run")
    assert err.code == "transport"
    assert "a run result without its run and source" in err.message


@pytest.mark.timeout(60)
def test_the_mcp_client_refuses_a_greeting_without_a_source(fake: Any) -> None:
    err = mcp_error(fake({"hello": ok(GREETINGS["no source"])}), "hello")
    assert err.code == "transport"


@pytest.mark.timeout(60)
@pytest.mark.parametrize("follow", [False, True])
def test_run_log_of_records_it_cannot_read(fake: Any, follow: bool) -> None:
    sock = fake({"*": ok({"rows": 5})})
    shown = cli(sock, "run", "log", "--run", "r0", *(["--follow"] if follow else []))
    assert shown.returncode == 9, shown
    assert shown.stderr.startswith("venomx: transport: a reply venomx cannot read"), shown
    assert "Traceback" not in shown.stderr


STREAMED = {
    "attach, data that is not base64": (("attach", "--pane", "p0"), "pane.attach", b'{"data":"a"}'),
    "attach, a screen that is not an object": (
        ("attach", "--pane", "p0"),
        "pane.attach",
        b'{"screen":"x"}',
    ),
    "attach, data that is a number": (("attach", "--pane", "p0"), "pane.attach", b'{"data":7}'),
    "events, an event that is a string": (
        ("events", "--follow"),
        "events.subscribe",
        b'{"event":"zzz"}',
    ),
    "events, an event without its fields": (
        ("events", "--follow"),
        "events.subscribe",
        b'{"event":{"seq":1}}',
    ),
}


@pytest.mark.timeout(60)
@pytest.mark.parametrize("what", list(STREAMED))
def test_streamed_items_it_cannot_read(fake: Any, what: str) -> None:
    args, verb, item = STREAMED[what]
    shown = cli(fake({verb: b'{"id":ID,"item":' + item + b"}\n"}), *args)
    assert shown.returncode == 9, shown
    assert "a reply venomx cannot read" in shown.stderr, shown
    assert "Traceback" not in shown.stderr


@pytest.mark.timeout(60)
def test_events_read_of_a_result_without_events(fake: Any) -> None:
    shown = cli(fake({"events.read": ok({})}), "events")
    assert shown.returncode == 9, shown
    assert "Traceback" not in shown.stderr


@pytest.mark.timeout(60)
def test_attach_input_ending_after_the_view_leaves_no_traceback(
    fake: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The key reader is a thread: end of input that reaches it after the view has closed
    # its connection (here, on an item it cannot read) must not print a traceback.
    sock = fake({"pane.attach": b'{"id":ID,"item":{"data":"a"}}\n'})
    for name in [k for k in os.environ if k.startswith("VENOMX_")]:
        monkeypatch.delenv(name)
    r, w = os.pipe()
    raised: list[BaseException | None] = []
    monkeypatch.setattr(threading, "excepthook", lambda args: raised.append(args.exc_value))
    stdin = open(r)
    monkeypatch.setattr(sys, "stdin", stdin)
    monkeypatch.setattr(sys, "stdout", io.TextIOWrapper(io.BytesIO()))
    assert run_attach("p0", False, sock, None) == 9
    readers = [t for t in threading.enumerate() if "read_keys" in t.name]
    senders = [t for t in threading.enumerate() if "send_keys" in t.name]  # may be gone
    assert readers
    os.close(w)
    for t in readers + senders:
        t.join(10)
        assert not t.is_alive()
    stdin.close()
    assert raised == []
