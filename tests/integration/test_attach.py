"""Attach (§8): the stream for programs, and ``venomx attach`` for humans, inside tmux."""

from __future__ import annotations

import base64
import contextlib
import os
import shutil
import subprocess
import uuid
from pathlib import Path

import pytest

from tests.helpers import PY, Daemon, wait_for
from venomx.wire import VenomxError
from workers.vt import UNSTATE


def test_attach_stream_items_and_exit(daemon: Daemon) -> None:
    s = daemon.call("session.create")["session"]
    w = daemon.call(
        "window.create",
        {"session": s, "argv": ["sh", "-c", "echo one; read x; echo $x"], "cols": 20, "rows": 5},
    )
    wait_for(
        lambda: "one" in daemon.call("pane.capture_rows", {"pane": w["pane"]})["lines"][0],
        10,
        "first line",
    )
    c = daemon.client()
    stream = c.stream("pane.attach", {"pane": w["pane"]})
    first = next(stream)["screen"]
    assert first["cols"] == 20 and b"one" in base64.b64decode(first["data"])
    offset = first["offset"]
    daemon.call("pane.send", {"pane": w["pane"], "text": "two\r"})
    data = b""
    for item in stream:
        if "result" in item:
            final = item["result"]["exit"]
            break
        assert item["offset"] == offset + len(base64.b64decode(item["data"]))
        offset = item["offset"]
        data += base64.b64decode(item["data"])
    assert b"two" in data and final["offset"] == offset and final["exit_code"] == 0


def test_attach_after_an_offset_replays_an_ended_panes_bytes(daemon: Daemon) -> None:
    """An attach with ``after`` that comes once the pane has ended (venomx exec's, for a
    fast command) gets the bytes after that offset, as from a live pane's sentinel, then
    the exit; without ``after``, or past what is held, the final screen."""
    s = daemon.call("session.create")["session"]
    out = b"".join(b"line %d " % i + b"x" * 300 + b"\n" for i in range(50))
    script = f"import sys; sys.stdout.buffer.write({out!r})"
    r = daemon.call("run", {"key": "replay", "session": s, "argv": [PY, "-c", script]})
    done = daemon.wait_exit(r["run"])
    assert done["outcome"] == "succeeded"
    final = daemon.call("pane.capture_rows", {"pane": r["pane"]})["offset"]
    for after in (0, 1234, final):
        items = list(daemon.client().stream("pane.attach", {"pane": r["pane"], "after": after}))
        assert items[0] == {
            "screen": {"cols": 80, "rows": 24, "offset": after, "data": "", "replay": True}
        }
        data = b"".join(base64.b64decode(i["data"]) for i in items[1:-1])
        shown = out.replace(b"\n", b"\r\n")  # the terminal's ONLCR
        assert data == shown[after:] and len(shown) == final
        assert items[-1]["result"]["exit"] == {"offset": final, "exit_code": 0}
    for params in ({}, {"after": final + 1}):
        items = list(daemon.client().stream("pane.attach", {"pane": r["pane"], **params}))
        assert "replay" not in items[0]["screen"] and b"line 49" in base64.b64decode(
            items[0]["screen"]["data"]
        )


def test_the_repaint_carries_the_programs_modes(daemon: Daemon) -> None:
    """A person attaching to a curses program in keypad mode must type what it expects
    (ESC O A for Up): the repaint turns the terminal's application cursor keys on; and
    mouse reports, bracketed paste, a hidden cursor and the scroll region, or what the
    person pastes runs line by line and what scrolls in the region is drawn wrong."""
    s = daemon.call("session.create")["session"]
    modes = "\\033[?1h\\033[?1000;1006h\\033[?2004h\\033[?25l\\033[2;5r\\033[9;1H"
    shell = f"printf '{modes}ready\\n'; sleep 30"
    w = daemon.call("window.create", {"session": s, "argv": ["sh", "-c", shell]})
    wait_for(
        lambda: "ready" in "".join(daemon.call("pane.capture_rows", {"pane": w["pane"]})["lines"]),
        10,
        "ready",
    )
    stream = daemon.client().stream("pane.attach", {"pane": w["pane"]})
    repaint = base64.b64decode(next(stream)["screen"]["data"])
    # a terminal that showed the pane before (an attach starting again) draws afresh
    assert repaint.startswith(UNSTATE)
    assert repaint.endswith(
        b"\x1b[2;5r\x1b[10;1H\x1b[?1h\x1b[?1000h\x1b[?1006h\x1b[?2004h\x1b[?25l"
    ), repaint
    daemon.call("pane.kill", {"pane": w["pane"], "grace_ms": 0})


@pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")
def test_venomx_attach_in_tmux(daemon: Daemon) -> None:
    s = daemon.call("session.create")["session"]
    w = daemon.call("window.create", {"session": s, "argv": ["cat"], "cols": 40, "rows": 10})
    daemon.call("pane.send", {"pane": w["pane"], "text": "before-attach\r"})
    name = f"vx{uuid.uuid4().hex[:8]}"
    sock = f"/tmp/{name}.tmux"
    env = {**os.environ, "VENOMX_SOCKET": daemon.socket, "VENOMX_TOKEN": "@owner"}
    tmux = ["tmux", "-S", sock]
    subprocess.run(
        [
            *tmux,
            "new-session",
            "-d",
            "-s",
            name,
            "-x",
            "60",
            "-y",
            "15",
            # the shell prints the status, and the pane stays to be read
            f"{PY} -m venomx attach --pane {w['pane']}; echo attach-exit=$?; sleep 60",
        ],
        env=env,
        check=True,
    )

    def screen() -> str:
        return subprocess.run(
            [*tmux, "capture-pane", "-p", "-t", name], capture_output=True, text=True
        ).stdout

    try:
        wait_for(lambda: "before-attach" in screen(), 20, "repaint in tmux")
        subprocess.run([*tmux, "send-keys", "-t", name, "typed-in-tmux", "Enter"], check=True)
        wait_for(lambda: screen().count("typed-in-tmux") >= 2, 20, "typed text echoed by cat")
        wait_for(
            lambda: any(
                "typed-in-tmux" in ln
                for ln in daemon.call("pane.capture_rows", {"pane": w["pane"]})["lines"]
            ),
            10,
            "input reached the pane",
        )
        # the program turns modes on in the person's terminal; leaving turns them off
        modes = base64.b64encode(b"\x1b[?25l\x1b[?1000h\x1b[?2004h\r").decode()
        daemon.call("pane.send", {"pane": w["pane"], "data": modes})
        flags = "#{alternate_on} #{cursor_flag} #{mouse_any_flag}"

        def shown() -> str:
            return subprocess.run(
                [*tmux, "display", "-p", "-t", name, flags], capture_output=True, text=True
            ).stdout.strip()

        wait_for(lambda: shown() == "1 0 1", 20, "the modes on, on the alternate screen")
        subprocess.run([*tmux, "send-keys", "-t", name, "C-\\"], check=True)
        wait_for(lambda: "attach-exit=" in screen(), 20, "venomx attach exited")
        assert "[detached]" in screen() and "attach-exit=0" in screen(), screen()
        assert shown() == "0 1 0"
        # an error is said after the alternate screen is left, or it would go with it
        subprocess.run(
            [*tmux, "new-window", "-t", name, f"{PY} -m venomx attach --pane p999; sleep 60"],
            env=env,
            check=True,
        )
        wait_for(lambda: "venomx: not_found.pane" in screen(), 20, "the error on the screen")
        assert daemon.call("pane.list")["panes"][0]["state"] == "running"  # detach stops nothing
    finally:
        subprocess.run([*tmux, "kill-server"], capture_output=True)
        with contextlib.suppress(FileNotFoundError):
            os.unlink(sock)


@pytest.mark.parametrize("stdin", ["devnull", "closed"])
def test_readonly_attach_from_a_pipe_follows_the_pane_until_it_exits(
    daemon: Daemon, tmp: Path, stdin: str
) -> None:
    """stdin at end of file is not a detach for a read-only attach: it can feed a log.
    A closed stdin (``<&-``, as a CI step or a service may give) reads as /dev/null."""
    gate = tmp / "gate"
    s = daemon.call("session.create")["session"]
    w = daemon.call(
        "window.create",
        {
            "session": s,
            "argv": [
                "sh",
                "-c",
                f"echo before; while [ ! -e {gate} ]; do sleep 0.05; done; echo after",
            ],
        },
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("VENOMX_")}
    env.update({"VENOMX_SOCKET": daemon.socket, "VENOMX_TOKEN": "@owner"})
    proc = subprocess.Popen(
        [PY, "-m", "venomx", "attach", "--pane", w["pane"], "--readonly"],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        env=env,
        preexec_fn=(lambda: os.close(0)) if stdin == "closed" else None,
    )
    try:
        assert proc.stdout is not None
        seen = b""
        while b"before" not in seen:
            chunk = os.read(proc.stdout.fileno(), 4096)
            assert chunk, seen
            seen += chunk
        assert proc.poll() is None  # still attached although stdin is at end of file
        gate.touch()
        rest, _ = proc.communicate(timeout=30)
        assert b"after" in seen + rest
        assert proc.returncode == 0
    finally:
        proc.kill()
        proc.wait()


