"""Trust checks of the paths the daemon serves from, writes to and reads its config from.

The socket directory follows tmux's rule: a real directory (not a symlink), owned by the
daemon's uid and writable by nobody else. Its ancestors follow OpenSSH's StrictModes:
owned by that uid or root, and writable by others only with the sticky bit, so nobody
can rename the directory away and put their own in its place. A missing socket directory
is created (one level, 0700) and checked again after creation; an existing one is never
chmodded. At the socket path only a stale socket of ours is ever removed. A socket
passed by systemd (socket activation) must be where one of ours would be, a socket file
of our uid that group and others cannot reach, and it is never removed. Files the daemon
appends to are opened with O_NOFOLLOW relative to a checked directory's fd. A config
file may be a symlink but must be owned by the uid or root and not writable by others,
and every directory its lookup reads a name from follows the ancestors' rule. Every
symlink on the way to the socket's directory, the log's or the config must be owned by
the uid or root: another user's link in /tmp is theirs to point elsewhere.

Every failure is a ``VenomxError`` with one clear message, never an ``OSError``. Imports
only ``venomx.wire``.
"""

from __future__ import annotations

import errno
import os
import socket
import stat
import time
from collections.abc import Callable
from dataclasses import dataclass

from venomx import unixdiag
from venomx.paths import abstract_address
from venomx.wire import VenomxError

SUN_PATH_MAX = 107  # sun_path holds 108 bytes with the terminating NUL
CONFIG_MAX_BYTES = 1 << 20
BACKLOG = 100
HOLDER_TRIES = 5  # binds of the abstract address, each failed one asking whose it is
HOLDER_PAUSE = 0.05  # seconds before the next try when the holder let go meanwhile
APPEND_FLAGS = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK
DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC

Fail = Callable[[str], VenomxError]


def socket_error(path: str, reason: str) -> VenomxError:
    return VenomxError(
        "invalid_params.socket", f"{path}: {reason}", {"socket": path, "reason": reason}
    )


def log_error(path: str, reason: str) -> VenomxError:
    return VenomxError(
        "invalid_params.log_file", f"{path}: {reason}", {"log_file": path, "reason": reason}
    )


def config_error(path: str, reason: str) -> VenomxError:
    return VenomxError(
        "invalid_params.config", f"{path}: {reason}", {"path": path, "reason": reason}
    )


def kind(mode: int) -> str:
    for test, name in (
        (stat.S_ISREG, "a regular file"),
        (stat.S_ISDIR, "a directory"),
        (stat.S_ISLNK, "a symlink"),
        (stat.S_ISSOCK, "a socket"),
        (stat.S_ISFIFO, "a fifo"),
    ):
        if test(mode):
            return name
    return "a device"


def _strerror(exc: OSError) -> str:
    return (exc.strerror or str(exc)).lower()


def _uid() -> int:
    return os.geteuid()


def directory_problem(st: os.stat_result, uid: int) -> str | None:
    """Why the directory holding the socket or the log is not ours alone (None: it is)."""
    if not stat.S_ISDIR(st.st_mode):
        return f"is {kind(st.st_mode)}, not a directory"
    if st.st_uid != uid:
        return f"is owned by uid {st.st_uid}, not by uid {uid}"
    if st.st_mode & 0o022:
        return f"is writable by group or others (mode {stat.S_IMODE(st.st_mode):04o})"
    return None


def ours(uid: int) -> str:
    """Who may own what the daemon trusts, in words."""
    return "root" if uid == 0 else f"uid {uid} or root"


def ancestor_problem(st: os.stat_result, uid: int) -> str | None:
    if not stat.S_ISDIR(st.st_mode):
        return f"is {kind(st.st_mode)}, not a directory"
    if st.st_uid not in (uid, 0):
        return f"is owned by uid {st.st_uid}, not by {ours(uid)}"
    if st.st_mode & 0o022 and not st.st_mode & stat.S_ISVTX:
        return (
            f"is writable by group or others without the sticky bit "
            f"(mode {stat.S_IMODE(st.st_mode):04o})"
        )
    return None


def check_ancestors(directory: str, fail: Fail) -> None:
    """``directory`` (already resolved) and every directory above it."""
    uid = _uid()
    current = directory
    while True:
        check_ancestor(current, uid, fail)
        parent = os.path.dirname(current)
        if parent == current:
            return
        current = parent


