"""The wire protocol (§2) against a real daemon: bad frames are answered and survived."""

from __future__ import annotations

import json
import socket
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.helpers import Daemon, wait_for
from venomx.daemon.server import FRAMES_PER_TURN
from venomx.wire import (
    ID_BEYOND,
    ID_DIGITS,
    MAX_DEPTH,
    VALUE_MAX_DEPTH,
    JsonError,
    id_number,
    loads,
)


class Raw:
    def __init__(self, path: str) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.connect(path)
        self.sock.settimeout(10)
        self.buf = b""

    def send(self, data: bytes) -> None:
        self.sock.sendall(data)

    def send_frames(self, frames: list[dict[str, Any]]) -> None:
        """Several requests in one write, so the daemon reads them together."""
        self.send(b"".join(json.dumps(f).encode() + b"\n" for f in frames))

    def line(self) -> bytes:
        """The next frame as it came, without its newline."""
        while b"\n" not in self.buf:
            chunk = self.sock.recv(65536)
            assert chunk, "connection closed"
            self.buf += chunk
        line, _, self.buf = self.buf.partition(b"\n")
        return line

    def frame(self) -> dict[str, Any]:
        obj: dict[str, Any] = json.loads(self.line())
        return obj

    def hello(self, **params: Any) -> dict[str, Any]:
        self.send(
            json.dumps(
                {"id": 0, "verb": "hello", "params": {"protocol": 1, "token": "@owner", **params}}
            ).encode()
            + b"\n"
        )
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
    assert r.frame() == {
        "id": 2,
        "error": {"code": "invalid_request.hello", "message": "hello was already sent", "data": {}},
    }
    r.close()


@pytest.mark.parametrize(
    ("data", "code", "rid"),
    [
        (b"not json\n", "invalid_request.json", None),
        (b"\xff\xfe{}\n", "invalid_request.json", None),
        (b"[1,2]\n", "invalid_request.frame", None),
        (b'{"verb":"whoami"}\n', "invalid_request.id", None),
        (b'{"id":"x","verb":"whoami"}\n', "invalid_request.id", "x"),
        (b'{"id":1.5,"verb":"whoami"}\n', "invalid_request.id", 1.5),
        (b'{"id":7,"verb":"nope"}\n', "invalid_request.verb", 7),
        (b'{"id":7}\n', "invalid_request.verb", 7),
        (b'{"id":8,"verb":"whoami","params":{"x":1}}\n', "invalid_params.unknown", 8),
        (
            b'{"id":9,"verb":"pane.resize","params":{"pane":"p0","cols":1'
            + b"0" * 5000
            + b',"rows":1}}\n',
            "invalid_params.range",
            9,
        ),
        (
            b'{"id":10,"verb":"whoami","params":' + b"[" * 100000 + b"]" * 100000 + b"}\n",
            "invalid_request.json",
            None,
        ),
        (b'{"id":11,"verb":"whoami","params":{"a":NaN}}\n', "invalid_request.json", None),
        # issue 15.2: ids that are not finite 64-bit integers
        (b'{"id":1e999,"verb":"whoami"}\n', "invalid_request.id", None),
        (b'{"id":-1e999,"verb":"whoami"}\n', "invalid_request.id", None),
        (b'{"id":1e308,"verb":"whoami"}\n', "invalid_request.id", 1e308),
        (b'{"id":1.0,"verb":"whoami"}\n', "invalid_request.id", 1.0),
        (b'{"id":true,"verb":"whoami"}\n', "invalid_request.id", True),
        (b'{"id":9223372036854775808,"verb":"whoami"}\n', "invalid_request.id", None),
        (b'{"id":-9223372036854775809,"verb":"whoami"}\n', "invalid_request.id", None),
        (b'{"id":1' + b"0" * 4400 + b',"verb":"whoami"}\n', "invalid_request.id", None),
        (b'{"id":[1],"verb":"whoami"}\n', "invalid_request.id", None),
        (b'{"id":"' + b"x" * 65 + b'","verb":"whoami"}\n', "invalid_request.id", None),
        (
            b'{"id":12,"verb":"config.set","params":{"path":"run.max_active","value":'
            + b"[" * 5000
            + b"]" * 5000
            + b"}}\n",
            "invalid_request.json",
            None,
        ),
    ],
)
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


