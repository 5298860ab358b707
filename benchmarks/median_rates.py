"""The add/remove median with decimal points, by computed laws on the anchors' panel: @6, @7 and @8 against OpenDP.

Under add/remove an added record moves a cell's score within [-Δu, Δu] and a decimal point's within
[-Δu - γ, Δu] (γ = 1/16, the fit; docs/math/exponential-mechanism.md §8.6-8.8). The rules computed:

* ``at6``: every set at the points' width 2Δu + γ, the grids as heavy as the cells (quantile @6);
* ``at7``: the cells at their own width 2Δu, the points at their symmetric one 2Δu + 2γ (quantile @7, §8.7);
* ``each``: each set at its own width, every rate times 1 / (1 + γ / (2 (2Δu + γ))) (34/35 for the median);
* ``default``: @7's rates with the grids at 2^-k of the cells' measure, 2^-k <= ε / (2Δu) (quantile @8,
  ``quantile.points_shift``, §8.8): the Session's default for a numeric column.

For each numeric column of ``benchmarks/accuracy.py``'s panel (the synthetic, tied and real columns; the
integer ones have no decimal points and are left out) and ε in ``EPSILONS`` (env var, default 0.01, 0.1,
1, 10), the script builds the exact rank table of each rule (``_rank_sampler.rank_table``, the sampler's
own table) and reads off the median and p90 of |error| (distance to the interval of sample medians, as
``accuracy.py``), treating each segment as its outputs spread evenly over its value range (a segment of
cells is 2^-32 of the domain per cell; a segment of points is a run of equally spaced values). Beside them
OpenDP's law, computed as ``median_interval.py`` does (its 2^16 + 1 candidates). No sampling: the figures
are the laws'. Prints a row per cell (ratios to OpenDP's median |error|; the raw figure where OpenDP's is
0) and, per rule, the geometric mean over cells of its median |error| over ``at6``'s (cells where both are
0 count as 1) and its worst ratio to OpenDP's law. Ends with ``TARGET median_rates_default_vs_at6_geomean
<g> <= 0.97`` and ``TARGET median_law_worst_vs_opendp_law <r> <= 1.1`` (the default; every cell, including
``cluster`` at ε = 1, where OpenDP's grid happens to put 10 candidates in the median interval where 9.28
fit on average: ``median_interval.py``), and exits 0 when they are missed.

    python benchmarks/median_rates.py
"""

from __future__ import annotations

import math
import os
import sys
import warnings
from fractions import Fraction

import numpy as np

from accuracy import panel
from dpsense.core.adjacency import Adjacency
from dpsense.mechanisms import _quantile_candidates, _rank_sampler
from dpsense.mechanisms.quantile import FIT_WEIGHT, cells_sharper, points_shift, utility_sensitivity
from median_interval import opendp_law

EPSILONS = tuple(Fraction(e) for e in os.environ.get("EPSILONS", "0.01,0.1,1,10").split(","))
HALF = Fraction(1, 2)


def rules(q: Fraction, eps: Fraction) -> dict[str, tuple[Fraction, Fraction, int]]:
    """Each rule as (the points' rate in the sampler's units ε = 1, the cells' over it, the grids' shift)."""
    du = utility_sensitivity(q, Adjacency.ADD_REMOVE)
    gamma = FIT_WEIGHT
    assert utility_sensitivity(q, Adjacency.ADD_REMOVE, fitted=True) == du + gamma  # @7 and the default
    assert cells_sharper(q, Adjacency.ADD_REMOVE) == (du + gamma) / du
    points = du + gamma / 2  # @6: one width 2Δu + γ for every set
    span = 1 + gamma / (2 * (2 * du + gamma))
    return {
        "at6": (1 / points, Fraction(1), 0),
        "at7": (1 / (du + gamma), (du + gamma) / du, 0),
        "each": (1 / (points * span), points / du, 0),
        "default": (1 / (du + gamma), (du + gamma) / du, points_shift(eps, q, Adjacency.ADD_REMOVE)),
    }


