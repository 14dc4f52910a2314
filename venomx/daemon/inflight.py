"""How many requests wait at once, daemon-wide and per principal tree, and how many of
them watch.

Every request that waits holds a task and its state until it ends, and every watcher (an
event stream, an event poll, an attach) is visited for each event or output it may see.
Without a bound, a client that pipelines tens of thousands of subscriptions grew the
daemon by ~6 KiB each and made every later event cost the reactor seconds (helper-109):
foundation §2 says nothing a client sends may wedge the daemon.

The daemon-wide bound keeps the total finite; a quarter of it is all one principal tree
may hold (the tree under one child of the owner: an agent's token and the panes and
principals it made, or one run the owner started), so that a pane's program, however
many principals it mints, cannot lock every other tree out (helper-112). Anonymous
callers share one tree. The owner has no share of its own and a small reserve above
each bound, as root has blocks a filesystem keeps back: it can still ask doctor what is
waiting, and attach. A request over a bound fails before its handler starts, so it did
nothing (dbus-daemon bounds match rules and pending replies the same way).
"""

from __future__ import annotations

from venomx.wire import VenomxError

WATCHING = frozenset({"events.subscribe", "events.read", "pane.attach"})
REQUESTS_MAX = 8192  # twice run.max_active's ceiling: a full burst of starts and waits
WATCHERS_MAX = 1024
SHARE = 4  # a tree may hold a quarter of each
OWNER_RESERVE = 64
WATCHERS_WHAT = "event streams, event polls and attaches"


class InFlight:
    """The counts: the daemon's, and each principal tree's while it has any."""

    def __init__(self) -> None:
        self.requests = 0
        self.watchers = 0
        self.trees: dict[str, list[int]] = {}  # tree -> [requests, watchers]

    def admit(self, verb: str, tree: str | None) -> None:
        """Count a request about to wait, for ``tree`` (None: the owner's), or raise
        ``unavailable.in_flight``."""
        watching = verb in WATCHING
        reserve = OWNER_RESERVE if tree is None else 0
        if self.requests >= REQUESTS_MAX + reserve:
            raise over(REQUESTS_MAX, "the daemon", "requests waiting")
        if watching and self.watchers >= WATCHERS_MAX + reserve:
            raise over(WATCHERS_MAX, "the daemon", WATCHERS_WHAT)
        if tree is not None:
            mine = self.trees.setdefault(tree, [0, 0])
            if mine[0] >= REQUESTS_MAX // SHARE:
                raise over(REQUESTS_MAX // SHARE, "this principal's tree", "requests waiting")
            if watching and mine[1] >= WATCHERS_MAX // SHARE:
                raise over(WATCHERS_MAX // SHARE, "this principal's tree", WATCHERS_WHAT)
            mine[0] += 1
            mine[1] += watching
        self.requests += 1
        self.watchers += watching

    def done(self, verb: str, tree: str | None) -> None:
        watching = verb in WATCHING
        self.requests -= 1
        self.watchers -= watching
        if tree is not None:
            mine = self.trees[tree]
            mine[0] -= 1
            mine[1] -= watching
            if mine[0] == 0:
                del self.trees[tree]


def over(limit: int, whose: str, what: str) -> VenomxError:
    return VenomxError(
        "unavailable.in_flight", f"{whose} has {limit} {what} already", {"limit": limit}
    )