def test_a_verb_missing_or_not_a_string_is_said_so(shared_daemon: Daemon) -> None:
    """A verb of another type read "unknown verb None" (helper-136)."""
    r = Raw(shared_daemon.socket)
    r.hello()
    for frame, message, shown in (
        (b'{"id":1,"verb":5}\n', "verb must be a string", None),
        (b'{"id":2}\n', "verb missing", None),
        (b'{"id":3,"verb":"nope"}\n', "unknown verb nope", "nope"),
    ):
        r.send(frame)
        err = r.frame()["error"]
        assert err == {"code": "invalid_request.verb", "message": message, "data": {"verb": shown}}
    r.close()


def test_max_frame_defaults_to_the_configured_one(daemon: Daemon) -> None:
    """foundation §2: max_frame's default and server maximum are protocol.max_frame."""
    daemon.call("config.set", {"path": "protocol.max_frame", "value": "4194304"})
    for params, agreed in (
        ({}, 4194304),
        ({"max_frame": 8388608}, 4194304),
        ({"max_frame": 5000}, 5000),
    ):
        r = Raw(daemon.socket)
        assert r.hello(**params)["ok"]["max_frame"] == agreed, params
        r.close()
    with daemon.client() as c:  # the CLI's client asks for nothing, as the MCP adapter
        assert c.hello["max_frame"] == 4194304


def test_an_error_reply_fits_max_frame_too(shared_daemon: Daemon) -> None:
    """foundation §2: the agreed max_frame bounds every frame, and a reply over it is
    never truncated. An error naming a caller's long text fails unsupported.result_size,
    as a result would, counted as if its id were 0."""
    r = Raw(shared_daemon.socket)
    assert r.hello(max_frame=4096)["ok"]["max_frame"] == 4096
    path = "a" * 4000
    sent = {"verb": "config.get", "params": {"path": path}}
    r.send_frames([{"id": 123456, **sent}])  # bytes counts it as id 0 all the same
    line = r.line()
    assert len(line) <= 4096
    err = json.loads(line)["error"]
    assert err["code"] == "unsupported.result_size"
    whole = {"code": "invalid_params.config", "message": f"{path}: unknown key"}
    full = {"id": 0, "error": {**whole, "data": {"path": path, "reason": "unknown key"}}}
    assert err["data"] == {"bytes": len(json.dumps(full, separators=(",", ":")))}
    r.send_frames([{"id": 2, "verb": "config.get", "params": {"path": "b" * 100}}])
    err = r.frame()["error"]  # one that fits is whole
    assert err == {
        "code": "invalid_params.config",
        "message": "b" * 100 + ": unknown key",
        "data": {"path": "b" * 100, "reason": "unknown key"},
    }
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
    assert f == {
        "id": 1,  # a bad frame is answered with its id (foundation §2), read unparsed
        "error": {
            "code": "invalid_request.frame_size",
            "message": f["error"]["message"],
            "data": {"max_frame": 4096},
        },
    }
    # the top-level id wherever it stands in the first max_frame bytes, not one in params
    r.send(b'{"verb":"whoami","params":{"id":9,"x":"a"},"id":7,"y":"' + b"a" * 5000 + b'"}\n')
    assert r.frame() == {**f, "id": 7}
    r.send(b'{"verb":"whoami","y":"' + b"a" * 5000 + b'","id":6}\n')  # beyond them: null
    assert r.frame() == {**f, "id": None}
    r.send(b'{"id":8,"verb":"whoami","x":"' + b"a" * 50000)  # arriving in pieces
    r.send(b"y" * 50000 + b'\n{"id":3,"verb":"whoami"}\n')
    assert r.frame() == {**f, "id": 8}
    assert r.frame()["id"] == 3
    r.send(b"x" * 5000 + b"\n")  # no id: null
    assert r.frame() == f | {"id": None}
    s = shared_daemon.call("session.create")["session"]
    r.send(
        json.dumps(
            {"id": 4, "verb": "window.create", "params": {"session": s, "argv": ["seq", "2000"]}}
        ).encode()
        + b"\n"
    )
    pane = r.frame()["ok"]["pane"]
    wait_for(lambda: shared_daemon.call("pane.list")["panes"][-1]["state"] == "exited", 10, "exit")
    r.send(
        json.dumps({"id": 5, "verb": "pane.capture_rows", "params": {"pane": pane}}).encode()
        + b"\n"
    )
    f = r.frame()
    assert f["error"]["code"] == "unsupported.result_size" and f["error"]["data"]["bytes"] > 4096
    # The same request under a longer id: the same error object, id aside.
    r.send(
        json.dumps(
            {"id": 123456789, "verb": "pane.capture_rows", "params": {"pane": pane}}
        ).encode()
        + b"\n"
    )
    g = r.frame()
    assert g["id"] == 123456789 and g["error"] == f["error"]
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
    r.send(
        json.dumps({"id": 1, "verb": "run.wait", "params": {"run": run["run"]}}).encode() + b"\n"
    )
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
        answer = r.frame()
        if answer.get("id") == 424242:
            assert answer["ok"]["principal"] == "g0"
            break
    r.close()


