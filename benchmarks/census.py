"""Census tables: the consistent counts' error against the raw noisy counts', on a 3-level hierarchy.

A synthetic census (deterministic): 20 regions x 60 districts = 1 200 leaves under a national total,
district populations from a lognormal (median about 30 persons, a tail into the thousands; 60 leaves
empty), 1 to 2 rows per person (C = 2). Two measurements:

* **Session** (``--runs``, default 200): ``dp.hierarchical_count("geo")`` released through
  ``dpsense.Session`` (DuckDB, a SQLite ledger in a temporary directory), each run a distinct question
  (a filter ``age >= -i`` that every row passes) at ε = 1, add/remove, split equal. Per node, the
  error of the consistent count and of the raw noisy count as the release states it (rounded,
  negatives set to 0: what separate grouped counts at ε/3 per level would give). Every run is checked
  for exact consistency (children sum to their parent, integers >= 0).
* **Math** (``--math-runs``, default 2 000): the same mechanism on the true vectors with
  ``dpsense.mechanisms.laplace`` and ``consistency.consistent_counts``, for several ε and splits,
  comparing with the raw noisy counts before any rounding or clamping as well.

Mean absolute error per level and over all 1 221 nodes (each node weighs the same). Ends with

    TARGET census_consistent_mae_over_raw <ratio> <= 1.0
    TARGET census_consistent_mae_over_unclamped_raw <ratio> <= 1.0
    TARGET census_exactly_consistent_runs <k> >= <n>   (k of the n runs exactly consistent)

and exits 0. ``uptime`` is printed first: errors do not depend on load, times do.

    python benchmarks/census.py
    python benchmarks/census.py --runs 50 --math-runs 500
"""

from __future__ import annotations

import argparse
import os
import subprocess
import tempfile
import time
from fractions import Fraction
from pathlib import Path

import numpy as np
import pandas as pd

import dpsense as dp
from dpsense.mechanisms import laplace
from dpsense.mechanisms.consistency import consistent_counts, tree_of_leaves

REGIONS, DISTRICTS, C = 20, 60, 2
LEAVES = [(f"r{r:02d}", f"r{r:02d}d{d:02d}") for r in range(REGIONS) for d in range(DISTRICTS)]
LEVELS = ("total", "region", "district")


def census() -> pd.DataFrame:
    """Persons per district (lognormal, every 20th district empty), 1 or 2 rows each, an age in [0, 100]."""
    rng = np.random.default_rng(2026)
    sizes = np.rint(rng.lognormal(np.log(30), 1.0, size=len(LEAVES))).astype(int)
    sizes[::20] = 0
    rows = []
    person = 0
    for (region, district), size in zip(LEAVES, sizes, strict=True):
        for _ in range(size):
            for _ in range(int(rng.integers(1, C + 1))):
                rows.append((f"p{person}", region, district, int(rng.integers(0, 101))))
            person += 1
    return pd.DataFrame(rows, columns=["pid", "region", "district", "age"])


def truth(frame: pd.DataFrame) -> list[np.ndarray]:
    """The true counts per level (nodes in the release's order: sorted)."""
    by_leaf = frame.groupby(["region", "district"]).size()
    leaf = np.array([by_leaf.get(leaf, 0) for leaf in sorted(LEAVES)], dtype=np.int64)
    by_region = frame.groupby("region").size()
    region = np.array([by_region.get(f"r{r:02d}", 0) for r in range(REGIONS)], dtype=np.int64)
    return [np.array([len(frame)]), region, leaf]


def policy() -> dp.PrivacyPolicy:
    return dp.PrivacyPolicy(
        protected="a person and all their rows",
        population=1_000_000,
        planned_releases=100_000,
        release_window="2026-12-01/2027-11-30",
        delta_rationale="no δ: pure ε-DP releases only",
        per_release_epsilon=2,
        attacker_knowledge="all but one person's rows",
        minimum_useful_accuracy="counts within ±20",
        approved_by="benchmark",
        approved_on="2026-12-03",
        next_review="2027-06-03",
    )


def consistent(table: pd.DataFrame) -> bool:
    """Children sum exactly to their parent at every level; every count an integer >= 0."""
    counts = table["n"]
    if not all(isinstance(v, (int, np.integer)) and v >= 0 for v in counts):
        return False
    total = table[table.level == "total"]["n"].sum()
    regions = table[table.level == "region"].set_index("region")["n"]
    districts = table[table.level == "district"].groupby("region")["n"].sum()
    return bool(regions.sum() == total and (districts.reindex(regions.index, fill_value=0) == regions).all())


def session_runs(runs: int, frame: pd.DataFrame, true: list[np.ndarray]) -> tuple[dict[str, list[float]], int, float]:
    """|error| per level of the consistent and the released raw counts, consistent runs, seconds per release."""
    errors: dict[str, list[float]] = {f"{kind}/{level}": [] for kind in ("consistent", "raw") for level in LEVELS}
    ok = 0
    seconds = 0.0
    with (
        tempfile.TemporaryDirectory() as tmp,
        dp.Session.open(f"sqlite:///{Path(tmp) / 'l.db'}", analyst="steward", role="steward") as session,
    ):
        ds = session.register_dataset(
            "census",
            source=frame,
            privacy_unit="pid",
            bounds={"age": (0, 120)},
            max_rows_per_unit=C,
            hierarchies={"geo": {"levels": ["region", "district"], "keys": LEAVES}},
            budget=dp.Budget(epsilon=10 * runs + 10),
            policy=policy(),
        )
        for i in range(runs):
            query = ds.query().filter("age", ">=", -1 - i).agg(n=dp.hierarchical_count("geo"))
            start = time.perf_counter()
            table = session.release(query, epsilon=1).table
            seconds += time.perf_counter() - start
            ok += consistent(table)
            for level, values in zip(LEVELS, true, strict=True):
                rows = table[table.level == level]
                errors[f"consistent/{level}"].extend(np.abs(rows["n"].to_numpy() - values).tolist())
                errors[f"raw/{level}"].extend(np.abs(rows["n_noisy"].to_numpy() - values).tolist())
    return errors, ok, seconds / max(runs, 1)


