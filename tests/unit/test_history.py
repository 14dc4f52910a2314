"""A pane's history, stored in blocks, behaves exactly like the ``deque(maxlen=...)`` of
rows it replaces, for any sequence of appends, extends, clears and reads."""

from __future__ import annotations

import sys
from collections import deque

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from workers.history import BLOCK, History

ROWS = st.text(alphabet=st.characters(blacklist_characters="\n"), max_size=6)
OPS = st.lists(
    st.one_of(
        st.tuples(st.just("append"), ROWS),
        st.tuples(st.just("extend"), st.lists(ROWS, max_size=3 * BLOCK)),
        st.tuples(st.just("clear"), st.none()),
    ),
    max_size=30,
)


def apply(op: str, arg: object, *histories: History | deque[str]) -> None:
    for h in histories:
        if op == "clear":
            h.clear()
        else:
            getattr(h, op)(arg)


@settings(max_examples=300, deadline=None)
@given(st.integers(0, 3 * BLOCK), OPS)
def test_history_is_a_bounded_deque_of_rows(maxlen: int, ops: list[tuple[str, object]]) -> None:
    ours, model = History(maxlen), deque[str](maxlen=maxlen)
    for op, arg in ops:
        apply(op, arg, ours, model)
        assert len(ours) == len(model)
        assert list(ours) == list(model)
        if model:
            assert ours[-1] == model[-1] and ours[0] == model[0]
    with pytest.raises(IndexError):
        ours[len(model)]


def test_a_full_history_costs_about_its_characters() -> None:
    h = History(2000, (f"{i:079d}" for i in range(5000)))
    blocks = sum(sys.getsizeof(b) for b in h._blocks) + sum(sys.getsizeof(r) for r in h._tail)
    assert len(h) == 2000 and h[0] == f"{3000:079d}" and h[1999] == f"{4999:079d}"
    assert blocks < 2000 * 85  # 80 characters and a separator a row; a str each was ~137


@settings(max_examples=300, deadline=None)
@given(st.integers(0, 3 * BLOCK), st.integers(0, 400), OPS)
def test_a_budget_keeps_the_newest_rows_and_bounds_the_rest(
    maxlen: int, budget: int, ops: list[tuple[str, object]]
) -> None:
    """With a budget in code points the history is the newest rows of the unbudgeted
    one, the oldest dropped while over it (the newest row stays)."""
    ours, model = History(maxlen, budget=budget), deque[str](maxlen=maxlen)
    for op, arg in ops:
        apply(op, arg, ours, model)
        kept = list(ours)
        assert kept == list(model)[len(model) - len(kept) :]
        held = sum(map(len, ours._blocks)) + sum(map(len, ours._tail))
        assert ours._chars == held
        assert held <= budget or len(kept) == 1
        if sum(map(len, model)) + len(model) <= budget:
            assert len(kept) == len(model)


def test_a_budget_bounds_a_very_wide_panes_history() -> None:
    row = " " * 9000 + "X"
    h = History(10000, (row for _ in range(10000)), budget=1_000_000)
    assert len(h) < 10000 and h[-1] == row
    assert h._chars <= 1_000_000 + 2 * BLOCK * (len(row) + 1)


def test_the_newest_block_is_no_way_past_the_budget() -> None:
    """The newest block and the rows after it were always kept: 127 rows of 65535
    cells of 32 code points each passed an 8 M budget by 30 times (session 32)."""
    row = ("\U0001f600" + "\u0301" * 31) * 2048  # 65536 code points: a wide row, scaled
    h = History(10000, budget=8 * len(row))
    for i in range(2 * BLOCK - 1):
        h.append(row[:-1] + chr(0x1F600 + i % 50))
        assert h._chars <= 8 * len(row) + len(row)  # at most one row over: the newest stays
    assert h[-1] == row[:-1] + chr(0x1F600 + (2 * BLOCK - 2) % 50) and len(h) == 8
    h.budget = 1
    h.append("tail")
    assert list(h) == ["tail"]


def test_a_block_is_at_most_a_quarter_of_the_budget() -> None:
    """Rows of ~132,000 code points: 64 of them joined into one block past the budget,
    which the next trim split back into rows and the next row joined again (3.2 ms a
    row), and dropping a block that size took the history down to one row where the
    budget holds 63 (helper-133). Such rows stay rows; every row the budget holds is
    kept."""
    budget = 8 * 1024 * 1024
    for size in (131_000, 132_000):
        h = History(10000, budget=budget)
        for i in range(200):
            h.append("x" * (size - 1) + chr(65 + i % 26))
            assert all(len(b) <= budget // 4 for b in h._blocks)
            assert len(h) == min(i + 1, budget // size)
    small = History(10000, (f"{i:079d}" for i in range(5000)), budget=budget)
    assert len(small._blocks) == 5000 // BLOCK  # rows of a common width are still joined