@pytest.mark.parametrize("rid", [-(2**63), 2**63 - 1, 0])
def test_ids_at_the_64_bit_edges(shared_daemon: Daemon, rid: int) -> None:
    r = Raw(shared_daemon.socket)
    r.hello()
    r.send(b'{"id":%d,"verb":"whoami"}\n' % rid)
    f = r.frame()
    assert f["id"] == rid and f["ok"]["principal"] == "g0"
    r.close()


def nest(n: int) -> bytes:
    return b"[" * n + b"]" * n


def test_nesting_bound_at_its_edge(shared_daemon: Daemon) -> None:
    """A frame may nest MAX_DEPTH arrays and objects (itself included), not one more."""
    r = Raw(shared_daemon.socket)
    r.hello()
    head = b'{"id":1,"verb":"whoami","x":'  # an unknown top-level key is ignored
    r.send(head + nest(MAX_DEPTH - 1) + b"}\n")
    assert r.frame()["ok"]["principal"] == "g0"
    for n in (MAX_DEPTH, 5000, 100_000):
        r.send(head + nest(n) + b"}\n")
        assert r.frame() == {
            "id": None,
            "error": {
                "code": "invalid_request.json",
                "message": f"frame is nested deeper than {MAX_DEPTH} arrays and objects",
                "data": {"reason": "depth", "max_depth": MAX_DEPTH},
            },
        }
    r.send(head + b"{}" * 10 + b"}\n")  # many containers side by side are not deep
    assert r.frame()["error"]["code"] == "invalid_request.json"
    r.send(head + b"[" + b"[]," * 5000 + b"[]]}\n")
    assert r.frame()["ok"]["principal"] == "g0"
    r.close()


def test_config_value_nesting_and_digits(shared_daemon: Daemon) -> None:
    """config.set's value is parsed by the same bounded loader: RecursionError never."""

    def err(value: str) -> dict[str, Any]:
        e = shared_daemon.error("config.set", {"path": "run.max_active", "value": value})
        assert e.code == "invalid_params.config", e.to_dict()
        assert e.data["path"] == "run.max_active"
        return e.data

    deep = f"value is nested deeper than {VALUE_MAX_DEPTH} arrays and objects"
    assert err("[" * 5000)["reason"] == deep
    assert err("[" * 5000 + "]" * 5000)["reason"] == deep
    assert err(nest(VALUE_MAX_DEPTH + 1).decode())["reason"] == deep
    assert err(nest(VALUE_MAX_DEPTH).decode())["reason"] == "must be an integer"
    assert err("9" * 4400)["reason"] == "must be between 1 and 4096"
    assert err("1e999")["reason"] == "must be an integer"
    assert err("NaN")["reason"].startswith("value is not JSON")
    assert err("\udcff")["reason"].startswith("value is not")
    ok = shared_daemon.call("config.set", {"path": "run.max_active", "value": "64"})
    assert ok == {"path": "run.max_active", "value": 64}


