"""The state a verb may require of its target, and cwd resolution: checks, no effects.

Dispatch applies them from the verb's declared target (``venomx.manifest.verbs.Target``);
the spawn sequence applies them again in its commit turn, since a target can change
while a start is prepared.
"""

from __future__ import annotations

import os

from venomx.daemon.registry import Pane, Registry, Session, Window
from venomx.manifest.rules import check_cwd_form, utf8_ok, value_error
from venomx.manifest.verbs import CWD
from venomx.wire import VenomxError


def must_run(pane: Pane) -> None:
    """Splitting or sending needs a running pane (§6)."""
    if pane.state == "exited":
        raise VenomxError("conflict.pane_exited", f"pane {pane.id} has exited", {})
    if pane.state == "terminating":
        raise VenomxError("conflict.pane_terminating", f"pane {pane.id} is terminating", {})


def must_live(pane: Pane) -> None:
    """Resizing needs a pane that has not exited (a terminating one still has a PTY)."""
    if not pane.live:
        raise VenomxError("conflict.pane_exited", f"pane {pane.id} has exited", {})


def must_have_exited(pane: Pane) -> None:
    if pane.live:
        raise VenomxError("conflict.pane_live", f"pane {pane.id} is still running", {})


def not_removing(reg: Registry, target: Session | Window | Pane) -> None:
    """Nothing new goes into a container that a removal is emptying."""
    if isinstance(target, Session):
        if target.removing:
            raise VenomxError("conflict.removing", f"session {target.id} is being removed", {})
        return
    window = target if isinstance(target, Window) else reg.windows[target.window]
    if window.removing or reg.sessions[window.session].removing:
        raise VenomxError("conflict.removing", f"window {window.id} is being removed", {})


def check_cwd(cwd: str | None) -> None:
    """Resolution: the form, then an existing directory (a stat on the reactor, bounded)."""
    check_cwd_form(cwd)
    if cwd is None:
        return
    # A NUL or a lone surrogate names no path a program could be given: no such directory.
    if "\0" in cwd or not utf8_ok(cwd) or not os.path.exists(cwd):
        raise value_error(CWD, "missing")
    if not os.path.isdir(cwd):
        raise value_error(CWD, "not_directory")
