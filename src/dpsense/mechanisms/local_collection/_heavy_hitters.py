"""Heavy hitters over an unknown domain by prefix extension (PEM-style beam over count-mean-sketch levels).

Clients are split into T levels by a public function of their identifier; a client of level t reports
the length-g_t prefix of its NUL-padded value through a count-mean sketch (ε-LDP per report). The
server estimates every one-segment extension of the previous level's ``beam`` best prefixes and keeps
the best ``beam`` again; at the last level it returns the ``top`` best full values. This is the
prefix-extending method of Wang-Li-Jha (PEM, IEEE TDSC 2019), with Apple's count-mean sketch
(2017; its SFP also reports value fragments) as the frequency oracle: docs/math/local-collection.md §13.9.
Post-processing of the reports: the scheme's ε per report is the whole cost.
"""

from __future__ import annotations

import itertools
from functools import cache

import numpy as np

from dpsense.core.checks import integral_in
from dpsense.core.errors import UsageError
from dpsense.device.schemes import PAD, PrefixScheme
from dpsense.mechanisms.local_collection._decode import FrequencyTable, bonferroni, level_estimate
from dpsense.mechanisms.local_collection._summary import Summary

#: The most prefixes one level may estimate.
MAX_LEVEL_CANDIDATES = 1 << 16


@cache
def _segments(symbols: str, length: int) -> tuple[str, ...]:
    """Every string of ``length`` symbols in which nothing but padding follows a pad."""
    out = []
    for combo in itertools.product(symbols, repeat=length):
        text = "".join(combo)
        first_pad = text.find(PAD)
        if first_pad < 0 or text[first_pad:] == PAD * (length - first_pad):
            out.append(text)
    return tuple(out)


def _extend(scheme: PrefixScheme, kept: list[str], level: int) -> list[str]:
    """The next level's candidates: each kept prefix followed by every valid segment (padding stays padding)."""
    grow = scheme.prefix_length(level) - scheme.prefix_length(level - 1)
    out = []
    for prefix in kept:
        if prefix.endswith(PAD):
            out.append(prefix + PAD * grow)
        else:
            out.extend(prefix + seg for seg in _segments(scheme.alphabet + PAD, grow))
    return out


def heavy_hitters(
    scheme: PrefixScheme, summary: Summary, top: int, *, beam: int | None = None, alpha: float = 0.05
) -> FrequencyTable:
    """The ``top`` most frequent values found by prefix extension, with count estimates and standard errors.

    Guarantee: post-processing of ε-LDP reports (each client reports one prefix once; adjacency:
    replace one user's input), so ε per report is the whole cost (PEM, Wang-Li-Jha, IEEE TDSC 2019;
    count-mean sketch, Apple 2017; docs/math/local-collection.md §13.9). ``beam`` (default 4·top,
    at most 256) prefixes survive each level; ``significant`` flags estimates above the one-sided
    Bonferroni threshold over the last level's candidates at family-wise level ``alpha``.
    """
    if not isinstance(scheme, PrefixScheme):
        raise UsageError("heavy_hitters needs a PrefixScheme", type(scheme).__name__, "collect with a prefix scheme")
    if not integral_in(top, 1, 4096):
        raise UsageError("top must be an integer in [1, 4096]", top, "pass e.g. top=10")
    width = min(4 * int(top), 256) if beam is None else beam
    if not integral_in(width, int(top), 4096):
        raise UsageError("beam must be an integer in [top, 4096]", beam, "pass beam >= top, or leave it unset")
    kept: list[str] = []
    for level in range(scheme.levels):
        candidates = (
            _extend(scheme, kept, level) if level else list(_segments(scheme.alphabet + PAD, scheme.prefix_length(0)))
        )
        if len(candidates) > MAX_LEVEL_CANDIDATES:
            raise UsageError("a level would estimate too many prefixes", len(candidates), "use a smaller beam")
        estimate, std_error = level_estimate(scheme, summary, level, candidates)
        order = np.argsort(-estimate, kind="stable")
        kept = [candidates[i] for i in order[: int(width)]]
    best = order[: int(top)]
    flags, details = bonferroni(estimate, std_error, alpha)
    details.update(
        {"n": summary.n, "levels": scheme.levels, "beam": int(width), "last_level_candidates": len(candidates)}
    )
    return FrequencyTable(
        [candidates[i].rstrip(PAD) for i in best],
        estimate[best],
        std_error[best],
        flags[best],
        "prefix extension (PEM-style beam) over count mean sketches",
        details,
    )
