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


def test_a_node_left_on_its_parents_axis_joins_the_parent() -> None:
    """cols[a, rows[b, cols[c, d]]] less b is cols[a, c, d], as a split of a beside c
    and d would have made it: the tree has one shape for one arrangement."""
    tree: Any = {"pane": "a"}
    tree = split_layout(tree, "a", "b", "cols")
    tree = split_layout(tree, "b", "c", "rows")
    tree = split_layout(tree, "c", "d", "cols")
    assert tree["children"][1]["children"][1]["axis"] == "cols"
    tree = remove_from_layout(tree, "b")
    assert tree == {"axis": "cols", "children": [{"pane": p} for p in ("a", "c", "d")]}
    tree = split_layout(tree, "c", "e", "cols")  # a sibling, not a nested node
    assert [c["pane"] for c in tree["children"]] == ["a", "c", "e", "d"]