def error_quantiles(
    values: np.ndarray, low: float, high: float, rate: Fraction, sharper: Fraction, shift: int
) -> tuple[float, float]:
    """Median and p90 of |error| of the rule's exact law on ``values`` (sorted, clipped inside)."""
    candidates, release = _quantile_candidates.prepared(values, (low, high), None, False, True, None, shift)
    table = _rank_sampler.rank_table(candidates, HALF, rate, sharper)
    held = (table.lengths > 0) & (table.counts > 0)
    log_w = np.log(table.lengths[held]) - float(table.rate) * table.exponents[held].astype(np.float64)
    weights = np.exp(log_w - log_w.max())
    weights /= weights.sum()
    parts, starts, counts = table.parts[held], table.starts[held], table.counts[held]
    strides = np.array([lattice.stride for lattice in candidates.lattices], dtype=np.int64)[parts]
    first = np.asarray(release(parts, starts), dtype=np.float64)
    last = np.asarray(release(parts, starts + strides * (counts - 1)), dtype=np.float64)
    ordered = np.sort(values)
    lo, hi = float(ordered[(values.size - 1) // 2]), float(ordered[values.size // 2])
    # each segment's outputs spread evenly over [first, last]: its error is a function of position, linear
    # outside [lo, hi]; integrate the error's distribution on a grid of error levels
    levels = np.concatenate(([0.0], np.geomspace(1e-12 * (high - low), high - low, 4000)))

    def below(e: float) -> float:
        """P(|error| <= e): the share of each segment inside [lo - e, hi + e]."""
        a, b = lo - e, hi + e
        inside = np.clip(np.minimum(last, b) - np.maximum(first, a), 0.0, None)
        span = last - first
        share = np.where(span > 0, inside / np.where(span > 0, span, 1.0), ((first >= a) & (first <= b)) * 1.0)
        return float((weights * share).sum())

    cdf = np.array([below(e) for e in levels])
    med = float(levels[min(int(np.searchsorted(cdf, 0.5)), levels.size - 1)])
    p90 = float(levels[min(int(np.searchsorted(cdf, 0.9)), levels.size - 1)])
    return med, p90


def main() -> int:
    warnings.simplefilter("ignore")
    names = list(rules(HALF, Fraction(1)))
    ratios: dict[str, list[float]] = {name: [] for name in names[1:]}
    to_opendp: dict[str, list[tuple[float, str]]] = {name: [] for name in names}
    print("median |error| over OpenDP's law's (p90 over OpenDP's p90); 'raw' where OpenDP's median |error| is 0")
    print(f"{'dataset':<12} {'eps':>5} {'opendp':>10}  " + "  ".join(f"{n:>17}" for n in names))
    for cell in panel():
        if cell.integer:
            continue
        values = np.sort(np.clip(cell.values.astype(np.float64), cell.low, cell.high))
        for eps in EPSILONS:
            anchor = opendp_law(values, float(eps), cell.low, cell.high)
            found = {}
            for name, (rate, sharper, shift) in rules(HALF, eps).items():
                found[name] = error_quantiles(values, cell.low, cell.high, eps * rate, sharper, shift)
            shown = []
            for name, (med, p90) in found.items():
                if anchor.median > 0:
                    to_opendp[name].append((med / anchor.median, f"{cell.name} eps={float(eps):g}"))
                    shown.append(f"{med / anchor.median:>7.3f} ({p90 / anchor.p90:<6.3f})")
                else:
                    shown.append(f"raw {med:<13.3g}")
            print(f"{cell.name:<12} {float(eps):>5g} {anchor.median:>10.4g}  " + "  ".join(shown))
            base = found["at6"][0]
            for name in ratios:
                value = found[name][0]
                ratios[name].append(1.0 if base == value == 0 else value / base if base > 0 else math.inf)
    geos = {}
    for name, per_cell in ratios.items():
        finite = [v for v in per_cell if 0 < v < math.inf]
        geo = math.exp(sum(math.log(v) for v in finite) / len(finite)) if finite else math.nan
        print(f"INFO rule {name!r}: geometric mean of median |error| / at6's over {len(finite)} cells {geo:.3f}, "
              f"best {min(per_cell):.3f}, worst {max(per_cell):.3f}")  # fmt: skip
        geos[name] = geo
    worst = {}
    for name, per_cell in to_opendp.items():
        worst[name] = max(per_cell)
        beyond = sorted((r, where) for r, where in per_cell if r > 1.1)
        listed = ", ".join(f"{where} {r:.3f}" for r, where in beyond) or "none"
        print(f"INFO rule {name!r}: worst median |error| / OpenDP's law's {worst[name][0]:.3f}; above 1.1: {listed}")
    print(f"TARGET median_rates_default_vs_at6_geomean {geos['default']:.3f} <= 0.97")
    print(f"TARGET median_law_worst_vs_opendp_law {worst['default'][0]:.3f} <= 1.1")
    return 0


if __name__ == "__main__":
    sys.exit(main())
