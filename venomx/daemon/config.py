"""Daemon configuration (§11): defaults, ranges, the TOML file, get/set/reload.

Keys are dotted paths (``run.max_active``). Changes apply at once; no config change ever
stops a process. ``config.set`` changes the running daemon only, never the file.
"""

from __future__ import annotations

import json
import logging
import os
import tomllib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from venomx.daemon.paths import read_config
from venomx.manifest.rules import nbytes, utf8_ok
from venomx.manifest.schema import problem
from venomx.manifest.verbs import ABSOLUTE_PATTERN, Param
from venomx.wire import VenomxError

log = logging.getLogger("venomx.daemon")

Validator = Callable[[Any], str | None]
ARTICLE = {"integer": "an integer", "array": "an array", "object": "an object"}


@dataclass(frozen=True)
class Key:
    """A config key: its type and bounds as a verb param declares them (the same
    ``Param`` and schema code), a rule ``Param`` cannot state, and a default computed at
    start when the default depends on the environment."""

    param: Param
    extra: Validator | None = None  # checked after the type, before the bounds
    make: Callable[[], Any] | None = None

    def default(self) -> Any:
        return self.make() if self.make is not None else self.param.default

    def check(self, value: Any) -> str | None:
        """The reason ``value`` is refused, or None."""
        p = self.param
        found = problem(p, value, pattern=True)
        if found == "type" and not (p.hint and p.kind == "string"):
            return f"must be {ARTICLE.get(p.kind, 'a ' + p.kind)}"
        if found is None and self.extra is not None:
            return self.extra(value)
        if found is not None and p.hint:
            return f"must be {p.hint}"
        if found == "range":
            return f"must be between {p.min} and {p.max}"
        return None if found is None else f"must be {found}"


def _int(
    name: str,
    default: int,
    lo: int,
    hi: int,
    extra: Validator | None = None,
    hint: str | None = None,
) -> Key:
    return Key(Param(name, "integer", default=default, min=lo, max=hi, hint=hint), extra)


# Bounds that keep the whole configuration one reply of the default max_frame: a value the
# daemon keeps is sent back by every ``config.get {}`` (the default grants have the bound
# of one request's, ``auth.GRANTS_MAX``).
PATH_MAX = 4096  # the kernel's, with the NUL: no longer path can be executed


def _grants(v: Any) -> str | None:
    from venomx.daemon.auth import GRANTS_MAX, parse_grants

    if isinstance(v, list) and len(v) > GRANTS_MAX:
        return f"must hold at most {GRANTS_MAX} grants"
    try:
        parse_grants(v, "value")
    except VenomxError as exc:
        return exc.message
    return None


def _shell(v: str) -> str | None:
    if not utf8_ok(v):
        return "must be valid UTF-8"
    if nbytes(v) >= PATH_MAX:
        return f"must be shorter than {PATH_MAX} bytes"
    return None


LOG_BYTES = f"0 (never rotate) or between 4096 and {1 << 40}"


def _log_bytes(v: int) -> str | None:
    return None if v == 0 or 4096 <= v else f"must be {LOG_BYTES}"


def default_shell() -> str:
    shell = os.environ.get("SHELL", "")
    return shell if shell.startswith("/") else "/bin/sh"


