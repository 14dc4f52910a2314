"""How many requests wait at once, daemon-wide, and how many of them watch.

Every request that waits holds a task and its state until it ends, and every watcher (an
event stream, an event poll, an attach) is visited for each event or output it may see.
Without a bound, a client that pipelines tens of thousands of subscriptions grew the
daemon by ~6 KiB each and made every later event cost the reactor seconds (helper-109):
foundation §2 says nothing a client sends may wedge the daemon. Refusing the request
over the bound leaves nothing behind; the bound is daemon-wide, as every client that
can reach the socket shares the daemon's uid (dbus-daemon bounds its match rules and
pending replies the same way). The owner has a small reserve above each bound, as root
has blocks a filesystem keeps back: whoever filled the daemon with a narrower token,
the owner can still ask doctor what is waiting, and attach.
"""

from __future__ import annotations

from venomx.wire import VenomxError

WATCHING = frozenset({"events.subscribe", "events.read", "pane.attach"})
REQUESTS_MAX = 8192  # twice run.max_active's ceiling: a full burst of starts and waits
WATCHERS_MAX = 1024
OWNER_RESERVE = 64


class InFlight:
    """The counts, kept by the server as each request's task is made and ends."""

    def __init__(self) -> None:
        self.requests = 0
        self.watchers = 0

    def admit(self, verb: str, owner: bool) -> None:
        """Count a request about to wait, or raise ``unavailable.in_flight``."""
        reserve = OWNER_RESERVE if owner else 0
        if self.requests >= REQUESTS_MAX + reserve:
            raise over(REQUESTS_MAX, "requests waiting")
        if verb in WATCHING:
            if self.watchers >= WATCHERS_MAX + reserve:
                raise over(WATCHERS_MAX, "event streams, event polls and attaches")
            self.watchers += 1
        self.requests += 1

    def done(self, verb: str) -> None:
        self.requests -= 1
        if verb in WATCHING:
            self.watchers -= 1


def over(limit: int, what: str) -> VenomxError:
    return VenomxError(
        "unavailable.in_flight", f"the daemon has {limit} {what} already", {"limit": limit}
    )
