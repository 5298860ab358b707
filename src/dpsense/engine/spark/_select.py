"""Distributed selection of order statistics on Spark.

``order_statistics`` never brings a column to the driver. It counts the values, then narrows an
interval [a, b] that holds the wanted ranks: ``percentile_approx`` (a Greenwald-Khanna summary, rank
error at most size / ``ACCURACY``) proposes a and b a safety margin outside the ranks, and exact
counts ``#(v < a)`` and ``#(v <= b)`` confirm that every wanted rank lies inside (if not, the
interval is left as it was: the approximation only saves work, it never decides a value). Once at
most ``EXACT_ROWS`` values remain (or narrowing stops helping), the values in the interval are
grouped with their multiplicities, a running count gives each distinct value its rank range, and
only the distinct values whose range meets the wanted ranks come back: at most 2 * width + 1 rows.

"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as sf

#: Relative rank accuracy asked of ``percentile_approx``.
ACCURACY = 10_000
#: At most this many values go through the final exact step (a single ordered window).
EXACT_ROWS = 200_000
#: Narrowing rounds before the exact step.
MAX_ROUNDS = 4

_V = "__dps_v"


def order_statistics(
    values: DataFrame, *, first: int, last: int, run: Callable[[Callable[[], Any]], Any]
) -> dict[int, float]:
    """Values of ranks ``max(1, first) .. min(n, last)`` (1-based, ascending) of the column ``__dps_v``.

    ``values`` holds one double column named ``__dps_v`` without missing values. ``run`` wraps each
    Spark action (the engine turns Spark's errors, which may quote data, into ``InternalError``).
    """
    n = int(run(values.count))
    low_rank, high_rank = max(1, first), min(n, last)
    if low_rank > high_rank:
        return {}
    below, size, subset = 0, n, values
    for _ in range(MAX_ROUNDS):
        if size <= EXACT_ROWS:
            break
        narrowed = _narrow(subset, size, low_rank - below, high_rank - below, run)
        if narrowed is None:
            break
        subset, skipped, kept = narrowed
        if kept >= size:  # ties: the interval cannot shrink further by value
            break
        below, size = below + skipped, kept
    return _exact(subset, low_rank - below, high_rank - below, below, run)


def _narrow(
    subset: DataFrame, size: int, lo: int, hi: int, run: Callable[[Callable[[], Any]], Any]
) -> tuple[DataFrame, int, int] | None:
    """An interval [a, b] holding ranks lo..hi of ``subset``: (rows in it, #(v < a), #(a <= v <= b))."""
    margin = 2 * math.ceil(size / ACCURACY) + 1
    p_lo, p_hi = (lo - margin) / size, (hi + margin) / size
    if p_lo <= 0 and p_hi >= 1:
        return None
    probabilities = [min(max(p, 0.0), 1.0) for p in (p_lo, p_hi)]
    row = run(lambda: subset.agg(sf.percentile_approx(sf.col(_V), probabilities, ACCURACY)).first())
    if row is None or row[0] is None:
        return None
    a, b = (float(v) for v in row[0])
    condition = sf.lit(True)
    if p_lo > 0:
        condition = condition & (sf.col(_V) >= sf.lit(a))
    if p_hi < 1:
        condition = condition & (sf.col(_V) <= sf.lit(b))
    less = sf.count(sf.when(sf.col(_V) < sf.lit(a), 1)) if p_lo > 0 else sf.lit(0)
    inside = sf.count(sf.when(condition, 1))
    counts = run(lambda: subset.agg(less, inside).first())
    if counts is None:
        return None
    skipped, kept = int(counts[0]), int(counts[1])
    if not (skipped < lo and skipped + kept >= hi):
        return None  # the approximation missed: keep the wider interval
    return subset.where(condition), skipped, kept


def _exact(
    subset: DataFrame, lo: int, hi: int, below: int, run: Callable[[Callable[[], Any]], Any]
) -> dict[int, float]:
    """Ranks lo..hi of ``subset`` (shifted by ``below``) from distinct values and their running counts."""
    grouped = subset.groupBy(sf.col(_V)).agg(sf.count(sf.lit(1)).alias("__dps_c"))
    running = Window.orderBy(sf.col(_V)).rowsBetween(Window.unboundedPreceding, Window.currentRow)
    ranked = grouped.withColumn("__dps_cum", sf.sum(sf.col("__dps_c")).over(running))
    wanted = ranked.where((sf.col("__dps_cum") - sf.col("__dps_c") < sf.lit(hi)) & (sf.col("__dps_cum") >= sf.lit(lo)))
    blocks = run(lambda: wanted.orderBy(sf.col(_V)).collect())
    out: dict[int, float] = {}
    for block in blocks:
        value, count, cumulative = float(block[0]), int(block[1]), int(block[2])
        for rank in range(max(lo, cumulative - count + 1), min(hi, cumulative) + 1):
            out[below + rank] = value
    return out
