"""hierarchical_count: a census table, rows counted at every level of a declared hierarchy, made consistent.

The steward declares the hierarchy at registration (levels from the top down and the leaf key set,
``query._hierarchy``); the engine counts the rows of every leaf, each unit bounded to C rows, every
leaf present (0 when empty: the grouped count's public-key path). Each level's true counts are sums
of leaf counts. A unit's C rows spread over leaves move at most as much mass at any coarser level: the
count vector of every level, the total included, has the global sensitivity of the leaf count vector
(``count_sensitivity`` grouped: C in L1 and L2 under add/remove, 2C in L1 and √2·C in L2 under
replace, where the replaced unit can leave one node while its replacement enters another;
docs/math/global-sensitivity.md §1.3, histogram rows, which hold for any partition of the rows).

The plan has one step (one charge ε, or (ε, δ) with Gaussian noise); level l (0 the total) runs the
step's mechanism at ε_l = ε·s_l, δ_l = δ·s_l, with the declared split s (Σ s_l = 1), so basic
composition (Dwork-Roth Thm 3.16) of the levels is the step's loss exactly. Then post-processing
(Dwork-Roth Prop. 2.1, free): weighted least squares across levels with weights 1/scale_l², then
non-negative integers whose children sum exactly to their parent (``mechanisms.consistency``: Hay et
al. 2010; in the spirit of the Census TopDown algorithm, Abowd et al. 2022). docs/census.md.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Hashable, Mapping, Sequence
from fractions import Fraction
from typing import Any, ClassVar

import numpy as np

from dpsense.core.errors import InternalError
from dpsense.core.privacy_loss import ApproxDP, PureDP
from dpsense.engine import GroupColumns, count_rows
from dpsense.mechanisms.consistency import Tree, consistent_counts, tree_of_leaves
from dpsense.query import _aggregates as aggregates
from dpsense.query._aggregates import Aggregate, AggregateKind
from dpsense.query._hierarchy import LEVEL_COLUMN
from dpsense.query._ir import AggregateIR, QueryIR
from dpsense.query._mechanisms import Mechanism
from dpsense.query._parts import StepPart
from dpsense.query._planner_rules import count_sensitivity
from dpsense.query.planner import Plan, PlanStep
from dpsense.sensitivity import Sqrt
from dpsense.statistics import _steps
from dpsense.statistics._base import COUNTING, SHARED_FIELDS, Facts, Fields, Produced, Runner, Statistic, common_fields
from dpsense.statistics._steps import Output

#: The name of the level above the hierarchy's first column (one node: every row).
TOTAL = "total"
#: The suffix of the raw noisy counts' column (released too: they are the mechanism's output).
NOISY_SUFFIX = "_noisy"


class HierarchicalCount(Statistic):
    """Rows counted at every level of a declared hierarchy; children sum exactly to their parent."""

    kind: ClassVar[AggregateKind] = AggregateKind.HIERARCHICAL_COUNT
    mechanisms: ClassVar[tuple[Mechanism, ...]] = COUNTING
    fields: ClassVar[Fields] = (SHARED_FIELDS | {"hierarchy", "split"}, frozenset({"hierarchy"}))
    default_reason: ClassVar[str] = "pure ε-DP default for counts, one noisy vector per level"

    def from_fields(self, f: Mapping[str, Any]) -> Aggregate:
        """``{kind: hierarchical_count, hierarchy, split?, max_rows_per_unit?, mechanism?}``."""
        return aggregates.hierarchical_count(f["hierarchy"], split=f.get("split"), **common_fields(f))

    def sensitivity(self, agg: AggregateIR, part: StepPart, facts: Facts) -> Fraction | Sqrt:
        """Every level's count vector: the grouped count's (a coarser partition of the same rows)."""
        return count_sensitivity(
            adjacency=facts.adjacency, rows=facts.bounded_rows(agg), groups=facts.groups, grouped=True, norm=facts.norm
        )

    def explain_note(self, agg: AggregateIR, part: StepPart, public_n: int | None) -> str:
        """The split of the step's ε over the levels, each level's vector at the stated sensitivity."""
        split = agg.split or ()
        shares = ", ".join(f"{level} {share}" for level, share in zip(level_names(agg), split, strict=True))
        return (
            f" at every level; ε split over the levels by basic composition (share of the step's ε: {shares}); "
            "made consistent by weighted least squares and non-negative integer rounding (post-processing)"
        )

    def noise_steps(self, agg: AggregateIR, step: PlanStep) -> list[PlanStep]:
        """One step per level at its share of the step's loss (what runs; admission checks each)."""
        return level_steps(agg, step)

    def check_executable(self, ir: QueryIR, agg: AggregateIR, plan: Plan) -> None:
        """Build the public tree before any charge (``released_groups`` and ``run`` build it again, alike)."""
        census_tree(ir_leaves(ir, agg))

    def additive_specs(self, runner: Runner, agg: AggregateIR, steps: list[PlanStep]) -> tuple[int, list[Any]] | None:
        """The rows of every leaf of the view bounded to C per unit."""
        return runner.step_rows(steps[0]), [count_rows(f"{agg.name}|n")]

    def released_groups(self, ir: QueryIR, agg: AggregateIR) -> tuple[GroupColumns, list[Any]]:
        """The table's key columns (``level`` and the levels) and one key per node, the total first."""
        _, keys = census_tree(ir_leaves(ir, agg))
        names = level_names(agg)
        depth = len(agg.columns)
        rows = [(names[lvl], *node, *([None] * (depth - lvl))) for lvl, nodes in enumerate(keys) for node in nodes]
        return (LEVEL_COLUMN, *agg.columns), rows

    def run(self, runner: Runner, agg: AggregateIR, steps: list[PlanStep]) -> Produced:
        """Noisy counts per level, then the consistent table (post-processing)."""
        step = steps[0]
        rows = runner.fetched(agg, [step])
        columns = runner.group_column
        leaves = leaf_paths([r.key for r in rows], columns, agg.columns)
        counts = dict(zip(leaves, (r.counts[f"{agg.name}|n"] for r in rows), strict=True))
        tree, keys = census_tree(leaves)
        leaf_counts = np.array([counts[leaf] for leaf in keys[-1]], dtype=np.int64)
        levels = [
            _steps.additive_noise(s, v)
            for v, s in zip(level_totals(tree, leaf_counts), level_steps(agg, step), strict=True)
        ]
        noisy = [np.atleast_1d(np.asarray(r.value, dtype=np.float64)) for r in levels]
        variances = [1.0 if r.accuracy is None else float(r.accuracy.scale) ** 2 for r in levels]
        errors = [e for r, v in zip(levels, noisy, strict=True) for e in _steps.error_bounds(r, v.size)]
        notes = [f"{name}: {_steps.accuracy_note(r)}" for name, r in zip(level_names(agg), levels, strict=True)]
        consistent = consistent_counts(tree, noisy, variances)
        values = [int(v) for level in consistent for v in level]
        raw = [max(0, round(float(v))) for level in noisy for v in level]
        note = "raw noisy counts per level: " + "; ".join(notes)
        done = [
            "weighted least squares across levels (weights 1/scale², Hay et al. 2010)",
            "then non-negative integers, each parent the exact sum of its children (projection and controlled "
            "rounding, top-down; Abowd et al. 2022)",
            "one row per node, the total first",
        ]
        consistent_note = (
            f"no public bound per value (post-processing of the raw counts in {agg.name + NOISY_SUFFIX!r}, whose "
            "bounds are stated; docs/census.md measures the consistent counts' error against theirs)"
        )
        table = Output(agg.name, values, [None] * len(values), consistent_note, done)
        noisy_out = Output(
            agg.name + NOISY_SUFFIX, raw, errors, note, ["rounded to an integer, negatives set to 0 (not consistent)"]
        )
        return [table, noisy_out], [r.loss for r in levels]


