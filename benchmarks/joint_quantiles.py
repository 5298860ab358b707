"""Many quantiles at once: recursive splitting (one release) against independent EM quantiles at ε/m each.

The panel of ``benchmarks/accuracy.py`` (synthetic, tied and real columns, each with its public domain),
add/remove, ε ∈ {0.1, 1}, quartiles (m = 3) and deciles (m = 9): ``em_quantiles(qs, ε)`` (m independent
EM quantiles at ε/m, basic composition) against ``recursive_quantiles(qs, ε)`` (Kaplan-Schnapp-Stemmer
splitting, ε/⌈log2(m + 1)⌉ per split), both with the decimal points of a numeric column (integer columns:
cells, the recursion's sub-domains have no integer candidates), ``RUNS`` releases each (env var, default
100). Error of one released quantile = its distance to [np.quantile(lower), np.quantile(higher)]; a
release's error = the mean over its m quantiles; per cell the median over the runs.

Prints per cell both errors and their ratio, the geometric mean of recursive / independent per m over
the cells where both err, and ends with ``TARGET joint_deciles_recursive_vs_independent <g> <= 0.8``.
"""

from __future__ import annotations

import os
import sys
import warnings

import numpy as np

from accuracy import TOLERANCE, panel
from dpsense.core.adjacency import Adjacency
from dpsense.mechanisms import em_quantiles, recursive_quantiles

RUNS = int(os.environ.get("RUNS", "100"))
SETS = {"quartiles": [0.25, 0.5, 0.75], "deciles": [i / 10 for i in range(1, 10)]}


def error(values: np.ndarray, qs: list[float], released: np.ndarray) -> float:
    lo = np.quantile(values, qs, method="lower")
    hi = np.quantile(values, qs, method="higher")
    return float(np.mean(np.maximum(0.0, np.maximum(lo - released, released - hi))))


def main() -> int:
    warnings.simplefilter("ignore")
    print(f"INFO RUNS={RUNS}, add/remove")
    ratios: dict[str, list[float]] = {name: [] for name in SETS}
    print(f"{'dataset':<12} {'eps':>4} {'set':<10} {'independent':>12} {'recursive':>12} {'ratio':>7}")
    for cell in panel():
        x = cell.values.astype(np.float64)
        tol = TOLERANCE * cell.width
        points = not cell.integer
        for eps in (0.1, 1.0):
            for name, qs in SETS.items():
                kw = {"qs": qs, "bounds": (cell.low, cell.high), "epsilon": eps, "adjacency": Adjacency.ADD_REMOVE}
                ind = [error(x, qs, em_quantiles(x, decimal_points=points, **kw).value) for _ in range(RUNS)]
                rec = [error(x, qs, recursive_quantiles(x, decimal_points=points, **kw).value) for _ in range(RUNS)]
                a, b = (float(np.median(e)) for e in (ind, rec))
                a, b = (0.0 if v < tol else v for v in (a, b))
                r = b / a if a > 0 and b > 0 else float("nan")
                if a > 0 and b > 0:
                    ratios[name].append(r)
                print(f"{cell.name:<12} {eps:>4g} {name:<10} {a:>12.4g} {b:>12.4g} {r:>7.3f}", flush=True)
    geo = {name: float(np.exp(np.mean(np.log(r)))) if r else float("nan") for name, r in ratios.items()}
    for name, g in geo.items():
        print(f"INFO {name}: geometric mean recursive / independent {g:.3f} over {len(ratios[name])} cells")
    print(f"TARGET joint_deciles_recursive_vs_independent {geo['deciles']:.3f} <= 0.8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
