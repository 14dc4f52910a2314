"""``EventLog.after`` takes events from the nearer end of its deque (indexing a deque one
event at a time was quadratic: 11 s for one ``events.read`` of a million events), and
``encode_key`` counts ``M-`` prefixes instead of recursing (a megabyte of them held the
reactor 1.4 s, and past ~1000 raised RecursionError)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from venomx.daemon.events import EventLog
from venomx.verbs.keys import APPLICATION, CTRL_SPECIAL, NAMED, encode_key


@settings(max_examples=300, deadline=None)
@given(
    st.integers(1, 40),
    st.integers(0, 100),
    st.integers(-2, 102),
    st.integers(1, 50),
)
def test_after_is_the_retained_events_past_a_seq(
    retain: int, emitted: int, seq: int, count: int
) -> None:
    log = EventLog("venomx/test", retain)
    for i in range(emitted):
        log.emit("session.created", f"session:s{i}", {})
    want = [ev.seq for ev in log.events if ev.seq > seq][:count] if seq < log.seq else []
    assert [ev.seq for ev in log.after(seq, count)] == want


def recursive(name: str, application: bool) -> bytes | None:
    """encode_key as it was: the model."""
    if application and name in APPLICATION:
        return APPLICATION[name]
    if name in NAMED:
        return NAMED[name]
    if name.startswith("M-") and len(name) > 2:
        rest = recursive(name[2:], application)
        return b"\x1b" + rest if rest is not None else None
    if name.startswith("C-") and len(name) > 2:
        k = name[2:]
        if len(k) == 1 and k.isascii() and k.isalpha():
            return bytes([ord(k.lower()) - 96])
        if k in CTRL_SPECIAL:
            return bytes([CTRL_SPECIAL[k]])
        return None
    if len(name) == 1:
        return name.encode("utf-8")
    return None


PARTS = st.sampled_from(["M-", "C-", "M", "-", "a", "Up", "Enter", "?", "é", ""])


@settings(max_examples=500, deadline=None)
@given(st.lists(PARTS, max_size=8).map("".join), st.booleans())
def test_encode_key_answers_as_the_recursive_one(name: str, application: bool) -> None:
    assert encode_key(name, application) == recursive(name, application)


def test_a_key_under_many_metas() -> None:
    assert encode_key("M-" * 100_000 + "Up", True) == b"\x1b" * 100_000 + b"\x1bOA"
    assert encode_key("M-" * 100_000) is None
