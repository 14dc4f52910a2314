"""The click commands for ``venomx exec`` and ``venomx run log`` (their work lives in
``venomx.cli.exec`` and ``venomx.cli.runlog``)."""

from __future__ import annotations

import os
import sys
from typing import Any

import click

from venomx.cli.options import ManifestInt, with_socket
from venomx.manifest.verbs import verb_by_name


def deadline_max() -> int:
    run = verb_by_name("run")
    p = run.param("deadline_ms") if run is not None else None
    return p.max if p is not None and p.max is not None else 2**31


@click.command(
    "exec",
    context_settings={"allow_interspersed_args": False},
    short_help="Run a command to completion, streaming its output; exit with its status.",
)
@click.option(
    "--session",
    metavar="SESSION",
    help="A session ID or name, found or created [default: the session named "
    "'default'; inside a pane, a split of that pane]",
)
@click.option("--key", metavar="KEY", help="The run's key [default: a new unique one]")
@click.option("--cwd", metavar="DIR", help="Working directory [default: the current one]")
@click.option(
    "--env", "env", multiple=True, metavar="NAME=VALUE", help="Set a variable (repeatable)"
)
@click.option(
    "--clean-env",
    is_flag=True,
    help="Do not pass your environment: the command gets the daemon's",
)
@click.option(
    "--stdin",
    "send_stdin",
    is_flag=True,
    help="Type your stdin into the command's terminal, then end of file "
    "[default: end of file at once, or your keys when stdin is a terminal]",
)
@click.option(
    "--detach-on-interrupt",
    is_flag=True,
    help="On SIGINT/SIGTERM leave the run going and print its ID, instead of cancelling it",
)
@click.option(
    "--deadline-ms",
    type=ManifestInt(1, deadline_max()),
    default=None,
    help="Terminate the command this many milliseconds after it starts (status 124)",
)
@click.option("--cols", type=ManifestInt(1, 65535), default=None, help="Pane columns")
@click.option("--rows", type=ManifestInt(1, 65535), default=None, help="Pane rows")
@click.option(
    "--keep-escapees",
    is_flag=True,
    help="Leave processes the command left behind running [default: end them once it "
    "completes, with run.cleanup]",
)
@click.option(
    "--json",
    "as_json",
    is_flag=True,
    help="Print the final run record as JSON on stdout; the output goes to stderr",
)
@with_socket
@click.option(
    "--token",
    default=None,
    metavar="TOKEN",
    help="A principal token [default: $VENOMX_TOKEN, else @owner outside a pane]",
)
@click.argument("command", nargs=-1, required=True, type=click.UNPROCESSED)
def exec_cmd(**given: Any) -> None:
    """Run COMMAND as a trusted run and stream its output while it runs.

    Exits with the run's status: the command's exit code, 128+N for signal N, 124 for
    the deadline, 125 when cancelled (SIGINT/SIGTERM to exec cancel the run with that
    signal), 127 when the program is not found and 126 when it cannot be executed.
    The outcome comes from the daemon's wait status, never from the output.

    \b
    Example:
      venomx exec -- make test
    """
    from venomx.cli.exec import exec_main

    exec_main(**given)


@click.command("log")
@click.option("--run", "run_id", required=True, metavar="RUN", help="The run")
@click.option("--follow", "-f", is_flag=True, help="Keep printing rows until the run completes")
@with_socket
@click.option(
    "--token", default=None, metavar="TOKEN", help="A principal token [default: $VENOMX_TOKEN]"
)
def run_log(run_id: str, follow: bool, socket_: str | None, token: str | None) -> None:
    """Print a run's output as text rows from the first retained one; with --follow,
    keep printing new rows until the run completes (resuming after a lost connection)."""
    from venomx.cli.runlog import print_log

    sys.exit(print_log(run_id, follow, socket_, token or os.environ.get("VENOMX_TOKEN")))
