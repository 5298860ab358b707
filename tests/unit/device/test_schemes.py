"""Scheme descriptors: JSON round trip, strict parsing of hostile input, the stated guarantees."""

from __future__ import annotations

import json
import math
from fractions import Fraction
from typing import Any

import pytest

from dpsense.device import (
    CmsScheme,
    HcmsScheme,
    KrrScheme,
    OueScheme,
    PrefixScheme,
    RapporScheme,
    Scheme,
    SchemeError,
    scheme_from_json,
)

SCHEMES: list[Scheme] = [
    RapporScheme(
        num_bits=128, num_hashes=2, num_cohorts=64, epsilon_lifetime=Fraction("1.0986"), epsilon_irr=Fraction("2")
    ),
    CmsScheme(num_hashes=64, num_buckets=1024, epsilon=Fraction("4")),
    HcmsScheme(num_hashes=64, num_buckets=1024, epsilon=Fraction("4")),
    KrrScheme(dictionary=("a", "b", "c"), epsilon=Fraction("1.5")),
    OueScheme(dictionary=("a", "b", "c", "d"), epsilon=Fraction("0.5")),
    PrefixScheme(alphabet="abc", max_length=6, segment_length=2, num_hashes=8, num_buckets=256, epsilon=Fraction("3")),
]


@pytest.mark.parametrize("scheme", SCHEMES, ids=lambda s: s.kind)
def test_json_round_trip_is_exact_and_canonical(scheme: Scheme) -> None:
    obj = json.loads(json.dumps(scheme.to_json()))
    again = scheme_from_json(obj)
    assert again == scheme and again.fingerprint() == scheme.fingerprint()
    assert obj["scheme"] == scheme.kind and obj["version"] == 1
    assert len(scheme.fingerprint()) == 64


@pytest.mark.parametrize("scheme", SCHEMES, ids=lambda s: s.kind)
def test_guarantee_states_epsilon_lifetime_and_theorem(scheme: Scheme) -> None:
    g = scheme.guarantee()
    assert set(g) == {"model", "adjacency", "epsilon_per_report", "epsilon_lifetime", "repeated_reports", "theorem"}
    assert Fraction(g["epsilon_per_report"]) > 0
    assert "docs/math/local-collection.md" in g["theorem"] or "docs/math/local-dp.md" in g["theorem"]
    assert (g["epsilon_lifetime"] is None) == (scheme.kind != "rappor")


def test_rappor_per_report_epsilon_is_the_composed_channel_rounded_up() -> None:
    scheme = RapporScheme(
        num_bits=16, num_hashes=2, num_cohorts=1, epsilon_lifetime=Fraction("1.0986"), epsilon_irr=Fraction("2")
    )
    h, a, b = 2, 1.0986 / 4, 2 / 4
    phi, g = 1 / (math.exp(a) + 1), 1 / (math.exp(b) + 1)
    rho = phi * (1 - g) + g * (1 - phi)
    exact = 2 * h * math.log((1 - rho) / rho)
    stated = float(scheme.guarantee()["epsilon_per_report"])
    assert exact <= stated <= exact + 1e-9
    assert stated < 1.0986 and scheme.guarantee()["epsilon_lifetime"] == "1.0986"


def _rappor_json(**change: Any) -> dict[str, Any]:
    obj = SCHEMES[0].to_json()
    obj.update(change)
    return obj