def test_an_attach_that_cannot_fit_ends_alone(daemon: Daemon) -> None:
    """A reader whose frame cannot hold the repaint gets unsupported.result_size; the pane
    it watched runs on, and its run ends with the program's own status and no fault."""
    s = daemon.call("session.create")["session"]
    prog = "import sys; print('x' * 7000, flush=True); sys.stdin.readline(); sys.exit(3)"
    r = daemon.call(
        "run", {"key": "big", "session": s, "argv": [PY, "-c", prog], "cols": 100, "rows": 80}
    )
    wait_for(
        lambda: "x" * 100 in daemon.call("pane.capture_rows", {"pane": r["pane"]})["lines"][69],
        10,
        "a full screen",
    )
    sentinel = daemon.titled(f"venomx-sentinel {r['pane']}")
    assert len(sentinel) == 1
    for _ in range(3):
        with daemon.client(token=None, max_frame=4096) as reader:
            with pytest.raises(VenomxError) as err:
                next(reader.stream("pane.attach", {"pane": r["pane"]}))
            assert err.value.code == "unsupported.result_size" and err.value.data["bytes"] > 4096
    assert daemon.call("run.get", {"run": r["run"], "output": False})["state"] == "running"
    assert daemon.titled(f"venomx-sentinel {r['pane']}") == sentinel
    daemon.call("pane.send", {"pane": r["pane"], "text": "\r"})
    done = daemon.wait_exit(r["run"])
    assert (done["exit_code"], done["outcome"]) == (3, "failed") and "fault" not in done


VIEWED = r"""
import sys
w = sys.stdout.write
w("primary-text\r\n"); sys.stdout.flush(); input()
w("\x1b]2;evil-title\x07\x1b]52;c;cm0gLXJmIH4K\x07\x1b[21t\x1b[?1049h\x1b[Halt-text")
sys.stdout.flush(); input()
w("\x1b[?1049l"); sys.stdout.flush(); input()
"""


def test_venomx_attach_shows_a_terminal_only_what_draws(daemon: Daemon) -> None:
    """On a terminal, attach keeps the program's title, clipboard write and window report
    from it; the program's alternate screen is drawn in the view, and leaving it brings
    the primary screen back by a new repaint, as the terminal never had it."""
    s = daemon.call("session.create")["session"]
    p = daemon.call("window.create", {"session": s, "argv": [PY, "-c", VIEWED]})["pane"]
    wait_for(
        lambda: "primary-text" in daemon.call("pane.capture_rows", {"pane": p})["lines"][0],
        10,
        "the program's first line",
    )
    main, sub = os.openpty()
    env = {**os.environ, "VENOMX_SOCKET": daemon.socket, "VENOMX_TOKEN": "@owner"}
    view = subprocess.Popen(
        [PY, "-m", "venomx", "attach", "--readonly", "--pane", p],
        stdin=subprocess.DEVNULL,
        stdout=sub,
        env=env,
    )
    os.close(sub)
    shown = b""

    def until(text: bytes, start: int = 0) -> int:
        nonlocal shown
        while text not in shown[start:]:
            shown += os.read(main, 65536)
        return shown.index(text, start)

    try:
        until(b"primary-text")
        daemon.call("pane.send", {"pane": p, "text": "\r"})
        alt = until(b"alt-text")
        daemon.call("pane.send", {"pane": p, "text": "\r"})
        back = until(b"primary-text", alt)
        daemon.call("pane.send", {"pane": p, "text": "\r"})
        assert view.wait(30) == 0
    finally:
        view.kill()
        view.wait()
        with contextlib.suppress(OSError):
            while chunk := os.read(main, 65536):
                shown += chunk
        os.close(main)
    for kept_out in (b"\x1b]", b"evil-title", b"\x1b[21t"):
        assert kept_out not in shown, shown
    assert shown.count(b"\x1b[?1049h") == 1  # the view's own alternate screen only
    # the repaint after the program's alternate screen: a cleared view, then the
    # primary screen's text
    assert b"\x1b[H\x1b[2J" in shown[alt:back], shown[alt:]
    assert b"[pane exited]" in shown


