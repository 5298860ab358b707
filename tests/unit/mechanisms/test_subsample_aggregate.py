from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest

from dpsense.core import PureDP
from dpsense.core.errors import InvalidBounds, InvalidData, InvalidPrivacyParameter, UsageError
from dpsense.mechanisms import subsample_aggregate as sa
from dpsense.mechanisms.subsample_aggregate import (
    em_median_aggregator,
    inverse_sensitivity_median_aggregator,
    subsample_and_aggregate,
)
from dpsense.noise.testing import deterministic_entropy

SALT = bytes(range(32))

# ---------------------------------------------------------------- a statistic with no useful global sensitivity


def kmeans_labels(points: np.ndarray, k: int, iterations: int = 30) -> np.ndarray:
    """Lloyd's algorithm with a deterministic farthest-point start (no randomness: a function of the rows)."""
    centres = [points[np.lexsort(points.T[::-1])[0]]]
    for _ in range(1, k):
        gaps = np.min([np.linalg.norm(points - c, axis=1) for c in centres], axis=0)
        centres.append(points[int(np.argmax(gaps))])
    c = np.array(centres)
    labels = np.zeros(len(points), dtype=np.int64)
    for _ in range(iterations):
        labels = np.argmin(np.linalg.norm(points[:, None, :] - c[None, :, :], axis=2), axis=1)
        c = np.array([points[labels == j].mean(axis=0) if np.any(labels == j) else c[j] for j in range(k)])
    return labels


def largest_cluster_diameter(rows: np.ndarray, k: int = 3) -> float:
    """The largest diameter among the k k-means clusters of the rows (the seed notes' "hard" statistic)."""
    if len(rows) < k:
        raise ValueError("too few rows for k clusters")
    labels = kmeans_labels(rows, k)
    diameters = []
    for j in range(k):
        members = rows[labels == j]
        if len(members) > 1:
            diameters.append(float(np.max(np.linalg.norm(members[:, None] - members[None], axis=2))))
    return max(diameters, default=0.0)


