"""Import rules: workers never load venomx (or click/mcp); the CLI loads no daemon code;
the daemon never loads pyte (only sentinels and the fork server parse output)."""

from __future__ import annotations

import ast
import subprocess
import sys
from collections.abc import Iterator

from tests.helpers import ROOT


def loaded_after(stmt: str) -> set[str]:
    code = f"import sys; {stmt}; print('\\n'.join(sys.modules))"
    r = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT
    )
    return set(r.stdout.split())


def test_sentinel_is_small() -> None:
    mods = loaded_after("import workers.sentinel, workers.forkserver")
    assert not {m for m in mods if m.split(".")[0] in ("venomx", "click", "mcp", "psutil")}


def test_cli_does_not_import_the_daemon() -> None:
    mods = loaded_after("import venomx.cli.tree as a; a.build()")
    assert not {m for m in mods if m.startswith("venomx.daemon") or m.startswith("mcp")}


def test_the_daemon_does_not_load_pyte() -> None:
    mods = loaded_after("import venomx.serve, venomx.verbs")
    assert "workers.rows" in mods  # it reads exited panes' rows, through the row model
    assert not {m for m in mods if m.split(".")[0] == "pyte"}
    assert "workers.deferred" not in mods  # its stand-in secrets is for the fork server only


def _imported(tree: ast.AST) -> Iterator[str]:
    """Modules a source file imports at any depth (functions too), not for type checks."""
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            yield from (m for n in node.orelse for m in _imported(ast.Module([n], [])))
            continue
        if isinstance(node, ast.Import):
            yield from (a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            if node.module == "workers":  # ``from workers import protocol``: submodules
                yield from (f"workers.{a.name}" for a in node.names)
            else:
                yield node.module
        yield from _imported(node)


def test_no_daemon_code_imports_pyte_even_inside_a_function() -> None:
    found = {
        m
        for path in sorted((ROOT / "venomx").rglob("*.py"))
        for m in _imported(ast.parse(path.read_text(), str(path)))
        if m.split(".")[0] in ("workers", "pyte")
    }
    assert "workers.rows" in found
    mods = loaded_after("import " + ", ".join(sorted(found)))
    assert not {m for m in mods if m.split(".")[0] == "pyte"}, sorted(found)