def attach_on_a_terminal(
    daemon: Daemon, pane: str, token: str | None
) -> tuple[int, subprocess.Popen[bytes]]:
    """``venomx attach`` on a new terminal; its main side (what the person's terminal
    reads and types into) and the process, whose stderr is a pipe."""
    main, sub = os.openpty()
    env = {k: v for k, v in os.environ.items() if not k.startswith("VENOMX_")}
    env["VENOMX_SOCKET"] = daemon.socket
    if token is not None:
        env["VENOMX_TOKEN"] = token
    view = subprocess.Popen(
        [PY, "-m", "venomx", "attach", "--pane", pane],
        stdin=sub,
        stdout=sub,
        stderr=subprocess.PIPE,
        env=env,
    )
    os.close(sub)
    return main, view


def test_ctrl_backslash_detaches_after_a_refused_keystroke(daemon: Daemon) -> None:
    """A caller who may read but not write attaches, types, and still gets out with
    Ctrl-\\: the refusal is said on leaving (with its exit status), not a stuck terminal."""
    s = daemon.call("session.create")["session"]
    p = daemon.call("window.create", {"session": s, "argv": ["cat"]})["pane"]
    main, view = attach_on_a_terminal(daemon, p, None)  # the anonymous caller, read only
    shown = b""

    def refused() -> bool:
        audit = daemon.call("audit.list", {"limit": 10000})["records"]
        return any(a["code"] == "denied.write" and a["verb"] == "pane.send" for a in audit)

    try:
        while b"\x1b[?1049h" not in shown:  # the view is up, the terminal raw
            shown += os.read(main, 65536)
        os.write(main, b"typed")
        wait_for(refused, 20, "the keystroke refused")
        os.write(main, b"\x1c")
        assert view.wait(30) == 4
        assert view.stderr is not None
        said = view.stderr.read().decode()
        assert "venomx: denied.write" in said and "keys after it were not sent" in said, said
        with contextlib.suppress(OSError):
            while chunk := os.read(main, 65536):
                shown += chunk
        assert b"[detached]" in shown, shown
        assert daemon.call("pane.list")["panes"][0]["state"] == "running"
        assert "typed" not in "".join(daemon.call("pane.capture_rows", {"pane": p})["lines"])
    finally:
        view.kill()
        view.wait()
        os.close(main)


def test_ctrl_backslash_detaches_at_once_behind_a_paste_the_pane_does_not_read(
    daemon: Daemon,
) -> None:
    """A pane whose program does not read its input takes a paste at the pace of its
    terminal's buffer (each send waits, up to timeout.input): Ctrl-\\ after a 128 KiB
    paste waited behind it, ~5 s per 4 KiB, over two minutes. It detaches at once now,
    and the typing not sent is said, not left to the shell after the view."""
    s = daemon.call("session.create")["session"]
    prog = "import sys, time, tty; tty.setraw(0); print('ready', flush=True); time.sleep(300)"
    p = daemon.call("window.create", {"session": s, "argv": [PY, "-c", prog]})["pane"]
    wait_for(
        lambda: "ready" in "".join(daemon.call("pane.capture_rows", {"pane": p})["lines"]),
        20,
        "the program in raw mode",
    )
    main, view = attach_on_a_terminal(daemon, p, "@owner")
    shown = b""
    try:
        while b"\x1b[?1049h" not in shown:
            shown += os.read(main, 65536)
        for _ in range(256):  # written as a terminal takes it: attach must read it all
            os.write(main, b"y" * 512)
        os.write(main, b"\x1c")
        assert view.wait(20) in (0, 7)  # ok, or the send that timed out, said on leaving
        assert view.stderr is not None
        said = view.stderr.read().decode()
        assert "not sent" in said, said
        with contextlib.suppress(OSError):
            while chunk := os.read(main, 65536):
                shown += chunk
        assert b"[detached]" in shown, shown[-300:]
        assert daemon.call("pane.list")["panes"][0]["state"] == "running"
    finally:
        view.kill()
        view.wait()
        os.close(main)