LONG_RUN = "r" + "9" * 4400


@pytest.mark.parametrize("run", [LONG_RUN, "r²", "r١", "r01", "r" + "9" * 21, "r", "x"])
def test_run_ids_that_name_no_run(shared_daemon: Daemon, run: str) -> None:
    for verb in ("run.get", "run.wait", "run.cancel"):
        e = shared_daemon.error(verb, {"run": run})
        assert e.code == "not_found.run" and e.data == {"reason": "unknown"}, (verb, e)


def test_run_list_after_ids_of_any_length(shared_daemon: Daemon) -> None:
    s = shared_daemon.call("session.create")["session"]
    rid = shared_daemon.call("run", {"key": "after", "session": s, "argv": ["true"]})["run"]
    shared_daemon.wait_exit(rid)

    def listed(**params: Any) -> list[str]:
        return [r["run"] for r in shared_daemon.call("run.list", {"limit": 1024, **params})["runs"]]

    everything = listed()
    assert rid in everything
    for after in (LONG_RUN, "r" + "9" * 21, "r" + "9" * 20):
        assert listed(after=after) == []
    for after in ("r²", "r١", "x"):  # not a run ID: said so
        err = shared_daemon.error("run.list", {"after": after})
        assert err.code == "invalid_params.after", after
    assert listed(after=rid) == everything[everything.index(rid) + 1 :]


def test_expired_run_is_still_told_apart(daemon: Daemon) -> None:
    s = daemon.call("session.create")["session"]
    rid = daemon.call("run", {"key": "gone", "session": s, "argv": ["true"]})["run"]
    daemon.wait_exit(rid)
    daemon.call("config.set", {"path": "run.retain_count", "value": "0"})
    wait_for(
        lambda: daemon.error("run.get", {"run": rid}).code == "not_found.run",
        10,
        "the record expires",
    )
    assert daemon.error("run.get", {"run": rid}).data == {"reason": "expired"}
    nxt = "r%d" % (int(rid[1:]) + 1)
    assert daemon.error("run.get", {"run": nxt}).data == {"reason": "unknown"}


def test_bounded_loader() -> None:
    assert loads(nest(MAX_DEPTH)) == loads(nest(MAX_DEPTH).decode())
    for text, reason in (
        (nest(MAX_DEPTH + 1), "depth"),
        (b"[" * 5000, "depth"),
        (b"\xff", "utf8"),
        (b"NaN", "syntax"),
        (b"", "syntax"),
    ):
        with pytest.raises(JsonError) as e:
            loads(text)
        assert e.value.reason == reason
    assert loads(b"1e999") == float("inf")
    assert loads(b"9" * 4400) > 2**64 and loads(b"-" + b"9" * 4400) < -(2**64)
    assert loads(b'"[[[["') == "[[[["


def test_id_number() -> None:
    assert [id_number(x, "r") for x in ("r0", "r12", "r" + "9" * ID_DIGITS)] == [
        0,
        12,
        10**ID_DIGITS - 1,
    ]
    assert id_number("r" + "9" * (ID_DIGITS + 1), "r") == id_number(LONG_RUN, "r") == ID_BEYOND
    for bad in ("r", "r01", "r-1", "r+1", "r 1", "r1 ", "r²", "r١", "R1", "p1", "", "r1.0"):
        assert id_number(bad, "r") is None, bad


def _pipelined(d: Daemon, frames: list[dict[str, Any]], n: int) -> list[dict[str, Any]]:
    """Send ``frames`` in one write on a new connection; the first ``n`` frames back."""
    r = Raw(d.socket)
    try:
        r.hello()
        r.send_frames(frames)
        return [r.frame() for _ in range(n)]
    finally:
        r.close()


