"""No input reaches ``internal`` (issue 15.2): every verb of the manifest, driven on a real
daemon with params of the wrong types, sizes and nestings, and raw frames with odd ids.

Every request is answered with a specified error or a result, never ``internal``, and the
daemon lives on. Programs that would start are ``true`` (or fail to exec), and every
request that blocks is cancelled after a short budget, so nothing is left behind.
"""

from __future__ import annotations

import json
import math
import socket
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from tests.helpers import Daemon, start_daemon, stop_daemon, wait_for
from venomx.manifest.verbs import VERBS, Param, Verb
from venomx.wire import MAX_DEPTH

SPAWNING = {"window.create", "pane.split"}
BUDGET = 0.3  # seconds a request may block before it is cancelled


@dataclass(frozen=True)
class Deep:
    """A JSON array nested ``n`` deep, written as text (no Python recursion)."""

    n: int


@dataclass(frozen=True)
class Raw:
    """JSON text sent verbatim (``1e999``, 400-digit integers, ``-0.0``)."""

    text: str


def enc(v: Any) -> str:
    """JSON text for a generated value: non-finite floats as ``1e999`` (valid JSON that
    parses to infinity), NaN as the non-JSON ``NaN``."""
    if isinstance(v, Deep):
        return "[" * v.n + "]" * v.n
    if isinstance(v, Raw):
        return v.text
    if isinstance(v, float) and not math.isfinite(v):
        return "NaN" if math.isnan(v) else ("1e999" if v > 0 else "-1e999")
    if isinstance(v, list):
        return "[" + ",".join(enc(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{" + ",".join(json.dumps(k) + ":" + enc(x) for k, x in v.items()) + "}"
    return json.dumps(v)


class Conn:
    """One owner connection speaking raw NDJSON, so any frame can be sent."""

    def __init__(self, path: str, hello: bool = True) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.connect(path)
        self.sock.settimeout(15)
        self.buf = b""
        self.next_id = 1
        if hello:
            self.send_text('{"id":0,"verb":"hello","params":{"protocol":1,"token":"@owner"}}')
            assert "ok" in (self.frame(None) or {}), "hello failed"

    def send_text(self, text: str) -> None:
        self.sock.sendall(text.encode("utf-8", "surrogatepass") + b"\n")

    def frame(self, timeout: float | None) -> dict[str, Any] | None:
        deadline = None if timeout is None else time.monotonic() + timeout
        while b"\n" not in self.buf:
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                return None
            self.sock.settimeout(15 if left is None else left)
            try:
                chunk = self.sock.recv(1 << 20)
            except TimeoutError:
                return None
            assert chunk, "the daemon closed the connection"
            self.buf += chunk
        line, _, self.buf = self.buf.partition(b"\n")
        obj: dict[str, Any] = json.loads(line)
        assert not (
            isinstance(obj.get("error"), dict) and obj["error"].get("code") == "internal"
        ), obj
        return obj

    def request(self, verb: str, params_text: str | None) -> dict[str, Any]:
        """Send one request; cancel it if it blocks past BUDGET; return its response."""
        rid = self.next_id
        self.next_id += 2
        body = f'"id":{rid},"verb":{json.dumps(verb)}'
        if params_text is not None:
            body += f',"params":{params_text}'
        self.send_text("{" + body + "}")
        answer: dict[str, Any] | None = None
        cancel_answered = True
        deadline = time.monotonic() + BUDGET
        while answer is None or not cancel_answered:
            f = self.frame(max(0.0, deadline - time.monotonic()) if cancel_answered else 15)
            if f is None:  # blocked: cancel it, then both answers must come
                self.send_text(f'{{"id":{rid + 1},"verb":"cancel","params":{{"id":{rid}}}}}')
                cancel_answered = False
                deadline = time.monotonic() + 15
                continue
            if (f.get("id") == rid and "item" not in f) or f.get("id") is None:
                answer = f  # (null: the frame itself was refused, e.g. too big or deep)
            elif f.get("id") == rid + 1:
                cancel_answered = True
        return answer

    def close(self) -> None:
        self.sock.close()


@pytest.fixture(scope="module")
def fuzzed() -> Iterator[tuple[Daemon, Conn]]:
    d = start_daemon(seams=False)  # no seam may hold the daemon's runs
    conn: Conn | None = None
    try:
        conn = Conn(d.socket)
        s = d.call("session.create", {"name": "fuzz"})["session"]
        d.call("window.create", {"session": s, "argv": ["true"]})
        d.call("run", {"key": "fuzz", "session": s, "argv": ["true"]})
        yield d, conn
        # nothing is left running: every program was `true` or never started
        conn.request("config.reload", None)  # undo any config.set of a small max_frame
        wait_for(
            lambda: all(
                p["state"] == "exited" for p in conn.request("pane.list", None)["ok"]["panes"]
            ),
            15,
            "every pane exited",
        )
        assert all(
            r["state"] == "completed"
            for r in conn.request("run.list", '{"limit":1024}')["ok"]["runs"]
        )
    finally:
        if conn is not None:
            conn.close()
        stop_daemon(d)


LONG = "r" + "9" * 4400
IDS = [
    "s0",
    "w0",
    "p0",
    "p1",
    "r0",
    "r1",
    "g0",
    "g1",
    "r01",
    "r²",
    "r١",
    LONG,
    "p" + "9" * 30,
    "",
    "*",
    "session:*",
    "self",
    "run.max_active",
    "auth.default_grants",
    "protocol.max_frame",
    "spawn.default_shell",
    "SIGKILL",
    "cols",
    "\udcff",
    "a\0b",
]
EDGE_INTS = [
    0,
    1,
    -1,
    2**31,
    2**62,
    2**62 + 1,
    2**63 - 1,
    2**63,
    -(2**63),
    -(2**63) - 1,
    2**64,
    65535,
    65536,
    3600001,
    86400001,
    10**30,
]
NUMBERS = [
    Raw("1e999"),
    Raw("-1e999"),
    Raw("1" + "0" * 400),
    Raw("-" + "9" * 5000),
    Raw("-0.0"),
    Raw("1.0"),
    Raw("1e308"),
    Raw("0.5"),
    float("inf"),
    float("nan"),
]
DEPTHS = [
    Deep(n)
    for n in (1, MAX_DEPTH - 3, MAX_DEPTH - 2, MAX_DEPTH - 1, MAX_DEPTH, 1000, 5000, 100_000)
]

scalars = (
    st.none()
    | st.booleans()
    | st.integers(-(2**200), 2**200)
    | st.sampled_from(EDGE_INTS)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.sampled_from(NUMBERS)
    | st.text(max_size=12)
    | st.sampled_from(IDS)
    | st.sampled_from([0, 1, 64, 65, 4097, 300_000, 2_000_000]).map(lambda n: "x" * n)
)
anything = st.recursive(
    scalars | st.sampled_from(DEPTHS),
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(
            st.text(max_size=6) | st.sampled_from(["right", "scope", "PATH", "A"]),
            inner,
            max_size=4,
        )
    ),
    max_leaves=10,
)


RUN_IDS = [
    "r0",
    "r1",
    "r9",
    "r01",
    "r-1",
    "r+1",
    "r 1",
    "r²",
    "r١",
    "r",
    LONG,
    "r" + "9" * 20,
    "r" + "9" * 21,
    "R0",
    "p0",
]
JSON_TEXTS = [
    "1",
    "64",
    "0",
    "5000",
    "true",
    '"/bin/sh"',
    "[]",
    "{}",
    "",
    "NaN",
    "1e999",
    "1.0",
    "9" * 5000,
    "[" * 5000,
    "[" * 5000 + "]" * 5000,
    "[" * 62 + "]" * 62,
    "[" * 63 + "]" * 63,
    '[{"right":"read","scope":"*"}]',
    '[{"right":"read","scope":' + "[" * 60 + "]" * 60 + "}]",
    "\udcff",
    "[1,",
]
STRINGS = {
    "run": RUN_IDS,
    "after": RUN_IDS,
    "value": JSON_TEXTS,
    "pane": ["p0", "p1", "p2", "p01", "p²", "p" + "9" * 4400],
    "session": ["s0", "s1", "s01", "s²", "s" + "9" * 4400],
    "window": ["w0", "w1", "w01", "w²", "w" + "9" * 4400],
    "principal": ["g0", "g1", "g2", "g²", "g" + "9" * 4400],
    "path": ["run.max_active", "auth.default_grants", "vt.scrollback", "nope", ""],
}


def plausible(p: Param) -> st.SearchStrategy[Any]:
    """Values of the param's declared kind, edges and choices included."""
    if p.kind == "integer":
        lo = -(2**63) if p.min is None else p.min
        hi = 2**63 - 1 if p.max is None else p.max
        return st.integers(lo, hi) | st.sampled_from([lo, hi, lo - 1, hi + 1])
    if p.kind == "boolean":
        return st.booleans()
    if p.kind == "string":
        own = st.sampled_from(p.choices or STRINGS.get(p.name, IDS))
        return own | own | st.sampled_from(IDS) | st.text(max_size=20)
    if p.kind == "array":
        if p.items == "object":
            return st.lists(
                st.fixed_dictionaries(
                    {
                        "right": st.sampled_from(["read", "write", "spawn", "admin", "x"]),
                        "scope": st.sampled_from(IDS),
                    }
                ),
                max_size=3,
            )
        return st.lists(st.text(max_size=8) | st.sampled_from(IDS), max_size=4)
    return st.dictionaries(
        st.sampled_from(["A", "PATH", "=", "a b", ""]), st.text(max_size=8) | anything, max_size=3
    )


def params_text(draw: Callable[[st.SearchStrategy[Any]], Any], verb: Verb) -> str | None:
    """Params for ``verb``: all plausible (to reach the handler's own checks), all but one
    plausible, each anything, absent, or not an object."""
    shape = draw(
        st.sampled_from(
            ["plausible", "plausible", "one-wrong", "one-wrong", "anything", "absent", "not-object"]
        )
    )
    params: dict[str, Any] = {}
    if shape == "not-object":
        value = draw(anything)  # (null params mean {}: a shutdown, so wrap it too)
        return enc([value] if value is None or isinstance(value, dict) else value)
    if shape in ("one-wrong", "plausible"):
        for p in verb.params:
            if p.required or draw(st.booleans()):
                params[p.name] = draw(plausible(p))
        if shape == "one-wrong" and verb.params:
            params[draw(st.sampled_from(verb.params)).name] = draw(anything)
    elif shape == "anything":
        for p in verb.params:
            if draw(st.booleans()):
                params[p.name] = draw(anything)
        if draw(st.integers(0, 4)) == 0:
            params[draw(st.text(max_size=8))] = draw(anything)
    # Never start anything but `true`, and never stop the daemon under test.
    if verb.name in SPAWNING or verb.name == "run":
        argv = params.get("argv")
        if (isinstance(argv, list) and all(isinstance(a, str) for a in argv)) or (
            verb.name in SPAWNING and "argv" not in params
        ):
            params["argv"] = ["true"]
        if isinstance(params.get("shell"), str):
            params["shell"] = "true"
    if verb.name == "shutdown":
        params["unknown"] = 1
    if isinstance(params.get("grace_ms"), int) and 1000 < params["grace_ms"] <= 3600000:
        params["grace_ms"] = 1000  # a SIGSTOP that wins the race with `true` ends soon
    return None if shape == "absent" and verb.name != "shutdown" else enc(params)


SCHEMA_ERRORS = {f"invalid_params.{x}" for x in ("unknown", "missing", "type", "range", "choice")}


def specified(verb: Verb, answer: dict[str, Any]) -> None:
    """One result or one error, and the error one the verb declares (manifest or §3), so
    ``internal`` or an undeclared code fails the example."""
    assert ("ok" in answer) != ("error" in answer), answer
    if "error" in answer:
        code = answer["error"]["code"]
        declared = {*verb.errors, *SCHEMA_ERRORS, "cancelled", f"denied.{verb.dispatch}"}
        assert code in declared or code.startswith("invalid_request."), (verb.name, code)


@pytest.mark.parametrize("verb", [v for v in VERBS if v.name != "hello"], ids=lambda v: v.name)
@settings(max_examples=20, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_every_verb_with_bad_params(
    fuzzed: tuple[Daemon, Conn], verb: Verb, data: st.DataObject
) -> None:
    d, conn = fuzzed
    answer = conn.request(verb.name, params_text(data.draw, verb))
    specified(verb, answer)
    event(f"{verb.name}: {answer['error']['code'] if 'error' in answer else 'ok'}")
    assert d.proc.poll() is None


@settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_hello_with_bad_params(fuzzed: tuple[Daemon, Conn], data: st.DataObject) -> None:
    """hello is only valid first, so each example opens its own connection."""
    d, _ = fuzzed
    conn = Conn(d.socket, hello=False)
    try:
        verb = next(v for v in VERBS if v.name == "hello")
        answer = conn.request("hello", params_text(data.draw, verb))
        specified(verb, answer)
        if "ok" in answer:  # the connection is usable at the size it agreed
            assert conn.request("whoami", None)["ok"]["source"] == answer["ok"]["source"]
    finally:
        conn.close()
    assert d.proc.poll() is None


# odd id text -> (code, id echoed back): a scalar comes back as the frame sent it, anything
# JSON cannot carry back faithfully (infinity, beyond 64 bits, over 64 chars) as null
ODD_IDS: dict[str, tuple[str, Any]] = {
    "1e999": ("invalid_request.id", None),
    "-1e999": ("invalid_request.id", None),
    "NaN": ("invalid_request.json", None),
    "1.5": ("invalid_request.id", 1.5),
    "-0.0": ("invalid_request.id", -0.0),
    "1e308": ("invalid_request.id", 1e308),
    "9223372036854775808": ("invalid_request.id", None),
    "-9223372036854775809": ("invalid_request.id", None),
    "9" * 400: ("invalid_request.id", None),
    "-" + "9" * 5000: ("invalid_request.id", None),
    '"1"': ("invalid_request.id", "1"),
    '"' + "x" * 100 + '"': ("invalid_request.id", None),
    "true": ("invalid_request.id", True),
    "false": ("invalid_request.id", False),
    "null": ("invalid_request.id", None),
    "[]": ("invalid_request.id", None),
    "{}": ("invalid_request.id", None),
    "[1]": ("invalid_request.id", None),
    '{"a":1}': ("invalid_request.id", None),
    "[" * 70 + "]" * 70: ("invalid_request.json", None),  # deeper than a frame may nest
    '"\\ud800"': ("invalid_request.id", "\ud800"),
}


@settings(max_examples=100, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.sampled_from(list(ODD_IDS)), st.sampled_from(["whoami", "cancel", "hello", "nope", None]))
def test_raw_frames_with_odd_ids(fuzzed: tuple[Daemon, Conn], rid: str, verb: str | None) -> None:
    d, conn = fuzzed
    body = f'"id":{rid}' + (f',"verb":"{verb}"' if verb else "")
    conn.send_text("{" + body + "}")
    f = conn.frame(10)
    assert f is not None and "error" in f
    code, echoed = ODD_IDS[rid]
    assert (f["error"]["code"], f["id"], type(f["id"])) == (code, echoed, type(echoed)), f
    if isinstance(echoed, float):
        assert math.copysign(1, f["id"]) == math.copysign(1, echoed)  # -0.0 stays -0.0
    assert d.proc.poll() is None


def test_the_daemon_survived(fuzzed: tuple[Daemon, Conn]) -> None:
    d, conn = fuzzed
    assert conn.request("whoami", "{}")["ok"]["principal"] == "g0"
    doc = d.call("doctor")  # every fuzzed program was `true`: nothing left to warn about
    assert doc["status"] == "ok", doc["checks"]
