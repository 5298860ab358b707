"""Unit tests for dpsense.mechanisms.local_collection: summaries, strict validation, estimates, heavy hitters."""

from __future__ import annotations

import json
from collections import Counter
from fractions import Fraction
from typing import Any

import numpy as np
import pytest

from dpsense.core.errors import InvalidData, UsageError
from dpsense.device import (
    CmsScheme,
    HcmsScheme,
    KrrScheme,
    OueScheme,
    PrefixScheme,
    RapporScheme,
    Scheme,
    hadamard_entry,
)
from dpsense.device.hashing import decode_bits
from dpsense.device.testing import deterministic_entropy as device_entropy
from dpsense.mechanisms.local_collection import (
    FrequencyTable,
    Summary,
    estimate,
    heavy_hitters,
    layout,
    simulate_reports,
    simulate_summaries,
    simulate_summary,
    summarize,
    theoretical_variance,
    zipf_population,
)
from dpsense.mechanisms.local_collection._decode import _walsh_hadamard
from dpsense.noise.testing import deterministic_entropy

SCHEMES: list[Scheme] = [
    RapporScheme(num_bits=12, num_hashes=2, num_cohorts=3, epsilon_lifetime=Fraction(2), epsilon_irr=Fraction(3)),
    CmsScheme(num_hashes=3, num_buckets=10, epsilon=Fraction(2)),
    HcmsScheme(num_hashes=3, num_buckets=8, epsilon=Fraction(2)),
    KrrScheme(dictionary=("a", "b", "c"), epsilon=Fraction(1)),
    OueScheme(dictionary=("a", "b", "c", "d", "e", "f", "g", "h", "i"), epsilon=Fraction(1)),
    PrefixScheme(alphabet="abc", max_length=3, segment_length=2, num_hashes=2, num_buckets=9, epsilon=Fraction(2)),
]
VALUES = ["a"] * 30 + ["b"] * 20 + ["c"] * 10
IDS = [s.kind for s in SCHEMES]


def _reports(scheme: Scheme, seed: int = 1) -> list[dict[str, Any]]:
    with device_entropy(seed):
        return simulate_reports(scheme, VALUES)


def _manual(scheme: Scheme, reports: list[dict[str, Any]]) -> dict[str, np.ndarray]:
    """The counters by a plain loop over the reports (the reference for the vectorised summarize)."""
    out = {name: np.zeros(shape, dtype=np.int64) for name, shape in layout(scheme).items()}
    for r in reports:
        if isinstance(scheme, RapporScheme):
            out["cohort_n"][r["cohort"]] += 1
            out["ones"][r["cohort"]] += decode_bits(r["bits"], scheme.num_bits)
        elif isinstance(scheme, CmsScheme):
            out["hash_n"][r["hash"]] += 1
            out["ones"][r["hash"]] += decode_bits(r["bits"], scheme.num_buckets)
        elif isinstance(scheme, HcmsScheme):
            out["sums"][r["hash"], r["coordinate"]] += 2 * r["bit"] - 1
        elif isinstance(scheme, KrrScheme):
            out["counts"][r["index"]] += 1
        elif isinstance(scheme, OueScheme):
            out["ones"] += decode_bits(r["bits"], len(scheme.dictionary))
        else:
            out["level_n"][r["level"]] += 1
            out["hash_n"][r["level"], r["hash"]] += 1
            out["ones"][r["level"], r["hash"]] += decode_bits(r["bits"], scheme.num_buckets)
    return out


@pytest.mark.parametrize("scheme", SCHEMES, ids=IDS)
def test_summarize_counts_what_a_loop_counts_and_round_trips_json(scheme: Scheme) -> None:
    reports = _reports(scheme)
    summary = summarize(scheme, reports)
    assert summary.n == len(VALUES) and summary.kind == scheme.kind
    for name, expected in _manual(scheme, reports).items():
        assert np.array_equal(summary.counts[name], expected), name
    again = Summary.from_json(scheme, json.loads(json.dumps(summary.to_json())))
    assert all(np.array_equal(again.counts[k], v) for k, v in summary.counts.items()) and again.n == summary.n


@pytest.mark.parametrize("scheme", SCHEMES, ids=IDS)
def test_summaries_merge_additively(scheme: Scheme) -> None:
    first, second = _reports(scheme, 1), _reports(scheme, 2)
    merged = summarize(scheme, first).merge(summarize(scheme, second))
    whole = summarize(scheme, first + second)
    assert merged.n == whole.n and all(np.array_equal(merged.counts[k], whole.counts[k]) for k in whole.counts)
    assert Summary.empty(scheme).merge(whole).n == whole.n


def test_merge_refuses_another_scheme() -> None:
    a, b = Summary.empty(SCHEMES[1]), Summary.empty(CmsScheme(num_hashes=3, num_buckets=10, epsilon=Fraction(3)))
    with pytest.raises(UsageError, match="one scheme"):
        a.merge(b)


CMS = SCHEMES[1]
GOOD = {"hash": 1, "bits": "ff03"}


