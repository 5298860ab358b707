"""The exact rank-table sampler of the EM quantile: integer exponents, a window near q n, acceptance.

Each candidate set's records form runs (tied positions) and gaps; a segment with ranks [a, b] gets the
exponent max(floor(q n D) - b D, a D - ceil(q n D), 0) on the public grid D, plus ⌊D/16⌋ per record
off its decimal grid (the fit), times its set's gain (each set runs at its own Δu: the cells' rate over the
points' is a ratio of small integers, §8.7), and is proposed with weight (base measure)
exp(-rate exponent) by ``dpsense.noise.categorical``; an exact Bernoulli step accepts it when q n D is
not whole. When the
segments far from q n are negligible only a window around it enters the float table, with a certified
bound on what it leaves out, and the whole table is built on the rare draw the window cannot decide:
the same draws from the same words. The groups of a grouped release build their windows and float tables
together (``draw_groups``) and draw in order: the same draws as group by group. Proofs:
docs/math/exponential-mechanism.md §8.1 ("Exact exponents"), §8.6 (the fit), §8.7 (a Δu per candidate set);
docs/math/floating-point.md §9.3
("Windows", "Tables built together").
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from fractions import Fraction

import numpy as np
from numpy.typing import NDArray

from dpsense.mechanisms._quantile_candidates import F64, I64, Candidates, Cells, Lattice
from dpsense.noise import exact
from dpsense.noise.categorical import CategoricalSampler, Outside, WindowedSampler

#: Largest grid denominator D of the exponents (docs/math/exponential-mechanism.md §8.1, "Exact exponents").
_GRID = 1 << 20
#: Exponents stay below (n + 1) D <= 2^61 (int64 prefix sums and shifts in the sampler).
_EXPONENT_LIMIT = 1 << 61


#: The fit's price per record off a decimal grid, in ranks: a point of G_e scores -(dist + FIT_WEIGHT d_e)
#: (docs/math/exponential-mechanism.md §8.6); it takes at most 1/17 of the width of the score's changes.
FIT_WEIGHT = Fraction(1, 16)
ONE = Fraction(1)


@dataclass(frozen=True)
class RankTable:
    """The segments' base measures, first cells and grid exponents, and the exact acceptance step.

    Segment j is proposed with weight ``lengths[j] exp(-rate exponents[j])`` and accepted with
    probability ``exp(-g accept_below)`` when ``sides[j] == BELOW``, ``exp(-g accept_above)`` when ``ABOVE``
    and always when ``EXACT``, g = ``gains[0]`` for the cells (part 0) and ``gains[1]`` for the other sets
    (the Fractions are 0 when D is a multiple of den).
    """

    lengths: F64
    starts: I64
    counts: I64
    parts: I64
    exponents: I64
    sides: NDArray[np.int8]
    rate: Fraction
    accept_below: Fraction
    accept_above: Fraction
    gains: tuple[int, int] = (1, 1)


BELOW, ABOVE, EXACT = 0, 1, 2


def _grid(n: int, den: int, *, fitted: bool = False, gain: int = 1) -> int:
    """The exponent grid D: den up to 2^20, else 2^20; halved while (n + 1) D > 2^61 (n >= 2^41 only).

    ``fitted``: 16 den (so FIT_WEIGHT D is a whole exponent) and (n + 1) D <= 2^60, leaving room for the
    fit's exponents (at most n D / 16 beside the rank's (n + 1) D). ``gain``: the largest set's gain, which
    multiplies the exponents, divides the limit.
    """
    wanted = den * FIT_WEIGHT.denominator if fitted else den
    limit = (_EXPONENT_LIMIT // 2 if fitted else _EXPONENT_LIMIT) // gain
    grid = wanted if wanted <= _GRID else _GRID
    while grid > 1 and (n + 1) * grid > limit:
        grid = max(1, grid // 2)
    return grid


def _runs(sorted_cells: I64) -> tuple[I64, I64]:
    """The runs of equal cells of a sorted array: (records below each run, records up to and in it)."""
    n = sorted_cells.size
    if n == 0:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    change = np.flatnonzero(sorted_cells[1:] != sorted_cells[:-1]) + 1
    below = np.empty(change.size + 1, dtype=np.int64)
    through = np.empty(change.size + 1, dtype=np.int64)
    below[0], below[1:] = 0, change
    through[:-1], through[-1] = change, n
    return below, through


@dataclass(frozen=True)
class Target:
    """The public constants of the rank utility for q and n (docs/math/exponential-mechanism.md §8.1, exponents)."""

    grid: int  # D
    target: int  # q n = target / den
    low: int  # floor(q n D)
    high: int  # ceil(q n D)
    split: int  # ceil(q n): an integer rank v < split lies below q n
    floor: int  # floor(q n): an integer rank v > floor lies above q n
    rate: Fraction
    accept_below: Fraction
    accept_above: Fraction
    misfit: int = 0  # the exponent of one record off a decimal grid: floor(FIT_WEIGHT D) (§8.6)
    gains: tuple[int, int] = (1, 1)  # the exponents' factor for the cells and for the points (§8.7)

    @classmethod
    def of(cls, n: int, q: Fraction, epsilon: Fraction, *, fitted: bool = False, sharper: Fraction = ONE) -> Target:
        """The constants for n records; ``epsilon`` is the points' rate, ``sharper`` the cells' over it (§8.7).

        With decimal points the cells' exponents are multiplied by ``sharper.numerator`` and the points' by
        ``sharper.denominator``, and the rate divided by the latter: a cell segment then weighs
        exp(-sharper epsilon E / (2 D)), a point exp(-epsilon E / (2 D)). Without them ``sharper`` is unused.
        """
        num, den = q.numerator, q.denominator
        gains = (sharper.numerator, sharper.denominator) if fitted else (1, 1)
        grid = _grid(n, den, fitted=fitted, gain=max(gains))
        target = num * n
        low, high = (target * grid) // den, -((-target * grid) // den)
        scale = epsilon / (2 * den * grid * gains[1])  # acceptance exponent per unit of E D - P den, gain 1
        return cls(
            grid=grid,
            target=target,
            low=low,
            high=high,
            split=-((-target) // den),
            floor=target // den,
            rate=epsilon / (2 * grid * gains[1]),
            accept_below=scale * (target * grid - low * den),
            accept_above=scale * (high * den - target * grid),
            misfit=math.floor(FIT_WEIGHT * grid) if fitted else 0,
            gains=gains,
        )


def rank_table(candidates: Candidates | Cells, q: Fraction, epsilon: Fraction, sharper: Fraction = ONE) -> RankTable:
    """The exact rank table (docs/math/exponential-mechanism.md §8.1, "Exact exponents"); large values as ints.

    A segment with ranks [a, b] has utility -dist(q n, [a, b]): ``q n - b`` when b < q n (below),
    ``a - q n`` when a > q n (above), else 0 (exact).
    """
    if isinstance(candidates, Cells):
        candidates = Candidates.of(candidates)
    target = Target.of(candidates.records.size, q, epsilon, fitted=candidates.misfits is not None, sharper=sharper)
    misfits = np.array([candidates.misfits or ()], dtype=np.int64)
    return _group_tables(candidates, [target], [_Pieces.whole(part) for part in candidates.parts], misfits)[0]


#: A window leaves out weight at most 2^-56 of the exact segment's in all (``rank_window``; the sampler's limit,
#: ``categorical.OUTSIDE_LIMIT``).
_WINDOW_LEFT_OUT_BITS = 56


@dataclass(frozen=True)
class Window:
    """The rank table of the segments near q n, the first record of each set's first run, and a bound on the rest."""

    table: RankTable
    firsts: tuple[int, ...]
    outside: Outside

    def rows_in_whole(self, candidates: Candidates) -> I64:
        """The window's rows' positions in the whole table (``rank_table``): built when a draw needs them."""
        positions, size = [], 0
        sizes = np.bincount(self.table.parts, minlength=len(candidates.lattices))
        for part, first, rows in zip(candidates.parts, self.firsts, sizes.tolist(), strict=True):
            below, _ = _runs(part.sorted_cells)
            start = size + 2 * int(np.searchsorted(below, first))
            positions.append(np.arange(start, start + rows, dtype=np.int64))
            size += 2 * below.size + 1
        return np.concatenate(positions)


