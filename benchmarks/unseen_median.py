"""The default add/remove median on real columns it was NOT tuned on: exact laws against OpenDP's.

``benchmarks/median_rates.py`` computes the laws of the median's rules on ``accuracy.py``'s panel, the
columns the default (quantile @8: the cells and the decimal grids, ``median_rates.rules()['default']``)
was tuned on. This script asks the same question on other real columns: every numeric column bundled
with scikit-learn and statsmodels (offline) that has n >= ``MIN_ROWS`` records and at least
``MIN_DISTINCT`` distinct values once NaN are dropped, except the panel's own:

* scikit-learn: ``breast_cancer`` (29 columns: all but ``mean radius``, the panel's ``radius``);
  ``diabetes`` (the 10 features as recorded, ``load_diabetes(scaled=False)``: the panel uses the target;
  ``sex`` has 2 values and drops out); ``iris`` (sepal width, petal length, petal width: the panel uses
  sepal length); ``wine`` (the 12 columns other than alcohol); ``digits`` (4 pixels, 0..16 integers:
  ``DIGIT_PIXELS``, the middle column of the 8x8 image, rows 2-5). ``linnerud`` has 20 rows: none.
* statsmodels (``statsmodels.api.datasets.<name>.load_pandas().data``, ``STATSMODELS``): anes96, ccard,
  fair, grunfeld, macrodata, modechoice (not ``individual``: an id), nile, randhie, scotland, spector,
  star98, strikes, sunspots, engel, elnino, heart, statecrime, fertility (the years ``FERTILITY_YEARS``
  only: its 52 year columns are near-copies of one another), interest_inflation, danish_data, cancer,
  co2. cpunish, longley, stackloss, copper, committee and china_smoking have fewer than 30 rows: none.

The PUBLIC domain of each column follows one rule, decided before any law is computed, and looks at
the data only as a steward who knows the variable's range would: a column without negative values gets
[0, U], U the smallest of 1, 2 or 5 times a power of ten at or above its maximum; a column with negatives
gets [-U, U], U likewise at or above its largest |value|. Nothing is tuned per column.

Each column is registered as the product registers a float column (``default``: the cells of [L, U] and
the decimal grids, the Session's default for a numeric column); a column whose every value is whole is
also registered as an integer column (``int``: the integers of [L, U], rate ε / Δu, no decimal grids:
``_quantile_candidates.prepared(..., integers=True)``), as a second row. For ε in ``EPSILONS`` (env var,
default 0.1, 1; add/remove), the script builds the sampler's own exact rank table
(``_rank_sampler.rank_table``) and reads off the law of |error| (distance to the interval of sample
medians, as ``accuracy.py``) EXACTLY: every segment of the table is its candidates (cell midpoints,
decimal points or integers, equally spaced), each with its share of the segment's weight, so P(|error|
<= e) is a count per segment and the median and p90 are found by bisection on e (atoms included: no
spreading a segment's outputs over a continuum as ``median_rates.py`` does). Beside it OpenDP's law
(``median_interval.opendp_law``: 2^16 + 1 candidates on [L, U], computed). Errors below 1e-9 x (U - L)
count as 0 (float round-off, as ``accuracy.py``).

One row per (column, registration, ε): n, distinct values, domain, dpsense's median |error|, OpenDP's, their
ratio, the p90s and their ratio, and P(error = 0) of each. Where OpenDP's median |error| is 0 the ratio
column says ``tie`` (both 0) or ``LOSS`` (dpsense's > 0, counted as an infinite ratio). Then, per
registration, the geometric mean of the finite ratios (both 0 counts as 1; a ratio of 0, dpsense exact where
OpenDP is not, is left out, which only raises the mean; the mean over the cells where both are > 0 beside
it), the cells above 1.1, the 10 worst, the cells whose P(error = 0) is 0.1 or more below OpenDP's (and the
5 largest shortfalls), the p90 ratios' geometric mean and worst, and a table of the flagged cells with the
data's shape (span of the data over the domain's width, the largest tie's share of n, the records tied at
the lower median, the finest decimal the values are recorded at). Ends with ``TARGET
unseen_median_worst_vs_opendp_law <r> <= 1.1`` and ``TARGET unseen_median_geomean_vs_opendp_law <g> <= 1.0``
(the ``default`` registration; ``inf`` when a LOSS cell exists) and exits 0 regardless.

    .venv/bin/pip install -e '.[bench-anchors]'   # opendp, scikit-learn, statsmodels
    .venv/bin/python benchmarks/unseen_median.py        # about 10 s (170 columns, 410 laws)
    ONLY=wine,star98 .venv/bin/python benchmarks/unseen_median.py   # datasets whose name contains one
"""

