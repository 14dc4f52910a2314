"""Commands that are not verbs: serve, attach, events (for humans), completion, skill, mcp."""

from __future__ import annotations

import json
import os
import sys
from typing import Any

import click

from venomx.cli.errors import Asked, emit_error
from venomx.cli.options import socket_option, with_socket
from venomx.paths import socket_path
from venomx.visible import json_line
from venomx.wire import Reading, VenomxError, dumps


@click.command("serve")
@click.option(
    "--socket",
    "socket_",
    default=None,
    metavar="PATH",
    help="Socket path [default: $VENOMX_SOCKET, else $XDG_RUNTIME_DIR/venomx/default.sock]",
)
@click.option("--config", "config_file", default=None, metavar="PATH", help="TOML config file")
@click.option("--detach", is_flag=True, help="Run in the background; return once serving")
@click.option(
    "--log-file",
    default=None,
    metavar="PATH",
    help="Append the log here (rotated by log.max_bytes; SIGHUP reopens it); "
    "default stderr, or venomx.log beside the socket with --detach",
)
@click.option(
    "--log-level",
    default="info",
    show_default=True,
    type=click.Choice(["debug", "info", "warning", "error"]),
    help="The least severe log records written",
)
@click.option("--test-seams", is_flag=True, help="Enable the seam.* verbs (tests only)")
@click.option("--json", "as_json", is_flag=True, help="With --detach: print JSON")
def serve(
    socket_: str | None,
    config_file: str | None,
    detach: bool,
    log_file: str | None,
    log_level: str,
    test_seams: bool,
    as_json: bool,
) -> None:
    """Run the daemon, in the foreground unless --detach.

    Under systemd it reports readiness (Type=notify) and serves the socket it is passed
    (socket activation); see contrib/systemd and docs/operations.md.
    """
    from venomx.serve import run_daemon

    path = os.path.abspath(socket_path(socket_))
    log_path = os.path.abspath(log_file) if log_file else None
    if not detach:
        sys.exit(run_daemon(path, config_file, test_seams, log_level, log_file=log_path))
    from venomx.daemon import ancestry

    launched_in = ancestry.launched_from(os.getpid())  # before we leave them
    r, w = os.pipe2(os.O_CLOEXEC)  # the daemon's children must not hold the ready pipe
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            os.close(r)
            os.setsid()
            if os.fork() != 0:
                os._exit(0)
            devnull = os.open(os.devnull, os.O_RDWR | os.O_CLOEXEC)
            for fd in (0, 1, 2):  # stderr becomes the log file once it is checked and open
                os.dup2(devnull, fd)
            os.close(devnull)
            code = run_daemon(
                path,
                config_file,
                test_seams,
                log_level,
                ready_fd=w,
                log_file=log_path,
                detached=True,
                launched_in=launched_in,
            )
        finally:
            os._exit(code)
    os.close(w)
    os.waitpid(pid, 0)
    data = b""
    while chunk := os.read(r, 4096):
        data += chunk
    os.close(r)
    if not data:
        click.echo(
            "venomx: unavailable.start: the daemon did not start (see its log, "
            f"{log_path or 'venomx.log beside the socket'})",
            err=True,
        )
        sys.exit(6)
    info = json.loads(data)
    if "error" in info:
        err = VenomxError.from_dict(info["error"])
        if as_json:
            click.echo(dumps({"error": err.to_dict()}).decode())
        else:
            click.echo(f"venomx: {err.code}: {err.message}", err=True)
        sys.exit(err.exit_code)
    click.echo(
        dumps(info).decode()
        if as_json
        else f"venomx serving on {info['socket']} (pid {info['pid']}, {info['source']})"
    )


