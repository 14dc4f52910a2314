"""Where the daemon's socket lives (§1), shared by the daemon and every client."""

from __future__ import annotations

import os


def socket_path(explicit: str | None) -> str:
    """--socket, else $VENOMX_SOCKET, else $XDG_RUNTIME_DIR/venomx/default.sock, else /tmp."""
    if explicit:
        return explicit
    env = os.environ.get("VENOMX_SOCKET")
    if env:
        return env
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    if runtime:
        return os.path.join(runtime, "venomx", "default.sock")
    return f"/tmp/venomx-{os.getuid()}/default.sock"
