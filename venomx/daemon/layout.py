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
    if layout.get("pane") == pane:
        return None
    if "children" not in layout:
        return layout
    kids = [k for k in (remove_from_layout(c, pane) for c in layout["children"]) if k]
    if not kids:
        return None
    if len(kids) == 1:
        return kids[0]
    return {"axis": layout["axis"], "children": kids}
