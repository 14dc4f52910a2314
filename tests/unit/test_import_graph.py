"""The import graph of venomx and workers has no circle at run time, and the daemon's
layers stay apart: nothing but ``venomx.serve`` knows the ``Daemon``, no handler reaches past
its services, and only the pane owner talks to sentinels.

Every import counts, module-level or inside a function (a function-level import is a
circle put off, not avoided), and so does one under ``if TYPE_CHECKING:``: a module that
names another in its annotations depends on it as surely, so a helper names what it
needs of its caller with a protocol of its own (``venomx.daemon.panes.contract``,
``workers.screen.Host``, ``workers.fastpath.Terminal``).
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
        if (
            isinstance(node, ast.If)
            and isinstance(node.test, ast.Name)
            and node.test.id == "TYPE_CHECKING"
        ):
            skip.update(id(n) for n in ast.walk(node))
    return skip


def imports_of(
    name: str, path: Path, known: dict[str, Path], annotations: bool = False
) -> set[str]:
    tree = ast.parse(path.read_text())
    skip = set() if annotations else type_checking_nodes(tree)
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
                up = package.split(".")[: len(package.split(".")) - node.level + 1]
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
    graph = {name: imports_of(name, path, known, annotations=True) for name, path in known.items()}
    assert graph.get("venomx.daemon.core")
    assert cycles(graph) == []


def test_the_check_sees_a_function_level_circle(tmp_path: Path) -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert cycles(graph) == [["a", "b", "c"]]
    probe = tmp_path / "probe.py"
    probe.write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
        "    from venomx import wire\ndef f():\n"
        "    from venomx.daemon import core\n"
    )
    known = {"venomx.daemon.core": probe, "venomx.wire": probe}
    assert imports_of("x", probe, known) == {"venomx.daemon.core"}
    assert imports_of("x", probe, known, annotations=True) == {
        "venomx.daemon.core",
        "venomx.wire",
    }


def test_only_serve_knows_the_daemon() -> None:
    """``Daemon`` constructs and wires the services; everything else gets services."""
    known = modules()
    users = {
        name
        for name, path in known.items()
        if "venomx.daemon.core" in imports_of(name, path, known, annotations=True)
    }
    assert users == {"venomx.serve"}


def test_no_handler_touches_the_daemon() -> None:
    for path in (ROOT / "venomx" / "verbs").rglob("*.py"):
        text = path.read_text()
        assert "ctx.d." not in text and "Daemon" not in text, path
    from venomx.daemon.dispatch import Context

    assert not hasattr(Context, "d")


def test_only_the_pane_owner_sends_sentinel_messages() -> None:
    """No module outside ``venomx/daemon/panes`` (and workers, the other end) names a
    message of the sentinel protocol; constants such as the titles are fine."""
    import inspect

    from workers import protocol

    messages = {
        n
        for n, obj in vars(protocol).items()
        if inspect.isclass(obj) and issubclass(obj, protocol.Message)
    }
    assert {"Input", "Resize", "Stream", "Spawn", "Exit"} <= messages
    owner = ROOT / "venomx" / "daemon" / "panes"
    offenders = []
    for path in (ROOT / "venomx").rglob("*.py"):
        if owner in path.parents:
            continue
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module == "workers.protocol":
                offenders += [(path.name, a.name) for a in node.names if a.name in messages]
            if (
                isinstance(node, ast.Attribute)
                and node.attr in messages
                and isinstance(node.value, ast.Name)
                and node.value.id in ("P", "protocol")
            ):
                offenders.append((path.name, node.attr))
    assert offenders == []
