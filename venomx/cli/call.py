"""One verb called and its result shown: the JSON line or the human rendering, and the
exit status (0, the error class's code, 9 for transport, or the result's exit field, as
``run wait``'s ``status``). Imports neither click nor the daemon."""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, NoReturn

from venomx.cli.errors import Asked, emit_error, program_of
from venomx.cli.out import echo
from venomx.cli.values import params_of
from venomx.visible import json_line
from venomx.wire import Reading, VenomxError, exit_status

if TYPE_CHECKING:
    from venomx.cli.facts import CliVerb
    from venomx.cli.render import Panes
    from venomx.client import Client


def renderer(verb: CliVerb) -> Callable[[dict[str, Any], Panes], str]:
    from venomx.cli.render import RENDERERS

    return RENDERERS[verb.render]


def pane_lookup(client: Client) -> Panes:
    """Pane records by ID, read once and only when a renderer asks (best effort: a
    renderer without them leaves the names out)."""
    cache: dict[str, dict[str, Any]] = {}
    done = False

    def panes() -> dict[str, dict[str, Any]]:
        nonlocal done
        if not done:
            done = True
            try:
                records = client.call("pane.list", {}).get("panes", [])
            except VenomxError:
                records = []
            cache.update({str(r.get("pane")): r for r in records if isinstance(r, dict)})
        return cache

    return panes


def readable(verb: CliVerb, result: dict[str, Any], panes: Panes | None = None) -> str:
    return renderer(verb)(result, panes or dict)


class Clock:
    """While a waiting verb blocks, the time waited on stderr, erased when it returns."""

    def __init__(self, on: bool, params: dict[str, Any]) -> None:
        self.on = on
        self.what = " ".join(str(v) for k, v in params.items() if k in ("run", "pane"))
        self.done = threading.Event()

    def tick(self) -> None:
        start = time.monotonic()
        while not self.done.wait(1.0):
            waited = int(time.monotonic() - start)
            sys.stderr.write(f"\r\x1b[Kvenomx: waiting for {self.what}: {waited} s")
            sys.stderr.flush()
        sys.stderr.write("\r\x1b[K")
        sys.stderr.flush()

    def __enter__(self) -> None:
        if self.on:
            self.thread = threading.Thread(target=self.tick, daemon=True)
            self.thread.start()

    def __exit__(self, *exc: object) -> None:
        if self.on:
            self.done.set()
            self.thread.join(1.0)


def dispatch(
    verb: CliVerb,
    raw: dict[str, str | None],
    trailing: list[str],
    as_json: bool,
    sock: str | None,
    token: str | None,
) -> NoReturn:
    """A parsed command line, however it was parsed: its params checked, then called."""
    try:
        params = params_of(verb, raw, trailing)
    except VenomxError as err:
        emit_error(err, as_json)
    call_verb(verb, params, sock, token or os.environ.get("VENOMX_TOKEN") or None, as_json)


def call_verb(
    verb: CliVerb, params: dict[str, Any], sock: str | None, token: str | None, as_json: bool
) -> NoReturn:
    from venomx.client import Client

    asked = Asked(sock, token, program_of(verb.name, params))
    try:
        with Client(sock, token, pipelined=True) as client:
            if verb.streams:
                for item in client.stream(verb.name, params):
                    # the items, then the result as its own line (foundation §4)
                    last = item["result"] if item.keys() == {"result"} else item
                    echo(json_line(last).decode())
                sys.exit(0)
            with Clock(verb.clock and not as_json and sys.stderr.isatty(), params):
                result = client.call(verb.name, params)
            text, status = shown(verb, result, as_json, client)
    except VenomxError as err:
        emit_error(err, as_json, asked)
    except KeyboardInterrupt:
        emit_error(VenomxError("cancelled", "interrupted", {}), as_json, asked)
    echo(text)
    sys.exit(status)


def shown(verb: CliVerb, result: dict[str, Any], as_json: bool, client: Client) -> tuple[str, int]:
    """The result as printed and the exit status it gives. A result of another shape than
    its verb's (not our daemon's, or a bug) is a transport error, never a traceback whose
    exit 1 a script would take for the run's status."""
    with Reading(f"{verb.name}'s result: "):
        if as_json:
            text = json_line(result).decode()
        else:
            from venomx.visible import for_terminal, visible

            text = for_terminal(visible(readable(verb, result, pane_lookup(client))), sys.stdout)
        return text, exit_of(verb, result)


def exit_of(verb: CliVerb, result: dict[str, Any]) -> int:
    if verb.exit_field is not None:
        return exit_status(result[verb.exit_field])
    if verb.fail_field is not None and result.get(verb.fail_field) == "fail":
        return 1
    return 0


__all__ = ["call_verb", "dispatch", "readable"]
