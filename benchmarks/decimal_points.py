"""The decimal points of the EM quantile (docs/math/exponential-mechanism.md §8.3) on real columns.

Every non-negative numeric column of scikit-learn's bundled iris, wine, breast cancer and linnerud data
(56 columns, 20 to 569 rows, as float64), with the public domain [0, 10^k] for the smallest k with
10^k >= 1.5 x the column's largest value (a kind-like declaration; the data only picks the power of
ten). Median (q = 1/2) under add/remove at ε ∈ {0.1, 1}: ``em_quantile(..., adjacency=ADD_REMOVE)``
with ``decimal_points=True`` (the Session's default for a numeric column) against cells alone
(``decimal_points=False``: the continuous-EM behaviour of OpenDP's and diffprivlib's quantiles),
``RUNS`` releases each (env var, default 400). Error = distance to the interval of sample medians.

Prints per cell both median |error|s and their ratio, then the counts of cells where the points are
worse by more than 10 %, better by 3x or more, and the geometric mean of the ratios (ratios clipped to
[1e-3, 1e3]; an exact answer against a non-zero error counts as 1e-3). Ends with
``TARGET decimal_points_geomean_ratio <r> <= 0.9``. Needs scikit-learn (the ``bench-anchors`` extra);
without it the script prints an INFO line and the target as inf.
"""

from __future__ import annotations

import math
import os
import sys

import numpy as np

from dpsense.core.adjacency import Adjacency
from dpsense.mechanisms import em_quantile

RUNS = int(os.environ.get("RUNS", "400"))


def columns() -> list[tuple[str, np.ndarray, float]]:
    from sklearn import datasets

    out = []
    for loader in (datasets.load_iris, datasets.load_wine, datasets.load_breast_cancer, datasets.load_linnerud):
        data = loader().data
        for j in range(data.shape[1]):
            x = np.asarray(data[:, j], dtype=np.float64)
            if x.min() >= 0:
                out.append((f"{loader.__name__[5:]}:{j}", x, float(10 ** math.ceil(math.log10(1.5 * x.max())))))
    return out


def median_error(x: np.ndarray, high: float, eps: float, points: bool) -> float:
    s = np.sort(x)
    lo, hi = s[(s.size - 1) // 2], s[s.size // 2]
    out = np.array(
        [
            em_quantile(
                x, q=0.5, bounds=(0.0, high), epsilon=eps, adjacency=Adjacency.ADD_REMOVE, decimal_points=points
            ).value
            for _ in range(RUNS)
        ]
    )
    return float(np.median(np.maximum(0.0, np.maximum(lo - out, out - hi))))


def main() -> int:
    try:
        cols = columns()
    except ImportError:
        print("INFO scikit-learn not importable: install the bench-anchors extra")
        print("TARGET decimal_points_geomean_ratio inf <= 0.9")
        return 0
    ratios = []
    print(f"INFO RUNS={RUNS}; {len(cols)} columns x ε in (0.1, 1)")
    print(f"{'column':<20} {'eps':>4} {'cells':>10} {'points':>10} {'ratio':>7}")
    for name, x, high in cols:
        for eps in (0.1, 1.0):
            cells, points = median_error(x, high, eps, False), median_error(x, high, eps, True)
            r = 1.0 if cells == points == 0 else (points / cells if cells > 0 else 1e3)
            ratios.append(min(max(r, 1e-3), 1e3))
            print(f"{name:<20} {eps:>4g} {cells:>10.3g} {points:>10.3g} {ratios[-1]:>7.3g}")
    arr = np.array(ratios)
    geo = float(np.exp(np.mean(np.log(arr))))
    print(
        f"INFO points worse than cells alone by > 10 % in {int((arr > 1.1).sum())}/{arr.size} cells "
        f"(worst {arr.max():.3g}x)"
    )
    print(f"INFO points 3x better or more in {int((arr <= 1 / 3).sum())}/{arr.size} cells")
    print(f"TARGET decimal_points_geomean_ratio {geo:.3f} <= 0.9")
    return 0


if __name__ == "__main__":
    sys.exit(main())