@pytest.mark.parametrize(
    ("report", "field"),
    [
        ({"hash": True, "bits": "ff03"}, "hash"),
        ({"hash": 3, "bits": "ff03"}, "hash"),
        ({"hash": -1, "bits": "ff03"}, "hash"),
        ({"hash": 1.0, "bits": "ff03"}, "hash"),
        ({"hash": 1, "bits": "FF03"}, "bits"),
        ({"hash": 1, "bits": "ff0"}, "bits"),
        ({"hash": 1, "bits": "ff 3"}, "bits"),
        ({"hash": 1, "bits": "ff07"}, "bits"),  # a padding bit beyond bit 10
        ({"hash": 1, "bits": 1023}, "bits"),
        ({"hash": 1, "bits": "f" * 10**6}, "bits"),
        ({"hash": 1}, "keys"),
        ({"hash": 1, "bits": "ff03", "extra": 0}, "keys"),
        ("not a report", "keys"),
    ],
)
def test_hostile_reports_are_refused_naming_index_and_field(report: object, field: str) -> None:
    with pytest.raises(InvalidData) as info:
        summarize(CMS, [GOOD, GOOD, report])  # type: ignore[list-item]  # hostile input under test
    text = str(info.value)
    assert "report 2" in text and (field in text if field != "keys" else "exactly the keys" in text)
    assert len(text) < 400  # never echoes a huge value


def test_summarize_accepts_the_good_report_and_an_empty_batch() -> None:
    assert summarize(CMS, [GOOD]).n == 1 and summarize(CMS, []).n == 0


def _summary_json(**change: Any) -> dict[str, Any]:
    with device_entropy(3):
        obj = summarize(CMS, simulate_reports(CMS, VALUES)).to_json()
    obj.update(change)
    return obj


@pytest.mark.parametrize(
    "obj",
    [
        [],
        _summary_json(extra=1),
        _summary_json(fingerprint="0" * 64),
        _summary_json(scheme="hcms"),
        _summary_json(n=True),
        _summary_json(n=-1),
        _summary_json(n=59),  # hash_n no longer sums to n
        _summary_json(counts={"hash_n": [20, 20, 20]}),
        _summary_json(counts={"hash_n": [20, 20, 20], "ones": [[0] * 10] * 2}),
        _summary_json(counts={"hash_n": [20, 20, 20], "ones": [[0] * 10, [0] * 10, [0] * 9 + [True]]}),
        _summary_json(counts={"hash_n": [20, 20, 20], "ones": [[0] * 10, [0] * 10, [0] * 9 + [1.0]]}),
        _summary_json(counts={"hash_n": [20, 20, 20], "ones": [[0] * 10, [0] * 10, [0] * 9 + [21]]}),
        _summary_json(counts={"hash_n": [20, 20, 20], "ones": [[0] * 10, [0] * 10, [0] * 9 + [-1]]}),
        _summary_json(counts={"hash_n": [30, 31, -1], "ones": [[0] * 10] * 3}),
    ],
)
def test_hostile_summary_json_is_refused(obj: object) -> None:
    with pytest.raises(InvalidData):
        Summary.from_json(CMS, obj)


def test_estimate_checks_its_inputs() -> None:
    krr = SCHEMES[3]
    summary = summarize(krr, _reports(krr))
    table = estimate(krr, summary)
    assert isinstance(table, FrequencyTable) and table.candidates == ["a", "b", "c"]
    assert abs(float(table.estimate.sum()) - len(VALUES)) < 1e-9  # GRR estimates sum to n
    assert estimate(krr, summary, ["c"]).candidates == ["c"]
    with pytest.raises(UsageError, match="dictionary"):
        estimate(krr, summary, ["zz"])
    with pytest.raises(UsageError, match="alpha"):
        estimate(krr, summary, alpha=1.5)
    with pytest.raises(UsageError, match="not built with this scheme"):
        estimate(CMS, summary, ["a"])
    cms_summary = summarize(CMS, _reports(CMS))
    for bad in (None, "a", [], [1]):
        with pytest.raises(UsageError):
            estimate(CMS, cms_summary, bad)  # type: ignore[arg-type]  # the check under test


@pytest.mark.parametrize("scheme", SCHEMES, ids=IDS)
def test_estimates_of_an_empty_summary_have_the_right_shape(scheme: Scheme) -> None:
    candidates = None if isinstance(scheme, KrrScheme | OueScheme) else ["a", "b"]
    table = estimate(scheme, Summary.empty(scheme), candidates)
    assert table.estimate.shape == table.std_error.shape == (len(table.candidates),)
    assert table.significant is not None and not table.significant.any()


