"""``split_by_key``: grouped rows split in one pass, equal to a mask per key (issue 18, item 2)."""

from __future__ import annotations

import numpy as np
import pytest

from dpsense.release._data_dependent import split_by_key


def _masks(labels: np.ndarray, rows: np.ndarray, keys: list[object]) -> list[np.ndarray]:
    return [rows[np.asarray(labels == key)] for key in keys]


@pytest.mark.parametrize("kind", ["int", "str", "unsorted"])
def test_the_split_equals_one_mask_per_key(kind: str) -> None:
    rng = np.random.default_rng(7)  # the test's own data
    raw = rng.integers(0, 50, 5_000)
    labels: np.ndarray = np.sort(raw) if kind != "unsorted" else raw
    if kind == "str":
        labels = np.array([f"g{v:02d}" for v in labels], dtype=object)
    rows = rng.normal(size=(labels.size, 2))
    keys: list[object] = [f"g{k:02d}" for k in range(55)] if kind == "str" else list(range(55))  # 5 absent keys
    got, want = split_by_key([labels], rows, keys), _masks(labels, rows, keys)
    assert len(got) == len(want) == 55
    for a, b in zip(got, want, strict=True):
        assert a.shape == b.shape and np.array_equal(a, b)


def test_no_rows_and_no_keys() -> None:
    rows = np.zeros((0, 1))
    assert [g.shape for g in split_by_key([np.array([], dtype=object)], rows, ["a", "b"])] == [(0, 1), (0, 1)]
    assert split_by_key([np.array(["a"], dtype=object)], np.ones((1, 1)), []) == []


@pytest.mark.parametrize("ordered", [True, False])
def test_two_group_columns_split_by_value_pairs(ordered: bool) -> None:
    rng = np.random.default_rng(11)  # the test's own data
    first = rng.integers(0, 6, 3_000)
    second = np.array([f"d{v}" for v in rng.integers(0, 4, 3_000)], dtype=object)
    if ordered:
        order = np.lexsort((second, first))
        first, second = first[order], second[order]
    rows = rng.normal(size=(first.size, 1))
    keys: list[object] = [(a, f"d{b}") for a in range(7) for b in range(4)]  # region 6 absent
    got = split_by_key([first, second], rows, keys)
    for key, part in zip(keys, got, strict=True):
        assert isinstance(key, tuple)
        want = rows[(first == key[0]) & (second == key[1])]
        assert part.shape == want.shape and np.array_equal(part, want)
    # a run boundary where only the second column changes is a new group
    assert sum(len(p) for p in got) == first.size