_KEYS = (
    _int("run.max_active", 64, 1, 4096),
    _int("run.retain_count", 256, 0, 65536),
    _int("run.retain_ms", 3600000, 0, 604800000),
    _int("run.retain_bytes", 16777216, 0, 1073741824),
    _int("vt.scrollback", 10000, 0, 1000000),
    _int("events.retain_count", 65536, 1, 1048576),
    # observation events (OSC markers) per pane: a token bucket, the excess coalesced
    _int("events.observe_rate", 100, 1, 1000000),
    _int("events.observe_burst", 200, 1, 1000000),
    _int("audit.retain_count", 10000, 1, 1048576),
    _int("protocol.max_frame", 1048576, 4096, 16777216),
    Key(Param("auth.default_grants", "any"), _grants, lambda: [{"right": "read", "scope": "*"}]),
    Key(
        Param("spawn.default_shell", "string", pattern=ABSOLUTE_PATTERN, hint="an absolute path"),
        _shell,
        default_shell,
    ),
    # the spare sentinel pool (venomx.daemon.panes.sentinels): at most this many after a
    # burst, halving their number each idle spell without a start that found it short
    _int("spawn.spares_min", 6, 0, 1024),
    _int("spawn.spares_max", 64, 0, 1024),
    _int("spawn.spares_idle_ms", 30000, 100, 86400000),
    _int("panes.exited_warn_bytes", 256 * 1024 * 1024, 0, 1 << 40),
    _int("panes.exited_max_bytes", 0, 0, 1 << 40),
    # the autogroup nice the daemon asks for its own session (venomx.daemon.priority)
    _int("daemon.nice", -5, -20, 0),
    _int("log.max_bytes", 10 * 1024 * 1024, 0, 1 << 40, _log_bytes, LOG_BYTES),
    _int("log.keep", 3, 0, 100),
    # per-pane cgroups (venomx.daemon.cgroups); read at start, a change applies at the next
    Key(
        Param(
            "cgroups",
            "string",
            default="auto",
            choices=("auto", "required", "off"),
            hint='one of "auto", "required", "off"',
        )
    ),
)
SCHEMA: dict[str, Key] = {k.param.name: k for k in _KEYS}


def config_path(explicit: str | None) -> Path:
    if explicit:
        return Path(explicit)
    base = os.environ.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config")
    return Path(base) / "venomx" / "config.toml"


def _flatten(d: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """The file's tables as dotted keys. A key the file sets twice (``"run.max_active"``
    and ``[run] max_active``) is refused rather than one silently winning; a table at a
    key's own path is that key's (wrong) value."""
    out: dict[str, Any] = {}
    for k, v in d.items():
        key = f"{prefix}{k}"
        inner = _flatten(v, key + ".") if isinstance(v, dict) and key not in SCHEMA else {key: v}
        for name, value in inner.items():
            if name in out:
                raise bad(name, "set twice in the config file")
            out[name] = value
    return out


def bad(path: str, reason: str) -> VenomxError:
    return VenomxError(
        "invalid_params.config", f"{path}: {reason}", {"path": path, "reason": reason}
    )


class Config:
    """The values in force, validated; ``listeners`` hear every change."""

    def __init__(self, path: Path, explicit: bool = False) -> None:
        self.path = path
        self.explicit = explicit  # named by --config: a missing one is worth a warning
        self.values = {k: key.default() for k, key in SCHEMA.items()}
        self.listeners: list[Callable[[list[str]], None]] = []

    def __getitem__(self, key: str) -> Any:
        return self.values[key]

    def read_file(self) -> dict[str, Any]:
        """The file's values, validated (a missing file = defaults).

        The file must be owned by our uid or root and not writable by others, and reached
        through directories only our uid or root can change
        (``venomx.daemon.paths.read_config``); it may be a symlink.
        """
        values = {k: key.default() for k, key in SCHEMA.items()}
        text = read_config(str(self.path))
        if text is None:
            if self.explicit:  # perhaps a typo; perhaps a file a later reload will find
                log.warning("config file %s does not exist: using the defaults", self.path)
            return values
        try:
            data = tomllib.loads(text)
            flat = _flatten(data)
        except tomllib.TOMLDecodeError as exc:
            raise bad(str(self.path), f"unreadable config file: {exc}") from None
        except RecursionError:  # tables or arrays a thousand deep: no key is
            raise bad(str(self.path), "unreadable config file: nested too deep") from None
        for key, value in flat.items():
            values[key] = self.validate(key, value)
        return values

    def validate(self, key: str, value: Any) -> Any:
        entry = SCHEMA.get(key)
        if entry is None:
            raise bad(key, "unknown key")
        reason = entry.check(value)
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
