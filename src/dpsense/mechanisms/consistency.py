"""Consistent hierarchical counts: weighted least squares across levels, then non-negative integers that add up.

Everything here is **post-processing** of already released noisy counts (Dwork-Roth Prop. 2.1): it
reads no data and draws no randomness, so it costs no privacy. It is also total: any finite or
non-finite noisy input (negative parents, all zeros, one leaf, 10^5 leaves, NaN) gives an output of
the same shape, and the output is exactly consistent.

A hierarchy is a tree whose leaves all sit at depth L (a national total, its regions, their districts):
``Tree.parents[l][i]`` is the parent, at level l - 1, of node i at level l (level 0 is the root).
The noisy input is one vector per level, each with a public noise variance (one per level: the
level's noise scale, decided from ε_l and the sensitivity only).

1. **Weighted least squares** (Hay, Rastogi, Miklau, Suciu, "Boosting the accuracy of differentially
   private histograms through consistency", VLDB 2010, Thm 3 and its two-pass algorithm; the same
   estimator for non-uniform fan-outs and per-level budgets is Cormode, Procopiuc, Srivastava, Shen,
   Yu, "Differentially private spatial decompositions", ICDE 2012, §4.2). Among all vectors whose
   children sum exactly to their parent, the one minimising Σ_v (x_v − y_v)² / σ²_v. For a tree it
   has a closed form in two passes: bottom-up, each node combines its own noisy count with the sum
   of its children's combined estimates by inverse variance (z_v, with variance V_v); top-down, the
   root keeps z_root and each parent's surplus x_v − Σ_c z_c is shared among its children in
   proportion to V_c. The result is the best linear unbiased estimate (the Gaussian posterior mean
   under a flat prior, computed by message passing on the tree); ``tests`` check it against a dense
   solve of the constrained problem.
2. **Non-negative integers with exact sums, top-down** (in the spirit of the TopDown algorithm of the
   2020 US Census: Abowd, Ashmead, Cumings-Menon, Garfinkel, Heineck, Heiss, Johns, Kifer, Leclerc,
   Machanavajjhala, Moran, Sexton, Spence, Zhuravlev, "The 2020 Census Disclosure Avoidance System
   TopDown Algorithm", Harvard Data Science Review, 2022; that system solves integer programs per
   level, here a closed-form projection and a controlled rounding take their place). The root is
   rounded to an integer >= 0. Then for each parent with integer count T, its children's estimates
   are projected onto {x >= 0, Σ x = T} (Euclidean projection onto a scaled simplex: Held, Wolfe,
   Crowder 1974; Duchi, Shalev-Shwartz, Singer, Chandra, ICML 2008, Fig. 1) and rounded by a
   controlled rounding: each child gets the floor of its share, and the T − Σ floors units left over
   go to the children with the largest fractional parts (ties to the earlier child). Sums stay exact,
   every count is an integer >= 0, and a child never moves by a whole unit from its projected share.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray

from dpsense.core.errors import UsageError

__all__ = ["Tree", "consistent_counts", "nonnegative_integer_counts", "tree_of_leaves", "weighted_least_squares"]

I64 = NDArray[np.int64]
F64 = NDArray[np.float64]
#: Counts are kept within ±2^52, where every integer is a double (a noisy count far beyond is clipped).
LARGEST_COUNT = float(1 << 52)
_TINY, _HUGE = 1e-300, 1e300


@dataclass(frozen=True)
class Tree:
    """The shape of a hierarchy: ``parents[l - 1][i]`` is the parent (index in level l - 1) of node i of level l.

    Level 0 is the root (one node); every node above the leaves has at least one child, so every
    leaf sits at depth ``depth``. Built from public facts only (the declared key set).
    """

    parents: tuple[I64, ...]

    def __post_init__(self) -> None:
        size = 1
        for level, parent in enumerate(self.parents, start=1):
            p = np.asarray(parent)
            if p.ndim != 1 or p.size == 0 or p.dtype.kind not in "iu" or p.min() < 0 or p.max() >= size:
                raise UsageError(
                    "a hierarchy level's parents must be indices into the level above",
                    f"level {level}",
                    "build the tree with tree_of_leaves",
                )
            if np.unique(p).size != size:
                raise UsageError(
                    "every node above the leaves needs a child (all leaves at the same depth)",
                    f"level {level - 1}",
                    "declare every leaf at the full depth of the hierarchy",
                )
            size = p.size

    @property
    def depth(self) -> int:
        """L: the number of levels below the root."""
        return len(self.parents)

    @property
    def sizes(self) -> tuple[int, ...]:
        """The number of nodes per level, the root's 1 first."""
        return (1, *(int(p.size) for p in self.parents))


