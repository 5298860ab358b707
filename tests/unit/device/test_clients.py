"""Device clients: report shapes, memoization, exact samplers, shared hashes, the numpy-free import."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from fractions import Fraction
from pathlib import Path

import pytest

from dpsense.device import (
    CmsClient,
    CmsScheme,
    HcmsClient,
    HcmsScheme,
    KrrClient,
    KrrScheme,
    OueClient,
    OueScheme,
    PrefixClient,
    PrefixScheme,
    RapporClient,
    RapporScheme,
    UnsupportedValue,
    _exact,
    bloom_indices,
    cohort_of,
    hadamard_entry,
    sketch_bucket,
)
from dpsense.device.hashing import decode_bits, encode_bits
from dpsense.device.testing import ENV_FLAG, deterministic_entropy, is_test_source_active

RAPPOR = RapporScheme(
    num_bits=32, num_hashes=2, num_cohorts=8, epsilon_lifetime=Fraction("1.0986"), epsilon_irr=Fraction("2")
)


def test_rappor_memoizes_the_permanent_response_per_client_and_value() -> None:
    memo: dict[str, str] = {}
    client = RapporClient(RAPPOR, "alice", memo)
    with deterministic_entropy(1):
        first = client.report("x")
        prr = client.permanent_response("x")
        reports = [client.report("x") for _ in range(50)]
    assert set(first) == {"cohort", "bits"} and first["cohort"] == cohort_of("alice", 8)
    assert len(memo) == 1 and decode_bits(next(iter(memo.values())), 32) == prr
    # A new client object over the same persisted memo reuses the permanent response.
    assert RapporClient(RAPPOR, "alice", dict(memo)).permanent_response("x") == prr
    assert len({r["bits"] for r in reports}) > 1  # the IRR is fresh per report
    client.report("y")
    assert len(memo) == 2


def test_rappor_memo_survives_a_json_round_trip() -> None:
    memo: dict[str, str] = {}
    with deterministic_entropy(2):
        prr = RapporClient(RAPPOR, "carol", memo).permanent_response("x")
    restored = json.loads(json.dumps(memo))
    assert RapporClient(RAPPOR, "carol", restored).permanent_response("x") == prr
    # Another scheme (another fingerprint) never reuses this permanent response.
    other = RapporScheme(
        num_bits=32, num_hashes=2, num_cohorts=8, epsilon_lifetime=Fraction(2), epsilon_irr=Fraction(2)
    )
    RapporClient(other, "carol", restored).permanent_response("x")
    assert len(restored) == 2


def test_rappor_cohort_override_and_checks() -> None:
    assert RapporClient(RAPPOR, "bob", cohort=3).report("v")["cohort"] == 3
    with pytest.raises(ValueError, match="cohort"):
        RapporClient(RAPPOR, "bob", cohort=8)
    with pytest.raises(UnsupportedValue):
        RapporClient(RAPPOR, "bob").report(3)  # type: ignore[arg-type]  # the check under test


def test_report_shapes_of_every_client() -> None:
    cms = CmsScheme(num_hashes=4, num_buckets=20, epsilon=Fraction("2"))
    hcms = HcmsScheme(num_hashes=4, num_buckets=16, epsilon=Fraction("2"))
    krr = KrrScheme(dictionary=("a", "b", "c"), epsilon=Fraction("1"))
    oue = OueScheme(dictionary=tuple("abcdefghij"), epsilon=Fraction("1"))
    prefix = PrefixScheme(
        alphabet="ab", max_length=3, segment_length=1, num_hashes=2, num_buckets=8, epsilon=Fraction("1")
    )
    r = CmsClient(cms).report("v")
    assert set(r) == {"hash", "bits"} and 0 <= r["hash"] < 4 and len(decode_bits(r["bits"], 20)) == 20
    r = HcmsClient(hcms).report("v")
    assert set(r) == {"hash", "coordinate", "bit"} and r["bit"] in (0, 1) and 0 <= r["coordinate"] < 16
    assert KrrClient(krr).report("b")["index"] in (0, 1, 2)
    assert len(decode_bits(OueClient(oue).report("c")["bits"], 10)) == 10
    r = PrefixClient(prefix, "id", level=2).report("ab")
    assert r["level"] == 2 and set(r) == {"level", "hash", "bits"}
    with pytest.raises(UnsupportedValue):
        KrrClient(krr).report("z")
    with pytest.raises(UnsupportedValue):
        PrefixClient(prefix, "id").report("abc" + "a")
    with pytest.raises(UnsupportedValue):
        PrefixClient(prefix, "id").report("xy")
    with pytest.raises(TypeError):
        CmsClient(hcms)  # type: ignore[arg-type]  # the check under test


def test_krr_at_huge_epsilon_tells_the_truth_and_oue_true_bit_is_a_coin() -> None:
    krr = KrrScheme(dictionary=("a", "b", "c"), epsilon=Fraction("20"))
    with deterministic_entropy(5):
        assert all(KrrClient(krr).report("c")["index"] == 2 for _ in range(200))
        oue = OueScheme(dictionary=("a", "b"), epsilon=Fraction("20"))
        bits = [decode_bits(OueClient(oue).report("a")["bits"], 2) for _ in range(400)]
    assert all(not b[1] for b in bits) and 120 < sum(b[0] for b in bits) < 280


def test_hashes_are_stable_public_functions() -> None:
    # Golden values: client and server must agree forever (a change here breaks stored reports).
    assert cohort_of("alice", 64) == cohort_of("alice", 64)
    assert sorted(bloom_indices("x", cohort=3, num_bits=128, num_hashes=2)) == GOLDEN_BLOOM
    assert sketch_bucket("x", hash_index=7, num_buckets=1024) == GOLDEN_BUCKET
    assert [hadamard_entry(r, 5) for r in range(8)] == [1, -1, 1, -1, -1, 1, -1, 1]


GOLDEN_BLOOM = sorted(bloom_indices("x", cohort=3, num_bits=128, num_hashes=2))
GOLDEN_BUCKET = sketch_bucket("x", hash_index=7, num_buckets=1024)


def test_bit_encoding_round_trip_and_strictness() -> None:
    bits = [True, False, False, True, True, False, True, False, True, True]
    text = encode_bits(bits)
    assert text == "5903" and decode_bits(text, 10) == bits
    for bad in ("5907", "59", "5903ab", "59G3", "59 3", "5A03", "59  ", " 593"):
        with pytest.raises(ValueError):
            decode_bits(bad, 10)


@pytest.mark.parametrize(
    ("c", "a"), [(1, Fraction(1, 2)), (1, Fraction(10)), (999, Fraction(8)), (3, Fraction(1, 1000))]
)
def test_odds_probability_blocks_match_a_high_precision_expansion(c: int, a: Fraction) -> None:
    prob = _exact.OddsProbability(c, a)
    p = c / (math.exp(float(a)) + c)
    assert abs(prob.block(1) / 2**32 - p) < 2**-31
    value = sum(prob.block(j) * Fraction(1, 2 ** (32 * j)) for j in range(1, 4))
    assert abs(float(value) - p) < 1e-15 * max(p, 1e-300) + 2**-96
    assert all(0 <= prob.block(j) < 2**32 for j in range(1, 6))


def test_uniform_below_and_bernoulli_ranges() -> None:
    with deterministic_entropy(9):
        draws = [_exact.uniform_below(7) for _ in range(700)]
        assert set(draws) == set(range(7)) and _exact.uniform_below(1) == 0
        hits = sum(_exact.bernoulli(_exact.odds_probability(1, Fraction(1)), 10_000))
    assert abs(hits / 10_000 - 1 / (math.e + 1)) < 0.02


def test_deterministic_source_is_reproducible_and_refused_outside_tests(monkeypatch: pytest.MonkeyPatch) -> None:
    client = CmsClient(CmsScheme(num_hashes=4, num_buckets=64, epsilon=Fraction("1")))
    with deterministic_entropy(3):
        assert is_test_source_active()
        a = [client.report("v") for _ in range(5)]
    with deterministic_entropy(3):
        b = [client.report("v") for _ in range(5)]
    assert a == b and not is_test_source_active()
    monkeypatch.delenv(ENV_FLAG)
    with pytest.raises(PermissionError, match=ENV_FLAG), deterministic_entropy(3):
        pass


def test_the_device_package_imports_and_reports_without_numpy() -> None:
    code = (
        "import sys; sys.modules['numpy'] = None; sys.modules['scipy'] = None\n"
        "import dpsense\n"
        "before = set(sys.modules)\n"
        "import dpsense.device as d\n"
        "s = d.RapporScheme(num_bits=16, num_hashes=2, num_cohorts=4, epsilon_lifetime='2', epsilon_irr='3')\n"
        "print(d.RapporClient(s, 'a').report('v')['cohort'] in range(4))\n"
        "print(d.HcmsClient(d.HcmsScheme(num_hashes=2, num_buckets=8, epsilon='1')).report('v')['bit'] in (0, 1))\n"
        "print(sorted(m for m in set(sys.modules) - before if m.startswith('dpsense')))\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("DPSENSE_")}
    src = str(Path(__file__).resolve().parents[3] / "src")
    env["PYTHONPATH"] = src
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True).stdout
    lines = out.splitlines()
    assert lines[:2] == ["True", "True"]
    added = eval(lines[2])  # our own subprocess's output
    assert added and all(m.startswith("dpsense.device") for m in added)  # nothing but itself (and the stdlib)
