"""``venomx run log --run R [--follow]``: a run's rows as text, by cursor.

Rows come from ``pane.capture_rows`` by row number, so a reconnect resumes at the next
row without repeating one. While the run is live, the row the terminal's cursor is on
(and anything below it) can still change, so only the rows above it are printed; once
the run has completed, the rest is final and printed down to the last non-blank row.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

from venomx.cli.errors import Asked, human
from venomx.client import Client, Pin, reconnecting
from venomx.visible import for_terminal
from venomx.wire import Reading, VenomxError

PAGE = 1000
POLL_MS = 500  # how long a follow waits for completion between looks at the rows
RECONNECT = 30.0  # seconds a follow keeps trying to reach the daemon again


class RowLog:
    """The cursor of one log: the next row to print and the epoch it counts in."""

    def __init__(
        self,
        run: str,
        say: Callable[[str], object] | None = None,
        flush: Callable[[], object] | None = None,
    ) -> None:
        self.run = run
        self.next = 0
        self.epoch: int | None = None
        self.say = say or (lambda text: sys.stdout.write(for_terminal(text, sys.stdout) + "\n"))
        self.flush = flush or sys.stdout.flush

    def print_rows(self, c: Client, pane: str, final: bool) -> None:
        """Every row from the cursor that can no longer change (all of them if final, but
        the blank rows after the last text)."""
        blank = 0
        while True:
            params: dict[str, Any] = {"pane": pane, "start": self.next, "limit": PAGE}
            if self.epoch is not None:
                params["epoch"] = self.epoch
            try:
                res = c.call("pane.capture_rows", params)
            except VenomxError as err:
                if err.code != "conflict.epoch":
                    raise
                self.say("[venomx: the pane was resized; its rows were renumbered]")
                self.epoch, self.next = None, 0
                continue
            if self.epoch is None:
                self.epoch = int(res["epoch"])
            oldest, start = int(res["oldest"]), int(res["start"])
            if start > self.next:
                self.say(f"[venomx: {start - self.next} rows were no longer retained]")
            lines = [str(x).rstrip() for x in res["lines"]]
            if final:  # blank rows are held back: after the last text they are the screen
                upto = len(lines)
                for line in lines:
                    if line:
                        for _ in range(blank):
                            self.say("")
                        blank = 0
                        self.say(line)
                    else:
                        blank += 1
            else:
                upto = max(0, min(len(lines), int(res["cursor"]["row"]) - start))
                for line in lines[:upto]:
                    self.say(line)
            self.flush()
            self.next = max(self.next, start + upto, oldest)
            if upto < PAGE:
                return

    def once(self, c: Client, follow: bool) -> bool:
        """Print what is final now; True once the run has completed and all is printed."""
        rec = c.call("run.get", {"run": self.run, "output": False})
        done = rec["state"] == "completed"
        if not done and follow:
            try:
                rec = c.call("run.wait", {"run": self.run, "output": False, "timeout_ms": POLL_MS})
                done = True
            except VenomxError as err:
                if err.code != "timeout.wait":
                    raise
        self.print_rows(c, rec["pane"], final=done or not follow)
        return done or not follow


def print_log(run: str, follow: bool, sock: str | None, token: str | None) -> int:
    log = RowLog(run)

    def work(c: Client) -> None:
        while not log.once(c, follow):
            pass

    pin = Pin(follow=False)  # the run's rows live on the daemon we first reached
    try:
        with Reading():  # a record or rows of another shape than their verb's
            reconnecting(
                lambda: Client(sock, token, pin=pin), work, RECONNECT if follow else 0, 0.5
            )
    except VenomxError as err:
        print(human(err, Asked(sock, token)), file=sys.stderr)
        return err.exit_code
    except KeyboardInterrupt:
        return 130
    return 0