def tree_of_leaves(leaves: Sequence[tuple[Hashable, ...]]) -> tuple[Tree, list[list[tuple[Hashable, ...]]]]:
    """The tree whose leaves are ``leaves`` (distinct tuples of one length L >= 1) and each level's node keys.

    A node of level l is a prefix of length l of some leaf (the root is ``()``); nodes of a level are
    in the order of their first leaf, so leaves given in sorted order give sorted levels.
    """
    if not leaves:
        raise UsageError("a hierarchy needs at least one leaf", [], "declare the leaf key set")
    depth = len(leaves[0])
    if depth < 1 or any(len(leaf) != depth for leaf in leaves):
        raise UsageError("every leaf of a hierarchy is a tuple of one value per level", depth, "list full paths")
    keys: list[list[tuple[Hashable, ...]]] = [[()]]
    parents: list[I64] = []
    above: dict[tuple[Hashable, ...], int] = {(): 0}
    for level in range(1, depth + 1):
        index: dict[tuple[Hashable, ...], int] = {}
        parent: list[int] = []
        for leaf in leaves:
            prefix = tuple(leaf[:level])
            if prefix not in index:
                index[prefix] = len(index)
                parent.append(above[prefix[:-1]])
        if level == depth and len(index) != len(leaves):
            raise UsageError("the leaves of a hierarchy must be distinct", len(leaves) - len(index), "list each once")
        keys.append(list(index))
        parents.append(np.asarray(parent, dtype=np.int64))
        above = index
    return Tree(tuple(parents)), keys


def _finite(values: ArrayLike, size: int) -> F64:
    """A level's noisy counts as doubles within ±2^52 (NaN as 0): total on any input of the right size."""
    x = np.asarray(values, dtype=np.float64).reshape(-1)
    if x.size != size:
        raise UsageError("one noisy count per node of the level", x.size, f"pass {size} values")
    return np.clip(
        np.nan_to_num(x, nan=0.0, posinf=LARGEST_COUNT, neginf=-LARGEST_COUNT), -LARGEST_COUNT, LARGEST_COUNT
    )


def _variances(variances: Sequence[float], tree: Tree) -> F64:
    v = np.asarray(variances, dtype=np.float64).reshape(-1)
    if v.size != tree.depth + 1:
        raise UsageError("one noise variance per level, the root's first", v.size, f"pass {tree.depth + 1}")
    return np.clip(np.nan_to_num(v, nan=1.0, posinf=_HUGE), _TINY, _HUGE)


def weighted_least_squares(tree: Tree, noisy: Sequence[ArrayLike], variances: Sequence[float]) -> list[F64]:
    """The consistent estimate minimising Σ (x − y)² / σ² per node (Hay et al. 2010; module docstring, step 1).

    Args:
        tree: the hierarchy's shape.
        noisy: per level (root first) the noisy counts of its nodes.
        variances: per level the (public) variance of one node's noise; only their ratios matter.

    Returns:
        Per level the consistent real-valued estimates: each parent equals the sum of its children.

    """
    var = _variances(variances, tree)
    y = [_finite(values, size) for values, size in zip(noisy, tree.sizes, strict=True)]
    z = [np.zeros(0)] * len(y)
    v = [np.zeros(0)] * len(y)
    z[-1], v[-1] = y[-1], np.full(y[-1].size, var[-1])
    for level in range(tree.depth - 1, -1, -1):
        parent, size = tree.parents[level], tree.sizes[level]
        s = np.bincount(parent, weights=z[level + 1], minlength=size)
        big_s = np.bincount(parent, weights=v[level + 1], minlength=size)
        own = var[level]
        z[level] = (y[level] * big_s + s * own) / (big_s + own)
        v[level] = own * big_s / (own + big_s)
    x = [z[0]]
    for level in range(1, tree.depth + 1):
        parent, size = tree.parents[level - 1], tree.sizes[level - 1]
        s = np.bincount(parent, weights=z[level], minlength=size)
        big_s = np.bincount(parent, weights=v[level], minlength=size)
        x.append(z[level] + v[level] / big_s[parent] * (x[level - 1] - s)[parent])
    return x