def check_ancestor(directory: str, uid: int, fail: Fail) -> None:
    """``directory`` alone, by the ancestors' rule (``ancestor_problem``)."""
    try:
        st = os.lstat(directory)
    except FileNotFoundError:
        raise fail(f"directory {directory} does not exist") from None
    except OSError as exc:
        raise fail(f"cannot inspect {directory}: {_strerror(exc)}") from None
    problem = ancestor_problem(st, uid)
    if problem is not None:
        raise fail(f"directory {directory} {problem}")


def resolve(directory: str) -> str:
    """The directory's parent with symlinks resolved, joined to its own (unresolved) name."""
    parent, name = os.path.split(os.path.abspath(directory))
    return os.path.join(os.path.realpath(parent), name) if name else parent


def open_checked_directory(directory: str, fail: Fail, create: bool) -> tuple[str, int]:
    """Resolve, check and open ``directory``; create it 0700 if missing and ``create``.

    Returns the resolved path and an O_DIRECTORY fd (close-on-exec) of the very directory
    that was checked, so later opens and renames cannot be redirected.
    """
    resolved = resolve(directory)
    uid = _uid()
    check_links(lookup(directory).links, uid, fail)  # resolving alone would not see them
    check_ancestors(os.path.dirname(resolved) or "/", fail)
    created = False
    if create:
        try:
            os.mkdir(resolved, 0o700)
            created = True
        except FileExistsError:
            pass
        except OSError as exc:
            raise fail(f"cannot create directory {resolved}: {_strerror(exc)}") from None
    try:
        fd = os.open(resolved, DIR_FLAGS)
    except FileNotFoundError:
        raise fail(f"directory {resolved} does not exist") from None
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENOTDIR):
            try:
                what = f"is {kind(os.lstat(resolved).st_mode)}, not a directory"
            except OSError:
                what = "is not a directory"
            raise fail(f"{resolved} {what}") from None
        raise fail(f"cannot open directory {resolved}: {_strerror(exc)}") from None
    try:
        if created:
            os.fchmod(fd, 0o700)  # our own new directory: undo a restrictive umask
        problem = directory_problem(os.fstat(fd), uid)
        if problem is None and created and stat.S_IMODE(os.fstat(fd).st_mode) != 0o700:
            problem = "did not get mode 0700"
        if problem is not None:
            raise fail(f"directory {resolved} {problem}; use a directory only you can write")
    except BaseException:
        os.close(fd)
        raise
    return resolved, fd


@dataclass
class SocketPlace:
    """Where the daemon will listen: checked, and what is at the path now."""

    given: str  # the path clients use (reported, and given to panes)
    path: str  # the same with the directory resolved: what is bound and unlinked
    directory: str
    dir_fd: int  # the checked directory, held open
    stale: os.stat_result | None = None  # a stale socket of ours, replaced at bind
    ino: int = -1  # the inode of the socket we bound
    sock: socket.socket | None = None  # listening, once bound
    abstract: socket.socket | None = None  # the same daemon at its abstract address
    squatter: int | None = None  # uid of another user's process holding that address
    activated: bool = False  # the socket file is systemd's: never replaced or removed


def prepare_socket(given: str, activated: bool = False) -> SocketPlace:
    """Check the socket's directory (creating it if missing) and what is at the path.

    Raises ``invalid_params.socket`` for anything untrusted or unusable and
    ``unavailable.address_in_use`` if a daemon of ours already listens there. With
    ``activated`` the path holds the socket systemd passed us (``adopt`` checks it).
    """

    def fail(reason: str) -> VenomxError:
        return socket_error(given, reason)

    if "\0" in given:
        raise fail("contains a NUL byte")
    if len(os.fsencode(given)) > SUN_PATH_MAX:
        raise fail(f"socket path is longer than {SUN_PATH_MAX} bytes")
    parent, name = os.path.split(given)
    if not name or name in (".", ".."):
        raise fail("socket path names a directory")
    resolved = os.path.join(resolve(parent), name)
    if len(os.fsencode(resolved)) > SUN_PATH_MAX:
        raise fail(f"resolved socket path {resolved} is longer than {SUN_PATH_MAX} bytes")
    directory, fd = open_checked_directory(parent, fail, create=True)
    place = SocketPlace(given, os.path.join(directory, name), directory, fd, activated=activated)
    if activated:
        return place
    try:
        place.stale = inspect_socket(place, fail)
    except BaseException:
        os.close(fd)
        raise
    return place


