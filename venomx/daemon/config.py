"""Daemon configuration (§11): defaults, ranges, the TOML file, get/set/reload.

Keys are dotted paths (``run.max_active``). Changes apply at once; no config change ever
stops a process. ``config.set`` changes the running daemon only, never the file.
"""

from __future__ import annotations

import json
import os
import tomllib
from collections.abc import Callable
from pathlib import Path
from typing import Any

from venomx.daemon.paths import read_config
from venomx.wire import VenomxError

Validator = Callable[[Any], str | None]


def _int_range(lo: int, hi: int) -> Validator:
    def check(v: Any) -> str | None:
        if not isinstance(v, int) or isinstance(v, bool):
            return "must be an integer"
        if not lo <= v <= hi:
            return f"must be between {lo} and {hi}"
        return None
    return check


def _abs_path(v: Any) -> str | None:
    if not isinstance(v, str) or not v.startswith("/") or "\0" in v:
        return "must be an absolute path"
    return None


def _grants(v: Any) -> str | None:
    from venomx.daemon.auth import parse_grants

    try:
        parse_grants(v, "value")
    except VenomxError as exc:
        return exc.message
    return None


def _log_bytes(v: Any) -> str | None:
    if not isinstance(v, int) or isinstance(v, bool):
        return "must be an integer"
    if v != 0 and not 4096 <= v <= 1 << 40:
        return f"must be 0 (never rotate) or between 4096 and {1 << 40}"
    return None


def default_shell() -> str:
    shell = os.environ.get("SHELL", "")
    return shell if shell.startswith("/") else "/bin/sh"


SCHEMA: dict[str, tuple[Callable[[], Any], Validator]] = {
    "run.max_active": (lambda: 64, _int_range(1, 4096)),
    "run.retain_count": (lambda: 256, _int_range(0, 65536)),
    "run.retain_ms": (lambda: 3600000, _int_range(0, 604800000)),
    "run.retain_bytes": (lambda: 16777216, _int_range(0, 1073741824)),
    "vt.scrollback": (lambda: 10000, _int_range(0, 1000000)),
    "events.retain_count": (lambda: 65536, _int_range(1, 1048576)),
    # observation events (OSC markers) per pane: a token bucket, the excess coalesced
    "events.observe_rate": (lambda: 100, _int_range(1, 1000000)),
    "events.observe_burst": (lambda: 200, _int_range(1, 1000000)),
    "audit.retain_count": (lambda: 10000, _int_range(1, 1048576)),
    "protocol.max_frame": (lambda: 1048576, _int_range(4096, 16777216)),
    "auth.default_grants": (lambda: [{"right": "read", "scope": "*"}], _grants),
    "spawn.default_shell": (default_shell, _abs_path),
    "panes.exited_warn_bytes": (lambda: 256 * 1024 * 1024, _int_range(0, 1 << 40)),
    "panes.exited_max_bytes": (lambda: 0, _int_range(0, 1 << 40)),
    "log.max_bytes": (lambda: 10 * 1024 * 1024, _log_bytes),
    "log.keep": (lambda: 3, _int_range(0, 100)),
}


def config_path(explicit: str | None) -> Path:
    if explicit:
        return Path(explicit)
    base = os.environ.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config")
    return Path(base) / "venomx" / "config.toml"


def _flatten(d: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in d.items():
        key = f"{prefix}{k}"
        if isinstance(v, dict):
            out.update(_flatten(v, key + "."))
        else:
            out[key] = v
    return out


def bad(path: str, reason: str) -> VenomxError:
    return VenomxError("invalid_params.config", f"{path}: {reason}",
                       {"path": path, "reason": reason})


class Config:
    """The values in force, validated; ``listeners`` hear every change."""

    def __init__(self, path: Path, explicit: bool = False) -> None:
        self.path = path
        self.explicit = explicit  # named by --config: missing or unreadable is an error
        self.values = {k: make() for k, (make, _) in SCHEMA.items()}
        self.listeners: list[Callable[[list[str]], None]] = []

    def __getitem__(self, key: str) -> Any:
        return self.values[key]

    def read_file(self) -> dict[str, Any]:
        """The file's values, validated (a missing default file = defaults).

        The file must be owned by our uid or root and not writable by others
        (``venomx.daemon.paths.read_config``); it may be a symlink.
        """
        values = {k: make() for k, (make, _) in SCHEMA.items()}
        text = read_config(str(self.path), self.explicit)
        if text is None:
            return values
        try:
            data = tomllib.loads(text)
        except tomllib.TOMLDecodeError as exc:
            raise bad(str(self.path), f"unreadable config file: {exc}") from None
        for key, value in _flatten(data).items():
            values[key] = self.validate(key, value)
        return values

    def validate(self, key: str, value: Any) -> Any:
        entry = SCHEMA.get(key)
        if entry is None:
            raise bad(key, "unknown key")
        reason = entry[1](value)
        if reason:
            raise bad(key, reason)
        return value

    def get(self, path: str | None) -> dict[str, Any]:
        if path is None:
            return dict(self.values)
        if path not in self.values:
            raise bad(path, "unknown key")
        return {path: self.values[path]}

    def set_text(self, path: str, text: str) -> Any:
        try:
            value = json.loads(text)
        except ValueError:
            raise bad(path, "value is not JSON text") from None
        value = self.validate(path, value)
        self.apply({path: value})
        return value

    def reload(self) -> list[str]:
        return self.apply(self.read_file())

    def apply(self, new: dict[str, Any]) -> list[str]:
        changed = [k for k, v in new.items() if self.values.get(k) != v]
        self.values.update(new)
        if changed:
            for listener in self.listeners:
                listener(changed)
        return changed