def rank_window(candidates: Candidates, q: Fraction, epsilon: Fraction, sharper: Fraction = ONE) -> Window | None:
    """The segments within the ranks of q n where exp(-rate E) is not negligible; ``None`` when that is all of them.

    A segment with b < r_lo has exponent >= floor(q n D) - (r_lo - 1) D >= R, one with a > r_hi has
    exponent >= (r_hi + 1) D - ceil(q n D) >= R, R = the reach in exponent units: the segments outside the
    window weigh at most their base measures' sum times exp(-rate R) (docs/math/floating-point.md §9.3,
    "Windows"). A candidate set's segments split its candidates, so their measures sum to the set's total
    measure, its weight times its candidates (``total_measure``): M, the sum over the sets, bounds the measures
    left out. The segment holding q n in the first set (an occupied cell or integer, exponent 0, measure w_0)
    is in the window, so the weight left out, relative to the window's largest, is at most M / w_0
    exp(-rate R): R is chosen to make that 2^-56 with a margin. The segments of ranks in [r_lo, r_hi] are the
    runs holding records r_lo - 1 .. r_hi of the sorted records: only records near those are mapped to each
    candidate set.
    """
    window = _group_windows([candidates], q, epsilon, sharper)[0]
    return None if window is None or not window.outside.measure else window


