"""Audit scenarios for the data-dependent mechanisms: smooth sensitivity and Propose-Test-Release.

Provides neighbouring pairs, chosen to be as hard as possible, on which every data-dependent release
(the smooth median, quantile, trimmed mean, closest pair and triangle count with every noise family
of ``dpsense.mechanisms.smooth_noise``; the PTR releases; ``inverse_sensitivity_median``) is run many
times, and ``dpsense.audit.empirical.epsilon_lower_bound`` bounds its loss from below against the
claimed pure ε, (ε, δ) or ρ-zCDP (audited at the (ε, δ) of ``zcdp_to_approx_tight``). The ``control:``
scenarios are broken variants that must be flagged. How the pairs were found, the expected readings
and the four controls: docs/math/smooth-sensitivity.md §3.5. Sampling: ``SmoothLaw.sample`` computes
f(x) and S(x) once with the product functions and applies ``release_with_smooth_bound``'s arithmetic
to a vector of product noise (the same law as n calls; PTR likewise); ``(end to end)`` scenarios call
the public function per output and are ``slow``. Nothing in this module is on a release path.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from dpsense.audit._types import Sampler, Scenario
from dpsense.audit.ptr_laws import (
    NAIVE_X,
    NAIVE_Y,
    PTR,
    PTR_BOUNDS,
    PTR_FAR,
    PTR_LINE_BOX,
    PTR_LINE_STABLE,
    PTR_LINE_UNSTABLE,
    PTR_STABLE,
    PTR_TRIM_STABLE,
    PTR_TRIM_UNSTABLE,
    PTR_UNSTABLE,
    control_half_threshold,
    control_naive_ptr,
    ptr_end_to_end_pair,
    ptr_median_statistic,
    ptr_min_distance_statistic,
    ptr_pair,
    ptr_trimmed_mean_statistic,
)
from dpsense.audit.smooth_laws import (
    CAUCHY,
    CLUSTER_BOX,
    F64,
    FLAT_X,
    FLAT_Y,
    GAUSSIAN,
    JUMP_X,
    JUMP_Y,
    LAPLACE,
    LINE_BOX,
    LINE_X,
    LINE_Y,
    LLN,
    MEDIAN_BOUNDS,
    POINTS_A,
    POINTS_A_COLLAPSED,
    POINTS_B,
    POINTS_B_MERGED,
    POLYNOMIAL,
    SEED_X,
    SEED_Y,
    SHIFT_X,
    SHIFT_Y,
    STUDENT_T,
    TRIANGLE_VERTICES,
    TRIANGLES,
    TRIANGLES_PLUS,
    TRIM,
    TRIM_LLN_X,
    TRIM_LLN_Y,
    TRIM_X,
    TRIM_Y,
    ULN,
    UNIT_BOX,
    Noise,
    control_local_sensitivity,
    control_truncated_loop,
    control_wrong_beta,
    end_to_end_pair,
    median_public_n_statistic,
    median_statistic,
    min_distance_statistic,
    pair_sampler,
    smooth_pair,
    triangle_statistic,
    trimmed_mean_public_n_statistic,
    trimmed_mean_statistic,
)
from dpsense.mechanisms.inverse_family import inverse_sensitivity_with_family
from dpsense.mechanisms.inverse_sensitivity import inverse_sensitivity_median
from dpsense.sensitivity.order_statistics import OrderStatisticFamily, median_rank

# --------------------------------------------------------------------------------------------------
# The inverse-sensitivity median (a data-dependent output law without a noise scale).

INVERSE_BOUNDS = (0.0, 8.0)
INVERSE_RESOLUTION = 8
#: The worst pair for the inverse-sensitivity median on the 8 public cells of [0, 8] (exhaustive over
#: all multisets of n = 5 cells and all replacements, exact output laws): replacing a 0.5 by 7.5 moves
#: the median from cell 6 to cell 7 and the path length of every cell by one. Exact loss 0.82 (ε = 1).
INVERSE_X = (0.5, 0.5, 6.5, 7.5, 7.5)
INVERSE_Y = (0.5, 6.5, 7.5, 7.5, 7.5)


def inverse_family_scenarios() -> list[Scenario]:
    """``inverse_sensitivity_with_family`` with the order-statistic family, on the median shift pair."""

    def draw(data: Sequence[float], n: int) -> F64:
        x = np.sort(np.asarray(data, dtype=np.float64))
        family = OrderStatisticFamily(x, median_rank(x.size), MEDIAN_BOUNDS)
        value = float(x[median_rank(x.size) - 1])
        return np.asarray(
            [
                inverse_sensitivity_with_family(
                    value, family, output_range=MEDIAN_BOUNDS, epsilon=1, resolution=16
                ).value
                for _ in range(n)
            ],
            dtype=np.float64,
        )

    return [
        Scenario(
            "inverse_sensitivity_with_family median (end to end)",
            1.0,
            0.0,
            "(50,50,50,70,M,M,M) vs 70->M: every path length moves",
            pair_sampler(draw, SHIFT_X, SHIFT_Y),
            slow=True,
        )
    ]


def inverse_sensitivity_scenarios() -> list[Scenario]:
    """``inverse_sensitivity_median`` (Asi-Duchi; exact sampling), end to end on its worst pair."""

    def draw(data: Sequence[float], n: int) -> F64:
        return np.asarray(
            [
                float(
                    inverse_sensitivity_median(
                        data, bounds=INVERSE_BOUNDS, epsilon=1, resolution=INVERSE_RESOLUTION
                    ).value
                )
                for _ in range(n)
            ],
            dtype=np.float64,
        )

    return [
        Scenario(
            "inverse_sensitivity_median (end to end)",
            1.0,
            0.0,
            "8 cells: (.5,.5,6.5,7.5,7.5) vs .5->7.5 (every len moves)",
            pair_sampler(draw, INVERSE_X, INVERSE_Y),
            slow=True,
        )
    ]


# --------------------------------------------------------------------------------------------------
# The registry.


def _smooth(
    name: str, noise: Noise, neighbours: str, sample: Sampler, *, control: bool = False, slow: bool = False
) -> Scenario:
    epsilon, delta = noise.claim()
    return Scenario(name, epsilon, delta, neighbours, sample, control=control, slow=slow)


def smooth_release_scenarios() -> list[Scenario]:
    """The smooth-sensitivity releases, every noise family, on their adversarial pairs."""
    median = median_statistic(MEDIAN_BOUNDS)
    trim = trimmed_mean_statistic(TRIM, MEDIAN_BOUNDS)
    line = min_distance_statistic(LINE_BOX)
    plane = min_distance_statistic(UNIT_BOX)
    cluster = min_distance_statistic(CLUSTER_BOX)
    graph = triangle_statistic(TRIANGLE_VERTICES)
    seed = "seed (0,0,0,0,0,M,M) vs (0,0,0,0,M,M,M), M=100"
    shift = "(50,50,50,70,M,M,M) vs 70->M: Δf=LS, S x e^β"
    out = [
        _smooth("smooth_median cauchy: seed pair", CAUCHY, seed, smooth_pair(median, SEED_X, SEED_Y, CAUCHY)),
        _smooth("smooth_median laplace: seed pair", LAPLACE, seed, smooth_pair(median, SEED_X, SEED_Y, LAPLACE)),
    ]
    for noise in (CAUCHY, STUDENT_T, POLYNOMIAL, LAPLACE, GAUSSIAN, LLN, ULN):
        out.append(
            _smooth(
                f"smooth_median {noise.label}: shift pair",
                noise,
                shift,
                smooth_pair(median, SHIFT_X, SHIFT_Y, noise),
            )
        )
    out += [
        _smooth(
            "smooth_median cauchy (end to end)",
            CAUCHY,
            shift,
            end_to_end_pair(median, SHIFT_X, SHIFT_Y, CAUCHY),
            slow=True,
        ),
        _smooth(
            "smooth_median cauchy: far-jump pair",
            CAUCHY,
            "(0..6,M,M) vs 6->M, n=9: A^(2) jumps to 96",
            smooth_pair(median, JUMP_X, JUMP_Y, CAUCHY),
        ),
        _smooth(
            "smooth_trimmed_mean cauchy",
            CAUCHY,
            "m=1 (50 x6, 80) vs 50->100: Δf=LS=6, S x e^β",
            smooth_pair(trim, TRIM_X, TRIM_Y, CAUCHY),
        ),
        _smooth(
            "smooth_trimmed_mean uln",
            ULN,
            "m=1 (50 x6, 80) vs 50->100: Δf=LS=6, S x e^β",
            smooth_pair(trim, TRIM_X, TRIM_Y, ULN),
        ),
        _smooth(
            "smooth_trimmed_mean lln",
            LLN,
            "m=1 (30,30,70x4,90) vs 30->100: Δf=12, S x e^β",
            smooth_pair(trim, TRIM_LLN_X, TRIM_LLN_Y, LLN),
        ),
        _smooth(
            "smooth_trimmed_mean lln (end to end)",
            LLN,
            "m=1 (30,30,70x4,90) vs 30->100: Δf=12, S x e^β",
            end_to_end_pair(trim, TRIM_LLN_X, TRIM_LLN_Y, LLN),
            slow=True,
        ),
    ]
    # Add/remove with a public n (the release system's smooth quantiles and trimmed means): adding
    # one record M to the seven below resizes (drops the smallest) to the replace pair above.
    n = len(SEED_X)
    median_n = median_public_n_statistic(MEDIAN_BOUNDS, n)
    trim_n = trimmed_mean_public_n_statistic(TRIM, MEDIAN_BOUNDS, n)
    out += [
        _smooth(
            "smooth_median cauchy, add/remove, public n: seed pair",
            CAUCHY,
            "seed x vs x + {M}, n = 7: resized to the seed replace pair",
            smooth_pair(median_n, SEED_X, (*SEED_X, MEDIAN_BOUNDS[1]), CAUCHY),
        ),
        _smooth(
            "smooth_trimmed_mean cauchy, add/remove, public n",
            CAUCHY,
            "m=1 (50 x6, 80) vs + {100}, n = 7: resized to the replace pair above",
            smooth_pair(trim_n, TRIM_X, (*TRIM_X, MEDIAN_BOUNDS[1]), CAUCHY),
        ),
    ]
    line_text = "1-D (6,9,10,11,12) vs 6->9: f 1->0, S x e^-β"
    a_text = "A (20 uniform) vs point 19 onto 15: f->0, S/1.5"
    out += [
        _smooth("smooth_min_distance 1-D cauchy", CAUCHY, line_text, smooth_pair(line, LINE_X, LINE_Y, CAUCHY)),
        _smooth("smooth_min_distance 1-D laplace", LAPLACE, line_text, smooth_pair(line, LINE_X, LINE_Y, LAPLACE)),
        _smooth(
            "smooth_min_distance A cauchy",
            CAUCHY,
            a_text,
            smooth_pair(plane, POINTS_A, POINTS_A_COLLAPSED, CAUCHY),
        ),
        _smooth(
            "smooth_min_distance A laplace",
            LAPLACE,
            a_text,
            smooth_pair(plane, POINTS_A, POINTS_A_COLLAPSED, LAPLACE),
        ),
        _smooth(
            "smooth_min_distance A cauchy (end to end)",
            CAUCHY,
            a_text,
            end_to_end_pair(plane, POINTS_A, POINTS_A_COLLAPSED, CAUCHY),
            slow=True,
        ),
        _smooth(
            "smooth_min_distance B cauchy",
            CAUCHY,
            "B (cluster+(10,10)) vs outlier->(.005,.005): S x e^-β",
            smooth_pair(cluster, POINTS_B, POINTS_B_MERGED, CAUCHY),
        ),
    ]
    tri_text = "2 triangles on hub 5 + edge 0-5, vs +2-4: Δf=LS, S x e^β"
    out += [
        _smooth(
            "smooth_triangle_count cauchy", CAUCHY, tri_text, smooth_pair(graph, TRIANGLES, TRIANGLES_PLUS, CAUCHY)
        ),
        _smooth(
            "smooth_triangle_count laplace", LAPLACE, tri_text, smooth_pair(graph, TRIANGLES, TRIANGLES_PLUS, LAPLACE)
        ),
        _smooth(
            "smooth_triangle_count cauchy (end to end)",
            CAUCHY,
            tri_text,
            end_to_end_pair(graph, TRIANGLES, TRIANGLES_PLUS, CAUCHY),
            slow=True,
        ),
    ]
    return out


def smooth_control_scenarios() -> list[Scenario]:
    """Broken smooth releases (controls 1-3): the audit must flag each of them."""
    median = median_statistic(MEDIAN_BOUNDS)
    trim = trimmed_mean_statistic(TRIM, MEDIAN_BOUNDS)
    seed = "seed pair: LS(x)=0, the output is exactly 0"
    return [
        _smooth(
            "control: median noise ∝ LS (cauchy)",
            CAUCHY,
            seed,
            control_local_sensitivity(median, SEED_X, SEED_Y, CAUCHY),
            control=True,
        ),
        _smooth(
            "control: trimmed mean noise ∝ LS (lln)",
            LLN,
            "(50 x7) vs 50->100: LS(x)=0, exact output",
            control_local_sensitivity(trim, FLAT_X, FLAT_Y, LLN),
            control=True,
        ),
        _smooth(
            "control: median k-loop cut at K=2, no tail",
            CAUCHY,
            "far-jump pair: S_K ratio 48 (x: 2e^-β, x': 96e^-β)",
            control_truncated_loop(median, JUMP_X, JUMP_Y, CAUCHY, terms=2),
            control=True,
        ),
        _smooth(
            "control: median S at β=2ε, cauchy for β=ε/2",
            CAUCHY,
            "seed pair: S ratio e^2",
            control_wrong_beta(median, SEED_X, SEED_Y, CAUCHY, beta=2.0),
            control=True,
        ),
        _smooth(
            "control: median S(β=ε), Lap noise for β=0.14",
            LAPLACE,
            "far-jump pair: S ratio e, tails beyond δ",
            control_wrong_beta(median, JUMP_X, JUMP_Y, LAPLACE, beta=1.0),
            control=True,
        ),
    ]


def ptr_scenarios() -> list[Scenario]:
    """PTR on pairs that cross instability, and the naive-threshold controls (control 4)."""
    med = ptr_median_statistic(PTR_BOUNDS)
    trim = ptr_trimmed_mean_statistic(TRIM, PTR_BOUNDS)
    line = ptr_min_distance_statistic(PTR_LINE_BOX)
    eps = PTR.epsilon_test + PTR.epsilon_release
    med_text = "(0,0,0,0,1,20,20) vs 0->20: Δf=b, dist 1->0 (pure)"
    trim_text = "m=1 (0 x6, 5) vs 0->20: Δf=b, dist 1->0 (pure)"
    line_text = "1-D (0,0,1,2) vs 0->6: Δf=b, dist 1->0 (pure)"
    far_text = "(0,0,0,1,20,20,20) vs 1->20: both unstable"
    return [
        Scenario("ptr_order_statistic", eps, 0.0, med_text, ptr_pair(med, PTR_STABLE, PTR_UNSTABLE)),
        Scenario(
            "ptr_order_statistic (end to end)",
            eps,
            0.0,
            med_text,
            ptr_end_to_end_pair(med, PTR_STABLE, PTR_UNSTABLE),
            slow=True,
        ),
        Scenario("ptr_order_statistic: unstable pair", eps, PTR.delta, far_text, ptr_pair(med, PTR_UNSTABLE, PTR_FAR)),
        Scenario("ptr_trimmed_mean", eps, 0.0, trim_text, ptr_pair(trim, PTR_TRIM_STABLE, PTR_TRIM_UNSTABLE)),
        Scenario(
            "ptr_trimmed_mean (end to end)",
            eps,
            0.0,
            trim_text,
            ptr_end_to_end_pair(trim, PTR_TRIM_STABLE, PTR_TRIM_UNSTABLE),
            slow=True,
        ),
        Scenario("ptr_min_distance 1-D", eps, 0.0, line_text, ptr_pair(line, PTR_LINE_STABLE, PTR_LINE_UNSTABLE)),
        Scenario(
            "ptr_min_distance 1-D (end to end)",
            eps,
            0.0,
            line_text,
            ptr_end_to_end_pair(line, PTR_LINE_STABLE, PTR_LINE_UNSTABLE),
            slow=True,
        ),
        Scenario(
            "control: naive PTR (removal count, 0.5)",
            eps,
            PTR.delta,
            "(0,0,0,2,2) vs (0,0,2,2,2): naive count 0 vs 3",
            control_naive_ptr(NAIVE_X, NAIVE_Y),
            control=True,
        ),
        Scenario(
            "control: PTR valid distance, threshold 0.5",
            eps,
            PTR.delta,
            far_text,
            control_half_threshold(med, PTR_UNSTABLE, PTR_FAR),
            control=True,
        ),
    ]


def smooth_scenarios() -> list[Scenario]:
    """Every data-dependent mechanism on its adversarial pairs, then the controls (registered in the CLI)."""
    scenarios = (
        smooth_release_scenarios() + ptr_scenarios() + inverse_sensitivity_scenarios() + inverse_family_scenarios()
    )
    return sorted(scenarios + smooth_control_scenarios(), key=lambda s: s.control)  # stable: controls last
