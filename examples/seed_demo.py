"""The seed example (lecture note 001), reproduced from public parameters, and the classical mechanisms.

Run with ``make demo``. Every line states the guarantee and the adjacency it holds under.
"""

from __future__ import annotations

import math

import numpy as np

from dpsense.accounting import advanced_composition, compose_basic, optimal_homogeneous_composition
from dpsense.accounting.gaussian_exact import balle_wang_delta, balle_wang_sigma
from dpsense.accounting.zcdp import zcdp_to_approx_tight
from dpsense.core import ZCDP, Adjacency, PureDP
from dpsense.mechanisms.discrete import discrete_gaussian, geometric
from dpsense.mechanisms.exponential import exponential_mechanism
from dpsense.mechanisms.gaussian import gaussian
from dpsense.mechanisms.laplace import laplace
from dpsense.mechanisms.local import randomized_response
from dpsense.mechanisms.local_estimators import estimate_proportion_rr
from dpsense.mechanisms.quantile import em_quantile
from dpsense.sensitivity import (
    Bounds,
    ContributionBound,
    count_rows_sensitivity,
    count_units_sensitivity,
    mean_sensitivity_public_n,
    sum_sensitivity,
    window_max_rows,
)

ADD_REMOVE, REPLACE = Adjacency.ADD_REMOVE, Adjacency.REPLACE


def rule(title: str) -> None:
    print(f"\n== {title} " + "=" * max(0, 90 - len(title)))


def main() -> None:
    rule("Seed example: a distinct-person count with the Laplace mechanism")
    person_ids = ["synthetic-a", "synthetic-a", "synthetic-b", "synthetic-c"]
    sens = count_units_sensitivity(adjacency=ADD_REMOVE)
    res = laplace(len(set(person_ids)), sensitivity=sens, epsilon=0.5)
    nominal = res.details["nominal_accuracy"]
    print("guarantee : pure ε-DP, add/remove one person (Dwork-Roth Thm 3.6)")
    print(f"public    : ε = 0.5, Δ = {sens}  ->  Laplace scale b = Δ/ε = {nominal.scale:g}")
    print(
        f"accuracy  : E|noise| = b = {nominal.mean_abs_error:g};  95 % of |noise| <= b·ln 20 = {nominal.error_bound:.3f}"
    )
    print(f"sampled   : {res.accuracy}")
    print(
        f"release   : {res.value:.3f}   (cost {res.loss}; every output is a multiple of 2^{res.details['granularity_exponent']})"
    )
    print(f"density ratio of neighbouring counts <= e^(1/b) = e^0.5 = {math.exp(0.5):.4f}")

    rule("Seed table: global L1 sensitivity, stated per person and adjacency")
    c = ContributionBound(max_rows_per_unit=1000)
    one = ContributionBound(max_rows_per_unit=1)
    hours = Bounds(0, 24)
    n = 1000
    rows = [
        ("distinct persons", "add/remove one person", count_units_sensitivity(adjacency=ADD_REMOVE)),
        (
            "events, <= C=1000 rows/person",
            "add/remove one person",
            count_rows_sensitivity(adjacency=ADD_REMOVE, contribution=c),
        ),
        (
            "total hours, one value in [0,24]",
            "add/remove one person",
            sum_sensitivity(hours, adjacency=ADD_REMOVE, contribution=one),
        ),
        (
            f"mean hours, public n={n}",
            "replace one person",
            mean_sensitivity_public_n(hours, n, adjacency=REPLACE, contribution=one),
        ),
    ]
    for name, adj, value in rows:
        print(f"{name:36s} {adj:24s} Δ = {value}  ({float(value):g})")
    window = ContributionBound(max_rows_per_unit=window_max_rows(1, 30))
    print(
        f"{'total hours over a 30-day window':36s} {'add/remove one person':24s} Δ = "
        f"{sum_sensitivity(hours, adjacency=ADD_REMOVE, contribution=window)}  (1 row/day x 30 days x 24 h)"
    )

    rule("Other classical mechanisms (each exact or float-safe, noise from the OS CSPRNG)")
    g = gaussian(3.0, sensitivity=1, epsilon=0.5, delta=1e-6)
    classic = math.sqrt(2 * math.log(1.25 / 1e-6)) / 0.5
    print(
        f"Gaussian      (ε=0.5, δ=1e-6)-DP, add/remove: σ Balle-Wang {g.details['sigma_balle_wang']:.3f} "
        f"(classic formula {classic:.3f}); sampled σ {g.details['sigma']:.3f}; release {g.value:.3f}"
    )
    classic20 = math.sqrt(2 * math.log(1.25 / 1e-6)) / 20
    achieved = balle_wang_delta(epsilon=20, sigma=classic20, sensitivity=1)
    print(
        f"              the classic formula holds only for ε < 1: at ε=20 its σ = {classic20:.4f} gives δ = {achieved:.1e}"
        f" > 1e-6; Balle-Wang asks σ = {balle_wang_sigma(epsilon=20, delta=1e-6, sensitivity=1):.4f}"
    )
    geo = geometric(3, sensitivity=1, epsilon=0.5)
    print(f"geometric     pure ε=0.5, add/remove: integer release {geo.value} ({geo.accuracy})")
    dg = discrete_gaussian(3, sensitivity=1, rho=0.125)
    print(f"discrete Gauss ρ=0.125 zCDP: integer release {dg.value} (σ² = {dg.details['sigma2']})")
    ages = (20 + (np.arange(501) * 37) % 31 + (np.arange(501) % 7)).astype(float)  # synthetic, deterministic
    med = em_quantile(ages, q=0.5, bounds=(0, 120), epsilon=1)
    print(
        f"EM median     pure ε=1 (Smith 2011), add/remove or replace one record: {med.value:.2f} (true {np.median(ages):g})"
    )
    em = exponential_mechanism([3, 10, 9, 1], epsilon=1, sensitivity=1, candidates=["north", "south", "east", "west"])
    print(f"EM choice     pure ε=1, utility sensitivity 1: chose {em.value!r} (utilities 3, 10, 9, 1)")
    truth = (np.arange(100_000) % 10 < 3).astype(np.int8)  # 30 % say yes
    rr = randomized_response(truth, epsilon=1)
    est = estimate_proportion_rr(rr.value, epsilon=1)
    print(f"rand. resp.   ε=1 local DP per user: estimate {est.value:.4f} ± {math.sqrt(est.variance):.4f} (truth 0.3)")

    rule("Accounting: 100 releases at ε=0.1, δ=0")
    print(f"basic      {compose_basic([PureDP('0.1')] * 100)}")
    print(f"advanced   {advanced_composition(epsilon='0.1', delta=0, k=100, delta_prime=1e-5)}")
    print(f"optimal    {optimal_homogeneous_composition(epsilon='0.1', delta=0, k=100, delta_prime=1e-5)}")
    total = compose_basic([PureDP("0.1").as_zcdp()] * 100)
    assert isinstance(total, ZCDP)
    print(
        f"zCDP       {PureDP('0.1').as_zcdp()} each, {total} in all -> {zcdp_to_approx_tight(total, 1e-5)} (CKS 2020)"
    )


if __name__ == "__main__":
    main()