from __future__ import annotations

import math
import os
import sys
import warnings
from dataclasses import dataclass
from decimal import Decimal
from fractions import Fraction

import numpy as np

from dpsense.core.adjacency import Adjacency
from dpsense.mechanisms import _quantile_candidates, _rank_sampler
from dpsense.mechanisms.quantile import utility_sensitivity
from median_interval import opendp_law
from median_rates import rules

EPSILONS = tuple(Fraction(e) for e in os.environ.get("EPSILONS", "0.1,1").split(",") if e)
ONLY = tuple(s for s in os.environ.get("ONLY", "").split(",") if s)
HALF = Fraction(1, 2)
MIN_ROWS = 30
MIN_DISTINCT = 10
TOLERANCE = 1e-9
DIGIT_PIXELS = (19, 27, 35, 43)
FERTILITY_YEARS = ("1960", "1970", "1980", "1990", "2000", "2010")
STATSMODELS = (
    *("anes96", "ccard", "cpunish", "fair", "grunfeld", "longley", "macrodata", "modechoice", "nile", "randhie"),
    *("scotland", "spector", "stackloss", "star98", "strikes", "sunspots", "copper", "engel", "elnino", "heart"),
    *("statecrime", "committee", "fertility", "china_smoking", "interest_inflation", "danish_data", "cancer", "co2"),
)
#: columns left out by name (dataset, column): ids, not measurements
EXCLUDED = {("modechoice", "individual")}
#: P(error = 0) this much below OpenDP's flags a cell even when its median |error| is not worse
EXACT_GAP = 0.1


@dataclass(frozen=True)
class Column:
    source: str
    name: str
    values: np.ndarray  # sorted, NaN dropped
    low: float
    high: float

    @property
    def label(self) -> str:
        return f"{self.source}.{self.name}"

    @property
    def whole(self) -> bool:
        return bool(np.all(self.values == np.round(self.values)))


@dataclass(frozen=True)
class Law:
    median: float
    p90: float
    exact: float  # P(|error| = 0), errors below TOLERANCE x width counting as 0


def round_up(x: float) -> float:
    """The smallest of 1, 2 or 5 times a power of ten at or above x > 0 (exact decimal arithmetic)."""
    k = math.floor(math.log10(x)) - 1
    while True:
        for m in (1, 2, 5):
            u = float(Decimal(m) * Decimal(10) ** k)
            if u >= x:
                return u
        k += 1


def domain(values: np.ndarray) -> tuple[float, float]:
    """The public domain rule: [0, U] without negatives, else [-U, U]; U = round_up(max |x|)."""
    top = float(np.max(np.abs(values)))
    u = round_up(top) if top > 0 else 1.0
    return (0.0, u) if float(values.min()) >= 0 else (-u, u)


def _add(out: list[Column], source: str, name: str, raw: object) -> None:
    values = np.asarray(raw, dtype=np.float64)
    values = np.sort(values[~np.isnan(values)])
    if (source, name) in EXCLUDED or values.size < MIN_ROWS or np.unique(values).size < MIN_DISTINCT:
        return
    out.append(Column(source, name, values, *domain(values)))