def test_a_read_is_answered_as_it_is_read(shared_daemon: Daemon) -> None:
    # whoami's handler never waits: it is answered while its frame is read, so it is no
    # longer in flight when the next frame, with the same id, is read.
    got = _pipelined(shared_daemon, [{"id": 1, "verb": "whoami"}] * 2, 2)
    assert [f["ok"]["principal"] for f in got] == ["g0", "g0"]


def test_requests_on_one_connection_start_in_the_order_sent(daemon: Daemon) -> None:
    # run.wait becomes a task (its first step runs a turn later); the config.set behind
    # it in the same read, though its handler never waits, must not overtake it and
    # evict the run first.
    s = daemon.call("session.create")["session"]
    run = daemon.call("run", {"key": "order", "session": s, "argv": ["true"]})["run"]
    daemon.call("run.wait", {"run": run, "output": False})
    frames = [
        {"id": 1, "verb": "run.wait", "params": {"run": run, "output": False}},
        {"id": 2, "verb": "config.set", "params": {"path": "run.retain_count", "value": "0"}},
    ]
    got = {f["id"]: f for f in _pipelined(daemon, frames, 2)}
    assert got[1]["ok"]["outcome"] == "succeeded", got
    assert "ok" in got[2], got
    assert daemon.error("run.get", {"run": run}).code == "not_found.run"


@pytest.mark.parametrize(
    "refused",
    [
        {"id": 5, "verb": "whoami"},  # a duplicate of an id in flight
        {"id": 5, "verb": "no.such.verb"},
        {"id": 5, "verb": "hello", "params": {"protocol": 1}},  # hello was already sent
        {"id": 5, "verb": "cancel", "params": {"id": 999}},  # cancel's own answer
    ],
)
def test_a_refused_frame_leaves_the_request_in_flight_under_its_id(
    shared_daemon: Daemon, refused: dict[str, Any]
) -> None:
    r = Raw(shared_daemon.socket)
    try:
        r.hello()
        frames = [
            {"id": 5, "verb": "events.subscribe", "params": {}},  # in flight until cancelled
            refused,
            {"id": 6, "verb": "cancel", "params": {"id": 5}},
        ]
        r.send_frames(frames)
        answers: list[dict[str, Any]] = []

        def read_until(done: Callable[[dict[str, Any]], bool]) -> None:
            """Answers (not stream items) until one is ``done``."""
            while not any(map(done, answers)):
                f = r.frame()
                if "item" not in f:
                    answers.append(f)

        read_until(lambda f: f["id"] == 6)
        assert answers[-1]["ok"] == {"cancelled": True}  # id 5 was still in the table
        read_until(lambda f: f["id"] == 5 and f.get("error", {}).get("code") == "cancelled")
    finally:
        r.close()
    assert len([f for f in answers if f["id"] == 5]) == 2  # the refusal, and the end


def test_the_order_holds_across_a_drain_cut_at_frames_per_turn(daemon: Daemon) -> None:
    # A drain handles FRAMES_PER_TURN frames, then goes on a turn later: a run.wait at
    # the cut, with a config.set that evicts its run right behind it, still reads first.
    s = daemon.call("session.create")["session"]
    for at in (FRAMES_PER_TURN - 1, FRAMES_PER_TURN, FRAMES_PER_TURN + 1):
        daemon.call("config.set", {"path": "run.retain_count", "value": "100"})
        run = daemon.call("run", {"key": f"cut{at}", "session": s, "argv": ["true"]})["run"]
        daemon.call("run.wait", {"run": run, "output": False})
        frames: list[dict[str, Any]] = [{"id": i, "verb": "whoami"} for i in range(1, at)]
        frames.append({"id": at, "verb": "run.wait", "params": {"run": run, "output": False}})
        frames.append(
            {
                "id": at + 1,
                "verb": "config.set",
                "params": {"path": "run.retain_count", "value": "0"},
            }
        )
        got = {f["id"]: f for f in _pipelined(daemon, frames, len(frames))}
        assert "ok" in got[at] and got[at]["ok"]["outcome"] == "succeeded", (at, got[at])
        assert "ok" in got[at + 1], got[at + 1]