def three_clusters(units: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Units spread uniformly over three unit discs; each unit owns 1 to 3 nearby rows."""
    rng = np.random.default_rng(seed)  # test data only; the mechanism draws its randomness from dpsense.noise
    centres = np.array([[0.0, 0.0], [10.0, 0.0], [0.0, 10.0]])
    angle = rng.uniform(0, 2 * np.pi, units)
    radius = np.sqrt(rng.uniform(0, 1, units))
    where = centres[np.arange(units) % 3] + np.c_[radius * np.cos(angle), radius * np.sin(angle)]
    rows_per_unit = rng.integers(1, 4, units)
    ids = np.repeat(np.arange(units), rows_per_unit)
    points = where[ids] + rng.normal(0, 0.005, (ids.size, 2))
    return points, ids


def test_largest_kmeans_cluster_diameter_is_released_accurately() -> None:
    points, ids = three_clusters(3000, seed=1)
    truth = largest_cluster_diameter(points)
    assert 1.95 < truth < 2.05
    with deterministic_entropy(3):
        results = [
            subsample_and_aggregate(
                points, unit_ids=ids, statistic=largest_cluster_diameter, blocks=50, bounds=(0.0, 5.0), epsilon=1
            )
            for _ in range(3)
        ]
    for result in results:
        assert result.loss == PureDP(1)
        assert abs(result.value - truth) < 0.4  # block answers (60 units each) concentrate in [1.7, 2.0]
        assert "Nissim-Raskhodnikova-Smith 2007" in result.guarantee
        assert result.details["blocks"] == 50


# ---------------------------------------------------------------- the partition


def test_every_row_of_a_unit_lands_in_one_block() -> None:
    for ids in (
        np.repeat(np.arange(500), 4),
        np.array([f"person-{i % 97}" for i in range(1000)]),
        np.array([str(i % 13).encode() for i in range(300)], dtype=object),
        np.array([i % 31 for i in range(200)], dtype=object),
    ):
        blocks = sa._assign_blocks(ids, blocks=7, salt=SALT)
        assert blocks.shape == ids.shape and blocks.min() >= 0 and blocks.max() < 7
        for unit in set(ids.tolist()):
            assert len(set(blocks[ids == unit].tolist())) == 1


def test_partition_is_balanced_and_depends_on_the_salt() -> None:
    ids = np.arange(20_000)
    a = sa._assign_blocks(ids, blocks=10, salt=SALT)
    b = sa._assign_blocks(ids, blocks=10, salt=bytes(32))
    assert np.all(np.abs(np.bincount(a, minlength=10) - 2000) < 250)
    assert np.mean(a == b) < 0.2  # a new salt reshuffles the units
    assert np.array_equal(a, sa._assign_blocks(ids, blocks=10, salt=SALT))
    # a unit's block depends on its own identifier only, not on the other units
    assert np.array_equal(sa._assign_blocks(ids[5000:], blocks=10, salt=SALT), a[5000:])


def test_removing_one_unit_changes_at_most_one_block_answer() -> None:
    points, ids = three_clusters(600, seed=2)
    k = 12
    blocks = sa._assign_blocks(ids, blocks=k, salt=SALT)

    def answers(keep: np.ndarray) -> list[float]:
        return [sa._answer(largest_cluster_diameter, points[keep & (blocks == b)], 2.5) for b in range(k)]

    everyone = answers(np.ones(ids.size, dtype=bool))
    for unit in (0, 17, 599):
        without = answers(ids != unit)
        assert sum(x != y for x, y in zip(everyone, without, strict=True)) <= 1


def test_the_salt_is_fresh_per_call_and_never_returned(monkeypatch: pytest.MonkeyPatch) -> None:
    drawn: list[bytes] = []
    real = sa.random_bytes

    def recording(n: int) -> bytes:
        drawn.append(real(n))
        return drawn[-1]

    monkeypatch.setattr(sa, "random_bytes", recording)
    values, ids = np.arange(100.0), np.arange(100)
    results = [
        subsample_and_aggregate(values, unit_ids=ids, statistic=np.mean, blocks=5, bounds=(0, 100), epsilon=1)
        for _ in range(2)
    ]
    assert len(drawn) == 2 and drawn[0] != drawn[1] and all(len(s) == 32 for s in drawn)
    for result in results:
        text = repr(result)
        for salt in drawn:
            assert salt.hex() not in text and repr(salt) not in text


@pytest.mark.parametrize(
    "ids",
    [np.array([1.5, 2.5]), np.array([1, "a"], dtype=object), np.array([None, None], dtype=object), np.zeros((2, 2))],
)
def test_bad_identifiers_are_refused(ids: np.ndarray) -> None:
    with pytest.raises(InvalidData):
        sa._assign_blocks(ids, blocks=3, salt=SALT)


# ---------------------------------------------------------------- aggregation, ties and fallbacks


def test_ties_are_answered_at_the_tied_value_by_both_aggregators() -> None:
    # Every block answers exactly 3.0. The EM median's tie-aware ranks (docs/math/exponential-mechanism.md
    # §8.2) give 3.0's cell utility 0 and every other cell -40; the inverse-sensitivity median gives the tied
    # value path length 0. (Before mechanism version @2 the EM median was uniform on [L, U] here.)
    values, ids = np.arange(800.0), np.arange(800)
    with deterministic_entropy(5):
        em = [
            subsample_and_aggregate(
                values,
                unit_ids=ids,
                statistic=lambda rows: 3.0,
                blocks=80,
                bounds=(0, 10),
                epsilon=1,
                aggregator=em_median_aggregator,
            ).value
            for _ in range(30)
        ]
        inverse = [
            subsample_and_aggregate(
                values,
                unit_ids=ids,
                statistic=lambda rows: 3.0,
                blocks=80,
                bounds=(0, 10),
                epsilon=1,
                aggregator=inverse_sensitivity_median_aggregator,
            ).value
            for _ in range(30)
        ]
    assert all(abs(v - 3.0) <= 10 / sa.DEFAULT_RESOLUTION for v in em)  # the midpoint of 3.0's cell
    assert all(abs(v - 3.0) <= 10 / sa.DEFAULT_RESOLUTION for v in inverse)


def test_failing_or_non_finite_blocks_get_the_public_fallback() -> None:
    def fragile(rows: np.ndarray) -> float:
        if rows.size % 2:
            raise RuntimeError("odd block")
        return math.nan

    values, ids = np.arange(800.0), np.arange(800)
    with deterministic_entropy(9):
        result = subsample_and_aggregate(
            values,
            unit_ids=ids,
            statistic=fragile,
            blocks=80,
            bounds=(0, 10),
            epsilon=1,
            fallback=7.0,
            aggregator=inverse_sensitivity_median_aggregator,
        )
    assert abs(result.value - 7.0) <= 10 / sa.DEFAULT_RESOLUTION
    assert result.details["fallback"] == 7.0


def test_answers_outside_the_range_are_clipped_and_empty_data_is_fine() -> None:
    with deterministic_entropy(4):
        high = subsample_and_aggregate(
            np.arange(400.0),
            unit_ids=np.arange(400),
            statistic=lambda rows: 1e9,
            blocks=80,
            bounds=(0, 1),
            epsilon=1,
            aggregator=inverse_sensitivity_median_aggregator,
        )
        empty = subsample_and_aggregate(
            np.empty((0, 2)),
            unit_ids=np.empty(0, dtype=np.int64),
            statistic=largest_cluster_diameter,
            blocks=4,
            bounds=(0, 1),
            epsilon=1,
        )
    assert high.value == pytest.approx(1.0, abs=1 / sa.DEFAULT_RESOLUTION)
    assert 0.0 <= empty.value <= 1.0


def test_aggregators_are_the_documented_mechanisms() -> None:
    answers = np.array([1.0, 2.0, 3.0])
    assert em_median_aggregator(answers, bounds=(0, 4), epsilon=Fraction(1), resolution=8).mechanism.startswith(
        "quantile/em"
    )
    assert inverse_sensitivity_median_aggregator(
        answers, bounds=(0, 4), epsilon=Fraction(1), resolution=8
    ).mechanism.startswith("inverse_sensitivity")


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [
        ({"epsilon": 0}, InvalidPrivacyParameter),
        ({"bounds": (1, 0)}, InvalidBounds),
        ({"bounds": (0, math.inf)}, InvalidBounds),
        ({"blocks": 0}, UsageError),
        ({"blocks": 2.5}, UsageError),
        ({"statistic": "mean"}, UsageError),
        ({"fallback": 11.0}, UsageError),
        ({"unit_ids": np.arange(9)}, InvalidData),
    ],
)
def test_validation(kwargs: dict[str, object], error: type[Exception]) -> None:
    params: dict[str, object] = {
        "unit_ids": np.arange(10),
        "statistic": np.mean,
        "blocks": 3,
        "bounds": (0, 10),
        "epsilon": 1,
    }
    params.update(kwargs)
    with pytest.raises(error):
        subsample_and_aggregate(np.arange(10.0), **params)  # type: ignore[arg-type]
