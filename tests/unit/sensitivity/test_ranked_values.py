"""The smooth order statistic from values known by rank only equals the one from the whole array."""

from __future__ import annotations

import numpy as np
import pytest

from dpsense.sensitivity.order_statistics import RankedValues, smooth_order_statistic


class SortedStore:
    """Clipped values served by rank, recording which ranks were read (an engine stand-in)."""

    def __init__(self, values: np.ndarray, low: float, high: float) -> None:
        self._sorted = np.sort(np.clip(values, low, high))
        self.read: list[tuple[int, int]] = []

    @property
    def size(self) -> int:
        return int(self._sorted.size)

    def ranks(self, first: int, last: int) -> np.ndarray:
        self.read.append((first, last))
        return self._sorted[first - 1 : last]


@pytest.mark.parametrize("seed", range(12))
@pytest.mark.parametrize("adjacency", ["replace", "add_remove"])
def test_ranked_values_give_the_same_statistic_and_bound(seed: int, adjacency: str) -> None:
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 3000))
    values = np.round(rng.normal(50, 15, n), int(rng.integers(0, 3)))  # ties included
    bounds = (0.0, 100.0)
    public_n = int(rng.integers(max(1, n // 2), 2 * n + 2)) if adjacency == "add_remove" else None
    size = public_n if public_n is not None else n
    rank = int(rng.integers(1, size + 1))
    kw = {"bounds": bounds, "beta": float(rng.uniform(0.01, 0.5)), "rank": rank, "adjacency": adjacency}
    kw["public_n"] = public_n
    kw["max_records_per_unit"] = int(rng.integers(1, 4))
    kw["constant_work"] = None if seed % 3 else int(rng.integers(1, 60))
    store = SortedStore(values, *bounds)
    assert isinstance(store, RankedValues)
    from_array = smooth_order_statistic(values, **kw)  # type: ignore[arg-type]
    from_ranks = smooth_order_statistic(store, **kw)  # type: ignore[arg-type]
    assert (from_ranks.value, from_ranks.smooth_sensitivity) == (from_array.value, from_array.smooth_sensitivity)
    assert store.read  # read by rank


def test_only_a_window_around_the_rank_is_read_from_a_large_store() -> None:
    values = np.linspace(0.0, 100.0, 200_001)
    store = SortedStore(values, 0.0, 100.0)
    smooth_order_statistic(store, bounds=(0.0, 100.0), beta=0.5, rank=100_001, adjacency="replace")
    read = sum(last - first + 1 for first, last in store.read)
    assert read < 2_000  # about 2 ln(2^64)/β ranks, not the 200,001 values
    assert not isinstance(values, RankedValues)