def inspect_socket(place: SocketPlace, fail: Fail) -> os.stat_result | None:
    """None if the path is free, its stat if it is a stale socket of ours; else raise."""
    try:
        st = os.stat(place.path, follow_symlinks=False)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise fail(f"cannot inspect the socket path: {_strerror(exc)}") from None
    if not stat.S_ISSOCK(st.st_mode):
        raise fail(f"{kind(st.st_mode)} is in the way; not replacing it")
    if st.st_uid != _uid():
        raise fail(f"a socket of uid {st.st_uid} is in the way; not replacing it")
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    probe.settimeout(2.0)
    try:
        probe.connect(place.path)
    except ConnectionRefusedError:
        return st  # nobody listens: stale
    except FileNotFoundError:
        return None
    except OSError:
        pass  # listening but busy (backlog full) counts as live
    finally:
        probe.close()
    raise VenomxError(
        "unavailable.address_in_use",
        f"a daemon is already listening on {place.given}",
        {"socket": place.given},
    )


def bind(place: SocketPlace, backlog: int = BACKLOG) -> socket.socket:
    """Replace a stale socket of ours, then bind and listen (0600 from birth)."""

    def fail(reason: str) -> VenomxError:
        return socket_error(place.given, reason)

    if place.stale is not None:
        try:
            now = os.stat(place.path, follow_symlinks=False)
        except FileNotFoundError:
            now = None
        if now is not None:
            if (now.st_dev, now.st_ino) != (place.stale.st_dev, place.stale.st_ino):
                place.stale = inspect_socket(place, fail)  # changed since: judge it again
            if place.stale is not None:
                try:
                    os.unlink(place.path)
                except FileNotFoundError:
                    pass
                except OSError as exc:
                    raise fail(f"cannot remove the stale socket: {_strerror(exc)}") from None
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)  # close-on-exec (PEP 446)
    old = os.umask(0o177)
    try:
        sock.bind(place.path)
        sock.listen(backlog)
    except OSError as exc:
        sock.close()
        if exc.errno == errno.EADDRINUSE:
            raise VenomxError(
                "unavailable.address_in_use",
                f"a daemon is already listening on {place.given}",
                {"socket": place.given},
            ) from None
        raise fail(f"cannot listen: {_strerror(exc)}") from None
    finally:
        os.umask(old)
    place.ino = os.stat(place.path, follow_symlinks=False).st_ino
    sock.setblocking(False)
    try:
        place.abstract = bind_abstract(place, backlog)
    except BaseException:
        sock.close()
        raise
    return sock


def adopt(place: SocketPlace, fd: int, backlog: int = BACKLOG) -> socket.socket:
    """Serve on the listening socket systemd passed as ``fd`` (socket activation).

    It must be what ``bind`` would have made: a listening AF_UNIX stream socket bound at
    the socket path (in the directory ``prepare_socket`` checked), whose file is a socket
    owned by our uid that nobody else may connect to (no group or other permission bits:
    ``SocketMode=0600``). Anything else is refused with ``invalid_params.socket``. The
    abstract address is bound as for a socket of our own.
    """

    def fail(reason: str) -> VenomxError:
        return socket_error(place.given, f"the socket passed by systemd (fd {fd}) {reason}")

    try:
        st = os.fstat(fd)
    except OSError as exc:
        raise fail(f"cannot be used: {_strerror(exc)}") from None
    if not stat.S_ISSOCK(st.st_mode):
        raise fail(f"is {kind(st.st_mode)}, not a socket")
    try:
        sock = socket.socket(fileno=fd)
    except OSError as exc:
        raise fail(f"cannot be used: {_strerror(exc)}") from None
    try:
        os.set_inheritable(fd, False)  # systemd passes it inheritable; no pane may get it
        if sock.family != socket.AF_UNIX or sock.type != socket.SOCK_STREAM:
            raise fail("is not a Unix stream socket (ListenStream= with a path)")
        if not sock.getsockopt(socket.SOL_SOCKET, socket.SO_ACCEPTCONN):
            raise fail("is not listening")
        name = sock.getsockname()
        if not isinstance(name, str) or not name.startswith("/"):
            raise fail("is not bound at a path")
        bound = os.path.join(resolve(os.path.dirname(name)), os.path.basename(name))
        if bound != place.path:
            raise fail(f"is bound at {name}, not at {place.path}: give serve --socket {name}")
        try:
            now = os.stat(os.path.basename(place.path), dir_fd=place.dir_fd, follow_symlinks=False)
        except OSError as exc:
            raise fail(f"has no file at {place.path}: {_strerror(exc)}") from None
        if not stat.S_ISSOCK(now.st_mode):
            raise fail(f"has {kind(now.st_mode)} at its path, not the socket")
        if now.st_uid != _uid():
            raise fail(f"is owned by uid {now.st_uid}, not by uid {_uid()}")
        if now.st_mode & 0o077:
            raise fail(
                f"is reachable by group or others (mode {stat.S_IMODE(now.st_mode):04o}); "
                "use SocketMode=0600"
            )
        place.ino = now.st_ino
        sock.setblocking(False)
        place.abstract = bind_abstract(place, backlog)
    except BaseException:
        sock.close()  # our copy only: systemd keeps its own
        raise
    return sock


