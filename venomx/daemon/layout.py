"""A window's layout tree: ``{"pane": id}`` leaves under ``{"axis", "children"}`` nodes.

Pure data in, data out (foundation §6): splitting puts a new pane beside its target,
removal collapses a node left with one child.
"""

from __future__ import annotations

from typing import Any


def split_layout(layout: dict[str, Any], target: str, new: str, axis: str) -> dict[str, Any]:
    """Put ``new`` beside ``target`` along ``axis`` in the layout tree."""
    if layout.get("pane") == target:
        return {"axis": axis, "children": [{"pane": target}, {"pane": new}]}
    if "children" in layout:
        children = layout["children"]
        for i, child in enumerate(children):
            if child.get("pane") == target and layout["axis"] == axis:
                return {
                    "axis": axis,
                    "children": [*children[: i + 1], {"pane": new}, *children[i + 1 :]],
                }
        return {
            "axis": layout["axis"],
            "children": [split_layout(c, target, new, axis) for c in children],
        }
    return layout


def remove_from_layout(layout: dict[str, Any], pane: str) -> dict[str, Any] | None:
    """The tree without ``pane``. A node left with one child becomes that child, and a
    node that thereby lands on its parent's axis joins the parent, so one arrangement
    has one tree and a later split beside its panes makes siblings, not nesting."""
    if layout.get("pane") == pane:
        return None
    if "children" not in layout:
        return layout
    axis = layout["axis"]
    kids: list[dict[str, Any]] = []
    for child in layout["children"]:
        kid = remove_from_layout(child, pane)
        if kid is None:
            continue
        kids.extend(kid["children"] if kid.get("axis") == axis else [kid])
    if not kids:
        return None
    if len(kids) == 1:
        return kids[0]
    return {"axis": axis, "children": kids}