def _project(values: F64, groups: I64, totals: F64) -> F64:
    """Per group g, the Euclidean projection of its values onto {w >= 0, Σ w = totals[g]} (totals >= 0)."""
    order = np.lexsort((-values, groups))
    u, g = values[order], groups[order]
    starts = np.flatnonzero(np.r_[True, g[1:] != g[:-1]])
    first = np.repeat(starts, np.diff(np.r_[starts, g.size]))
    css = np.cumsum(u)
    css = css - np.r_[0.0, css][first]  # cumulative sums within each group
    j = np.arange(g.size) - first + 1
    target = totals[g]
    rho = np.ones(totals.size, dtype=np.int64)
    np.maximum.at(rho, g, np.where(u - (css - target) / j > 0, j, 1))
    group_start = np.zeros(totals.size, dtype=np.int64)
    group_start[g[starts]] = starts
    theta = (css[group_start + rho - 1] - totals) / rho
    projected: F64 = np.maximum(values - theta[groups], 0.0)
    return projected


def _round(shares: F64, groups: I64, totals: I64) -> I64:
    """Controlled rounding: floors, then the leftover units to the largest fractional parts; Σ per group exact."""
    floors = np.floor(shares)
    out = floors.astype(np.int64)
    left = totals - np.bincount(groups, weights=floors, minlength=totals.size).astype(np.int64)
    order = np.lexsort((np.arange(shares.size), -(shares - floors), groups))
    g = groups[order]
    starts = np.flatnonzero(np.r_[True, g[1:] != g[:-1]]) if g.size else np.zeros(0, dtype=np.int64)
    rank = np.arange(g.size) - np.repeat(starts, np.diff(np.r_[starts, g.size]))
    out[order] += (rank < left[g]).astype(np.int64)
    sizes = np.bincount(groups, minlength=totals.size)
    off = np.flatnonzero((left < 0) | (left > sizes))  # only when float sums drift by a whole unit
    for group in off:
        _settle(out, np.flatnonzero(groups == group), int(totals[group]))
    return out


def _settle(out: I64, members: I64, total: int) -> None:
    """Make ``out[members]`` non-negative integers summing to ``total`` (a fallback; exact integer arithmetic)."""
    rest = total - int(out[members].sum())
    if rest > 0:
        q, r = divmod(rest, members.size)
        out[members] += q
        out[members[:r]] += 1
    while rest < 0:
        k = members[np.argmax(out[members])]
        take = min(int(out[k]), -rest)
        out[k] -= take
        rest += take


def nonnegative_integer_counts(tree: Tree, estimates: Sequence[ArrayLike]) -> list[I64]:
    """Non-negative integer counts whose children sum exactly to their parent (module docstring, step 2)."""
    x = [_finite(values, size) for values, size in zip(estimates, tree.sizes, strict=True)]
    counts = [np.asarray([int(np.clip(np.rint(x[0][0]), 0, LARGEST_COUNT))], dtype=np.int64)]
    for level in range(1, tree.depth + 1):
        parent = tree.parents[level - 1]
        totals = counts[-1]
        shares = _project(x[level], parent, totals.astype(np.float64))
        counts.append(_round(shares, parent, totals))
    return counts


def consistent_counts(tree: Tree, noisy: Sequence[ArrayLike], variances: Sequence[float]) -> list[I64]:
    """Weighted least squares across levels, then non-negative integers with exact sums (both post-processing)."""
    return nonnegative_integer_counts(tree, weighted_least_squares(tree, noisy, variances))