def total_measure(candidates: Candidates) -> int:
    """The base measure of every candidate of every set: sum of weight x candidates (positions p % stride == offset)."""
    return sum(
        weight * ((lattice.resolution - 1 - lattice.offset) // lattice.stride + 1)
        for lattice, weight in zip(candidates.lattices, candidates.weights, strict=True)
    )


def draw_groups(
    groups: Sequence[Candidates], q: Fraction, epsilon: Fraction, sharper: Fraction = ONE
) -> list[tuple[int, int]]:
    """One draw for each group, in order: what ``draw(group, q, epsilon, 1, sharper)`` returns from the same words.

    The groups' windows (``rank_window``; the whole table when the window would hold it all) are built
    together (``_group_windows``) and their float tables too (``WindowedSampler.build_many``); each group's
    draw then runs as ``draw``'s does, group by group. A group without records, or with other candidate sets
    or another rate, and one whose window the sampler refuses, takes ``draw`` itself. A window and the whole
    table give the same index from the same words (docs/math/floating-point.md §9.3), so the draws equal
    those of ``draw`` called for each group in turn.
    """
    out = []
    for batch in _batches(groups, q, epsilon, sharper):
        for candidates, one in zip(batch, _group_samplers(batch, q, epsilon, sharper), strict=True):
            if one is None:
                parts, positions = draw(candidates, q, epsilon, 1, sharper)
            else:
                parts, positions = _draw_window(candidates, *one, 1)
            out.append((int(parts[0]), int(positions[0])))
    return out


#: Records the windows of one batch of groups may hold: their tables (a few segments a record in each candidate
#: set, some thirty arrays of them) then stay in the processor's cache; all groups in one batch ran 2-3x slower.
BATCH_RECORDS = 1 << 14


def _batches(
    groups: Sequence[Candidates], q: Fraction, epsilon: Fraction, sharper: Fraction = ONE
) -> list[Sequence[Candidates]]:
    """Consecutive groups whose windows hold about ``BATCH_RECORDS`` records in all (at least one group each)."""
    if not groups:
        return []
    target = Target.of(groups[0].records.size, q, epsilon, fitted=groups[0].misfits is not None, sharper=sharper)
    rate = float(target.rate) if target.rate < 2**1000 else math.inf
    ranks = target.grid * min(target.gains)  # exponent units per rank of the slowest set
    span = len(groups[0].records) if not 0.0 < rate < math.inf else 2 * (_reach(groups[0], rate) // ranks) + 2
    batches, start, held = [], 0, 0
    for g, candidates in enumerate(groups):
        held += min(candidates.records.size, span)
        if held > BATCH_RECORDS and g > start:
            batches.append(groups[start:g])
            start, held = g, min(candidates.records.size, span)
    batches.append(groups[start:])
    return batches


def _reach(candidates: Candidates, rate: float) -> int:
    """The window's reach R in exponent units (``rank_window``): M / w_0 exp(-rate R) <= 2^-56 with a margin.

    At most ``_EXPONENT_LIMIT``: every exponent of a table lies below it, so that reach is the whole table (a
    rate so small, e.g. a subnormal one, that the quotient is not a finite float, reaches it too).
    """
    bits = total_measure(candidates).bit_length() - candidates.weights[0].bit_length() + 2 + _WINDOW_LEFT_OUT_BITS
    reach = (bits * math.log(2) + 2.0) / rate
    return math.ceil(reach) + 1 if reach < _EXPONENT_LIMIT else _EXPONENT_LIMIT


def _group_windows(
    groups: Sequence[Candidates], q: Fraction, epsilon: Fraction, sharper: Fraction = ONE
) -> list[Window | None]:
    """The window of each group, built together (``None`` where a group takes ``draw``'s whole table).

    A group whose window would hold every segment gets that whole table as its window, with nothing left out
    (``outside.measure == 0``): the same table and the same draws. Groups without records, or with other
    candidate sets, rate or grid than the first, get ``None``.
    """
    out: list[Window | None] = [None] * len(groups)
    if not groups:
        return out
    model = groups[0]
    fitted = model.misfits is not None
    targets = [Target.of(c.records.size, q, epsilon, fitted=fitted, sharper=sharper) for c in groups]
    rate = targets[0].rate
    chosen = [
        g
        for g, (c, t) in enumerate(zip(groups, targets, strict=True))
        if c.records.size
        and c.lattices == model.lattices
        and c.weights == model.weights
        and (c.misfits is not None) == fitted
        and t.rate == rate
        and t.grid == targets[0].grid
        and t.gains == targets[0].gains
    ]
    rate_f = float(rate) if rate < 2**1000 else math.inf
    if not chosen or not 0.0 < rate_f < math.inf:
        return out
    measure = total_measure(model)
    reach = _reach(model, rate_f)
    grid = targets[0].grid
    # a segment's exponent is its set's gain times its rank exponent (plus the fit): the slowest set's gain
    # turns the reach R into the rank exponent every left-out segment reaches, ceil(R / gain); every exponent of
    # the table lies below _EXPONENT_LIMIT, so a longer reach (a tiny rate) is the whole table, and int64 holds it
    per_rank = min(-(-reach // min(targets[0].gains)), _EXPONENT_LIMIT)
    n = np.array([groups[g].records.size for g in chosen], dtype=np.int64)
    low = np.array([targets[g].low for g in chosen], dtype=np.int64)
    high = np.array([targets[g].high for g in chosen], dtype=np.int64)
    r_lo = (low - per_rank) // grid + 1
    r_hi = -(-(high + per_rank) // grid) - 1
    partial = (r_lo > 0) | (r_hi < n)  # else the window holds the whole table: nothing is left out
    first, last = np.maximum(r_lo - 1, 0), np.minimum(r_hi, n - 1)
    records = np.concatenate([groups[g].records for g in chosen])
    origin = np.cumsum(n) - n
    pieces = [_group_pieces(lattice, records, origin, n, first, last) for lattice in model.lattices]
    misfits = np.array([groups[g].misfits or () for g in chosen], dtype=np.int64).reshape(n.size, -1)
    tables = _group_tables(model, [targets[g] for g in chosen], pieces, misfits)
    firsts = np.stack([piece.below[piece.head] for piece in pieces], axis=1).tolist()
    for k, (g, cut) in enumerate(zip(chosen, partial.tolist(), strict=True)):
        left_out = Outside(measure=math.ldexp(1.0, measure.bit_length()), exponent=reach) if cut else Outside(0.0, 0)
        out[g] = Window(tables[k], tuple(firsts[k]), left_out)
    return out


def _group_samplers(
    groups: Sequence[Candidates], q: Fraction, epsilon: Fraction, sharper: Fraction = ONE
) -> list[tuple[Window, WindowedSampler, Callable[[], RankTable]] | None]:
    """Each group's window with its sampler (``WindowedSampler.build_many``) and its whole table, built on demand."""
    chosen = [(g, window) for g, window in enumerate(_group_windows(groups, q, epsilon, sharper)) if window is not None]
    out: list[tuple[Window, WindowedSampler, Callable[[], RankTable]] | None] = [None] * len(groups)
    if not chosen:
        return out
    tables = [window.table for _, window in chosen]
    wholes = [functools.cache(lambda c=groups[g]: rank_table(c, q, epsilon, sharper)) for g, _ in chosen]
    samplers = WindowedSampler.build_many(
        np.concatenate([t.lengths for t in tables]),
        np.concatenate([t.exponents for t in tables]),
        tables[0].rate,
        np.cumsum([0] + [t.lengths.size for t in tables]).astype(np.int64),
        outside=[window.outside for _, window in chosen],
        whole=[_whole_sampler(whole) for whole in wholes],
    )
    for (g, window), sampler, whole in zip(chosen, samplers, wholes, strict=True):
        if sampler is not None:
            out[g] = (window, sampler, whole)
    return out


def _whole_sampler(whole: Callable[[], RankTable]) -> Callable[[], CategoricalSampler]:
    return lambda: CategoricalSampler.build(whole().lengths, whole().exponents, whole().rate)


def _group_tables(model: Candidates, targets: list[Target], pieces: list[_Pieces], misfits: I64) -> list[RankTable]:
    """The rank tables of groups: group g's runs in set l are ``pieces[l]``'s g-th piece, with the gaps around them.

    Gap j holds the empty positions between the cells of runs j - 1 and j (both ranks: the records below);
    run j's cell holds its tied records (ranks below and up to). The exponent is max(floor(q n D) - b D,
    a D - ceil(q n D), 0): >= 0 in its first term exactly when the segment lies below q n, in the second
    exactly when above, both <= 0 when its ranks hold q n; plus, with decimal points, floor(FIT_WEIGHT D) per
    record off the segment's set (§8.6).
    """
    groups, sets = len(targets), len(pieces)
    sizes = np.stack([2 * piece.runs + 1 for piece in pieces], axis=1)  # (group, set): segments, group-major
    flat = sizes.ravel()
    offsets = (np.cumsum(flat) - flat).reshape(groups, sets)
    total = int(flat.sum())
    starts, counts, a, b, mass, parts = (np.empty(total, dtype=np.int64) for _ in range(6))
    for part, (lattice, weight, piece) in enumerate(zip(model.lattices, model.weights, pieces, strict=True)):
        k = piece.runs
        edge_at = np.cumsum(k + 2) - (k + 2)
        run_at = piece.head
        gaps, ramp = k + 1, _ramp(k + 1)
        edge = np.repeat(edge_at, gaps) + ramp
        gap_start = piece.edges[edge] + 1
        gap_length = piece.edges[edge + 1] - piece.edges[edge] - 1
        first_rank = np.zeros(k.size, dtype=np.int64)  # the gap before the first run: the records below it
        first_rank[k > 0] = piece.below[run_at[k > 0]]
        rank = np.repeat(first_rank, gaps)  # a later gap follows a run: the records up to and in it
        later = ramp > 0
        rank[later] = piece.through[(np.repeat(run_at, gaps) + ramp - 1)[later]]
        run_ramp = _ramp(k)
        run_start = piece.edges[np.repeat(edge_at, k) + run_ramp + 1]
        seg_start = np.concatenate((gap_start, run_start))
        seg_length = np.concatenate((gap_length, np.ones(run_start.size, dtype=np.int64)))
        if lattice.stride > 1:  # only positions p % stride == offset are candidates: count and align those
            ends = seg_start + seg_length - 1
            seg_start += (lattice.offset - seg_start) % lattice.stride
            seg_length = np.where(ends >= seg_start, (ends - seg_start) // lattice.stride + 1, 0)
        at = np.concatenate(
            (np.repeat(offsets[:, part], gaps) + 2 * ramp, np.repeat(offsets[:, part], k) + 2 * run_ramp + 1)
        )
        starts[at], counts[at] = seg_start, seg_length
        a[at] = np.concatenate((rank, piece.below))
        b[at] = np.concatenate((rank, piece.through))
        mass[at] = seg_length * weight
        parts[at] = part
    per_group = sizes.sum(axis=1)
    owner = np.repeat(np.arange(groups), per_group)
    grid = targets[0].grid
    low = np.array([t.low for t in targets], dtype=np.int64)[owner]
    high = np.array([t.high for t in targets], dtype=np.int64)[owner]
    below_target = b < np.array([t.split for t in targets], dtype=np.int64)[owner]
    above_target = a > np.array([t.floor for t in targets], dtype=np.int64)[owner]
    exponents = np.maximum(low - b * grid, a * grid - high)
    np.maximum(exponents, 0, out=exponents)
    if model.misfits is not None and targets[0].misfit:
        exponents += np.repeat(misfits.ravel() * targets[0].misfit, flat)
    gains = targets[0].gains
    if gains != (1, 1):  # each set at its own Δu (§8.7): the cells' exponents times gains[0], the points' gains[1]
        exponents *= np.where(parts == 0, gains[0], gains[1])
    sides = (EXACT - 2 * below_target - above_target).astype(np.int8)
    lengths = mass.astype(np.float64)
    bounds = np.cumsum(per_group) - per_group
    tables = []
    for g, t in enumerate(targets):
        view = slice(int(bounds[g]), int(bounds[g] + per_group[g]))
        tables.append(
            RankTable(
                lengths=lengths[view],
                starts=starts[view],
                counts=counts[view],
                parts=parts[view],
                exponents=exponents[view],
                sides=sides[view],
                rate=t.rate,
                accept_below=t.accept_below,
                accept_above=t.accept_above,
                gains=t.gains,
            )
        )
    return tables


def _ramp(counts: I64) -> I64:
    """0..c-1 for each count c, concatenated."""
    total = int(counts.sum())
    return np.arange(total, dtype=np.int64) - np.repeat(np.cumsum(counts) - counts, counts)


def _group_pieces(lattice: Lattice, records: F64, origin: I64, n: I64, first: I64, last: I64) -> _Pieces:
    """The runs of one candidate set holding each group's records ranked first..last, and their edges.

    Group g's records are ``records[origin[g]:origin[g] + n[g]]`` (0 <= first <= last < n). The records near
    those ranks (16 on each side) are mapped in one call for all groups; runs are split at every change of
    position and at every group's start; a run reaching past a group's slice is followed to its end by a
    search run for all such groups together (the map is non-decreasing).
    """
    lo = np.maximum(first - 16, 0)
    hi = np.minimum(last + 17, n)
    widths = hi - lo
    slice_at = np.cumsum(widths) - widths  # group g's slice in the mapped array
    positions = lattice.positions(records[np.repeat(origin + lo - slice_at, widths) + np.arange(int(widths.sum()))])
    marks = np.zeros(positions.size + 1, dtype=np.bool_)
    marks[1:-1] = positions[1:] != positions[:-1]
    marks[slice_at] = True
    marks[-1] = True
    run_starts = np.flatnonzero(marks)
    i = np.searchsorted(run_starts, slice_at + first - lo, side="right") - 1
    j = np.searchsorted(run_starts, slice_at + last - lo, side="right")
    runs = j - i
    at = np.repeat(i, runs) + _ramp(runs)
    shift = np.repeat(lo - slice_at, runs)  # a mapped index plus shift is the record's rank in its group
    below = run_starts[at] + shift
    through = run_starts[at + 1] + shift
    values = positions[run_starts[at]]
    head = np.cumsum(runs) - runs  # each group's first run
    tail = head + runs - 1
    before = below[head] > 0
    wide = np.flatnonzero(before & (below[head] == lo))  # the first run may begin before the slice
    if wide.size:
        below[head[wide]] = (
            _run_bounds(lattice, records, origin[wide], origin[wide] + lo[wide], values[head[wide]], start=True)
            - origin[wide]
        )
    wide = np.flatnonzero((through[tail] == hi) & (hi < n))  # the last run may end after it
    if wide.size:
        through[tail[wide]] = (
            _run_bounds(
                lattice, records, origin[wide] + hi[wide] - 1, origin[wide] + n[wide], values[tail[wide]], start=False
            )
            - origin[wide]
        )
    edges = np.empty(int(runs.sum()) + 2 * runs.size, dtype=np.int64)
    edge_at = np.cumsum(runs + 2) - (runs + 2)
    edges[np.repeat(edge_at + 1, runs) + _ramp(runs)] = values
    edges[edge_at] = _neighbour(lattice, records, positions, origin, lo, slice_at, below[head] - 1, below[head] > 0, -1)
    edges[edge_at + runs + 1] = _neighbour(
        lattice, records, positions, origin, lo, slice_at, through[tail], through[tail] < n, lattice.resolution
    )
    return _Pieces(edges, below, through, runs)


def _neighbour(
    lattice: Lattice,
    records: F64,
    positions: I64,
    origin: I64,
    lo: I64,
    slice_at: I64,
    rank: I64,
    present: NDArray[np.bool_],
    missing: int,
) -> I64:
    """The position of each group's record ``rank`` (from its mapped slice if there), ``missing`` where absent."""
    widths = np.diff(np.append(slice_at, positions.size))
    inside = present & (rank >= lo) & (rank < lo + widths)
    out = np.full(rank.size, missing, dtype=np.int64)
    out[inside] = positions[(slice_at + rank - lo)[inside]]
    outside = present & ~inside
    if outside.any():
        out[outside] = lattice.positions(records[(origin + rank)[outside]])
    return out


def _run_bounds(lattice: Lattice, records: F64, low: I64, high: I64, values: I64, *, start: bool) -> I64:
    """Searches for many runs at once on the sorted records (the map to positions is non-decreasing).

    ``start``: the first index in [low, high] whose position is ``values`` (record ``high`` has it). Else one past
    the last such index in [low, high]: the first in (low, high) whose position is above (record ``low`` has it),
    or ``high`` (the group's end). Each step maps ``_SEARCH_PROBES`` records of every range still open (a range
    of at most four times as many is mapped whole), so a run of n records takes about log n / 5 steps.
    """
    lo, hi = (low.copy(), high.copy()) if start else (low + 1, high.copy())
    while True:
        active = np.flatnonzero(lo < hi)
        if not active.size:
            return lo
        a, b = lo[active], hi[active]
        steps = np.minimum(b - a, _SEARCH_PROBES)  # probes a + (i (b - a)) // steps, i = 0..steps - 1, then b
        spread = np.arange(_SEARCH_PROBES + 1)
        probes = np.where(
            spread < steps[:, None], a[:, None] + (spread * (b - a)[:, None]) // steps[:, None], b[:, None]
        )
        inside = probes < b[:, None]  # record b is known to be past the bound, and may lie past the group: not mapped
        found = np.zeros(probes.shape, dtype=np.int64)
        found[inside] = lattice.positions(records[probes[inside]])
        want = values[active][:, None]
        ahead = ((found >= want) if start else (found > want)) | ~inside
        k = np.argmax(ahead, axis=1)  # the first probe at or past the bound (b always is; k = 0: the bound is a)
        rows = np.arange(active.size)
        hi[active] = probes[rows, k]
        lo[active] = np.where(k > 0, probes[rows, np.maximum(k - 1, 0)] + 1, a)


#: Records each step of ``_run_bounds`` maps per open range.
_SEARCH_PROBES = 32


@dataclass(frozen=True)
class _Pieces:
    """The pieces of one candidate set for many groups: group g has runs[g] runs, and runs[g] + 2 edges."""

    edges: I64
    below: I64
    through: I64
    runs: I64

    @classmethod
    def whole(cls, cells: Cells) -> _Pieces:
        """Every run of one group's cells: the whole table's piece (edges -1 and K around the runs' cells)."""
        below, through = _runs(cells.sorted_cells)
        edges = np.empty(below.size + 2, dtype=np.int64)
        edges[0], edges[1:-1], edges[-1] = -1, cells.sorted_cells[below], cells.resolution
        return cls(edges, below, through, np.array([below.size], dtype=np.int64))

    @functools.cached_property
    def head(self) -> I64:
        """Each group's first run (an index into ``below`` and ``through``)."""
        return np.cumsum(self.runs) - self.runs


def _accepted(table: RankTable, runs: I64) -> NDArray[np.bool_]:
    """The exact acceptance step of each proposed segment (all True when both residuals are 0)."""
    accept = np.ones(runs.size, dtype=np.bool_)
    for lane, run in enumerate(runs.tolist()):
        side = int(table.sides[run])
        x = table.accept_below if side == BELOW else table.accept_above if side == ABOVE else Fraction(0)
        x *= table.gains[0] if table.parts[run] == 0 else table.gains[1]
        if x:
            accept[lane] = exact.python_bernoulli_exp(x.numerator, x.denominator)
    return accept


def draw_cells(cells: Cells, q: Fraction, epsilon: Fraction, size: int) -> I64:
    """``size`` independent exact draws of the output cell of one candidate set (``draw``)."""
    return draw(Candidates.of(cells), q, epsilon, size)[1]


def draw(candidates: Candidates, q: Fraction, epsilon: Fraction, size: int, sharper: Fraction = ONE) -> tuple[I64, I64]:
    """``size`` independent exact draws: (candidate set, position) each (the mechanism's randomness).

    ``epsilon`` is the rate of the utility in rank units: the privacy loss divided by the utility's
    sensitivity (``utility_sensitivity``); with decimal points that is the points' rate, and ``sharper``
    (the points' Δu over the cells', >= 1) gives the cells theirs (§8.7). The law is the whole rank
    table's; when the segments far from q n are negligible, only a window around it enters the float
    table (``rank_window``), and the whole table is built on the rare draw the window's margin does not
    decide: the same draws from the same words (docs/math/floating-point.md §9.3, "Windows").
    """
    whole = functools.cache(lambda: rank_table(candidates, q, epsilon, sharper))
    window = rank_window(candidates, q, epsilon, sharper)
    windowed = None
    if window is not None:
        windowed = WindowedSampler.build(
            window.table.lengths,
            window.table.exponents,
            window.table.rate,
            outside=window.outside,
            whole=_whole_sampler(whole),
        )
    if window is not None and windowed is not None:
        return _draw_window(candidates, window, windowed, whole, size)
    sampler = CategoricalSampler.build(whole().lengths, whole().exponents, whole().rate)
    table, at = whole(), sampler.draw(size)
    if table.accept_below or table.accept_above:  # a public fact of (q, D): exact rejection step
        pending = np.flatnonzero(~_accepted(table, at))
        while pending.size:
            at[pending] = sampler.draw(pending.size)
            pending = pending[~_accepted(table, at[pending])]
    return _chosen(candidates, table, at)


def _draw_window(
    candidates: Candidates, window: Window, sampler: WindowedSampler, whole: Callable[[], RankTable], size: int
) -> tuple[I64, I64]:
    """``draw`` from a window and its sampler."""
    table, at = _windowed_draws(window, sampler, whole, candidates, size)
    return _chosen(candidates, table, at)


def _chosen(candidates: Candidates, table: RankTable, at: I64) -> tuple[I64, I64]:
    """The drawn segments' candidate sets, and a uniform candidate position in each (the last words used)."""
    strides = np.array([lattice.stride for lattice in candidates.lattices], dtype=np.int64)[table.parts[at]]
    return table.parts[at], table.starts[at] + strides * exact.uniform_below(table.counts[at])


def _windowed_draws(
    window: Window, sampler: WindowedSampler, whole: Callable[[], RankTable], candidates: Candidates, size: int
) -> tuple[RankTable, I64]:
    """``draw``'s draws from a window: its rows while every draw is decided in it, else the whole table's."""
    rows, inside = sampler.draw(size)
    table = window.table
    if not bool(inside.all()):
        rows = _in_whole(window, candidates, rows, inside)
        table = whole()
    if table.accept_below or table.accept_above:  # a public fact of (q, D): exact rejection step
        pending = np.flatnonzero(~_accepted(table, rows))
        while pending.size:
            redrawn, inside = sampler.draw(pending.size)
            if table is window.table and not bool(inside.all()):
                rows = _in_whole(window, candidates, rows, np.ones(rows.size, dtype=np.bool_))
                table = whole()
            if table is not window.table:
                redrawn = _in_whole(window, candidates, redrawn, inside)
            rows[pending] = redrawn
            pending = pending[~_accepted(table, rows[pending])]
    return table, rows


def _in_whole(window: Window, candidates: Candidates, rows: I64, inside: NDArray[np.bool_]) -> I64:
    """Draws as positions in the whole table: window rows mapped, the others already whole positions."""
    out = rows.copy()
    out[inside] = window.rows_in_whole(candidates)[rows[inside]]
    return out
