"""Empirical privacy of every data-dependent mechanism on adversarial neighbours, with controls.

Each scenario of ``dpsense.audit.smooth_scenarios`` (smooth-sensitivity releases with every noise
family, PTR for order statistics, trimmed means and the closest pair) is sampled on its neighbouring
pair and ``epsilon_lower_bound`` (Clopper-Pearson, alpha = 1e-9, events chosen on a pilot half) bounds
the privacy loss from below. A correct mechanism must stay at or under its claim, whatever the
samples (the bound is valid with probability 1 - 1e-9); every ``control:`` scenario (noise calibrated
to LS, a k-loop without its tail term, S at a larger β than the noise, PTR with the threshold 0.5) must
be flagged. Margins measured over 12 repetitions at 200 000 samples: every control exceeds its claim
by at least 0.5, more than 15 standard deviations of its bound.

Fast scenarios draw their releases through the vectorised path (``SmoothLaw.sample``, ``ptr_draws``);
the tests below first check that path against the public mechanisms bit for bit, with the noise
sampler replaced by a fixed stream, and check that every pair is a pair of neighbours with the
extreme properties its docstring claims. ``(end to end)`` scenarios call the public function per output.

The ``HARD`` floors show the pairs are adversarial (the audit is not vacuous): the observed bounds
(minimum over 12 repetitions) lie well above them.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Iterator
from fractions import Fraction
from typing import Any

import numpy as np
import pytest

from dpsense.audit import ptr_laws as ptrl
from dpsense.audit import smooth_laws as laws
from dpsense.audit import smooth_scenarios as sc
from dpsense.audit.registry import all_scenarios
from dpsense.audit.scenarios import Scenario, run_audit
from dpsense.cli import main
from dpsense.mechanisms import smooth_noise
from dpsense.mechanisms.inverse_sensitivity import order_statistic_path_lengths
from dpsense.mechanisms.laplace import laplace_plan
from dpsense.mechanisms.ptr import Refusal, propose_test_release
from dpsense.noise import exact, pool

pytestmark = pytest.mark.statistical

#: The CLI default; the end-to-end scenarios run with fewer samples (they call the public function).
SAMPLES = 200_000
SLOW_SAMPLES = 10_000

SCENARIOS = sc.smooth_scenarios()

#: Lower bounds the correct mechanisms must reach at 200 000 samples (observed minimum over 12 runs in
#: brackets): evidence that the pairs are hard. Exact losses in the pair docstrings.
HARD = {
    "smooth_median cauchy: shift pair": 0.25,  # [0.37], exact 0.625
    "smooth_median cauchy: seed pair": 0.1,  # [0.25], exact 0.50
    "smooth_trimmed_mean cauchy": 0.35,  # [0.48], exact 0.625
    # the release system's form (add/remove, data resized to a public n): the same pairs after resizing
    "smooth_median cauchy, add/remove, public n: seed pair": 0.1,  # [0.24 over 4 runs]
    "smooth_trimmed_mean cauchy, add/remove, public n": 0.35,  # [0.49 over 4 runs]
    "smooth_min_distance 1-D cauchy": 0.3,  # [0.44], exact 0.57
    "smooth_min_distance A cauchy": 0.2,  # [0.31], exact 0.43
    "smooth_min_distance B cauchy": 0.2,  # [0.33], exact 0.50
    "smooth_triangle_count cauchy": 0.3,  # [0.45], exact 0.59
    "smooth_trimmed_mean lln": 0.3,  # [0.41], exact 0.58 at δ = 1e-3
    "ptr_order_statistic": 1.3,  # [1.67], pure 2
    "ptr_trimmed_mean": 1.3,  # [1.66], pure 2
    "ptr_min_distance 1-D": 1.3,  # [1.68], pure 2
}


# ---------------------------------------------------------------- the audits


@pytest.mark.parametrize("scenario", SCENARIOS, ids=lambda s: s.name)
def test_correct_mechanisms_stay_under_their_claim_and_controls_are_caught(scenario: Scenario) -> None:
    row = run_audit(scenario, samples=SLOW_SAMPLES if scenario.slow else SAMPLES)
    bound = row.result.epsilon_lower_bound
    if scenario.control:
        assert row.flagged, f"{scenario.name}: lower bound {bound:.3f} <= claim {scenario.epsilon:.3f} (not caught)"
    else:
        # A failure here is a privacy bug in the mechanism: report the pair, do not weaken the test.
        assert not row.flagged, (
            f"{scenario.name} VIOLATED: ε >= {bound:.3f} > claim {scenario.epsilon:.3f} at δ = {scenario.delta:g} "
            f"on {scenario.neighbours} (event {row.result.event})"
        )
        assert bound >= HARD.get(scenario.name, 0.0)


def test_every_family_has_a_check_an_end_to_end_run_and_every_control_kind_is_present() -> None:
    names = [s.name for s in SCENARIOS]
    publics = ("smooth_median", "smooth_trimmed_mean", "smooth_min_distance", "smooth_triangle_count")
    for public in (*publics, "ptr_order_statistic", "ptr_trimmed_mean", "ptr_min_distance", "inverse_sensitivity"):
        assert any(n.startswith(public) for n in names)
        assert any(n.startswith(public) and "(end to end)" in n for n in names)
    for family in smooth_noise.FAMILIES:
        assert any(f" {family}" in n for n in names), family
    controls = [n for n in names if n.startswith("control:")]
    for kind in ("∝ LS", "no tail", "S at β", "S(β=ε)", "0.5"):
        assert any(kind in n for n in controls), kind
    assert all(s.control == s.name.startswith("control:") for s in SCENARIOS)
    assert {s.name for s in SCENARIOS} <= {s.name for s in all_scenarios()}


def test_the_cli_runs_the_smooth_scenarios(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["audit", "--samples", "20000", "--only", "noise ∝ LS", "--controls"]) == 0
    out = capsys.readouterr().out
    assert out.count("caught") == 2 and "median noise ∝ LS" in out and "trimmed mean noise ∝ LS" in out


# ---------------------------------------------------------------- the pairs are neighbours, and extreme


def _replace_distance(x: Any, y: Any) -> int:
    cx, cy = Counter(x), Counter(y)
    return max((cx - cy).total(), (cy - cx).total())


PAIRS = [
    (laws.SEED_X, laws.SEED_Y),
    (laws.SHIFT_X, laws.SHIFT_Y),
    (laws.JUMP_X, laws.JUMP_Y),
    (laws.TRIM_X, laws.TRIM_Y),
    (laws.TRIM_LLN_X, laws.TRIM_LLN_Y),
    (laws.FLAT_X, laws.FLAT_Y),
    (laws.LINE_X, laws.LINE_Y),
    (laws.POINTS_A, laws.POINTS_A_COLLAPSED),
    (laws.POINTS_B, laws.POINTS_B_MERGED),
    (ptrl.PTR_STABLE, ptrl.PTR_UNSTABLE),
    (ptrl.PTR_UNSTABLE, ptrl.PTR_FAR),
    (ptrl.PTR_TRIM_STABLE, ptrl.PTR_TRIM_UNSTABLE),
    (ptrl.PTR_LINE_STABLE, ptrl.PTR_LINE_UNSTABLE),
    (ptrl.NAIVE_X, ptrl.NAIVE_Y),
    (sc.INVERSE_X, sc.INVERSE_Y),
]


@pytest.mark.parametrize(("x", "y"), PAIRS)
def test_each_pair_differs_in_one_record(x: Any, y: Any) -> None:
    assert len(x) == len(y) and _replace_distance(x, y) == 1


def test_the_graphs_differ_in_one_edge() -> None:
    assert len(set(laws.TRIANGLES_PLUS) ^ set(laws.TRIANGLES)) == 1


BETA = laws.CAUCHY.plan.beta_float


def _fs(stat: laws.SmoothStatistic, data: Any, beta: float = BETA) -> tuple[float, float, float]:
    return stat.value(data), stat.bound(data, beta), stat.local(data)


def test_the_median_pairs_are_extreme() -> None:
    med = laws.median_statistic(laws.MEDIAN_BOUNDS)
    (fx, sx, lx), (fy, sy, _) = _fs(med, laws.SEED_X), _fs(med, laws.SEED_Y)
    assert fx == fy == 0 and lx == 0 and sy / sx == pytest.approx(math.exp(BETA), rel=1e-12)  # pure dilation
    (fx, sx, lx), (fy, sy, _) = _fs(med, laws.SHIFT_X), _fs(med, laws.SHIFT_Y)
    assert fy - fx == lx == 30 and sy / sx == pytest.approx(math.exp(BETA), rel=1e-12)  # shift by LS and e^β
    (fx, sx, _), (fy, sy, _) = _fs(med, laws.JUMP_X), _fs(med, laws.JUMP_Y)
    assert fx == fy and sy / sx == pytest.approx(math.exp(BETA), rel=1e-12)
    cut = [laws.truncated_without_tail(med.family(d), BETA, 2) for d in (laws.JUMP_X, laws.JUMP_Y)]
    assert cut[1] / cut[0] > 40 and cut[0] < sx  # the tail-less loop is far below S*: not smooth


def test_the_trimmed_mean_pairs_are_extreme() -> None:
    trim = laws.trimmed_mean_statistic(laws.TRIM, laws.MEDIAN_BOUNDS)
    (fx, sx, lx), (fy, sy, _) = _fs(trim, laws.TRIM_X), _fs(trim, laws.TRIM_Y)
    assert fy - fx == pytest.approx(lx) and lx == pytest.approx(6) and sy / sx == pytest.approx(math.exp(BETA))
    beta = laws.LLN.plan.beta_float
    (fx, sx, _), (fy, sy, _) = _fs(trim, laws.TRIM_LLN_X, beta), _fs(trim, laws.TRIM_LLN_Y, beta)
    assert fy - fx == pytest.approx(12) and sy / sx == pytest.approx(math.exp(beta))
    (fx, _, lx), (fy, _, ly) = _fs(trim, laws.FLAT_X), _fs(trim, laws.FLAT_Y)
    assert fx == fy == 50 and lx == 0 < ly


def test_the_closest_pair_and_triangle_pairs_are_extreme() -> None:
    line = laws.min_distance_statistic(laws.LINE_BOX)
    (fx, sx, _), (fy, sy, _) = _fs(line, laws.LINE_X), _fs(line, laws.LINE_Y)
    assert (fx, fy) == (1, 0) and sx / sy == pytest.approx(math.exp(BETA))
    plane = laws.min_distance_statistic(laws.UNIT_BOX)
    (fx, sx, _), (fy, sy, _) = _fs(plane, laws.POINTS_A), _fs(plane, laws.POINTS_A_COLLAPSED)
    assert fx > 0 == fy and 1.4 < sx / sy < math.exp(BETA)
    cluster = laws.min_distance_statistic(laws.CLUSTER_BOX)
    (fx, sx, _), (fy, sy, _) = _fs(cluster, laws.POINTS_B), _fs(cluster, laws.POINTS_B_MERGED)
    assert fx == fy == 0 and sx / sy == pytest.approx(math.exp(BETA)) and sx < 0.003
    # B's bound is far smaller than A's (docs/math/closest-pair.md §6.7)
    assert sx * 40 < plane.bound(laws.POINTS_A, BETA)
    graph = laws.triangle_statistic(laws.TRIANGLE_VERTICES)
    (fx, sx, lx), (fy, sy, _) = _fs(graph, laws.TRIANGLES), _fs(graph, laws.TRIANGLES_PLUS)
    assert fy - fx == lx == 1 and sy / sx == pytest.approx(math.exp(BETA))


def test_the_ptr_pairs_cross_instability_with_a_shift_of_b() -> None:
    b = ptrl.PTR.proposed_bound
    for stat, x, y in (
        (ptrl.ptr_median_statistic(ptrl.PTR_BOUNDS), ptrl.PTR_STABLE, ptrl.PTR_UNSTABLE),
        (ptrl.ptr_trimmed_mean_statistic(laws.TRIM, ptrl.PTR_BOUNDS), ptrl.PTR_TRIM_STABLE, ptrl.PTR_TRIM_UNSTABLE),
        (ptrl.ptr_min_distance_statistic(ptrl.PTR_LINE_BOX), ptrl.PTR_LINE_STABLE, ptrl.PTR_LINE_UNSTABLE),
    ):
        assert (stat.distance(x, ptrl.PTR), stat.distance(y, ptrl.PTR)) == (1, 0)
        assert abs(stat.value(x) - stat.value(y)) == pytest.approx(b)
    med = ptrl.ptr_median_statistic(ptrl.PTR_BOUNDS)
    assert med.distance(ptrl.PTR_FAR, ptrl.PTR) == 0 and med.value(ptrl.PTR_FAR) - med.value(ptrl.PTR_UNSTABLE) == 19
    assert [ptrl.naive_removal_count(d, b) for d in (ptrl.NAIVE_X, ptrl.NAIVE_Y)] == [0, 3]


def test_the_inverse_sensitivity_pair_moves_every_path_length() -> None:
    midpoints = np.arange(sc.INVERSE_RESOLUTION) + 0.5  # the data sit at cell midpoints: lengths per cell
    laws = []
    for data in (sc.INVERSE_X, sc.INVERSE_Y):
        lengths = order_statistic_path_lengths(data, rank=3, candidates=midpoints)
        weights = np.exp(-0.5 * lengths)  # exp(-ε len / 2), ε = 1
        laws.append(weights / weights.sum())
    assert np.max(np.abs(np.log(laws[0] / laws[1]))) == pytest.approx(0.8188, abs=1e-4)


# ---------------------------------------------------------------- the vectorised path is the product's path

#: Noise values that exercise the grid rounding, the clamp on both sides and large magnitudes.
Z = np.array([0.0, 1.0, -1.0, 0.318309886, -2.5, 0.4999999, 17.0, -40.0, 1e3, -1e6, 3e-7, 1e9])


def _fixed_noise(monkeypatch: pytest.MonkeyPatch) -> None:
    stream: Iterator[float] = iter(Z.tolist())
    monkeypatch.setattr(smooth_noise, "standard_noise", lambda plan, n: np.array([next(stream) for _ in range(n)]))


SMOOTH_CASES: list[tuple[Callable[[], laws.SmoothStatistic], Any, laws.Noise]] = [
    *(
        (lambda: laws.median_statistic(laws.MEDIAN_BOUNDS), d, noise)
        for d in (laws.SHIFT_X, laws.SEED_Y)
        for noise in (laws.CAUCHY, laws.LAPLACE, laws.GAUSSIAN, laws.STUDENT_T, laws.POLYNOMIAL, laws.LLN, laws.ULN)
    ),
    (lambda: laws.trimmed_mean_statistic(laws.TRIM, laws.MEDIAN_BOUNDS), laws.TRIM_Y, laws.CAUCHY),
    (lambda: laws.trimmed_mean_statistic(laws.TRIM, laws.MEDIAN_BOUNDS), laws.TRIM_LLN_X, laws.LLN),
    (lambda: laws.min_distance_statistic(laws.LINE_BOX), laws.LINE_X, laws.CAUCHY),
    (lambda: laws.min_distance_statistic(laws.LINE_BOX), laws.LINE_Y, laws.LAPLACE),
    (lambda: laws.min_distance_statistic(laws.UNIT_BOX), laws.POINTS_A, laws.CAUCHY),
    (lambda: laws.min_distance_statistic(laws.CLUSTER_BOX), laws.POINTS_B, laws.CAUCHY),
    (lambda: laws.triangle_statistic(laws.TRIANGLE_VERTICES), laws.TRIANGLES_PLUS, laws.CAUCHY),
]


@pytest.mark.parametrize(("make", "data", "noise"), SMOOTH_CASES)
def test_the_vectorised_smooth_release_is_the_public_mechanism_bit_for_bit(
    monkeypatch: pytest.MonkeyPatch, make: Callable[[], laws.SmoothStatistic], data: Any, noise: laws.Noise
) -> None:
    stat = make()
    law = stat.law(data, noise)
    _fixed_noise(monkeypatch)
    vectorised = law.sample(Z.size)
    _fixed_noise(monkeypatch)
    public = np.array([float(stat.release(data, noise).value) for _ in range(Z.size)])
    np.testing.assert_array_equal(vectorised, public)
    assert vectorised[0] != vectorised[1]  # Z = 1 moved the output: the noise scale S/s is exercised


class _FixedDiscreteLaplace:
    """Stands in for the discrete Laplace sampler: serves a fixed queue of draws and records each scale asked."""

    def __init__(self, queue: list[int]) -> None:
        self.queue, self.scales = list(queue), []

    def __call__(self, scale: Fraction, n: int) -> np.ndarray:
        self.scales += [Fraction(scale)] * n
        out, self.queue = self.queue[:n], self.queue[n:]
        return np.asarray(out, dtype=np.int64)


def test_the_vectorised_ptr_is_propose_test_release_bit_for_bit(monkeypatch: pytest.MonkeyPatch) -> None:
    setting = ptrl.PTR
    stat = ptrl.ptr_median_statistic(ptrl.PTR_BOUNDS)
    value, distance, clamp = (
        stat.value(ptrl.PTR_STABLE),
        stat.distance(ptrl.PTR_STABLE, setting),
        stat.clamp(ptrl.PTR_STABLE),
    )
    threshold = ptrl.ptr_threshold(setting)
    k_test, t_test = laplace_plan(sensitivity=1, epsilon=setting.epsilon_test)
    k_rel, t_rel = laplace_plan(sensitivity=setting.proposed_bound, epsilon=setting.epsilon_release)
    # test noise (in grid steps) just below, at and above the pass threshold, and far away
    at_threshold = round(threshold * 2.0**-k_test) - round(distance * 2.0**-k_test)
    test_draws = [at_threshold + d for d in (-2, -1, 0, 1, 2, -(2**40), 2**40)]
    release_draws = [0, 1, -1, 2 ** (-k_rel - 1), -30 * 2**-k_rel, 17, 2 ** (1 - k_rel)]

    vector_fake = _FixedDiscreteLaplace(test_draws + release_draws)
    monkeypatch.setattr(exact, "discrete_laplace", vector_fake)
    vectorised = ptrl.ptr_draws(value, distance, setting, clamp, len(test_draws), threshold=threshold)

    public, public_scales = [], []
    for t_draw, r_draw in zip(test_draws, release_draws, strict=True):
        fake = _FixedDiscreteLaplace([t_draw, r_draw])
        monkeypatch.setattr(pool, "pooled_discrete_laplace", fake)
        answer = propose_test_release(value, distance, output_clamp=clamp, **setting.kwargs())
        public.append(math.nan if isinstance(answer, Refusal) else float(answer.value))
        public_scales += fake.scales
    np.testing.assert_array_equal(vectorised, np.array(public))
    assert 2 <= np.isnan(vectorised).sum() <= len(test_draws) - 2  # refusals and releases both exercised
    # the same noise plans: the test scale for every draw, the release scale for every release
    assert vector_fake.scales == [Fraction(t_test)] * 7 + [Fraction(t_rel)] * 7
    assert sorted(set(public_scales)) == sorted({Fraction(t_test), Fraction(t_rel)})
