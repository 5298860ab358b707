"""Labels by meaning (``query._meaning``): injective, readable, safe for hostile names and long options."""

from __future__ import annotations

from fractions import Fraction

import dpsense as dp
from dpsense.query import Query, Schema, by_meaning
from dpsense.query._meaning import MAX_LABEL, _number

SCHEMA = Schema(
    {"uid": "unit", "x": "numeric", "g": "categorical", "odd\nname": "numeric"},
    bounds={"x": (0, 10), "odd\nname": (0, 1)},
    keys={"g": ["a", "b"]},
)


def _labels(**aggregates: dp.Aggregate) -> dict[str, str]:
    return by_meaning(Query("d").agg(**aggregates).build(SCHEMA), SCHEMA)[1]


def test_numbers_are_exact_decimals_or_ratios() -> None:
    cases = {Fraction(9, 10): "0.9", Fraction(24): "24", Fraction(-3, 8): "-0.375", Fraction(1, 3): "1/3"}
    assert {k: _number(k) for k in cases} == cases
    assert _number(Fraction(1, 4 * 10**18)) == "0.00000000000000000025"
    assert _number(Fraction(1, 2**200)).endswith(f"/{2**200}")  # more than 30 places: the ratio


def test_histogram_keys_other_than_the_declared_ones_are_a_digest() -> None:
    labels = _labels(a=dp.histogram("g"), b=dp.histogram("g", keys=["a"]), c=dp.histogram("g", keys=["a", "b"]))
    assert labels["a"] == labels["c"] == "histogram(g)"
    assert labels["b"].startswith("histogram(g, keys=#") and labels["b"] != labels["a"]


def test_hostile_column_names_and_long_options_give_a_printable_bounded_label() -> None:
    labels = _labels(m=dp.mean("odd\nname"), q=dp.quantiles("x", [Fraction(i, 97) for i in range(1, 97)]))
    assert all(ch.isprintable() for label in labels.values() for ch in label)
    assert all(len(label) <= MAX_LABEL for label in labels.values())
    assert labels["m"].startswith("mean(#") and labels["q"].startswith("quantiles(#")


def test_equal_meanings_merge_and_different_ones_never_do() -> None:
    ir, labels = by_meaning(
        Query("d").agg(a=dp.count(), b=dp.count(), c=dp.count(max_rows_per_unit=2)).build(SCHEMA), SCHEMA
    )
    assert labels["a"] == labels["b"] != labels["c"]
    assert [a.name for a in ir.aggregates] == sorted({labels["a"], labels["c"]})