def level_names(agg: AggregateIR) -> list[str]:
    """The levels' names, the total first."""
    return [TOTAL, *agg.columns]


def level_steps(agg: AggregateIR, step: PlanStep) -> list[PlanStep]:
    """The step at each level's share s_l of its loss: ε·s_l (and δ·s_l); basic composition gives the step's."""
    if agg.split is None:
        raise InternalError(f"hierarchical count {agg.name!r} without a split")
    out = []
    for share in agg.split:
        loss: PureDP | ApproxDP = (
            ApproxDP(step.loss.epsilon * share, step.loss.delta * share)
            if isinstance(step.loss, ApproxDP)
            else PureDP(step.loss.epsilon * share)
        )
        out.append(dataclasses.replace(step, loss=loss, mechanism_epsilon=loss.epsilon))
    return out


def ir_leaves(ir: QueryIR, agg: AggregateIR) -> list[tuple[Hashable, ...]]:
    """The public leaf key set of a hierarchical count's query, each leaf in the hierarchy's level order."""
    keys = ir.group_keys
    if keys is None:
        raise InternalError(f"hierarchical count {agg.name!r} without public keys")
    columns = ir.group_columns
    return leaf_paths(list(keys), columns[0] if len(columns) == 1 else columns, agg.columns)


def leaf_paths(
    keys: Sequence[Any], columns: GroupColumns | None, levels: tuple[str, ...]
) -> list[tuple[Hashable, ...]]:
    """Group keys (one value, or a tuple in the grouping's column order) as paths in the hierarchy's order."""
    order = (columns,) if isinstance(columns, str) else tuple(columns or ())
    position = [order.index(level) for level in levels]
    return [tuple((key if isinstance(key, tuple) else (key,))[i] for i in position) for key in keys]


def census_tree(leaves: Sequence[tuple[Hashable, ...]]) -> tuple[Tree, list[list[tuple[Hashable, ...]]]]:
    """The tree of the leaves sorted level by level; its nodes per level.

    The public keys (exact values) and the engine's keys (their bound form: an integral fraction as an
    int) sort alike under ``_order``, so the release's table keys and its values line up.
    """
    return tree_of_leaves(sorted(leaves, key=lambda leaf: [_order(v) for v in leaf]))


def _order(value: Any) -> tuple[int, Any, str]:
    """Booleans, then numbers by size, then text (``query._values.sort_key``, for exact and bound values)."""
    if isinstance(value, bool):
        return (0, int(value), "")
    if isinstance(value, int | float | Fraction):
        return (1, value, "")
    return (2, 0, str(value))


def level_totals(
    tree: Tree, leaf_counts: np.ndarray[Any, np.dtype[np.int64]]
) -> list[np.ndarray[Any, np.dtype[np.int64]]]:
    """Each level's true counts: sums of the leaf counts (the root first)."""
    levels = [leaf_counts]
    for level in range(tree.depth - 1, -1, -1):
        parent = tree.parents[level]
        levels.append(np.bincount(parent, weights=levels[-1], minlength=tree.sizes[level]).astype(np.int64))
    return levels[::-1]
