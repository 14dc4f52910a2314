"""``Pin``: which later hellos a reconnecting client takes for the daemon it began with."""

from __future__ import annotations

import pytest

from venomx.client import NotTheDaemon, Pin
from venomx.wire import VenomxError

DAEMON = (4242, 1000)  # (pid, start time) of the process serving the socket


@pytest.mark.parametrize("follow", [False, True])
def test_the_same_daemon_again_is_taken(follow: bool) -> None:
    pin = Pin(follow)
    pin.check("s", DAEMON, "venomx/a")
    pin.check("s", DAEMON, "venomx/a")
    assert (pin.source, pin.process) == ("venomx/a", DAEMON)


@pytest.mark.parametrize("follow", [False, True])
@pytest.mark.parametrize("other", [(4243, 1000), (4242, 1001), (4242, None)])
def test_another_process_with_its_source_is_never_taken(
    follow: bool, other: tuple[int, int | None]
) -> None:
    pin = Pin(follow)
    pin.check("s", DAEMON, "venomx/a")
    with pytest.raises(NotTheDaemon) as caught:
        pin.check("s", other, "venomx/a")
    assert caught.value.code == "transport"
    assert caught.value.data == {"socket": "s", "server_pid": other[0]}
    assert (pin.source, pin.process) == ("venomx/a", DAEMON)


def test_a_restarted_daemon_is_a_conflict_for_a_client_of_one_run() -> None:
    pin = Pin(follow=False)
    pin.check("s", DAEMON, "venomx/a")
    with pytest.raises(VenomxError) as caught:
        pin.check("s", (5000, 2000), "venomx/b")
    assert caught.value.code == "conflict.source"
    assert caught.value.data == {"source": "venomx/b"}


def test_a_following_client_goes_on_with_a_restarted_daemon() -> None:
    pin = Pin(follow=True)
    pin.check("s", DAEMON, "venomx/a")
    pin.check("s", (5000, 2000), "venomx/b")
    assert (pin.source, pin.process) == ("venomx/b", (5000, 2000))
    with pytest.raises(NotTheDaemon):
        pin.check("s", DAEMON, "venomx/b")