@click.command("attach")
@click.option("--pane", required=True, metavar="PANE", help="The pane to watch")
@click.option("--readonly", is_flag=True, help="Only watch; send no input")
@with_socket
@click.option(
    "--token",
    default=None,
    metavar="TOKEN",
    help="A principal token, or @owner [default: $VENOMX_TOKEN]",
)
def attach(pane: str, readonly: bool, socket_: str | None, token: str | None) -> None:
    """Watch a pane on this terminal and type into it; Ctrl-\\ detaches."""
    from venomx.cli.attach import run_attach

    sys.exit(run_attach(pane, readonly, socket_, token or os.environ.get("VENOMX_TOKEN")))


def event_line(ev: dict[str, Any]) -> str:
    data = " ".join(
        f"{k}={json.dumps(v, separators=(',', ':'))}" for k, v in ev.get("data", {}).items()
    )
    return f"{ev['seq']:>6} {ev['ts']} {ev['type']:<24} {data}".rstrip()


def events_cmd(
    ctx: click.Context,
    follow: bool,
    after: int | None,
    as_json: bool,
    socket_: str | None,
    token: str | None,
) -> None:
    from venomx.client import Client

    if ctx.invoked_subcommand:
        return
    tok = token or os.environ.get("VENOMX_TOKEN") or None
    try:
        with Client(socket_, tok) as c, Reading():
            if follow:
                params: dict[str, Any] = {"snapshot": False}
                if after is not None:
                    params["after"] = after
                for item in c.stream("events.subscribe", params):
                    if "event" in item:
                        ev = item["event"]
                        click.echo(json_line(ev).decode() if as_json else event_line(ev))
            else:
                res = c.call("events.read", {} if after is None else {"after": after})
                for ev in res["events"]:
                    click.echo(json_line(ev).decode() if as_json else event_line(ev))
    except VenomxError as err:
        emit_error(err, as_json, Asked(socket_, tok))
    except KeyboardInterrupt:
        sys.exit(0)


@click.command("skill")
def skill() -> None:
    """Print the agent skill (how to use venomx safely)."""
    from venomx.manifest.generate import skill_md

    click.echo(skill_md(), nl=False)


@click.command("mcp")
@with_socket
@click.option(
    "--all-tools", is_flag=True, help="List every tool, not only those the principal can ever call"
)
def mcp(socket_: str | None, all_tools: bool) -> None:
    """Serve the verbs as MCP tools on stdio."""
    from venomx.mcp import main

    main(socket_, all_tools)


def command(name: str, root: click.Group) -> click.Command:
    """One of the hand-written commands (``HAND_WRITTEN``), by name."""
    if name == "exec":
        from venomx.cli.exec_command import exec_cmd

        return exec_cmd
    if name == "completion":

        @click.command("completion")
        @click.argument("shell", type=click.Choice(["bash", "zsh", "fish"]))
        def completion(shell: str) -> None:
            """Print a shell completion script (source it from your shell's rc file)."""
            from click.shell_completion import get_completion_class

            cls = get_completion_class(shell)
            assert cls is not None
            click.echo(cls(root, {}, "venomx", "_VENOMX_COMPLETE").source())

        return completion
    found: click.Command = {"serve": serve, "attach": attach, "skill": skill, "mcp": mcp}[name]
    return found


def extend(cmd: click.Command) -> None:
    """What the hand-written side adds to ``venomx events`` (``venomx run log`` is added by
    ``venomx.cli.app.finish``, so that ``run wait`` does not import this module)."""
    if cmd.name == "events" and isinstance(cmd, click.Group):
        extend_events(cmd)


def extend_events(events: click.Group) -> None:
    events.invoke_without_command = True
    events.help = (
        "Show events: `venomx events [--follow] [--after N] [--json]`, or the verbs below."
    )
    events.params.extend(
        [
            click.Option(["--follow"], is_flag=True, help="Keep printing live events"),
            click.Option(["--after"], type=int, default=None, help="Start after this seq"),
            click.Option(["--json", "as_json"], is_flag=True, help="One line of JSON per event"),
            socket_option(),
            click.Option(
                ["--token"],
                default=None,
                metavar="TOKEN",
                help="A principal token, or @owner [default: $VENOMX_TOKEN]",
            ),
        ]
    )
    events.callback = click.pass_context(events_cmd)
