"""``workers.inherited``: the limits and scheduling a fork server hands every sentinel,
as the daemon passes them to it."""

from __future__ import annotations

import resource

from workers import inherited


def test_every_limit_is_in_the_baseline_once() -> None:
    """Python names RLIMIT_NOFILE twice (RLIMIT_OFILE), so the raised descriptor limit
    was put back over the lowered one; and does not name RLIMIT_LOCKS (10 on Linux), so
    a program could lower it for every later run (helper-139)."""
    assert len(set(inherited.RESOURCES)) == len(inherited.RESOURCES)
    assert resource.RLIMIT_NOFILE in inherited.RESOURCES
    assert 10 in inherited.RESOURCES  # RLIMIT_LOCKS
    assert inherited.RESOURCES == tuple(range(len(inherited.RESOURCES)))  # RLIM_NLIMITS


def test_the_baseline_survives_its_way_to_the_fork_server() -> None:
    base = inherited.now()
    assert inherited.decode(inherited.encode(base)) == base
    assert inherited.restore(base)
