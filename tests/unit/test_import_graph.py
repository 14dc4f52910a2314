"""The import graph of venomx and workers has no circle at run time.

Every import counts, module-level or inside a function (a function-level import is a
circle put off, not avoided); imports under ``if TYPE_CHECKING:`` are annotations only
and are left out.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent.parent
PACKAGES = ("venomx", "workers")


def modules() -> dict[str, Path]:
    out = {}
    for pkg in PACKAGES:
        for path in (ROOT / pkg).rglob("*.py"):
            parts = path.relative_to(ROOT).with_suffix("").parts
            if parts[-1] == "__init__":
                parts = parts[:-1]
            out[".".join(parts)] = path
    return out


def type_checking_nodes(tree: ast.AST) -> set[int]:
    skip: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and isinstance(node.test, ast.Name) \
                and node.test.id == "TYPE_CHECKING":
            skip.update(id(n) for n in ast.walk(node))
    return skip


def imports_of(name: str, path: Path, known: dict[str, Path]) -> set[str]:
    tree = ast.parse(path.read_text())
    skip = type_checking_nodes(tree)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    out: set[str] = set()
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = package.split(".")[:len(package.split(".")) - node.level + 1]
                base = ".".join([*up, base] if base else up)
            for alias in node.names:
                sub = f"{base}.{alias.name}"
                out.add(sub if sub in known else base)
    return {m for m in out if m in known and m != name}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                found.append(sorted(comp))

    for v in graph:
        if v not in index:
            visit(v)
    return found


def test_no_import_circle() -> None:
    known = modules()
    graph = {name: imports_of(name, path, known) for name, path in known.items()}
    assert graph.get("venomx.daemon.core")
    assert cycles(graph) == []


def test_the_check_sees_a_function_level_circle(tmp_path: Path) -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert cycles(graph) == [["a", "b", "c"]]
    probe = tmp_path / "probe.py"
    probe.write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                     "    from venomx import wire\ndef f():\n"
                     "    from venomx.daemon import core\n")
    known = {"venomx.daemon.core": probe, "venomx.wire": probe}
    assert imports_of("x", probe, known) == {"venomx.daemon.core"}
