"""The EM quantile's public candidates, and the public map of each record onto them.

A candidate set (``Lattice``) is K equal cells of [L, U], the integers of [L, U], the half-step lattice
of a decimal grid 10^e Z inside [L, U], or the points k s of a declared recording step; each maps a
record by a non-decreasing function of the record alone, so the sorted records give sorted positions.
``prepared`` decides the sets and their base measures from public facts (the bounds, the column's
declared kind or step, K) and returns the map from a chosen (set, position) to the released value.
``misfits`` counts, per decimal grid, the records off it: the fit of §8.6. Proofs:
docs/math/exponential-mechanism.md §8.1 (cells), §8.2 (integers), §8.3 (decimal grids), §8.5 (a
declared step), §8.6 (the fit); the sampler is ``_rank_sampler``, the mechanism ``quantile``.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from dpsense.core.errors import UsageError
from dpsense.core.numbers import NumberLike, to_fraction
from dpsense.core.steps import DecimalStep, check_step
from dpsense.mechanisms._validate import MAX_CELLS, as_record_values, check_bounds_pair, check_resolution

F64 = NDArray[np.float64]
I64 = NDArray[np.int64]

#: Default number of public output cells in [L, U].
DEFAULT_RESOLUTION = 1 << 32


@dataclass(frozen=True)
class Cells:
    """A dataset mapped to public cells and sorted."""

    lower: float
    upper: float
    resolution: int
    sorted_cells: I64
    stride: int = 1  # candidates are the positions p with p % stride == offset (the others only hold records)
    offset: int = 0


def record_values(values: ArrayLike) -> NDArray[np.float64]:
    """One value per record as a 1-D float64 array without NaN; no records (shape (0,)) is allowed."""
    array = np.asarray(values, dtype=np.float64)
    if array.shape == (0,):
        return array
    return as_record_values(array)


def _sorted_clipped(values: ArrayLike, low: float, high: float) -> F64:
    """The records clipped to [L, U] and sorted: sorted once for every candidate set of a release.

    Each candidate set maps a record by a non-decreasing public map (``Lattice.positions``), so
    mapping the sorted records gives the sorted positions, the same array as sorting the mapped ones.
    """
    records = record_values(values)
    if records.size and (records[0] < low or records[-1] > high or not bool(np.all(records[1:] >= records[:-1]))):
        clipped = np.clip(records, low, high)  # a copy: the caller's array is never changed
        clipped.sort()
        return clipped
    return records  # sorted and inside the bounds (a release's collected groups come sorted): no copy


def to_cells(values: ArrayLike, low: float, high: float, resolution: int) -> Cells:
    return Lattice(low, high, resolution, _BY_CELL).cells(_sorted_clipped(values, low, high))


def _cell_positions(clipped: F64, low: float, high: float, resolution: int) -> I64:
    """Clipped records on the K equal cells of [L, U] (every step is non-decreasing: sorted records stay sorted)."""
    if high == low:
        return np.zeros(clipped.size, dtype=np.int64)
    # Halving is exact and keeps (U - L) finite for any finite bounds.
    position = (clipped * 0.5 - low * 0.5) / (high * 0.5 - low * 0.5)
    return np.clip(np.floor(position * resolution), 0, resolution - 1).astype(np.int64)


#: Integer candidates stay within ±2^53, where every integer is a double (the cells are computed in float64).
_EXACT_INTEGERS = 1 << 53


def integer_span(low: NumberLike, high: NumberLike, *, limit: int = MAX_CELLS) -> tuple[int, int] | None:
    """The integers ⌈L⌉ .. ⌊U⌋ of public bounds when there are 1 to ``limit`` of them within ±2^53, else ``None``.

    The one rule for integer candidates, decided from the bounds alone: the query
    builder asks it before any charge, so the release never meets a span the mechanism refuses.
    """
    first, last = math.ceil(to_fraction(low)), math.floor(to_fraction(high))
    if not -_EXACT_INTEGERS <= first <= last <= _EXACT_INTEGERS or last - first + 1 > limit:
        return None
    return first, last


def integer_candidates(bounds: tuple[float, float]) -> tuple[int, int]:
    """The integers ⌈L⌉ .. ⌊U⌋ of public bounds, the candidates of an integer column; refused when none."""
    low, high = check_bounds_pair(bounds)
    span = integer_span(low, high)
    if span is None:
        raise UsageError(
            "integer candidates need 1 to 2^52 integers within the bounds, inside ±2^53",
            (low, high),
            "widen the bounds to hold an integer, or use cells (integers=False)",
        )
    return span


#: Most points of one decimal grid added to the cells of a numeric column (``decimal_grids``).
MAX_GRID_POINTS = 1 << 16
#: Base measure of one cell when decimal points join the cells: the cells carry 2^20 K in all, the grids
#: share 2^-k as much equally, k the points' shift (docs/math/exponential-mechanism.md §8.3, §8.8); exact
#: integers while K <= 2^32.
_CELL_MEASURE = 1 << 20
#: Decimal exponents whose power of ten is an exact double (10^22 is the largest).
_DECIMAL_EXPONENTS = range(-22, 23)


@dataclass(frozen=True)
class DecimalGrid:
    """The public points k 10^e, k = first..last, of a decimal grid inside [L, U]."""

    exponent: int
    first: int
    last: int

    @property
    def size(self) -> int:
        """The number of points."""
        return self.last - self.first + 1

    @property
    def step(self) -> DecimalStep:
        """The grid's step 10^e: its points' doubles and the nearest point of a record (``core.steps``)."""
        return DecimalStep(1, self.exponent)

    def values(self, k: NDArray[np.float64]) -> F64:
        """The double nearest each decimal k 10^e (one correctly rounded operation on exact operands)."""
        return self.step.values(k)


@functools.lru_cache(maxsize=256)  # asked per group of a release: the same public bounds each time
def decimal_grids(bounds: tuple[float, float]) -> tuple[DecimalGrid, ...]:
    """The decimal grids 10^e Z whose points in [L, U] number 2 to 2^16, finest first (public: the bounds alone).

    A real column records its values at some decimal resolution (whole years, tenths of a centimetre,
    cents, hundreds of grams rounded to 25); each such grid holding 2 to 2^16 points of the domain is a
    candidate set of its own, so a median inside a block of tied recorded values is released at that
    value. Points stay within ±2^53 units of their grid (every k is an exact double).
    """
    low, high = check_bounds_pair(bounds)
    grids = []
    for e in _DECIMAL_EXPONENTS:
        step = Fraction(10) ** e
        first, last = math.ceil(Fraction(low) / step), math.floor(Fraction(high) / step)
        if 2 <= last - first + 1 <= MAX_GRID_POINTS and first >= -_EXACT_INTEGERS and last <= _EXACT_INTEGERS:
            grids.append(DecimalGrid(e, first, last))
    return tuple(grids)


def grid_positions(clipped: F64, grid: DecimalGrid) -> I64:
    """Clipped records on the half-step lattice of a decimal grid (ranks: records below and at each point).

    A record equal to the double of k 10^e sits at 2(k - first) + 1 (a candidate); any other record
    at the even position between the two points around it (a public map of each record alone). The map
    is non-decreasing (the nearest point is, and a record sits below, at or above its point), so sorted
    records give sorted positions. 2 offset + 1 + sign(x - point) is that position: x - point rounds to 0
    only when x == point, and keeps its sign.
    """
    nearest = grid.step.nearest(clipped, grid.first, grid.last).astype(np.float64)
    point = grid.values(nearest)
    positions = 2.0 * (nearest - grid.first) + 1.0 + np.sign(clipped - point)
    return positions.astype(np.int64)


_BY_CELL, _BY_INTEGER, _BY_GRID, _BY_GIVEN, _BY_STEP = range(5)  # how a lattice maps a record


@dataclass(frozen=True)
class Lattice:
    """One candidate set: its public positions and the non-decreasing public map of a record to its position.

    ``kind``: K equal cells of [lower, upper]; the integers lower..upper (records rounded); the half-step
    lattice of a decimal grid (candidates at odd positions: stride 2, offset 1); the points k s, k =
    lower..upper, of a declared step s (records rounded to the nearest); or records given as cells.
    """

    lower: float
    upper: float
    resolution: int
    kind: int
    grid: DecimalGrid | None = None
    stride: int = 1
    offset: int = 0
    step: DecimalStep | None = None

    def positions(self, records: NDArray[Any]) -> I64:
        """The positions of sorted records (sorted too: the map is non-decreasing)."""
        if self.kind == _BY_CELL:
            return _cell_positions(records, self.lower, self.upper, self.resolution)
        if self.kind == _BY_INTEGER:
            rounded: F64 = np.rint(np.clip(records, self.lower, self.upper)) - self.lower
            return rounded.astype(np.int64)
        if self.step is not None:
            first = int(self.lower)
            return self.step.nearest(records, first, int(self.upper)) - first
        if self.grid is not None:
            return grid_positions(records, self.grid)
        given: I64 = np.asarray(records, dtype=np.int64)
        return given

    def cells(self, records: NDArray[Any]) -> Cells:
        return Cells(self.lower, self.upper, self.resolution, self.positions(records), self.stride, self.offset)


def _grid_lattice(grid: DecimalGrid) -> Lattice:
    return Lattice(float(grid.first), float(grid.last), 2 * grid.size + 1, _BY_GRID, grid, stride=2, offset=1)


@dataclass(frozen=True)
class Candidates:
    """Public candidate sets with their base measure per candidate (equal total mass per set), and the records.

    ``records`` are sorted (float records, or the cells of ``of``); each set's positions are its map of them.
    ``misfits`` (decimal points beside the cells): a point of set j pays FIT_WEIGHT misfits[j] in ranks.
    """

    records: NDArray[Any]
    lattices: tuple[Lattice, ...]
    weights: tuple[int, ...]
    misfits: tuple[int, ...] | None = None  # per set, the records off it (0 for the cells): the fit (§8.6)

    @functools.cached_property
    def parts(self) -> tuple[Cells, ...]:
        """Every record on every candidate set (the whole table's input)."""
        return tuple(lattice.cells(self.records) for lattice in self.lattices)

    @classmethod
    def of(cls, cells: Cells) -> Candidates:
        lattice = Lattice(cells.lower, cells.upper, cells.resolution, _BY_GIVEN, None, cells.stride, cells.offset)
        return cls(cells.sorted_cells, (lattice,), (1,))


def cell_midpoints(cell: I64, low: float, high: float, resolution: int) -> F64:
    """Post-processing: the midpoint of each public cell, clipped to [L, U]."""
    fraction = (cell.astype(np.float64) + 0.5) / resolution
    midpoint = 2.0 * (low * 0.5 + fraction * (high * 0.5 - low * 0.5))
    return np.clip(midpoint, low, high)


def step_candidates(bounds: tuple[float, float], step: NumberLike | DecimalStep) -> tuple[DecimalStep, int, int]:
    """The declared step s and the indices first..last of its points k s inside [L, U]; refused when none.

    ``step_span`` is the builder's question (``None`` instead of the refusal), asked before any charge.
    """
    low, high = check_bounds_pair(bounds)
    grid = step if isinstance(step, DecimalStep) else check_step(step, what="step")
    span = step_span(low, high, grid)
    if span is None:
        raise UsageError(
            f"step candidates need 1 to 2^52 points k x {grid.text()} within the bounds, |k m| <= 2^50",
            (low, high),
            "widen the bounds to hold a point of the step, or drop step=",
        )
    return grid, *span


def step_span(low: float, high: float, step: DecimalStep) -> tuple[int, int] | None:
    """The indices of the step's points whose doubles lie in [L, U], when there are 1 to 2^52 (public facts)."""
    span = step.points(low, high)
    if span is None or span[1] - span[0] + 1 > MAX_CELLS:
        return None
    return span


def prepared(
    values: ArrayLike,
    bounds: tuple[float, float],
    resolution: int | None,
    integers: bool,
    points: bool,
    step: NumberLike | DecimalStep | None = None,
    points_shift: int = 0,
) -> tuple[Candidates, Callable[[I64, I64], F64]]:
    """The records on their public candidates, and the map from a chosen (set, position) to the released value.

    ``integers``: the integers of [L, U] alone (an integer column). ``points``: the K cells and the
    points of every decimal grid of [L, U] (``decimal_grids``) together, the grids weighing 2^-points_shift
    of the cells' total, shared equally (docs/math/exponential-mechanism.md §8.3, §8.8); cells alone when
    no grid fits or K > 2^32. ``step``: the points k s of a declared step alone, each record
    rounded to the nearest (§8.5); it takes precedence over ``integers`` and ``points``.
    """
    (candidates,), release = prepared_groups([values], bounds, resolution, integers, points, step, points_shift)
    return candidates, release


def prepared_groups(
    groups: Sequence[ArrayLike],
    bounds: tuple[float, float],
    resolution: int | None,
    integers: bool,
    points: bool,
    step: NumberLike | DecimalStep | None = None,
    points_shift: int = 0,
) -> tuple[list[Candidates], Callable[[I64, I64], F64]]:
    """``prepared`` for each group's records: the public candidate sets made once, the fit's counts in one pass."""
    sets = candidate_sets(bounds, resolution, integers, points, step, points_shift)
    records = [sets.records(values) for values in groups]
    if not sets.grids:
        return [Candidates(r, sets.lattices, sets.weights) for r in records], sets.release
    counts = misfits_of_groups(records, sets.grids)
    return [
        Candidates(r, sets.lattices, sets.weights, (0, *c)) for r, c in zip(records, counts, strict=True)
    ], sets.release


@dataclass(frozen=True)
class CandidateSets:
    """The public candidate sets of a quantile's options: lattices, base measures, the released value of a choice.

    ``clip``: the bounds records are clipped to (cells and points), or ``None`` (integers and a step map each
    record to the nearest candidate); ``grids``: the decimal grids among the sets (their fit is counted).
    """

    lattices: tuple[Lattice, ...]
    weights: tuple[int, ...]
    release: Callable[[I64, I64], F64]
    clip: tuple[float, float] | None
    grids: tuple[DecimalGrid, ...] = ()

    def records(self, values: ArrayLike) -> F64:
        """The records, sorted (and clipped to the bounds for cells and points): each set maps them in order."""
        if self.clip is not None:
            return _sorted_clipped(values, *self.clip)
        records = record_values(values)
        if not bool(np.all(records[1:] >= records[:-1])):  # the nearest candidate is non-decreasing in the record
            records = np.sort(records)
        return records


def candidate_sets(
    bounds: tuple[float, float],
    resolution: int | None,
    integers: bool,
    points: bool,
    step: NumberLike | DecimalStep | None = None,
    points_shift: int = 0,
) -> CandidateSets:
    """The candidate sets of ``prepared``'s options (public facts alone; the refusals are ``prepared``'s).

    Made once per set of options (a release asks for them per group); options that cannot be a cache key
    (bounds given as a list) are made afresh.
    """
    options = (tuple(bounds) if isinstance(bounds, list) else bounds, resolution, integers, points, step, points_shift)
    try:
        return _cached_sets(_typed(options), options)
    except TypeError:  # unhashable options: the checks below speak for them
        return _candidate_sets(*options)


@functools.lru_cache(maxsize=64)
def _cached_sets(key: object, options: tuple[Any, ...]) -> CandidateSets:
    """``_candidate_sets`` keyed by the options and their types (in Python True == 1 == 1.0 == Fraction(1))."""
    return _candidate_sets(*options)


def _typed(value: Any) -> Any:
    """A cache key that keeps True, 1, 1.0 and Fraction(1) apart (each value beside its type)."""
    if isinstance(value, tuple):
        return tuple(_typed(v) for v in value)
    return (type(value), value)


def _candidate_sets(
    bounds: tuple[float, float],
    resolution: int | None,
    integers: bool,
    points: bool,
    step: NumberLike | DecimalStep | None = None,
    points_shift: int = 0,
) -> CandidateSets:
    if step is not None:
        if resolution is not None:
            raise UsageError("step candidates fix the resolution (one per point)", resolution, "drop resolution=")
        grid, first, last = step_candidates(bounds, step)
        lattice = Lattice(float(first), float(last), last - first + 1, _BY_STEP, step=grid)
        return CandidateSets((lattice,), (1,), lambda _, k: grid.values((k + first).astype(np.float64)), None)
    if integers:
        if resolution is not None:
            raise UsageError(
                "integer candidates fix the resolution (one cell per integer)", resolution, "drop resolution="
            )
        first, last = integer_candidates(bounds)
        lattice = Lattice(float(first), float(last), last - first + 1, _BY_INTEGER)
        return CandidateSets((lattice,), (1,), lambda _, cell: (cell + first).astype(np.float64), None)
    low, high = check_bounds_pair(bounds)
    k = check_resolution(DEFAULT_RESOLUTION if resolution is None else resolution)
    cells = Lattice(low, high, k, _BY_CELL)
    grids = point_grids((low, high), k, points_shift) if points else ()
    if not grids:
        return CandidateSets((cells,), (1,), lambda _, cell: cell_midpoints(cell, low, high, k), (low, high))

    def release(part: I64, position: I64) -> F64:
        out = cell_midpoints(np.where(part == 0, position, 0), low, high, k)
        for j, grid in enumerate(grids, start=1):
            chosen = part == j
            out[chosen] = grid.values((grid.first + (position[chosen] - 1) // 2).astype(np.float64))
        return out

    lattices = (cells, *(_grid_lattice(grid) for grid in grids))
    measures = _grid_measures(grids, k, points_shift)
    return CandidateSets(lattices, (_CELL_MEASURE, *measures), release, (low, high), grids)


def misfits_of_groups(records: Sequence[F64], grids: tuple[DecimalGrid, ...]) -> list[tuple[int, ...]]:
    """``misfits`` of each group's records, counted in one pass over all of them per grid (the same counts)."""
    out: list[tuple[int, ...]] = []
    start = 0
    while start < len(records):
        end, taken = start + 1, records[start].size  # about _MISFIT_CHUNK records at a time: bounded temporaries
        while end < len(records) and taken + records[end].size <= _MISFIT_CHUNK:
            taken += records[end].size
            end += 1
        chunk = records[start:end]
        sizes = np.array([r.size for r in chunk], dtype=np.int64)
        on, owner = np.concatenate(chunk), np.repeat(np.arange(sizes.size), sizes)
        counts = []
        for grid in grids:
            held = grid.step.holds(on, grid.first, grid.last)
            if not held.all():
                on, owner = on[held], owner[held]
            counts.append(sizes - np.bincount(owner, minlength=sizes.size))
        out.extend(tuple(int(c[g]) for c in counts) for g in range(sizes.size))
        start = end
    return out


#: Records whose off-grid counts ``misfits_of_groups`` takes at once (a few arrays of this many doubles).
_MISFIT_CHUNK = 1 << 20


def misfits(clipped: F64, grids: tuple[DecimalGrid, ...]) -> tuple[int, ...]:
    """Per grid (finest first) the records off it: d_e = #{x : x is not a point of G_e and of every finer grid}.

    A per-record predicate, so d_e moves by at most 1 when a record is added, removed or replaced (§8.6).
    A point of G_e is a point of every finer grid (k 10^e = 10k 10^(e-1), one decimal, one double), so d_e is
    the count of records off G_e itself; testing each grid on the records left on the finer ones keeps the
    work to one pass over the records on continuous data (and no copy while every record is on a grid).
    """
    return misfits_of_groups([clipped], grids)[0]


def _grid_measures(grids: tuple[DecimalGrid, ...], resolution: int, shift: int) -> tuple[int, ...]:
    """The base measure of one point of each grid (``_grid_measure``): public facts of the bounds and the shift."""
    return tuple(_grid_measure(grid, len(grids), resolution, shift) for grid in grids)


def _grid_measure(grid: DecimalGrid, count: int, resolution: int, shift: int) -> int:
    """Base measure of one point of ``grid``: its grid carries 2^-shift / count of the cells' total 2^20 K.

    Rounded down: the grids together weigh at most 2^-shift of the cells (§8.3, §8.8).
    """
    return (_CELL_MEASURE * resolution) // ((count * grid.size) << shift)


def rank_slack_candidates(resolution: int, *, points: bool) -> int:
    """The K of the rank bound (2Δu/ε) ln(K/β) (DR Thm 3.11 with a base measure): total mass over one cell's.

    The best candidate weighs at least one cell; with decimal points the cells carry at least half the mass
    (the grids weigh at most as much as the cells, §8.8), so K doubles (ln(2K/β)).
    """
    return resolution * 2 if points else resolution


def point_grids(
    bounds: tuple[float, float], resolution: int = DEFAULT_RESOLUTION, shift: int = 0
) -> tuple[DecimalGrid, ...]:
    """The decimal grids that join K cells as point candidates: ``decimal_grids`` when K <= 2^32, else none.

    Every grid kept has a positive integer base measure per point (``_grid_measure`` with the points'
    ``shift``: at a very small rate the coarse grids' points round to nothing and are left out).
    """
    if resolution > DEFAULT_RESOLUTION:
        return ()
    grids = decimal_grids(bounds)
    return tuple(g for g in grids if _grid_measure(g, len(grids), resolution, shift) >= 1)
