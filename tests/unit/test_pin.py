"""``Pin``: which later hellos a reconnecting client takes for the daemon it began with.
Real processes stand for the servers: this one (alive), children that have exited."""

from __future__ import annotations

import os
import subprocess
import threading
from collections.abc import Iterator

import pytest

from venomx.client import NotTheDaemon, Pin
from venomx.wire import VenomxError

ALIVE = os.getpid()


@pytest.fixture
def ended() -> Iterator[int]:
    """The pid of a child that has exited (a zombie: its pid is not reused meanwhile)."""
    proc = subprocess.Popen(["true"])
    os.waitid(os.P_PID, proc.pid, os.WEXITED | os.WNOWAIT)
    yield proc.pid
    proc.wait()


@pytest.fixture
def living() -> Iterator[int]:
    proc = subprocess.Popen(["sleep", "60"])
    yield proc.pid
    proc.kill()
    proc.wait()


@pytest.mark.parametrize("follow", [False, True])
def test_the_same_daemon_again_is_taken(follow: bool) -> None:
    pin = Pin(follow)
    pin.check("s", ALIVE, "venomx/a")
    pin.check("s", ALIVE, "venomx/a")
    assert pin.source == "venomx/a" and list(pin.seen) == [ALIVE]
    pin.close()


@pytest.mark.parametrize("follow", [False, True])
def test_another_process_with_its_source_is_refused_once_the_daemon_exited(
    follow: bool, ended: int
) -> None:
    pin = Pin(follow)
    pin.check("s", ended, "venomx/a")  # the daemon, since killed
    with pytest.raises(NotTheDaemon) as caught:
        pin.check("s", ALIVE, "venomx/a")
    assert caught.value.code == "transport"
    assert caught.value.data == {"socket": "s", "server_pid": ALIVE}
    assert list(pin.seen) == [ended]
    with pytest.raises(NotTheDaemon):  # the daemon's own pid, after its exit
        pin.check("s", ended, "venomx/a")
    pin.close()


def test_a_second_process_is_taken_while_the_first_lives(living: int) -> None:
    # socket activation: systemd's socket first, then the daemon's own abstract address
    pin = Pin(follow=False)
    pin.check("s", ALIVE, "venomx/a")
    pin.check("s", living, "venomx/a")
    assert list(pin.seen) == [ALIVE, living]
    pin.close()


def test_a_process_without_a_pidfd_pins_the_source_alone(living: int) -> None:
    # pid 0: a daemon in a pid namespace we cannot see; nothing tells its processes apart
    pin = Pin(follow=False)
    pin.check("s", 0, "venomx/a")
    pin.check("s", 0, "venomx/a")
    pin.check("s", living, "venomx/a")
    assert pin.seen[0] == -1
    pin.close()


def checked_at_once(pin: Pin, pid: int, threads: int) -> list[BaseException]:
    """``pin.check`` of ``pid`` from ``threads`` threads let go together; what they raised."""
    errors: list[BaseException] = []
    together = threading.Barrier(threads)

    def check() -> None:
        together.wait()
        try:
            pin.check("s", pid, "venomx/a")
        except BaseException as exc:
            errors.append(exc)

    started = [threading.Thread(target=check) for _ in range(threads)]
    for t in started:
        t.start()
    for t in started:
        t.join()
    return errors


def test_threads_checking_at_once_see_one_pin(living: int) -> None:
    # exec's input threads connect while its main thread does
    for _ in range(200):
        pin = Pin(follow=False)
        pin.check("s", ALIVE, "venomx/a")
        assert checked_at_once(pin, living, 4) == []
        assert list(pin.seen) == [ALIVE, living]
        pin.close()


def test_a_restarted_daemon_is_a_conflict_for_a_client_of_one_run(living: int) -> None:
    pin = Pin(follow=False)
    pin.check("s", ALIVE, "venomx/a")
    with pytest.raises(VenomxError) as caught:
        pin.check("s", living, "venomx/b")
    assert caught.value.code == "conflict.source"
    assert caught.value.data == {"source": "venomx/b"}
    pin.close()


def test_a_following_client_goes_on_with_a_restarted_daemon(ended: int, living: int) -> None:
    pin = Pin(follow=True)
    pin.check("s", ended, "venomx/a")
    pin.check("s", living, "venomx/b")
    assert pin.source == "venomx/b" and list(pin.seen) == [living]
    pin.close()