@pytest.mark.parametrize(
    ("obj", "field"),
    [
        ([], "(scheme)"),
        ({"scheme": "nope", "version": 1}, "scheme"),
        (_rappor_json(version=2), "version"),
        (_rappor_json(version=True), "version"),
        (_rappor_json(extra=1), "extra"),
        ({k: v for k, v in _rappor_json().items() if k != "num_bits"}, "num_bits"),
        (_rappor_json(num_bits=True), "num_bits"),
        (_rappor_json(num_bits=128.0), "num_bits"),
        (_rappor_json(num_bits=10**9), "num_bits"),
        (_rappor_json(num_hashes=0), "num_hashes"),
        (_rappor_json(num_cohorts=1024, num_bits=128), "num_bits x num_cohorts"),
        (_rappor_json(epsilon_lifetime=1.0986), "epsilon_lifetime"),
        (_rappor_json(epsilon_lifetime="NaN"), "epsilon_lifetime"),
        (_rappor_json(epsilon_lifetime="inf"), "epsilon_lifetime"),
        (_rappor_json(epsilon_lifetime=Fraction("0")), "epsilon_lifetime"),
        (_rappor_json(epsilon_lifetime="-1"), "epsilon_lifetime"),
        (_rappor_json(epsilon_lifetime="1e3"), "epsilon_lifetime"),
        (_rappor_json(epsilon_irr=Fraction("21")), "epsilon_irr"),
        (_rappor_json(epsilon_irr="1." + "1" * 40), "epsilon_irr"),
        (
            {"scheme": "cms", "version": 1, "num_hashes": 65536, "num_buckets": 65536, "epsilon": "1"},
            "num_hashes x num_buckets",
        ),
        ({"scheme": "hcms", "version": 1, "num_hashes": 4, "num_buckets": 1000, "epsilon": "1"}, "num_buckets"),
        ({"scheme": "krr", "version": 1, "dictionary": ["a"], "epsilon": "1"}, "dictionary"),
        ({"scheme": "krr", "version": 1, "dictionary": ["a", "a"], "epsilon": "1"}, "dictionary"),
        ({"scheme": "krr", "version": 1, "dictionary": ["a", 3], "epsilon": "1"}, "dictionary"),
        ({"scheme": "krr", "version": 1, "dictionary": "ab", "epsilon": "1"}, "dictionary"),
        ({"scheme": "oue", "version": 1, "dictionary": [str(i) for i in range(20000)], "epsilon": "1"}, "dictionary"),
        ({"scheme": "krr", "version": 1, "dictionary": ["a", "b" * 5000], "epsilon": "1"}, "dictionary"),
        (
            {
                "scheme": "prefix",
                "version": 1,
                "alphabet": "a\x00",
                "max_length": 4,
                "segment_length": 1,
                "num_hashes": 4,
                "num_buckets": 64,
                "epsilon": "1",
            },
            "alphabet",
        ),
        (
            {
                "scheme": "prefix",
                "version": 1,
                "alphabet": "abcdefghijklmnopqrstuvwxyz",
                "max_length": 8,
                "segment_length": 3,
                "num_hashes": 4,
                "num_buckets": 64,
                "epsilon": "1",
            },
            "segment_length",
        ),
    ],
)
def test_hostile_json_is_refused_naming_the_field(obj: object, field: str) -> None:
    with pytest.raises(SchemeError) as info:
        scheme_from_json(obj)
    assert info.value.field == field
    assert "Fix:" in str(info.value) and len(str(info.value)) < 400  # never echoes a huge value
    assert isinstance(info.value, ValueError)


def test_python_constructors_check_too_and_normalise_epsilon() -> None:
    assert CmsScheme(num_hashes=1, num_buckets=2, epsilon=Fraction(1, 4)).epsilon == Fraction(1, 4)
    assert CmsScheme(num_hashes=1, num_buckets=2, epsilon=Fraction(2)).to_json()["epsilon"] == "2"
    with pytest.raises(SchemeError, match="epsilon"):
        CmsScheme(num_hashes=1, num_buckets=2, epsilon=Fraction(1, 3))  # no finite decimal: cannot travel
    with pytest.raises(SchemeError, match="epsilon"):
        CmsScheme(num_hashes=1, num_buckets=2, epsilon=0.5)  # type: ignore[arg-type]  # the check under test
    with pytest.raises(SchemeError, match="num_buckets"):
        CmsScheme(num_hashes=1, num_buckets=True, epsilon=Fraction("1"))  # a bool is not a size


def test_prefix_levels() -> None:
    s = PrefixScheme(alphabet="ab", max_length=5, segment_length=2, num_hashes=1, num_buckets=2, epsilon=Fraction("1"))
    assert s.levels == 3 and [s.prefix_length(t) for t in range(3)] == [2, 4, 5]
