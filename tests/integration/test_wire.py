"""The wire protocol (§2) against a real daemon: bad frames are answered and survived."""

from __future__ import annotations

import json
import socket
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.helpers import Daemon, wait_for


class Raw:
    def __init__(self, path: str) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.connect(path)
        self.sock.settimeout(10)
        self.buf = b""

    def send(self, data: bytes) -> None:
        self.sock.sendall(data)

    def frame(self) -> dict[str, Any]:
        while b"\n" not in self.buf:
            chunk = self.sock.recv(65536)
            assert chunk, "connection closed"
            self.buf += chunk
        line, _, self.buf = self.buf.partition(b"\n")
        obj: dict[str, Any] = json.loads(line)
        return obj

    def hello(self, **params: Any) -> dict[str, Any]:
        self.send(json.dumps({"id": 0, "verb": "hello",
                              "params": {"protocol": 1, "token": "@owner", **params}}).encode()
                  + b"\n")
        return self.frame()

    def close(self) -> None:
        self.sock.close()


def alive(d: Daemon) -> None:
    assert d.call("whoami")["principal"] == "g0"


def test_hello_first_and_once(shared_daemon: Daemon) -> None:
    r = Raw(shared_daemon.socket)
    r.send(b'{"id":1,"verb":"whoami"}\n')
    assert r.frame()["error"]["code"] == "invalid_request.hello"
    ok = r.hello()["ok"]
    assert ok["protocol"] == 1 and ok["principal"] == "g0" and ok["max_frame"] == 1048576
    assert ok["source"].startswith("venomx/")
    r.send(b'{"id":2,"verb":"hello","params":{"protocol":1}}\n')
    assert r.frame() == {"id": 2, "error": {"code": "invalid_request.hello",
                                            "message": "hello was already sent", "data": {}}}
    r.close()


@pytest.mark.parametrize(("data", "code", "rid"), [
    (b"not json\n", "invalid_request.json", None),
    (b"\xff\xfe{}\n", "invalid_request.json", None),
    (b"[1,2]\n", "invalid_request.frame", None),
    (b'{"verb":"whoami"}\n', "invalid_request.id", None),
    (b'{"id":"x","verb":"whoami"}\n', "invalid_request.id", "x"),
    (b'{"id":1.5,"verb":"whoami"}\n', "invalid_request.id", 1.5),
    (b'{"id":7,"verb":"nope"}\n', "invalid_request.verb", 7),
    (b'{"id":7}\n', "invalid_request.verb", 7),
    (b'{"id":8,"verb":"whoami","params":{"x":1}}\n', "invalid_params.unknown", 8),
    (b'{"id":9,"verb":"pane.resize","params":{"pane":"p0","cols":1' + b"0" * 5000 + b',"rows":1}}\n',
     "invalid_params.range", 9),
    (b'{"id":10,"verb":"whoami","params":' + b"[" * 100000 + b"]" * 100000 + b"}\n",
     "invalid_request.json", None),
    (b'{"id":11,"verb":"whoami","params":{"a":NaN}}\n', "invalid_request.json", None),
])
def test_bad_frames(shared_daemon: Daemon, data: bytes, code: str, rid: Any) -> None:
    r = Raw(shared_daemon.socket)
    r.hello()
    r.send(data)
    f = r.frame()
    assert f["error"]["code"] == code and f["id"] == rid
    assert isinstance(f["error"]["data"], dict)
    r.send(b'{"id":99,"verb":"whoami"}\n')
    assert r.frame()["ok"]["principal"] == "g0"
    r.close()


def test_frame_size_limit_both_ways(shared_daemon: Daemon) -> None:
    r = Raw(shared_daemon.socket)
    assert r.hello(max_frame=4096)["ok"]["max_frame"] == 4096
    pad = 4096 - len(b'{"id":1,"verb":"whoami","params":{},"x":""}')
    frame = b'{"id":1,"verb":"whoami","params":{},"x":"' + b"a" * pad + b'"}'
    assert len(frame) == 4096
    r.send(frame + b"\n")
    assert "ok" in r.frame()  # exactly max_frame is fine (the unknown top-level key is ignored)
    r.send(frame[:-2] + b'a"}\n')  # max_frame + 1
    f = r.frame()
    assert f == {"id": None, "error": {"code": "invalid_request.frame_size", "message":
                                       f["error"]["message"], "data": {"max_frame": 4096}}}
    r.send(b"x" * 50000)  # a long frame arriving in pieces is discarded up to its newline
    r.send(b"y" * 50000 + b'\n{"id":3,"verb":"whoami"}\n')
    assert r.frame()["error"]["code"] == "invalid_request.frame_size"
    assert r.frame()["id"] == 3
    s = shared_daemon.call("session.create")["session"]
    r.send(json.dumps({"id": 4, "verb": "window.create", "params": {
        "session": s, "argv": ["seq", "2000"]}}).encode() + b"\n")
    pane = r.frame()["ok"]["pane"]
    wait_for(lambda: shared_daemon.call("pane.list")["panes"][-1]["state"] == "exited", 10, "exit")
    r.send(json.dumps({"id": 5, "verb": "pane.capture_rows", "params": {"pane": pane}}).encode()
           + b"\n")
    f = r.frame()
    assert f["error"]["code"] == "unsupported.result_size" and f["error"]["data"]["bytes"] > 4096
    r.close()


def test_half_frame_and_non_reader_do_not_hurt_others(shared_daemon: Daemon) -> None:
    half = Raw(shared_daemon.socket)
    half.hello()
    half.send(b'{"id":1,"verb":"who')
    half.close()
    lazy = Raw(shared_daemon.socket)
    lazy.hello()
    lazy.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    for i in range(3000):  # never reads the replies
        try:
            lazy.send(b'{"id":%d,"verb":"session.list"}\n' % (i + 1))
        except OSError:
            break
    alive(shared_daemon)
    lazy.close()
    alive(shared_daemon)


def test_cancel(shared_daemon: Daemon) -> None:
    c = shared_daemon.client()
    assert c.call("cancel", {"id": 12345}) == {"cancelled": False}


def test_closing_cancels_requests(shared_daemon: Daemon) -> None:
    s = shared_daemon.call("session.create")["session"]
    run = shared_daemon.call("run", {"key": "close", "session": s, "argv": ["sleep", "60"]})
    r = Raw(shared_daemon.socket)
    r.hello()
    r.send(json.dumps({"id": 1, "verb": "run.wait", "params": {"run": run["run"]}}).encode()
           + b"\n")
    r.close()
    alive(shared_daemon)
    assert shared_daemon.call("run.get", {"run": run["run"]})["state"] == "running"
    shared_daemon.call("run.cancel", {"run": run["run"], "grace_ms": 0})


@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.lists(st.binary(max_size=200), max_size=5))
def test_random_frames(shared_daemon: Daemon, frames: list[bytes]) -> None:
    r = Raw(shared_daemon.socket)
    r.hello()
    for f in frames:
        r.send(f.replace(b"\n", b" ") + b"\n")
    r.send(b'{"id":424242,"verb":"whoami"}\n')
    while True:
        f = r.frame()
        if f.get("id") == 424242:
            assert f["ok"]["principal"] == "g0"
            break
    r.close()