def math_runs(runs: int, true: list[np.ndarray], epsilon: Fraction, split: tuple[int, ...]) -> dict[str, float]:
    """MAE of consistent, raw unclamped, and raw rounded and clamped counts over all nodes (equal weight)."""
    tree, _ = tree_of_leaves(sorted(LEAVES))
    shares = [Fraction(s, sum(split)) for s in split]
    out = {"consistent": 0.0, "raw": 0.0, "raw_clamped": 0.0}
    nodes = sum(v.size for v in true)
    for _ in range(runs):
        noisy, variances = [], []
        for values, share in zip(true, shares, strict=True):
            result = laplace(values.astype(np.float64), sensitivity=C, epsilon=epsilon * share)
            noisy.append(np.atleast_1d(result.value))
            variances.append(float(C / (epsilon * share)) ** 2)
        fixed = consistent_counts(tree, noisy, variances)
        out["consistent"] += sum(float(np.abs(f - t).sum()) for f, t in zip(fixed, true, strict=True))
        out["raw"] += sum(float(np.abs(n - t).sum()) for n, t in zip(noisy, true, strict=True))
        out["raw_clamped"] += sum(
            float(np.abs(np.maximum(0, np.rint(n)) - t).sum()) for n, t in zip(noisy, true, strict=True)
        )
    return {k: v / (runs * nodes) for k, v in out.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=200, help="Session releases")
    parser.add_argument("--math-runs", type=int, default=2000, help="runs of the mechanism and post-processing alone")
    args = parser.parse_args()
    print("INFO uptime:", subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip())
    print(f"INFO cpus: {os.cpu_count()}")
    frame = census()
    true = truth(frame)
    print(
        f"INFO {len(LEAVES)} leaves, {REGIONS} regions, {len(frame)} rows of {frame.pid.nunique()} persons; "
        f"district counts: median {int(np.median(true[2]))}, max {int(true[2].max())}, "
        f"{int((true[2] == 0).sum())} empty"
    )

    errors, ok, per_release = session_runs(args.runs, frame, true)
    print(f"\n== Session: {args.runs} releases at ε = 1 (1/3 per level), add/remove, C = {C} ==")
    print(f"{'level':10} {'nodes':>6} {'MAE consistent':>15} {'MAE raw':>10} {'ratio':>7}")
    pooled = {"consistent": 0.0, "raw": 0.0}
    count = 0
    for level, values in zip(LEVELS, true, strict=True):
        mc, mr = np.mean(errors[f"consistent/{level}"]), np.mean(errors[f"raw/{level}"])
        pooled["consistent"] += float(np.sum(errors[f"consistent/{level}"]))
        pooled["raw"] += float(np.sum(errors[f"raw/{level}"]))
        count += len(errors[f"raw/{level}"])
        print(f"{level:10} {values.size:>6} {mc:>15.3f} {mr:>10.3f} {mc / mr:>7.3f}")
    overall = pooled["consistent"] / pooled["raw"]
    print(f"{'all nodes':10} {sum(v.size for v in true):>6} {pooled['consistent'] / count:>15.3f} "
          f"{pooled['raw'] / count:>10.3f} {overall:>7.3f}")  # fmt: skip
    print(f"INFO exactly consistent on {ok}/{args.runs} runs; {per_release * 1000:.0f} ms per release")

    print(f"\n== Math: {args.math_runs} runs of the mechanism and the post-processing alone ==")
    head = ("epsilon", "split", "MAE consistent", "raw", "raw clamped", "ratio", "ratio cl.")
    print("{:>8} {:>9} {:>15} {:>8} {:>12} {:>7} {:>9}".format(*head))
    unclamped = []
    for epsilon, split in (
        (Fraction(1, 10), (1, 1, 1)),
        (Fraction(1), (1, 1, 1)),
        (Fraction(1), (1, 1, 2)),
        (Fraction(10), (1, 1, 1)),
    ):
        m = math_runs(args.math_runs, true, epsilon, split)
        ratio = m["consistent"] / m["raw"]
        unclamped.append(ratio)
        print(
            f"{float(epsilon):>8g} {list(split)!s:>9} {m['consistent']:>15.3f} {m['raw']:>8.3f} "
            f"{m['raw_clamped']:>12.3f} {ratio:>7.3f} {m['consistent'] / m['raw_clamped']:>9.3f}"
        )
    print()
    print(f"TARGET census_consistent_mae_over_raw {overall:.3f} <= 1.0")
    print(f"TARGET census_consistent_mae_over_unclamped_raw {max(unclamped):.3f} <= 1.0")
    print(f"TARGET census_exactly_consistent_runs {ok} >= {args.runs}")


if __name__ == "__main__":
    main()
