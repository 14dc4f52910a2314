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
ABSTRACT, PATH = True, False  # where a connection reached its server


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
    pin.check("s", ALIVE, "venomx/a", ABSTRACT)
    pin.check("s", ALIVE, "venomx/a", ABSTRACT)
    pin.check("s", ALIVE, "venomx/a", PATH)  # the same process at its path
    assert pin.source == "venomx/a" and list(pin.seen) == [ALIVE]
    pin.close()


@pytest.mark.parametrize("follow", [False, True])
def test_another_process_with_its_source_is_refused_once_the_daemon_exited(
    follow: bool, ended: int
) -> None:
    pin = Pin(follow)
    pin.check("s", ended, "venomx/a", ABSTRACT)  # the daemon, since killed
    with pytest.raises(NotTheDaemon) as caught:
        pin.check("s", ALIVE, "venomx/a", ABSTRACT)
    assert caught.value.code == "transport"
    assert caught.value.data == {"socket": "s", "server_pid": ALIVE}
    assert list(pin.seen) == [ended]
    with pytest.raises(NotTheDaemon):  # the daemon's own pid, after its exit
        pin.check("s", ended, "venomx/a", ABSTRACT)
    pin.close()


@pytest.mark.parametrize("at", [ABSTRACT, PATH])
def test_another_process_is_refused_while_the_daemon_lives_stopped(at: bool, living: int) -> None:
    # a program stopped the daemon once its shutdown let the address go, and took it
    pin = Pin(follow=False)
    pin.check("s", living, "venomx/a", ABSTRACT)
    with pytest.raises(NotTheDaemon):
        pin.check("s", ALIVE, "venomx/a", at)
    pin.close()


def test_the_daemon_after_its_managers_socket_is_taken_once(living: int, ended: int) -> None:
    # socket activation: the manager's socket at the path first, then the daemon's own
    # abstract address; a third process is not a way any daemon comes
    pin = Pin(follow=False)
    pin.check("s", ALIVE, "venomx/a", PATH)
    with pytest.raises(NotTheDaemon):  # not at the path
        pin.check("s", living, "venomx/a", PATH)
    pin.check("s", living, "venomx/a", ABSTRACT)
    assert list(pin.seen) == [ALIVE, living]
    with pytest.raises(NotTheDaemon):
        pin.check("s", ended, "venomx/a", ABSTRACT)
    pin.close()


def test_a_process_without_a_pidfd_is_taken_for_itself(living: int) -> None:
    # pid 0: a daemon in a pid namespace we cannot see; its processes all read as 0
    pin = Pin(follow=False)
    pin.check("s", 0, "venomx/a", PATH)
    pin.check("s", 0, "venomx/a", ABSTRACT)
    assert pin.seen[0] == (-1, True)
    with pytest.raises(NotTheDaemon):
        pin.check("s", living, "venomx/a", ABSTRACT)
    pin.close()


def checked_at_once(pin: Pin, pid: int, threads: int) -> list[BaseException]:
    """``pin.check`` of ``pid`` from ``threads`` threads let go together; what they raised."""
    errors: list[BaseException] = []
    together = threading.Barrier(threads)

    def check() -> None:
        together.wait()
        try:
            pin.check("s", pid, "venomx/a", ABSTRACT)
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
        pin.check("s", ALIVE, "venomx/a", PATH)
        assert checked_at_once(pin, living, 4) == []
        assert list(pin.seen) == [ALIVE, living]
        pin.close()


def test_a_restarted_daemon_is_a_conflict_for_a_client_of_one_run(living: int) -> None:
    pin = Pin(follow=False)
    pin.check("s", ALIVE, "venomx/a", ABSTRACT)
    with pytest.raises(VenomxError) as caught:
        pin.check("s", living, "venomx/b", ABSTRACT)
    assert caught.value.code == "conflict.source"
    assert caught.value.data == {"source": "venomx/b"}
    pin.close()


def test_a_following_client_goes_on_with_a_restarted_daemon(ended: int, living: int) -> None:
    pin = Pin(follow=True)
    pin.check("s", ended, "venomx/a", ABSTRACT)
    pin.check("s", living, "venomx/b", ABSTRACT)
    assert pin.source == "venomx/b" and list(pin.seen) == [living]
    pin.close()


def test_a_following_client_never_takes_a_source_it_left_behind(ended: int, living: int) -> None:
    """A daemon's source is new at each start, so a server that presents one the client
    has followed away from is a program of our uid answering in a daemon's place. It
    first showed a new source (taken for a restart), then the first one again: the MCP
    adapter took that for the first daemon and accepted its made-up record of a run."""
    pin = Pin(follow=True)
    pin.check("s", ended, "venomx/a", ABSTRACT)  # the daemon, since killed
    pin.check("s", living, "venomx/b", ABSTRACT)  # the impostor, with a new source
    with pytest.raises(NotTheDaemon) as caught:
        pin.check("s", living, "venomx/a", ABSTRACT)  # and the first one again
    assert caught.value.code == "transport"
    assert "left behind" in caught.value.message
    assert pin.source == "venomx/b" and list(pin.seen) == [living]
    pin.close()
