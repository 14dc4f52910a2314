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
from venomx.cli.typed import ENDING, Typed, ends_typing
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
