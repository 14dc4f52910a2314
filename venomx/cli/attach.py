"""``venomx attach``: a human's view of a pane, in raw mode, until Ctrl-\\ or pane exit."""

from __future__ import annotations

import base64
import contextlib
import os
import sys
import termios
import threading
import tty

from venomx.cli.errors import Asked, human
from venomx.cli.termguard import TermGuard
from venomx.client import Client
from venomx.visible import for_terminal, visible
from venomx.wire import Reading, VenomxError

DETACH = b"\x1c"
# On a terminal the pane is shown on the alternate screen, as tmux does, so that leaving
# gives the person their screen back; only what draws reaches the terminal (TermGuard),
# and whatever modes the pane's program turned on (mouse reporting, bracketed paste, a
# hidden cursor, application keys, colours) are turned off again on the way out, which
# foundation §8's "restoring the terminal" means.
ENTER = b"\x1b[?1049h\x1b[H\x1b[2J"
LEAVE = b"\x1b[?1049l"
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


def run_attach(pane: str, readonly: bool, sock: str | None, token: str | None) -> int:
    try:
        view = Client(sock, token)
        keys = None if readonly else Client(sock, token)
    except VenomxError as err:
        print(human(err, Asked(sock, token)), file=sys.stderr)
        return err.exit_code
    rid = view.start("pane.attach", {"pane": pane})
    # a closed stdin is /dev/null by now (std_descriptors): end of file, as from a pipe
    fd = sys.stdin.fileno() if sys.stdin is not None else 0
    saved = termios.tcgetattr(fd) if os.isatty(fd) else None
    out = sys.stdout.buffer
    screen = out.isatty()
    guard = TermGuard.for_terminal(out.fileno(), alternate=False) if screen else None
    detached = threading.Event()
    refused: list[VenomxError] = []  # the keystroke the daemon refused, said on leaving
    typed = Typed()

    def read_keys() -> None:
        # Reading never waits on a send: Ctrl-\ must detach at once even while a pane
        # that does not read its input holds up the keys typed before it.
        while True:
            try:
                data = os.read(fd, 4096)
            except OSError:
                data = b""
            if not data or DETACH in data:
                detached.set()
                typed.close()
                with contextlib.suppress(VenomxError):  # the view may have ended first
                    view.cancel(rid)
                return
            if keys is not None:
                typed.put(data)

    def send_keys() -> None:
        # After a refusal (no write right, the pane going) the rest are dropped, as a
        # read-only attach drops them; after a pane too slow to take them, those only.
        typing = True
        while (data := typed.take()) is not None:
            if not typing or keys is None:
                continue
            try:
                keys.call("pane.send", {"pane": pane, "data": base64.b64encode(data).decode()})
            except VenomxError as err:
                typing = not ends_typing(err.code)
                if err.code not in ENDING and not refused:
                    refused.append(err)

    code = 0
    said = ""
    ended = False  # the view's last frame arrived (not a fault of ours on the way)
    try:
        if screen:
            out.write(ENTER)
        if saved is not None:
            tty.setraw(fd)
        if keys is not None or saved is not None:
            # read-only from a pipe or /dev/null: nothing to type and no end-of-file
            # detach, so it can follow a pane into a log until the pane exits
            threading.Thread(target=read_keys, daemon=True).start()
            threading.Thread(target=send_keys, daemon=True).start()
        while True:
            frame = view.read()
            if frame.get("id") != rid:
                continue
            if "item" in frame:
                with Reading("an attach item: "):
                    item = frame["item"]
                    chunk = item.get("screen", {}).get("data") or item.get("data")
                    data = base64.b64decode(chunk) if chunk else b""
                if data:
                    out.write(data if guard is None else guard.feed(data))
                    out.flush()
                if guard is not None and guard.repaint_wanted:
                    # the program left its alternate screen for a primary one this
                    # terminal does not have: a new attach starts with its repaint
                    guard.repaint_wanted = False
                    guard.resync()
                    view.cancel(rid)
                    rid = view.start("pane.attach", {"pane": pane})
                    if detached.is_set():
                        view.cancel(rid)
                continue
            if "error" in frame:
                failure = VenomxError.from_dict(frame["error"])
                if failure.code != "cancelled":
                    code = failure.exit_code
                    said = visible(f"venomx: {failure.code}: {failure.message}")
            ended = True
            break
    except VenomxError as err:
        code = err.exit_code
        said = visible(f"venomx: {err.code}: {err.message}")
    finally:
        typed.close()
        if saved is not None:
            # typing not yet read was meant for the pane, not for the shell after us
            termios.tcflush(fd, termios.TCIFLUSH)
            termios.tcsetattr(fd, termios.TCSADRAIN, saved)
        if guard is not None:
            out.write(guard.restore().encode() + LEAVE)
        if code == 0 and ended:
            out.write(b"[detached]\r\n" if detached.is_set() else b"[pane exited]\r\n")
        out.flush()
        if refused and code == 0:  # the view ended well; the keys did not all arrive
            code = refused[0].exit_code
            lost = "keys after it were" if ends_typing(refused[0].code) else "those keys were"
            said = visible(f"venomx: {refused[0].code}: {refused[0].message} ({lost} not sent)")
        if typed.dropped and not said:
            said = (
                f"venomx: {typed.dropped} bytes of typing were not sent: the pane was not "
                "taking its input"
            )
        if said:  # after the alternate screen is gone, or it would go with it
            sys.stderr.write(for_terminal(said, sys.stderr) + "\n")
        view.close()
        if keys is not None:
            keys.close()
    return code
