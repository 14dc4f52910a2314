"""The hot CLI commands cost about one interpreter start (issue 19 §1): after a real call
to a real daemon, none of the heavy modules is loaded. Structural, not timed."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tests.helpers import ROOT, Daemon
from venomx.client import Client
from venomx.wire import VenomxError

HEAVY = ("asyncio", "ssl", "logging", "concurrent", "pyte", "psutil", "mcp", "msgpack", "anyio")
# A well-formed call of a generated verb is parsed without click (venomx.cli.quick)
CLICK = ("click", "venomx.cli.tree", "venomx.cli.options")
# Loaded only where help or another command needs them: click's gettext lookup of its help
# option's text imports locale; the hand-written commands are built when one is invoked;
# a call reads its verb's facts from venomx.cli.facts_data, help reads the manifest.
AVOIDED = (
    "locale",
    "venomx.cli.commands",
    "venomx.cli.exec_command",
    "venomx.manifest",
    "venomx.manifest.verbs",
    "venomx.manifest.schema",
    "venomx.manifest.generate",
)
PROBE = (
    "import sys\n"
    "sys.argv = ['venomx', *sys.argv[1:]]\n"
    "try:\n"
    "    from venomx.cli.app import main\n"
    "    main()\n"
    "except SystemExit as e:\n"
    "    code = e.code\n"
    "print('\\n' + '\\x00'.join(sorted(sys.modules)), file=sys.stderr)\n"
)


def modules_after(d: Daemon, *args: str) -> tuple[str, set[str]]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("VENOMX_")}
    env["VENOMX_SOCKET"] = d.socket
    r = subprocess.run(
        [sys.executable, "-c", PROBE, *args, "--token", "@owner"],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        timeout=30,
    )
    return r.stdout, set(r.stderr.rstrip("\n").rsplit("\n", 1)[-1].split("\0"))


@pytest.fixture(scope="module")
def finished(shared_daemon: Daemon) -> tuple[Daemon, str, str]:
    d = shared_daemon
    s = d.call("session.create")["session"]
    r = d.call("run", {"key": "imports", "session": s, "argv": ["echo", "hi"]})
    d.wait_exit(r["run"])
    return d, r["run"], r["pane"]


@pytest.mark.parametrize(
    "args",
    [
        ("whoami", "--json"),
        ("run", "wait", "--run", "{run}"),
        ("run", "wait", "--run", "{run}", "--output=false", "--json"),
        ("run", "get", "--run", "{run}", "--json"),
        ("run", "list"),
        ("pane", "capture-rows", "--pane", "{pane}"),
    ],
)
def test_hot_commands_load_nothing_heavy(
    finished: tuple[Daemon, str, str], args: tuple[str, ...]
) -> None:
    d, run, pane = finished
    out, mods = modules_after(d, *(a.format(run=run, pane=pane) for a in args))
    assert "venomx.cli.app" in mods and "venomx.client" in mods, mods
    heavy = sorted(m for m in mods if m.split(".")[0] in HEAVY)
    assert heavy == [], heavy
    assert not any(m.startswith(("venomx.daemon", "venomx.mcp", "workers")) for m in mods)
    assert sorted(mods & set(AVOIDED)) == []
    assert sorted(m for m in mods if m.split(".")[0] == "click" or m in CLICK) == []
    if args[0] == "whoami":
        assert json.loads(out)["principal"] == "g0"
    else:
        assert out.strip()  # the command really ran


def test_pipelined_hello_answers_and_refuses_as_a_separate_one(shared_daemon: Daemon) -> None:
    """The CLI sends hello with its request (one round trip): the same answers, and a
    refused hello is still the error the caller gets."""
    d = shared_daemon
    with Client(d.socket, "@owner") as plain, Client(d.socket, "@owner", pipelined=True) as c:
        assert c.call("whoami") == plain.call("whoami")
        assert c.hello == plain.hello
        assert c.call("whoami")["principal"] == "g0"  # the connection goes on
    with Client(d.socket, "vx_not_a_token", pipelined=True) as c:
        with pytest.raises(VenomxError) as e:
            c.call("whoami")
        assert e.value.code == "denied.token"
    with Client(d.socket, "vx_not_a_token", pipelined=True) as c:
        with pytest.raises(VenomxError) as e:
            list(c.stream("events.subscribe", {}))
        assert e.value.code == "denied.token"
    r = d.cli("whoami", "--json", token="vx_not_a_token")
    assert r.code == 4 and json.loads(r.out)["error"]["code"] == "denied.token"


def test_exec_loads_neither_click_nor_asyncio(shared_daemon: Daemon) -> None:
    """``venomx exec`` (the CI runner's call) is parsed without click too; it reads the
    manifest for its checks, and keeps its own synchronous loop."""
    out, mods = modules_after(shared_daemon, "exec", "--json", "--", "echo", "quick")
    assert json.loads(out)["outcome"] == "succeeded"
    assert "venomx.cli.exec" in mods
    heavy = sorted(m for m in mods if m.split(".")[0] in HEAVY)
    assert heavy == [], heavy
    assert sorted(m for m in mods if m.split(".")[0] == "click" or m in CLICK) == []