def columns() -> list[Column]:
    """Every column of the bundled datasets named in the docstring that passes the size and distinctness rule."""
    import pandas as pd
    from sklearn import datasets

    out: list[Column] = []
    cancer = datasets.load_breast_cancer()
    for j, name in enumerate(cancer.feature_names):
        if name != "mean radius":  # the panel's ``radius``
            _add(out, "breast_cancer", str(name), cancer.data[:, j])
    diabetes = datasets.load_diabetes(scaled=False)
    for j, name in enumerate(diabetes.feature_names):
        _add(out, "diabetes", str(name), diabetes.data[:, j])
    iris = datasets.load_iris()
    for j, name in enumerate(iris.feature_names[1:], start=1):  # the panel uses sepal length
        _add(out, "iris", str(name), iris.data[:, j])
    wine = datasets.load_wine()
    for j, name in enumerate(wine.feature_names[1:], start=1):  # the panel uses alcohol
        _add(out, "wine", str(name), wine.data[:, j])
    digits = datasets.load_digits()
    for j in DIGIT_PIXELS:
        _add(out, "digits", f"pixel_{j}", digits.data[:, j])
    import statsmodels.api as sm

    for source in STATSMODELS:
        try:
            frame = getattr(sm.datasets, source).load_pandas().data
        except Exception as exc:  # a dataset that does not load offline
            print(f"INFO statsmodels {source}: not loaded ({type(exc).__name__})")
            continue
        for name in frame.columns:
            if source == "fertility" and str(name) not in FERTILITY_YEARS:
                continue
            series = pd.to_numeric(frame[name], errors="coerce")
            if pd.api.types.is_numeric_dtype(series):
                _add(out, source, str(name), series.to_numpy(dtype=np.float64, na_value=np.nan))
    if ONLY:
        out = [c for c in out if any(s in c.source for s in ONLY)]
    return out


