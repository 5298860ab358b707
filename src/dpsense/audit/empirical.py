"""Empirical privacy auditing: a statistical lower bound on a mechanism's privacy loss from samples.

Given many outputs of a mechanism on two neighbouring datasets x and x', every event E gives the
bound P[M(x) in E] <= e^eps P[M(x') in E] + delta, so

    eps >= ln((P[M(x) in E] - delta) / P[M(x') in E]).

We estimate both probabilities with Clopper-Pearson intervals (the lower end for the numerator, the
upper end for the denominator), over a family of events chosen from the pooled samples: single bins,
both tails at every bin edge, the most frequent exact outputs (atoms) and the refusal outcome. The
confidence level is split over all events and both directions (Bonferroni), so with probability at
least 1 - alpha the reported number is a true lower bound on the mechanism's epsilon at that delta.
The events are chosen on one half of the samples and evaluated on the other half.

A correct mechanism's lower bound stays below its claim; a broken one (noise calibrated to local
sensitivity, a dropped tail term, a mismatched smoothing parameter, a naive PTR threshold) is caught
when the bound exceeds the claim. This is the engine behind ``dpsense audit`` and the empirical
privacy tests. It reads only mechanism outputs; it is not part of any release path.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray
from scipy import stats

F64 = NDArray[np.float64]


@dataclass(frozen=True)
class AuditResult:
    """The outcome of one audit.

    Attributes:
        epsilon_lower_bound: with probability >= 1 - alpha, the mechanism's epsilon (at ``delta``) is
            at least this. An event seen under one input and never under the other gives a bound that grows
            like ln(samples): finite samples can never certify an infinite loss.
        event: a description of the event that gave the bound.
        samples: samples per dataset.

    """

    epsilon_lower_bound: float
    event: str
    samples: int


def _clopper_pearson(k: NDArray[np.int64], n: int, alpha: float) -> tuple[F64, F64]:
    lo = np.where(k > 0, stats.beta.ppf(alpha, k, n - k + 1), 0.0)
    hi = np.where(k < n, stats.beta.ppf(1 - alpha, k + 1, n - k), 1.0)
    return np.nan_to_num(lo), np.nan_to_num(hi, nan=1.0)


def _events(pooled: F64, bins: int, atoms: int) -> tuple[list[str], list[tuple[str, float, float]]]:
    finite = pooled[np.isfinite(pooled)]
    specs: list[tuple[str, float, float]] = []
    names: list[str] = []
    if finite.size:
        edges = np.unique(np.quantile(finite, np.linspace(0, 1, bins + 1)[1:-1]))
        for e in edges:
            specs += [("le", float(e), 0.0), ("gt", float(e), 0.0)]
        bounds = np.concatenate([[-np.inf], edges, [np.inf]])
        for a, b in itertools.pairwise(bounds):
            specs.append(("in", float(a), float(b)))
        values, counts = np.unique(finite, return_counts=True)
        for v in values[np.argsort(counts)[::-1][:atoms]]:
            specs.append(("eq", float(v), 0.0))
    specs.append(("refused", 0.0, 0.0))
    for kind, a, b in specs:
        names.append(
            {
                "le": f"out <= {a:.6g}",
                "gt": f"out > {a:.6g}",
                "in": f"{a:.6g} < out <= {b:.6g}",
                "eq": f"out == {a:.6g}",
                "refused": "refused",
            }[kind]
        )
    return names, specs


def _hits(samples: F64, specs: list[tuple[str, float, float]]) -> NDArray[np.int64]:
    out = np.empty(len(specs), dtype=np.int64)
    refused = np.isnan(samples)
    for i, (kind, a, b) in enumerate(specs):
        if kind == "le":
            out[i] = int(np.count_nonzero(samples <= a))
        elif kind == "gt":
            out[i] = int(np.count_nonzero(samples > a))
        elif kind == "in":
            out[i] = int(np.count_nonzero((samples > a) & (samples <= b)))
        elif kind == "eq":
            out[i] = int(np.count_nonzero(samples == a))
        else:
            out[i] = int(np.count_nonzero(refused))
    return out


def epsilon_lower_bound(
    outputs_x: F64, outputs_y: F64, *, delta: float = 0.0, alpha: float = 1e-9, bins: int = 30, atoms: int = 5
) -> AuditResult:
    """A (1 - alpha)-confidence lower bound on epsilon from outputs on neighbours x and y (NaN = refusal)."""
    x = np.asarray(outputs_x, dtype=np.float64)
    y = np.asarray(outputs_y, dtype=np.float64)
    half = min(x.size, y.size) // 2
    # Events are chosen on a pilot half and evaluated on the other half, so the Bonferroni bound is
    # not spoiled by selecting events on the very samples that estimate them.
    names, specs = _events(np.concatenate([x[:half], y[:half]]), bins, atoms)
    x, y = x[half : 2 * half], y[half : 2 * half]
    n = half
    level = alpha / (2 * len(specs))
    best, best_event = -math.inf, "none"
    for first, second, label in ((x, y, "x vs x'"), (y, x, "x' vs x")):
        p_lo, _ = _clopper_pearson(_hits(first, specs), n, level)
        _, q_hi = _clopper_pearson(_hits(second, specs), n, level)
        with np.errstate(divide="ignore", invalid="ignore"):
            bound = np.where(p_lo > delta, np.log(np.maximum(p_lo - delta, 1e-300) / q_hi), -np.inf)
        i = int(np.argmax(bound))
        if bound[i] > best:
            best, best_event = float(bound[i]), f"{label}: {names[i]}"
    return AuditResult(max(best, 0.0), best_event, n)
