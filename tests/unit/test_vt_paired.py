"""``paired`` returns a row with no wide character and no lone mark as it is, without a
step per cell (rows of box drawing and check marks paid one each time they entered
history); for every row it gives what its cell-by-cell rule gives."""

from __future__ import annotations

from hypothesis import example, given, settings
from hypothesis import strategies as st

from workers.screen import cell_by_cell, paired

CELLS = st.sampled_from(
    ["a", " ", "", "中", "✓", "─", "\u0301", "e\u0301", "\u200b", "\u200bx", "é", "😀"]
)


@settings(max_examples=2000, deadline=None)
@given(st.lists(CELLS, min_size=1, max_size=12))
@example(["✓", "─", "a"])
@example(["中", "", "✓"])
@example(["中", "✓"])
def test_paired_is_the_cell_by_cell_rule(cells: list[str]) -> None:
    assert paired(list(cells)) == cell_by_cell(list(cells))


def test_a_narrow_row_is_returned_as_it_is() -> None:
    row = ["✓", " ", "─", "─", "é", "a"]
    assert paired(row) is row