def exact_law(column: Column, rate: Fraction, sharper: Fraction, shift: int, integers: bool) -> Law:
    """The |error| law of the rule from the sampler's exact rank table, every candidate counted (no spreading)."""
    values, width = column.values, column.high - column.low
    bounds = (column.low, column.high)
    candidates, release = _quantile_candidates.prepared(values, bounds, None, integers, not integers, None, shift)
    table = _rank_sampler.rank_table(candidates, HALF, rate, sharper)
    assert table.accept_below == 0 and table.accept_above == 0  # q n D is whole for the median: no acceptance step
    held = (table.lengths > 0) & (table.counts > 0)
    log_w = np.log(table.lengths[held]) - float(table.rate) * table.exponents[held].astype(np.float64)
    weights = np.exp(log_w - log_w.max())
    keep = weights > 1e-18  # the rest weighs below 1e-18 of the heaviest segment (a few thousand segments at most)
    weights = weights[keep] / weights[keep].sum()
    parts, starts, counts = table.parts[held][keep], table.starts[held][keep], table.counts[held][keep]
    strides = np.array([lattice.stride for lattice in candidates.lattices], dtype=np.int64)[parts]
    first = np.asarray(release(parts, starts), dtype=np.float64)
    last = np.asarray(release(parts, starts + strides * (counts - 1)), dtype=np.float64)
    many = counts > 1
    step = np.where(many, (last - first) / np.where(many, counts - 1, 1), 1.0)
    top = (counts - 1).astype(np.float64)
    lo, hi = float(values[(values.size - 1) // 2]), float(values[values.size // 2])
    zero = TOLERANCE * width

    def cdf(e: float) -> float:
        """P(|error| <= e): per segment, the share of its equally spaced candidates inside [lo - e, hi + e]."""
        a, b = lo - e, hi + e
        j_lo = np.maximum(np.ceil((a - first) / step - 1e-6), 0.0)
        j_hi = np.minimum(np.floor((b - first) / step + 1e-6), top)
        inside = np.where(many, np.maximum(j_hi - j_lo + 1.0, 0.0), ((first >= a) & (first <= b)) * 1.0)
        return float((weights * inside / counts).sum())

    def quantile(p: float) -> float:
        if cdf(zero) >= p:
            return 0.0
        below, above = zero, width
        for _ in range(200):
            if above - below <= 1e-13 * max(above, zero):
                break
            mid = 0.5 * (below + above)
            below, above = (below, mid) if cdf(mid) >= p else (mid, above)
        return above

    return Law(quantile(0.5), quantile(0.9), cdf(zero))


def opendp(column: Column, eps: Fraction) -> Law:
    scores = opendp_law(column.values, float(eps), column.low, column.high)
    zero = TOLERANCE * (column.high - column.low)
    med, p90 = (0.0 if v <= zero else v for v in (scores.median, scores.p90))
    return Law(med, p90, scores.exact)


def shape(column: Column) -> str:
    """The data's shape in numbers: span over the domain, the largest tie, ties at the median, recording decimal."""
    x = column.values
    _, counts = np.unique(x, return_counts=True)
    mid = float(np.median(x))
    at_median = int(np.sum(x == x[(x.size - 1) // 2]))
    decimals = next((d for d in range(0, 7) if np.allclose(x * 10**d, np.round(x * 10**d), rtol=0, atol=1e-6)), None)
    recorded = f"1e-{decimals}" if decimals else ("whole" if decimals == 0 else "finer than 1e-6")
    span = (float(x[-1]) - float(x[0])) / (column.high - column.low)
    return (
        f"span/width {span:.2g}, median {mid:.4g}, largest tie {counts.max() / x.size:.0%} of n, "
        f"{at_median} at the lower median, recorded at {recorded}"
    )


def _geomean(values: list[float]) -> float:
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else math.nan


def ratio(mine: Law, theirs: Law) -> float:
    if theirs.median > 0:
        return mine.median / theirs.median
    return 1.0 if mine.median == 0 else math.inf


def main() -> int:
    warnings.simplefilter("ignore")
    cols = columns()
    print(f"INFO {len(cols)} columns; {sum(c.whole for c in cols)} hold whole numbers only (also run as integers)")
    du = utility_sensitivity(HALF, Adjacency.ADD_REMOVE)
    header = (
        f"{'column':<44} {'reg':>7} {'eps':>4} {'n':>6} {'dist':>5} {'domain':>14} {'dpsense':>10} "
        f"{'opendp':>10} {'ratio':>6} {'p90 dps':>10} {'p90 odp':>10} {'p90 r':>6} {'P0 dps':>6} {'P0 odp':>6}"
    )
    print(header)
    rows: list[tuple[Column, str, Fraction, Law, Law, float]] = []
    for column in cols:
        distinct = np.unique(column.values).size
        regs = ["default", "int"] if column.whole else ["default"]
        for eps in EPSILONS:
            theirs = opendp(column, eps)
            for reg in regs:
                if reg == "default":
                    rate, sharper, shift = rules(HALF, eps)["default"]
                    mine = exact_law(column, eps * rate, sharper, shift, False)
                else:
                    mine = exact_law(column, eps / du, Fraction(1), 0, True)
                r = ratio(mine, theirs)
                rows.append((column, reg, eps, mine, theirs, r))
                shown = f"{r:>6.3f}" if theirs.median > 0 else ("   tie" if r == 1.0 else "  LOSS")
                p90r = f"{mine.p90 / theirs.p90:>6.3f}" if theirs.p90 > 0 else "     -"
                print(
                    f"{column.label:<44} {reg:>7} {float(eps):>4g} {column.values.size:>6} {distinct:>5} "
                    f"{f'[{column.low:g},{column.high:g}]':>14} {mine.median:>10.4g} {theirs.median:>10.4g} {shown} "
                    f"{mine.p90:>10.4g} {theirs.p90:>10.4g} {p90r} {mine.exact:>6.3f} {theirs.exact:>6.3f}",
                    flush=True,
                )
    summary: dict[str, tuple[float, float]] = {}
    for reg in ("default", "int"):
        mine_rows = [row for row in rows if row[1] == reg]
        if not mine_rows:
            continue
        finite = [row[5] for row in mine_rows if 0 < row[5] < math.inf]
        geo = _geomean(finite)
        both = _geomean([row[5] for row in mine_rows if row[3].median > 0 and row[4].median > 0])
        wins = sum(row[5] == 0 for row in mine_rows)
        worst = max(row[5] for row in mine_rows)
        above = [row for row in mine_rows if row[5] > 1.1]
        exact_gap = [row for row in mine_rows if row[4].exact - row[3].exact >= EXACT_GAP]
        summary[reg] = (worst, geo)
        print(f"\nSUMMARY registration {reg!r}: {len(mine_rows)} cells, {len(finite)} with a finite ratio")
        print(f"  geometric mean of median |error| / OpenDP's: {geo:.3f} (both 0 count as 1; {wins} cells where")
        print(f"  dpsense's is 0 and OpenDP's is not are left out); over the cells where both are > 0: {both:.3f}")
        print(f"  above 1.1: {len(above)}; LOSS (OpenDP 0, dpsense > 0): {sum(r[5] == math.inf for r in mine_rows)}")
        print(f"  P(error = 0) {EXACT_GAP} or more below OpenDP's: {len(exact_gap)}; the 5 largest shortfalls:")
        for column, _, eps, mine, theirs, _r in sorted(mine_rows, key=lambda row: row[3].exact - row[4].exact)[:5]:
            print(
                f"    {column.label:<44} eps={float(eps):<4g} P0 {mine.exact:.3f} vs {theirs.exact:.3f}, "
                f"median |error| {mine.median:.4g} vs {theirs.median:.4g}"
            )
        p90s = [row[3].p90 / row[4].p90 for row in mine_rows if row[3].p90 > 0 and row[4].p90 > 0]
        print(f"  p90 |error| / OpenDP's over {len(p90s)} cells: geometric mean {_geomean(p90s):.3f}, ", end="")
        print(f"worst {max(p90s):.3f}")
        print("  worst 10:")
        for column, _, eps, mine, theirs, r in sorted(mine_rows, key=lambda row: -row[5])[:10]:
            print(
                f"    {column.label:<44} eps={float(eps):<4g} ratio {r:.3f}  median |error| {mine.median:.4g} vs "
                f"{theirs.median:.4g}, P0 {mine.exact:.3f} vs {theirs.exact:.3f}"
            )
        flagged = sorted({id(row): row for row in above + exact_gap}.values(), key=lambda row: -row[5])
        if flagged:
            print("  flagged cells (ratio > 1.1 or P(error = 0) well below OpenDP's), with the data's shape:")
        for column, _, eps, mine, theirs, r in flagged:
            print(
                f"    {column.label} eps={float(eps):g}: n {column.values.size}, "
                f"{np.unique(column.values).size} distinct, [{column.low:g}, {column.high:g}], ratio {r:.3f} "
                f"(p90 {mine.p90:.4g} vs {theirs.p90:.4g}, P0 {mine.exact:.3f} vs {theirs.exact:.3f}); "
                f"{shape(column)}"
            )
    worst, geo = summary["default"]
    if "int" in summary:
        print(f"INFO integer registration: worst {summary['int'][0]:.3f}, geometric mean {summary['int'][1]:.3f}")
    print(f"TARGET unseen_median_worst_vs_opendp_law {worst:.3f} <= 1.1")
    print(f"TARGET unseen_median_geomean_vs_opendp_law {geo:.3f} <= 1.0")
    return 0


if __name__ == "__main__":
    sys.exit(main())
