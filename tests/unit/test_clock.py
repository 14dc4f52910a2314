"""``now_iso``, the wall-clock stamp of every ``*_at`` field, formats its second once a
second: it must still agree with the clock to the millisecond, across second changes."""

from __future__ import annotations

import re
import time
from datetime import UTC, datetime

from venomx.daemon.registry import now_iso

STAMP = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z")


def _ms(dt: datetime) -> datetime:
    return dt.replace(microsecond=dt.microsecond // 1000 * 1000)


def test_now_iso_is_the_clock_to_the_millisecond_across_seconds() -> None:
    seconds: set[str] = set()
    deadline = time.monotonic() + 5
    while len(seconds) < 2:  # a change of second, and the stamps either side of it
        assert time.monotonic() < deadline, "the clock did not move on"
        before = _ms(datetime.now(UTC))
        stamp = now_iso()
        after = _ms(datetime.now(UTC))
        assert STAMP.fullmatch(stamp), stamp
        got = datetime.strptime(stamp, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=UTC)
        assert before <= got <= after, (before, stamp, after)
        seconds.add(stamp[:19])