def bind_abstract(place: SocketPlace, backlog: int) -> socket.socket | None:
    """Also listen on the abstract address clients try first (``venomx.paths``): the file
    can be swapped by any program of our uid, this address cannot while we hold it.

    Anyone may compute the address and take it first. Held by another user, the daemon
    serves at the path alone, which that user cannot reach, and records the holder in
    ``squatter``; clients pass such a holder over. So it does when the holder comes and
    goes through every try (``squatter`` -1): no daemon of ours does that. Held by our
    uid or root, or where the kernel cannot say, it is taken to be a daemon already
    serving this path: ``unavailable.address_in_use``.
    """
    for _ in range(HOLDER_TRIES):
        try:
            sock = listen_abstract(place.path, backlog)
        except OSError as exc:
            unlink_ours(place)
            raise socket_error(place.given, f"cannot listen: {_strerror(exc)}") from None
        if sock is not None:
            return sock
        try:
            holder = abstract_holder(place.path)
        except unixdiag.Unknown:
            break
        if holder is None:
            time.sleep(HOLDER_PAUSE)  # let go between our bind and the question
            continue
        if not unixdiag.mine(holder):
            place.squatter = holder
            return None
        break
    else:
        place.squatter = -1
        return None
    unlink_ours(place)
    raise VenomxError(
        "unavailable.address_in_use",
        f"another process holds the abstract address of {place.given}",
        {"socket": place.given},
    )


def holder_text(squatter: int) -> str:
    """How the log and doctor name the other holder of the abstract address."""
    return f"uid {squatter}" if squatter >= 0 else "a holder that comes and goes"


def abstract_holder(path: str) -> int | None:
    """Whose the abstract address of ``path`` is: the uid that made the socket holding
    it (``unixdiag``), unless whoever listens there answers a connect with credentials
    of our uid or root, as clients would see them (a socket made by one user may be
    listened on by another's process). None if no socket holds it now; raises
    ``unixdiag.Unknown`` if the kernel cannot say. The kernel is asked first: a connect
    would tell a holder that a check is under way."""
    name = abstract_address(path)
    uid = unixdiag.holder_uid(name.encode())
    if uid is None or unixdiag.mine(uid):
        return uid
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
            probe.setblocking(False)
            probe.connect(name)
            _, listener = unixdiag.peer_credentials(probe)
            if unixdiag.mine(listener):
                return listener
    except OSError:
        pass  # a full queue, no listener, or no descriptor: the kernel's answer stands
    return uid


def listen_abstract(path: str, backlog: int) -> socket.socket | None:
    """Listen at ``path``'s abstract address; None if another socket holds it."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.bind(abstract_address(path))
        sock.listen(backlog)
    except OSError as exc:
        sock.close()
        if exc.errno == errno.EADDRINUSE:
            return None
        raise
    sock.setblocking(False)
    return sock


def unlink_ours(place: SocketPlace) -> None:
    """Remove the socket at shutdown, only if it is still the one we bound (never one
    systemd passed us: its socket unit still listens there, to start us again)."""
    if place.activated:
        return
    try:
        if os.stat(place.path, follow_symlinks=False).st_ino == place.ino:
            os.unlink(place.path)
    except OSError:
        pass


def open_append(dir_fd: int, directory: str, name: str) -> int:
    """Open ``name`` in a checked directory to append: never through a symlink, 0600.

    The file must be a regular file of ours with one link (a hard link could point
    anywhere).
    """
    path = os.path.join(directory, name)
    try:
        fd = os.open(name, APPEND_FLAGS, 0o600, dir_fd=dir_fd)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise log_error(path, "is a symlink; not following it") from None
        if exc.errno == errno.ENXIO:
            raise log_error(path, "is a fifo with no reader") from None
        raise log_error(path, f"cannot open: {_strerror(exc)}") from None
    try:
        st = os.fstat(fd)
        problem = None
        if not stat.S_ISREG(st.st_mode):
            problem = f"is {kind(st.st_mode)}, not a regular file"
        elif st.st_uid != _uid():
            problem = f"is owned by uid {st.st_uid}, not by uid {_uid()}"
        elif st.st_nlink != 1:
            problem = f"has {st.st_nlink} hard links"
        if problem is not None:
            raise log_error(path, problem)
        os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return fd


def prepare_log(path: str) -> tuple[str, int, str]:
    """Check the log file's directory (it must exist); returns (directory, dir fd, name)."""

    def fail(reason: str) -> VenomxError:
        return log_error(path, reason)

    parent, name = os.path.split(os.path.abspath(path))
    if not name:
        raise fail("names a directory")
    directory, fd = open_checked_directory(parent, fail, create=False)
    return directory, fd, name


