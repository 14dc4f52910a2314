"""Import rules: workers never load venomx (or click/mcp); the CLI loads no daemon code."""

from __future__ import annotations

import subprocess
import sys

from tests.helpers import ROOT


def loaded_after(stmt: str) -> set[str]:
    code = f"import sys; {stmt}; print('\\n'.join(sys.modules))"
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                       cwd=ROOT)
    return set(r.stdout.split())


def test_sentinel_is_small() -> None:
    mods = loaded_after("import workers.sentinel, workers.forkserver")
    assert not {m for m in mods if m.split(".")[0] in ("venomx", "click", "mcp", "psutil")}


def test_cli_does_not_import_the_daemon() -> None:
    mods = loaded_after("import venomx.cli.app as a; a.build()")
    assert not {m for m in mods if m.startswith("venomx.daemon") or m.startswith("mcp")}
