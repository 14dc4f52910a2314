"""Keys a person types into a pane, between the thread that reads their terminal and the
thread that sends them: ``attach`` and ``exec`` on a terminal."""

from __future__ import annotations

import threading

# A keystroke refused because the pane is ending is not the person's failure: the view
# ends with the pane a moment later.
ENDING = frozenset({"conflict.pane_exited", "conflict.pane_terminating"})
FINAL = ENDING | {"transport"}


class Typed:
    """Keys read from the person's terminal and not yet sent, at most ``HELD_MAX`` bytes:
    a pane that does not read its input takes them at the pace of its terminal's buffer
    (each send waits for that, up to ``timeout.input``), and a paste typed meanwhile is
    dropped past the bound, not held without end. Sent in one piece per send."""

    HELD_MAX = 1 << 16

    def __init__(self) -> None:
        self.cond = threading.Condition()
        self.pending: list[bytes] = []
        self.held = 0
        self.dropped = 0
        self.closed = False

    def put(self, data: bytes) -> None:
        with self.cond:
            if self.held + len(data) > self.HELD_MAX:
                self.dropped += len(data)
                return
            self.pending.append(data)
            self.held += len(data)
            self.cond.notify()

    def take(self) -> bytes | None:
        """What was typed since the last take, once there is some; None once closed."""
        with self.cond:
            while not self.pending and not self.closed:
                self.cond.wait()
            if self.closed:
                return None
            data = b"".join(self.pending)
            self.pending.clear()
            self.held = 0
            return data

    def close(self) -> None:
        with self.cond:
            self.closed = True
            self.cond.notify()


def ends_typing(code: str) -> bool:
    """Whether no key can arrive after a refusal with ``code``: no right to type, or
    nothing left to type on or into. Anything else (a sentinel slow to answer) loses
    the keys of that one send."""
    return code.startswith("denied.") or code in FINAL