SYMLINK_HOPS = 40  # as the kernel's lookup allows; past it the open says ELOOP


@dataclass
class Lookup:
    """What the kernel's lookup of a path reads: the directories it reads a name from
    and the symlinks it follows. Whoever may write one of those directories, or owns one
    of those symlinks in a sticky directory, may swap the name it holds."""

    directories: set[str]
    links: set[str]


def lookup(path: str) -> Lookup:
    """The lookup of ``path`` as the kernel walks it, up to the first name missing."""
    found = Lookup(set(), set())
    parts = os.path.abspath(path).split("/")[1:]
    current = "/"
    hops = 0
    while parts:
        name = parts.pop(0)
        if name in ("", "."):
            continue
        if name == "..":
            current = os.path.dirname(current)
            continue
        found.directories.add(current)
        candidate = os.path.join(current, name)
        if not os.path.lexists(candidate):
            break  # nothing further exists to be swapped; the open says what is missing
        if os.path.islink(candidate):
            found.links.add(candidate)
            hops += 1
            try:
                target = os.readlink(candidate)
            except OSError:
                break
            if hops > SYMLINK_HOPS:
                break
            if target.startswith("/"):
                current = "/"
            parts = target.split("/") + parts
            continue
        current = candidate
    return found


def check_links(links: set[str], uid: int, fail: Fail) -> None:
    """Every symlink on the way is owned by ``uid`` or root: in a sticky directory such
    as /tmp its owner may replace it, and so point the daemon elsewhere at will."""
    for link in sorted(links):
        try:
            owner = os.lstat(link).st_uid
        except OSError as exc:
            raise fail(f"cannot inspect symlink {link}: {_strerror(exc)}") from None
        if owner not in (uid, 0):
            raise fail(f"symlink {link} is owned by uid {owner}, not by {ours(uid)}")


def read_config(path: str) -> str | None:
    """The config file's text; None when it does not exist (foundation §11: missing =
    defaults). One that exists but cannot be trusted or read is an error, and so is one
    reached through a directory another user could change (as sshd's StrictModes has
    it): whoever could delete the file, or swap it or a symlink on the way for another,
    would choose the daemon's grants. A missing file is not judged by its directories: a
    fresh ``~/.config`` made under umask 002 is group-writable, and defaults are what a
    daemon without the file has anyway. The symlinks on the way to it are judged: one of
    another user's, pointed at nothing, would turn a trusted file into defaults."""
    uid = _uid()

    def fail(reason: str) -> VenomxError:
        return config_error(path, reason)

    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NONBLOCK | os.O_NOCTTY)
    except FileNotFoundError:
        # missing only because another user's symlink points nowhere is their choice
        check_links(lookup(path).links, uid, fail)
        return None
    except OSError as exc:
        raise config_error(path, f"cannot open: {_strerror(exc)}") from None
    try:
        # the lookup reads names from "/" down, so these hold every directory above each
        found = lookup(path)
        check_links(found.links, uid, fail)
        for directory in sorted(found.directories):
            check_ancestor(directory, uid, fail)
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise config_error(path, f"is {kind(st.st_mode)}, not a regular file")
        if st.st_uid not in (uid, 0):
            raise config_error(path, f"is owned by uid {st.st_uid}, not by {ours(uid)}")
        if st.st_mode & 0o022:
            raise config_error(
                path, f"is writable by group or others (mode {stat.S_IMODE(st.st_mode):04o})"
            )
        chunks: list[bytes] = []
        size = 0
        while chunk := os.read(fd, 65536):
            chunks.append(chunk)
            size += len(chunk)
            if size > CONFIG_MAX_BYTES:
                raise config_error(path, f"is larger than {CONFIG_MAX_BYTES} bytes")
    except OSError as exc:
        raise config_error(path, f"cannot read: {_strerror(exc)}") from None
    finally:
        os.close(fd)
    try:
        return b"".join(chunks).decode("utf-8")
    except UnicodeDecodeError:
        raise config_error(path, "is not UTF-8") from None
