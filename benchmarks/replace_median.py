"""The median's default under replace adjacency: the EM quantile against inverse sensitivity, per ε.

The panel of ``benchmarks/accuracy.py`` (its synthetic, tied and real columns, each with its public
domain; an integer column gives the EM its integer candidates, a numeric one its decimal points, as the
Session does). Replace adjacency, one record per unit, ε ∈ {0.1, 1, 10}: ``em_quantile(q=1/2, Δu = 1)``
against ``inverse_sensitivity_median`` (Asi-Duchi), both ε-DP for one replaced record, ``RUNS`` releases
each (env var, default 300). Error = distance to the interval of sample medians.

Prints per cell both median |error|s; per ε the geometric mean of em / inverse sensitivity over the
cells where both are non-zero, and the number of cells where only one is exact (error 0). Ends with
``TARGET replace_median_em_vs_invsens_geomean <g> <= 1.0`` (the largest of the per-ε geometric means):
the planner's replace default is the EM quantile at every ε (docs/planner.md).
"""

from __future__ import annotations

import os
import sys
import warnings

import numpy as np

from accuracy import TOLERANCE, panel
from dpsense.mechanisms import em_quantile, inverse_sensitivity_median

RUNS = int(os.environ.get("RUNS", "300"))
EPSILONS = (0.1, 1.0, 10.0)


def median_error(values: np.ndarray, released: list[float]) -> float:
    s = np.sort(values)
    lo, hi = s[(s.size - 1) // 2], s[s.size // 2]
    out = np.array(released)
    return float(np.median(np.maximum(0.0, np.maximum(lo - out, out - hi))))


def main() -> int:
    warnings.simplefilter("ignore")
    print(f"INFO RUNS={RUNS}")
    worst = 0.0
    rows: dict[float, list[tuple[float, float]]] = {eps: [] for eps in EPSILONS}
    print(f"{'dataset':<12} {'eps':>5} {'em':>10} {'invsens':>10}")
    for cell in panel():
        x = cell.values.astype(np.float64)
        tol = TOLERANCE * cell.width
        for eps in EPSILONS:
            em = [
                em_quantile(
                    x,
                    q=0.5,
                    bounds=(cell.low, cell.high),
                    epsilon=eps,
                    integers=cell.integer,
                    decimal_points=not cell.integer,
                ).value
                for _ in range(RUNS)
            ]
            inv = [inverse_sensitivity_median(x, bounds=(cell.low, cell.high), epsilon=eps).value for _ in range(RUNS)]
            e, i = (median_error(x, r) for r in (em, inv))
            e, i = (0.0 if v < tol else v for v in (e, i))
            rows[eps].append((e, i))
            print(f"{cell.name:<12} {eps:>5g} {e:>10.3g} {i:>10.3g}")
    for eps, pairs in rows.items():
        both = [(e, i) for e, i in pairs if e > 0 and i > 0]
        geo = float(np.exp(np.mean([np.log(e / i) for e, i in both]))) if both else 1.0
        worst = max(worst, geo)
        only_em = sum(1 for e, i in pairs if e == 0 < i)
        only_inv = sum(1 for e, i in pairs if i == 0 < e)
        print(
            f"INFO ε={eps:g}: geometric mean em/invsens {geo:.3f} over {len(both)} cells; exact only with em in "
            f"{only_em}, only with invsens in {only_inv}"
        )
    print(f"TARGET replace_median_em_vs_invsens_geomean {worst:.3f} <= 1.0")
    return 0


if __name__ == "__main__":
    sys.exit(main())