def test_high_epsilon_estimates_are_close_for_every_scheme() -> None:
    values = ["ab"] * 3000 + ["ba"] * 2000 + ["c"] * 1000
    schemes: list[Scheme] = [
        RapporScheme(num_bits=64, num_hashes=2, num_cohorts=8, epsilon_lifetime=Fraction(16), epsilon_irr=Fraction(20)),
        CmsScheme(num_hashes=32, num_buckets=256, epsilon=Fraction(8)),
        HcmsScheme(num_hashes=32, num_buckets=256, epsilon=Fraction(8)),
        KrrScheme(dictionary=("ab", "ba", "c", "d"), epsilon=Fraction(8)),
        OueScheme(dictionary=("ab", "ba", "c", "d"), epsilon=Fraction(8)),
        PrefixScheme(
            alphabet="abc", max_length=2, segment_length=1, num_hashes=32, num_buckets=256, epsilon=Fraction(8)
        ),
    ]
    for scheme in schemes:
        with deterministic_entropy(11):
            summary = simulate_summary(scheme, values)
        table = estimate(scheme, summary, ["ab", "ba", "c", "d"])
        assert np.allclose(table.estimate, [3000, 2000, 1000, 0], atol=300), (scheme.kind, table.estimate)
        assert table.significant is not None and list(table.significant) == [True, True, True, False], scheme.kind


def test_rappor_selection_flags_only_held_values() -> None:
    scheme = RapporScheme(
        num_bits=64, num_hashes=2, num_cohorts=16, epsilon_lifetime=Fraction(4), epsilon_irr=Fraction(8)
    )
    values, ranked = zipf_population(50, 20_000, 1.2)
    decoys = [f"nobody-{i}" for i in range(50)]
    with deterministic_entropy(5):
        summary = simulate_summary(scheme, values)
    table = estimate(scheme, summary, ranked + decoys)
    assert table.significant is not None
    flagged = {c for c, s in zip(table.candidates, table.significant, strict=True) if s}
    assert set(ranked[:3]) <= flagged <= set(ranked)
    assert table.details["selected"] < 100 and table.details["bonferroni_level"] == pytest.approx(0.05 / 100)
    unselected = table.estimate == 0
    assert np.isnan(table.std_error[unselected]).all()


def test_rappor_decoding_refuses_oversized_dictionaries() -> None:
    scheme = RapporScheme(
        num_bits=64, num_hashes=16, num_cohorts=1024, epsilon_lifetime=Fraction(4), epsilon_irr=Fraction(8)
    )
    summary = Summary.empty(scheme)
    with pytest.raises(UsageError, match="candidates"):
        estimate(scheme, summary, [f"c{i}" for i in range(4097)])
    with pytest.raises(UsageError, match="decoding matrix"):
        estimate(scheme, summary, [f"c{i}" for i in range(1000)])


def test_heavy_hitters_find_planted_values() -> None:
    scheme = PrefixScheme(
        alphabet="abcd", max_length=4, segment_length=1, num_hashes=16, num_buckets=128, epsilon=Fraction(6)
    )
    values = (
        ["abca"] * 4000 + ["dd"] * 3000 + ["bad"] * 2000 + [w for w in ("a", "b", "c", "d", "cab") for _ in range(100)]
    )
    with deterministic_entropy(17):
        summary = simulate_summary(scheme, values)
    table = heavy_hitters(scheme, summary, 3)
    assert table.candidates == ["abca", "dd", "bad"]
    assert np.allclose(table.estimate, [4000, 3000, 2000], rtol=0.2)
    assert table.significant is not None and table.significant.all()
    with pytest.raises(UsageError):
        heavy_hitters(CMS, summary, 3)  # type: ignore[arg-type]  # the check under test
    for top, beam in ((0, None), (True, None), (5, 2)):
        with pytest.raises(UsageError):
            heavy_hitters(scheme, summary, top, beam=beam)


def test_theoretical_variance_needs_rappor_context_and_matches_dictionary_formulas() -> None:
    with pytest.raises(UsageError, match="RAPPOR"):
        theoretical_variance(SCHEMES[0], n=10, true_count=1)
    krr = SCHEMES[3]
    assert float(theoretical_variance(krr, n=100, true_count=0)) > 0
    cms = SCHEMES[1]
    averaged = float(theoretical_variance(cms, n=100, true_count=10))
    exact = float(theoretical_variance(cms, n=100, true_count=10, candidate="x", population={"x": 10, "y": 90}))
    assert averaged > 0 and exact > 0


def test_walsh_hadamard_transform_is_the_matrix_product() -> None:
    m = 16
    h = np.array([[hadamard_entry(r, c) for c in range(m)] for r in range(m)])
    rows = np.arange(3 * m, dtype=np.int64).reshape(3, m) - 20
    assert np.array_equal(_walsh_hadamard(rows), rows @ h)


def test_zipf_population_is_deterministic_and_exact() -> None:
    values, ranked = zipf_population(10, 1000, 1.1)
    assert len(values) == 1000 and values == zipf_population(10, 1000, 1.1)[0]
    counts = Counter(values)
    assert [counts[v] for v in ranked] == sorted((counts[v] for v in ranked), reverse=True)
    with pytest.raises(UsageError):
        zipf_population(0, 10, 1.0)


def test_simulate_summaries_counts_runs_and_refuses_nonsense() -> None:
    with deterministic_entropy(1):
        runs = simulate_summaries(SCHEMES[2], VALUES, 7)
    assert len(runs) == 7 and all(s.n == len(VALUES) for s in runs)
    with pytest.raises(UsageError):
        simulate_summaries(SCHEMES[2], VALUES, 0)
    with pytest.raises(UsageError):
        simulate_summaries(SCHEMES[3], ["zz"], 1)
