"""The layout tree: splits nest or extend along an axis; removal collapses single children."""

from __future__ import annotations

from typing import Any

from venomx.daemon.layout import remove_from_layout, split_layout


def test_split_then_remove_round_trips() -> None:
    tree: Any = {"pane": "p0"}
    tree = split_layout(tree, "p0", "p1", "cols")
    assert tree == {"axis": "cols", "children": [{"pane": "p0"}, {"pane": "p1"}]}
    tree = split_layout(tree, "p0", "p2", "cols")  # same axis: a sibling, right after p0
    assert [c["pane"] for c in tree["children"]] == ["p0", "p2", "p1"]
    tree = split_layout(tree, "p1", "p3", "rows")  # other axis: a nested node
    assert tree["children"][2] == {"axis": "rows", "children": [{"pane": "p1"}, {"pane": "p3"}]}
    tree = remove_from_layout(tree, "p3") or {}
    assert tree["children"][2] == {"pane": "p1"}
    for pane in ("p0", "p2"):
        tree = remove_from_layout(tree, pane) or {}
    assert tree == {"pane": "p1"}
    assert remove_from_layout(tree, "p1") is None
    assert remove_from_layout(tree, "p9") == tree
