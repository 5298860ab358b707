"""Quantiles by the exponential mechanism over public candidates (Smith 2011), sampled exactly.

Guarantee: ε-DP for one record (C records per unit: Cε by group privacy), under replace adjacency
with utility sensitivity Δu = 1 and under add/remove with Δu = max(q, 1 − q) when the caller states it
(``adjacency=Adjacency.ADD_REMOVE``: twice as sharp for the median). McSherry–Talwar 2007, Dwork–Roth
Thm 3.10. The utility is −dist(q n, [records below c, records up to and in c]) over K public candidates
(2^32 equal cells of [L, U], or the integers of [L, U] for an integer column), so a tie holding the
target rank is answered at its own value. Several quantiles: ε / k each, basic composition (DR Thm 3.16).
Output: the chosen cell's midpoint or integer, a function of the candidate alone (no private endpoints:
Mironov's attack does not apply). Rank accuracy: (2Δu/ε) ln(K/β) beyond the best candidate (DR Thm 3.11).
Exact sampling: integer exponents on a public grid with an exact acceptance step for long denominators.
For a numeric column the points of the decimal grids of [L, U] (10^e Z with 2 to 2^16 points each) can
join the cells as candidates, so a tie at a recorded value (a whole number, a tenth, a cent stored as a
float) is released at its value; each such point pays 1/16 rank per record off its grid (the fit: the
grids the data are not recorded on lose their pull), which widens Δu by 1/32 under add/remove and 1/16
under replace. A column's declared recording step s makes the points k s of [L, U] the only
candidates. Proofs: docs/math/exponential-mechanism.md §8.1 (cells, exact exponents), §8.2 (ties,
add/remove Δu, integer candidates), §8.3 (decimal points), §8.5 (a declared step), §8.6 (the fit).
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

from dpsense.core.adjacency import Adjacency
from dpsense.core.errors import UsageError
from dpsense.core.numbers import NumberLike, to_fraction, widen
from dpsense.core.privacy_loss import PureDP, check_epsilon
from dpsense.core.steps import DecimalStep, check_step
from dpsense.mechanisms._validate import MAX_CELLS, as_record_values, check_bounds_pair, check_resolution
from dpsense.mechanisms.result import MechanismResult
from dpsense.noise import exact
from dpsense.noise.categorical import CategoricalSampler, Outside, WindowedSampler

F64 = NDArray[np.float64]
I64 = NDArray[np.int64]

#: Default number of public output cells in [L, U].
DEFAULT_RESOLUTION = 1 << 32
#: The mechanism's version: @6 charges each decimal grid's point for the records off its grid (the fit,
#: §8.6; @5 was a rule of grids of >= 100 points, reverted before it landed); @4 may add the points of
#: the decimal grids of [L, U] (@3: the integers alone); @2 ranks ties (an occupied cell holds the ranks
#: of its records) and sharpens the weights under add/remove; @1 gave every cell the rank of the records
#: strictly below it.
MECHANISM = "quantile/em-cells-exact@6"
#: Confidence of the public rank bound reported in ``details``.
REPORTED_CONFIDENCE = 0.95
#: Largest grid denominator D of the exponents (docs/math/exponential-mechanism.md §8.1, "Exact exponents").
_GRID = 1 << 20
#: Exponents stay below (n + 1) D <= 2^61 (int64 prefix sums and shifts in the sampler).
_EXPONENT_LIMIT = 1 << 61


@dataclass(frozen=True)
class _Cells:
    """A dataset mapped to public cells and sorted."""

    lower: float
    upper: float
    resolution: int
    sorted_cells: I64
    stride: int = 1  # candidates are the positions p with p % stride == offset (the others only hold records)
    offset: int = 0


def _check_q(q: NumberLike) -> Fraction:
    value = to_fraction(q, name="q")
    if not 0 <= value <= 1:
        raise UsageError("q must lie in [0, 1]", q, "pass the quantile as a fraction, e.g. q=0.5 for the median")
    return value


#: The fit's price per record off a decimal grid, in ranks: a point of G_e scores -(dist + FIT_WEIGHT d_e)
#: (docs/math/exponential-mechanism.md §8.6); it takes at most 1/17 of the width of the score's changes.
FIT_WEIGHT = Fraction(1, 16)


def utility_sensitivity(q: Fraction, adjacency: Adjacency | None, *, fitted: bool = False) -> Fraction:
    """Δu of the score for one record: half the width of the range its change can take on a neighbour.

    Rank utility alone: max(q, 1 − q) under add/remove, 1 otherwise. Adding or removing a record moves
    every rank count by 0 or 1 and q n by q, so the utility moves by at most max(q, 1 − q); replacing one
    (n fixed) moves the counts by at most 1 (docs/math/exponential-mechanism.md §8.2). ``None``
    (adjacency not stated) takes 1, valid under both. ``fitted`` (decimal points beside the cells): a
    point of G_e also pays FIT_WEIGHT per record off G_e, a count that moves by 0 or +1 when a record
    is added (0 or -1 removed) and by -1..1 when one is replaced, so the width grows by FIT_WEIGHT under
    add/remove and 2 FIT_WEIGHT otherwise: Δu + FIT_WEIGHT / 2, or 1 + FIT_WEIGHT (§8.6).
    """
    if adjacency is Adjacency.ADD_REMOVE:
        return max(q, 1 - q) + (FIT_WEIGHT / 2 if fitted else 0)
    return Fraction(1) + (FIT_WEIGHT if fitted else 0)


def record_values(values: ArrayLike) -> NDArray[np.float64]:
    """One value per record as a 1-D float64 array without NaN; no records (shape (0,)) is allowed."""
    array = np.asarray(values, dtype=np.float64)
    if array.shape == (0,):
        return array
    return as_record_values(array)


def _sorted_clipped(values: ArrayLike, low: float, high: float) -> F64:
    """The records clipped to [L, U] and sorted: sorted once for every candidate set of a release.

    Each candidate set maps a record by a non-decreasing public map (``_Lattice.positions``), so
    mapping the sorted records gives the sorted positions, the same array as sorting the mapped ones.
    """
    clipped = np.clip(record_values(values), low, high)
    clipped.sort()
    return clipped


def _to_cells(values: ArrayLike, low: float, high: float, resolution: int) -> _Cells:
    return _Lattice(low, high, resolution, _BY_CELL).cells(_sorted_clipped(values, low, high))


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


def _to_integer_cells(values: ArrayLike, first: int, last: int) -> _Cells:
    """Each record rounded to the nearest integer candidate (per record: a public map), cell = value - first."""
    return _Lattice(float(first), float(last), last - first + 1, _BY_INTEGER).cells(np.sort(record_values(values)))


#: Most points of one decimal grid added to the cells of a numeric column (``decimal_grids``).
MAX_GRID_POINTS = 1 << 16
#: Base measure of one cell when decimal points join the cells: the cells carry 2^20 K in all, the grids
#: share as much equally (docs/math/exponential-mechanism.md §8.3); exact integers while K <= 2^32.
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


def _grid_positions(clipped: F64, grid: DecimalGrid) -> I64:
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
class _Lattice:
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
            return _grid_positions(records, self.grid)
        given: I64 = np.asarray(records, dtype=np.int64)
        return given

    def cells(self, records: NDArray[Any]) -> _Cells:
        return _Cells(self.lower, self.upper, self.resolution, self.positions(records), self.stride, self.offset)


def _grid_lattice(grid: DecimalGrid) -> _Lattice:
    return _Lattice(float(grid.first), float(grid.last), 2 * grid.size + 1, _BY_GRID, grid, stride=2, offset=1)


@dataclass(frozen=True)
class _Candidates:
    """Public candidate sets with their base measure per candidate (equal total mass per set), and the records.

    ``records`` are sorted (float records, or the cells of ``of``); each set's positions are its map of them.
    ``misfits`` (decimal points beside the cells): a point of set j pays FIT_WEIGHT misfits[j] in ranks.
    """

    records: NDArray[Any]
    lattices: tuple[_Lattice, ...]
    weights: tuple[int, ...]
    misfits: tuple[int, ...] | None = None  # per set, the records off it (0 for the cells): the fit (§8.6)

    @functools.cached_property
    def parts(self) -> tuple[_Cells, ...]:
        """Every record on every candidate set (the whole table's input)."""
        return tuple(lattice.cells(self.records) for lattice in self.lattices)

    @classmethod
    def of(cls, cells: _Cells) -> _Candidates:
        lattice = _Lattice(cells.lower, cells.upper, cells.resolution, _BY_GIVEN, None, cells.stride, cells.offset)
        return cls(cells.sorted_cells, (lattice,), (1,))


@dataclass(frozen=True)
class _RankTable:
    """The segments' base measures, first cells and grid exponents, and the exact acceptance step.

    Segment j is proposed with weight ``lengths[j] exp(-rate exponents[j])`` and accepted with
    probability ``exp(-accept_below)`` when ``sides[j] == BELOW``, ``exp(-accept_above)`` when ``ABOVE``
    and always when ``EXACT`` (the Fractions are 0 when D is a multiple of den).
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


_BELOW, _ABOVE, _EXACT = 0, 1, 2


def _grid(n: int, den: int, *, fitted: bool = False) -> int:
    """The exponent grid D: den up to 2^20, else 2^20; halved while (n + 1) D > 2^61 (n >= 2^41 only).

    ``fitted``: 16 den (so FIT_WEIGHT D is a whole exponent) and (n + 1) D <= 2^60, leaving room for the
    fit's exponents (at most n D / 16 beside the rank's (n + 1) D).
    """
    wanted = den * FIT_WEIGHT.denominator if fitted else den
    limit = _EXPONENT_LIMIT // 2 if fitted else _EXPONENT_LIMIT
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
class _Piece:
    """k consecutive runs of one candidate set: their records below and up to, the cells around them.

    ``edges``: the cell before the first run (-1 for none), the runs' cells, the cell after the last (K for
    none); ``first_rank``: the rank of the gap before the first run (the records below it).
    """

    edges: I64
    below: I64
    through: I64

    @classmethod
    def whole(cls, cells: _Cells) -> _Piece:
        below, through = _runs(cells.sorted_cells)
        edges = np.empty(below.size + 2, dtype=np.int64)
        edges[0], edges[1:-1], edges[-1] = -1, cells.sorted_cells[below], cells.resolution
        return cls(edges, below, through)

    @property
    def first_rank(self) -> int:
        return int(self.below[0]) if self.below.size else 0


def _fill_segments(lattice: _Lattice, piece: _Piece, out: tuple[I64, I64, I64, I64]) -> None:
    """Gaps and occupied cells in cell order, written into ``out`` = (starts, lengths, a, b), views of length 2 k + 1.

    Gap j holds the empty cells between occupied cells d_j and d_(j+1) (both ranks: the records below);
    occupied cell d_j = the cell of run j holds its t_j tied records (ranks a_j and a_j + t_j).
    """
    starts, lengths, a, b = out
    edges = piece.edges
    np.add(edges[:-1], 1, out=starts[0::2])
    np.subtract(edges[1:], edges[:-1], out=lengths[0::2])
    lengths[0::2] -= 1
    starts[1::2], lengths[1::2] = edges[1:-1], 1
    a[0] = b[0] = piece.first_rank
    a[2::2] = b[2::2] = piece.through
    a[1::2], b[1::2] = piece.below, piece.through
    if lattice.stride > 1:  # only positions p % stride == offset are candidates: count and align those
        ends = starts + lengths - 1
        starts += (lattice.offset - starts) % lattice.stride
        lengths[:] = np.where(ends >= starts, (ends - starts) // lattice.stride + 1, 0)


@dataclass(frozen=True)
class _Target:
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

    @classmethod
    def of(cls, n: int, q: Fraction, epsilon: Fraction, *, fitted: bool = False) -> _Target:
        num, den = q.numerator, q.denominator
        grid = _grid(n, den, fitted=fitted)
        target = num * n
        low, high = (target * grid) // den, -((-target * grid) // den)
        scale = epsilon / (2 * den * grid)  # acceptance exponent per unit of E D - P den
        return cls(
            grid=grid,
            target=target,
            low=low,
            high=high,
            split=-((-target) // den),
            floor=target // den,
            rate=epsilon / (2 * grid),
            accept_below=scale * (target * grid - low * den),
            accept_above=scale * (high * den - target * grid),
            misfit=math.floor(FIT_WEIGHT * grid) if fitted else 0,
        )


def _rank_weights(candidates: _Candidates | _Cells, q: Fraction, epsilon: Fraction) -> _RankTable:
    """The exact rank table (docs/math/exponential-mechanism.md §8.1, "Exact exponents"); large values as ints.

    A segment with ranks [a, b] has utility -dist(q n, [a, b]): ``q n - b`` when b < q n (below),
    ``a - q n`` when a > q n (above), else 0 (exact).
    """
    if isinstance(candidates, _Cells):
        candidates = _Candidates.of(candidates)
    target = _Target.of(candidates.records.size, q, epsilon, fitted=candidates.misfits is not None)
    return _segment_table(candidates, target, [_Piece.whole(part) for part in candidates.parts])


def _segment_table(candidates: _Candidates, target: _Target, pieces: list[_Piece]) -> _RankTable:
    """The rank table of the runs ``pieces`` (one per candidate set) and the gaps around them.

    The exponent is max(floor(q n D) - b D, a D - ceil(q n D), 0): the first term is >= 0 exactly when the
    segment lies below q n, the second exactly when above, and both are <= 0 when its ranks hold q n;
    plus, with decimal points, floor(FIT_WEIGHT D) per record off the segment's set (§8.6).
    """
    sizes = [2 * piece.below.size + 1 for piece in pieces]
    total = sum(sizes)
    starts, counts, a, b, mass = (np.empty(total, dtype=np.int64) for _ in range(5))
    end = 0
    for lattice, piece, size, weight in zip(candidates.lattices, pieces, sizes, candidates.weights, strict=True):
        view = slice(end, end + size)
        _fill_segments(lattice, piece, (starts[view], counts[view], a[view], b[view]))
        np.multiply(counts[view], weight, out=mass[view])
        end += size
    below_target = b < target.split
    above_target = a > target.floor
    exponents = np.maximum(target.low - b * target.grid, a * target.grid - target.high)
    np.maximum(exponents, 0, out=exponents)
    if candidates.misfits is not None and target.misfit:
        exponents += np.repeat(np.asarray(candidates.misfits, dtype=np.int64) * target.misfit, sizes)
    return _RankTable(
        lengths=mass.astype(np.float64),
        starts=starts,
        counts=counts,
        parts=np.repeat(np.arange(len(sizes), dtype=np.int64), sizes),
        exponents=exponents,
        sides=(_EXACT - 2 * below_target - above_target).astype(np.int8),
        rate=target.rate,
        accept_below=target.accept_below,
        accept_above=target.accept_above,
    )


def _local_piece(lattice: _Lattice, records: NDArray[Any], first: int, last: int) -> _Piece:
    """The runs of one candidate set holding the records ranked first..last (0 <= first <= last < n), and their edges.

    Only records near those ranks are mapped (a slice with 16 on each side; all of them when there are at
    most 8 192, one vectorised map); a tied run reaching past the slice is followed to its end by a search
    on the sorted records (the map is non-decreasing).
    """
    n = records.size
    pad = 16 if n > 8 * _PROBES else n
    lo, hi = max(first - pad, 0), min(last + 1 + pad, n)
    positions = lattice.positions(records[lo:hi])
    change = np.flatnonzero(positions[1:] != positions[:-1]) + 1
    i = int(np.searchsorted(change, first - lo, side="right"))
    j = int(np.searchsorted(change, last - lo, side="right"))
    starts = lo + np.concatenate(([change[i - 1] if i > 0 else 0], change[i:j])).astype(np.int64)
    ends = lo + np.concatenate((change[i:j], [change[j] if j < change.size else hi - lo])).astype(np.int64)
    if starts[0] == lo and lo > 0:  # the first run may begin before the slice
        starts[0] = _run_start(lattice, records, lo, int(positions[0]))
    if ends[-1] == hi and hi < n:  # the last run may end after it
        ends[-1] = _run_end(lattice, records, hi - 1, int(positions[-1]))
    edges = np.empty(starts.size + 2, dtype=np.int64)
    edges[1:-1] = positions[np.maximum(starts - lo, 0)]
    edges[0] = -1 if starts[0] == 0 else _position(lattice, records, int(starts[0]) - 1, positions, lo)
    edges[-1] = lattice.resolution if ends[-1] == n else _position(lattice, records, int(ends[-1]), positions, lo)
    return _Piece(edges, starts, ends)


def _position(lattice: _Lattice, records: NDArray[Any], index: int, positions: I64, lo: int) -> int:
    """The position of record ``index``: from the mapped slice starting at ``lo`` when it holds it."""
    if lo <= index < lo + positions.size:
        return int(positions[index - lo])
    return int(lattice.positions(records[index : index + 1])[0])


#: Probes per step of the searches for the ends of a tied run (a range of up to 4 times as many is mapped whole:
#: one vectorised map costs less than a further step at these sizes).
_PROBES = 1024


def _run_start(lattice: _Lattice, records: NDArray[Any], index: int, value: int) -> int:
    """The first record of the run holding record ``index`` (whose position is ``value``)."""
    lo, hi = 0, index  # the start is in [lo, hi]; record lo - 1 lies below the run (or lo == 0)
    while hi - lo > 4 * _PROBES:
        probes = lo + (np.arange(_PROBES + 1, dtype=np.int64) * (hi - lo)) // _PROBES
        k = int(np.argmax(lattice.positions(records[probes]) == value))
        if k == 0:
            return lo
        lo, hi = int(probes[k - 1]) + 1, int(probes[k])
    return lo + int(np.argmax(lattice.positions(records[lo : hi + 1]) == value))


def _run_end(lattice: _Lattice, records: NDArray[Any], index: int, value: int) -> int:
    """One past the last record of the run holding record ``index`` (whose position is ``value``)."""
    lo, hi = index, records.size - 1  # the last record is in [lo, hi]; record hi + 1 lies above (or is none)
    while hi - lo > 4 * _PROBES:
        probes = lo + (np.arange(_PROBES + 1, dtype=np.int64) * (hi - lo)) // _PROBES
        k = int(np.searchsorted(lattice.positions(records[probes]), value, side="right")) - 1
        if k == _PROBES:
            return hi + 1
        lo, hi = int(probes[k]), int(probes[k + 1]) - 1
    return lo + int(np.searchsorted(lattice.positions(records[lo : hi + 1]), value, side="right"))


#: A window leaves out weight at most 2^-80 of the exact segment's in all (``_windowed``; the sampler's limit).
_WINDOW_LEFT_OUT_BITS = 80


@dataclass(frozen=True)
class _Window:
    """The rank table of the segments near q n, the first record of each set's first run, and a bound on the rest."""

    table: _RankTable
    firsts: tuple[int, ...]
    outside: Outside

    def rows_in_whole(self, candidates: _Candidates) -> I64:
        """The window's rows' positions in the whole table (``_rank_weights``): built when a draw needs them."""
        positions, size = [], 0
        sizes = np.bincount(self.table.parts, minlength=len(candidates.lattices))
        for part, first, rows in zip(candidates.parts, self.firsts, sizes.tolist(), strict=True):
            below, _ = _runs(part.sorted_cells)
            start = size + 2 * int(np.searchsorted(below, first))
            positions.append(np.arange(start, start + rows, dtype=np.int64))
            size += 2 * below.size + 1
        return np.concatenate(positions)


def _windowed(candidates: _Candidates, q: Fraction, epsilon: Fraction) -> _Window | None:
    """The segments within the ranks of q n where exp(-rate E) is not negligible; ``None`` when that is all of them.

    A segment with b < r_lo has exponent >= floor(q n D) - (r_lo - 1) D >= R, one with a > r_hi has
    exponent >= (r_hi + 1) D - ceil(q n D) >= R, R = the reach in exponent units: every segment outside
    the window weighs at most its base measure times exp(-rate R) (docs/math/floating-point.md §9.3, "Windows").
    The segment holding q n in the first set (an occupied cell or integer, exponent 0, measure w_0) is in the
    window, so the weight left out, relative to the window's largest, is at most count B / w_0 exp(-rate R)
    (B bounds a measure outside, count the segments): R is chosen to make that 2^-80 with a margin. The
    segments of ranks in [r_lo, r_hi] are the runs holding records r_lo - 1 .. r_hi of the sorted records:
    only records near those are mapped to each candidate set.
    """
    n = candidates.records.size
    target = _Target.of(n, q, epsilon, fitted=candidates.misfits is not None)
    rate = float(target.rate) if target.rate < 2**1000 else math.inf
    if not 0.0 < rate < math.inf:
        return None
    lattices, weights = candidates.lattices, candidates.weights
    heaviest = max(weight * lattice.resolution for lattice, weight in zip(lattices, weights, strict=True))
    most = (2 * n + 1) * len(lattices)
    bits = most.bit_length() + heaviest.bit_length() - weights[0].bit_length() + 2 + _WINDOW_LEFT_OUT_BITS
    reach = math.ceil((bits * math.log(2) + 2.0) / rate) + 1
    r_lo = (target.low - reach) // target.grid + 1
    r_hi = -(-(target.high + reach) // target.grid) - 1
    if r_lo <= 0 and r_hi >= n:
        return None
    first, last = max(r_lo - 1, 0), min(r_hi, n - 1)
    pieces = [_local_piece(lattice, candidates.records, first, last) for lattice in lattices]
    table = _segment_table(candidates, target, pieces)
    outside = Outside(count=most - table.lengths.size, base=math.ldexp(1.0, heaviest.bit_length()), exponent=reach)
    return _Window(table, tuple(int(piece.below[0]) for piece in pieces), outside)


def _accepted(table: _RankTable, runs: I64) -> NDArray[np.bool_]:
    """The exact acceptance step of each proposed segment (all True when both residuals are 0)."""
    accept = np.ones(runs.size, dtype=np.bool_)
    for lane, run in enumerate(runs.tolist()):
        side = int(table.sides[run])
        x = table.accept_below if side == _BELOW else table.accept_above if side == _ABOVE else Fraction(0)
        if x:
            accept[lane] = exact.python_bernoulli_exp(x.numerator, x.denominator)
    return accept


def _draw_cells(cells: _Cells, q: Fraction, epsilon: Fraction, size: int) -> I64:
    """``size`` independent exact draws of the output cell of one candidate set (``_draw``)."""
    return _draw(_Candidates.of(cells), q, epsilon, size)[1]


def _draw(candidates: _Candidates, q: Fraction, epsilon: Fraction, size: int) -> tuple[I64, I64]:
    """``size`` independent exact draws: (candidate set, position) each (the mechanism's randomness).

    ``epsilon`` is the rate of the utility in rank units: the privacy loss divided by the utility's
    sensitivity (``utility_sensitivity``). The law is the whole rank table's; when the segments far from
    q n are negligible, only a window around it enters the float table (``_windowed``), and the whole
    table is built on the rare draw the window's margin does not decide: the same draws from the same
    words (docs/math/floating-point.md §9.3, "Windows").
    """
    whole = functools.cache(lambda: _rank_weights(candidates, q, epsilon))
    window = _windowed(candidates, q, epsilon)
    windowed = None
    if window is not None:
        windowed = WindowedSampler.build(
            window.table.lengths,
            window.table.exponents,
            window.table.rate,
            outside=window.outside,
            whole=lambda: CategoricalSampler.build(whole().lengths, whole().exponents, whole().rate),
        )
    if window is None or windowed is None:
        sampler = CategoricalSampler.build(whole().lengths, whole().exponents, whole().rate)
        table, at = whole(), sampler.draw(size)
        if table.accept_below or table.accept_above:  # a public fact of (q, D): exact rejection step
            pending = np.flatnonzero(~_accepted(table, at))
            while pending.size:
                at[pending] = sampler.draw(pending.size)
                pending = pending[~_accepted(table, at[pending])]
    else:
        table, at = _windowed_draws(window, windowed, whole, candidates, size)
    strides = np.array([lattice.stride for lattice in candidates.lattices], dtype=np.int64)[table.parts[at]]
    return table.parts[at], table.starts[at] + strides * exact.uniform_below(table.counts[at])


def _windowed_draws(
    window: _Window, sampler: WindowedSampler, whole: Callable[[], _RankTable], candidates: _Candidates, size: int
) -> tuple[_RankTable, I64]:
    """``_draw``'s draws from a window: its rows while every draw is decided in it, else the whole table's."""
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


def _in_whole(window: _Window, candidates: _Candidates, rows: I64, inside: NDArray[np.bool_]) -> I64:
    """Draws as positions in the whole table: window rows mapped, the others already whole positions."""
    out = rows.copy()
    out[inside] = window.rows_in_whole(candidates)[rows[inside]]
    return out


def _cell_midpoints(cell: I64, low: float, high: float, resolution: int) -> F64:
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


def _prepared(
    values: ArrayLike,
    bounds: tuple[float, float],
    resolution: int | None,
    integers: bool,
    points: bool,
    step: NumberLike | DecimalStep | None = None,
) -> tuple[_Candidates, Callable[[I64, I64], F64]]:
    """The records on their public candidates, and the map from a chosen (set, position) to the released value.

    ``integers``: the integers of [L, U] alone (an integer column). ``points``: the K cells and the
    points of every decimal grid of [L, U] (``decimal_grids``) together, the cells with half the base
    measure and each of the J grids with 1/(2J) of it (docs/math/exponential-mechanism.md §8.3); cells
    alone when no grid fits or K > 2^32. ``step``: the points k s of a declared step alone, each record
    rounded to the nearest (§8.5); it takes precedence over ``integers`` and ``points``.
    """
    if step is not None:
        if resolution is not None:
            raise UsageError("step candidates fix the resolution (one per point)", resolution, "drop resolution=")
        grid, first, last = step_candidates(bounds, step)
        lattice = _Lattice(float(first), float(last), last - first + 1, _BY_STEP, step=grid)
        records = np.sort(record_values(values))  # the nearest point is non-decreasing in the record
        return _Candidates(records, (lattice,), (1,)), lambda _, k: grid.values((k + first).astype(np.float64))
    if integers:
        if resolution is not None:
            raise UsageError(
                "integer candidates fix the resolution (one cell per integer)", resolution, "drop resolution="
            )
        first, last = integer_candidates(bounds)
        lattice = _Lattice(float(first), float(last), last - first + 1, _BY_INTEGER)
        records = np.sort(record_values(values))  # rint, clip and the shift are non-decreasing
        return _Candidates(records, (lattice,), (1,)), lambda _, cell: (cell + first).astype(np.float64)
    low, high = check_bounds_pair(bounds)
    k = check_resolution(DEFAULT_RESOLUTION if resolution is None else resolution)
    clipped = _sorted_clipped(values, low, high)
    cells = _Lattice(low, high, k, _BY_CELL)
    grids = point_grids((low, high), k) if points else ()
    if not grids:
        return _Candidates(clipped, (cells,), (1,)), lambda _, cell: _cell_midpoints(cell, low, high, k)
    lattices = (cells, *(_grid_lattice(grid) for grid in grids))
    weights = (_CELL_MEASURE, *_grid_measures(grids, k))

    def release(part: I64, position: I64) -> F64:
        out = _cell_midpoints(np.where(part == 0, position, 0), low, high, k)
        for j, grid in enumerate(grids, start=1):
            chosen = part == j
            out[chosen] = grid.values((grid.first + (position[chosen] - 1) // 2).astype(np.float64))
        return out

    return _Candidates(clipped, lattices, weights, (0, *_misfits(clipped, grids))), release


def _misfits(clipped: F64, grids: tuple[DecimalGrid, ...]) -> tuple[int, ...]:
    """Per grid (finest first) the records off it: d_e = #{x : x is not a point of G_e and of every finer grid}.

    A per-record predicate, so d_e moves by at most 1 when a record is added, removed or replaced (§8.6).
    A point of G_e is a point of every finer grid (k 10^e = 10k 10^(e-1), one decimal, one double), so d_e is
    the count of records off G_e itself; testing each grid on the records left on the finer ones keeps the
    work to one pass over the records on continuous data.
    """
    on = clipped
    counts = []
    for grid in grids:
        on = on[grid.step.holds(on, grid.first, grid.last)]  # the record is the double of a point
        counts.append(clipped.size - on.size)
    return tuple(counts)


def _grid_measures(grids: tuple[DecimalGrid, ...], resolution: int) -> tuple[int, ...]:
    """The base measure of one point of each grid (``_grid_measure``): public facts of the bounds alone."""
    return tuple(_grid_measure(grid, len(grids), resolution) for grid in grids)


def _grid_measure(grid: DecimalGrid, count: int, resolution: int) -> int:
    """Base measure of one point of ``grid``: its grid carries 1/count of the cells' total 2^20 K (rounded down)."""
    return (_CELL_MEASURE * resolution) // (count * grid.size)


def rank_slack_candidates(resolution: int, *, points: bool) -> int:
    """The K of the rank bound (2Δu/ε) ln(K/β) (DR Thm 3.11 with a base measure): total mass over one cell's.

    The best candidate weighs at least one cell; with decimal points the cells carry half the mass, so
    K doubles (ln(2K/β)).
    """
    return resolution * 2 if points else resolution


def point_grids(bounds: tuple[float, float], resolution: int = DEFAULT_RESOLUTION) -> tuple[DecimalGrid, ...]:
    """The decimal grids that join K cells as point candidates: ``decimal_grids`` when K <= 2^32, else none.

    Every grid kept has a positive integer base measure per point (``_grid_measure``).
    """
    if resolution > DEFAULT_RESOLUTION:
        return ()
    grids = decimal_grids(bounds)
    return tuple(g for g in grids if _grid_measure(g, len(grids), resolution) >= 1)


def _details(
    epsilon: Fraction, sensitivity: Fraction, candidates: _Candidates, count: int, integers: bool
) -> dict[str, Any]:
    cells = candidates.lattices[0]
    if cells.step is not None:
        details = dict(_public_details(epsilon, sensitivity, cells.resolution, False, count, False))
        step = cells.step.text()
        details.update(candidates=f"the points of the declared step {step}", output="the chosen point")
        details["cell_width"] = float(cells.step.value)
        return details
    width = 1.0 if integers else (cells.upper * 0.5 - cells.lower * 0.5) * 2.0 / cells.resolution
    points = len(candidates.lattices) > 1
    details = dict(_public_details(epsilon, sensitivity, cells.resolution, points, count, integers))
    details["cell_width"] = width
    return details


@functools.lru_cache(maxsize=256)  # asked per group of a release with the same public facts
def _public_details(
    epsilon: Fraction, sensitivity: Fraction, resolution: int, points: bool, count: int, integers: bool
) -> dict[str, Any]:
    """The details of a release but the cell width: public facts alone (callers copy the dict)."""
    beta = 1.0 - REPORTED_CONFIDENCE
    kind = "integers" if integers else "cells and decimal points" if points else "cells"
    effective = rank_slack_candidates(resolution, points=points)
    return {
        "resolution": resolution,
        "candidates": kind,
        "cell_width": None,  # set by ``_details``
        "epsilon_per_quantile": str(epsilon),
        "utility_sensitivity": str(sensitivity),
        "rank_excess_bound": widen(2.0 * float(sensitivity / epsilon) * math.log(effective / beta)),
        "rank_excess_confidence": REPORTED_CONFIDENCE,
        "rank_statement": (
            "with the stated confidence dist(q n, ranks(c)) <= min_c' dist(q n, ranks(c')) + rank_excess_bound, "
            "ranks(c) = [records below the released cell, records up to and in it] (DR Thm 3.11); the min term is "
            "0 when a candidate holds the target rank, so no value-unit accuracy is stated"
        ),
        "adjacency": "add/remove or replace of one record (C records per unit: C times the loss)",
        "composition": f"basic composition of {count} mechanisms (DR Thm 3.16)" if count > 1 else "single mechanism",
        "output": "the chosen integer" if integers else "midpoint of the chosen public cell",
    }


@functools.lru_cache(maxsize=256)
def _guarantee(epsilon: Fraction, sensitivity: Fraction, count: int, adjacency: Adjacency | None) -> str:
    what = f"exponential-mechanism quantile (Smith 2011; McSherry-Talwar 2007, DR Thm 3.10, Delta u = {sensitivity})"
    if count > 1:
        what = f"{count} exponential-mechanism quantiles at epsilon/{count} each, basic composition (DR Thm 3.16)"
    if adjacency is Adjacency.ADD_REMOVE:
        return f"{PureDP(epsilon)}-DP for one record under add/remove adjacency: {what}"
    return f"{PureDP(epsilon)}-DP for one record under add/remove and under replace adjacency: {what}"


def em_quantile(
    values: ArrayLike,
    *,
    q: NumberLike,
    bounds: tuple[float, float],
    epsilon: NumberLike,
    resolution: int | None = None,
    adjacency: Adjacency | None = None,
    integers: bool = False,
    decimal_points: bool = False,
    step: NumberLike | DecimalStep | None = None,
) -> MechanismResult:
    """An epsilon-DP q-quantile of ``values`` clipped to public ``bounds``, by the exponential mechanism.

    Guarantee: epsilon-DP for one record under ``adjacency`` (Smith 2011 interval exponential
    mechanism with tie-aware ranks; DR Thm 3.10 with Δu = max(q, 1 − q) under add/remove, 1 under
    replace or when no adjacency is stated), sampled exactly over public candidates: ``resolution``
    equal cells of [L, U], or the integers ⌈L⌉..⌊U⌋ with ``integers=True`` (an integer column's
    declared kind). Proof: docs/math/exponential-mechanism.md §8.2.

    Args:
        values: the records (1-D, no NaN; infinities are clipped). No records gives a uniform candidate.
        q: the quantile in [0, 1] (``0.5`` is the median; converted exactly, 0.1 means 1/10).
        bounds: public clipping bounds (L, U), L <= U, finite.
        epsilon: privacy loss > 0.
        resolution: number K of equal public output cells in [L, U] (1 <= K <= 2^52; default 2^32).
        adjacency: the neighbouring relation the guarantee must hold under; ``Adjacency.ADD_REMOVE``
            sharpens the weights by 1 / max(q, 1 − q) (2x for the median). ``None``: valid under both.
        integers: candidates are the integers in [L, U] (records rounded to the nearest one).
        decimal_points: the cells (half the base measure) and the points of each decimal grid of
            [L, U] with 2 to 2^16 points (``decimal_grids``; the other half, shared equally), so a tie
            at a recorded value of a numeric column (whole years, tenths, cents) is released at that
            value (docs/math/exponential-mechanism.md §8.3); a point of a grid pays FIT_WEIGHT per
            record off that grid and Δu grows by FIT_WEIGHT / 2 (add/remove) or FIT_WEIGHT (§8.6).
            Cells alone when resolution > 2^32.
        step: a declared recording step s (a decimal such as ``"0.01"`` or ``25``): the candidates are the
            points k s in [L, U] alone, each record rounded to the nearest (§8.5); overrides ``integers``
            and ``decimal_points``.

    Returns:
        A ``MechanismResult`` with ``value`` the released float, ``loss = PureDP(epsilon)``,
        ``accuracy = None`` and the public rank bound in ``details``.

    Raises:
        InvalidData: NaN, not 1-D. InvalidBounds: L > U or non-finite bounds.
        UsageError: q outside [0, 1], bad resolution, no integer in the bounds. InvalidPrivacyParameter:
        epsilon not > 0. None of these depends on the values beyond their shape and NaN.

    """
    eps = check_epsilon(epsilon)
    quantile = _check_q(q)
    candidates, release = _prepared(values, bounds, resolution, integers, decimal_points, step)
    sensitivity = utility_sensitivity(quantile, adjacency, fitted=candidates.misfits is not None)
    part, chosen = _draw(candidates, quantile, eps / sensitivity, 1)
    return MechanismResult(
        value=float(release(part, chosen)[0]),
        loss=PureDP(eps),
        accuracy=None,
        mechanism=MECHANISM,
        guarantee=_guarantee(eps, sensitivity, 1, adjacency),
        details={"q": str(quantile), **_details(eps, sensitivity, candidates, 1, integers)},
    )


def em_quantiles(
    values: ArrayLike,
    *,
    qs: Sequence[NumberLike],
    bounds: tuple[float, float],
    epsilon: NumberLike,
    resolution: int | None = None,
    adjacency: Adjacency | None = None,
    integers: bool = False,
    decimal_points: bool = False,
    step: NumberLike | DecimalStep | None = None,
) -> MechanismResult:
    """Several quantiles, each by ``em_quantile``'s mechanism with epsilon / len(qs).

    Guarantee: epsilon-DP in total for one record under ``adjacency`` (as ``em_quantile``), by basic
    composition (DR Thm 3.16) of len(qs) mechanisms that are each (epsilon/len(qs))-DP. The outputs
    are independent and returned in the order of ``qs`` (not forced to be monotone; sorting them is
    free post-processing).

    Returns:
        A ``MechanismResult`` whose ``value`` is a float64 array, one entry per requested quantile.

    """
    eps = check_epsilon(epsilon)
    if isinstance(qs, (str, bytes)) or len(qs) == 0:
        raise UsageError("qs must be a non-empty sequence of quantiles", qs, "pass e.g. qs=[0.25, 0.5, 0.75]")
    quantiles = [_check_q(q) for q in qs]
    candidates, release = _prepared(values, bounds, resolution, integers, decimal_points, step)
    share = eps / len(quantiles)
    sensitivities = [
        utility_sensitivity(quantile, adjacency, fitted=candidates.misfits is not None) for quantile in quantiles
    ]
    draws = [
        _draw(candidates, quantile, share / sens, 1) for quantile, sens in zip(quantiles, sensitivities, strict=True)
    ]
    part, chosen = (np.concatenate([d[i] for d in draws]) for i in (0, 1))
    return MechanismResult(
        value=release(part, chosen),
        loss=PureDP(eps),
        accuracy=None,
        mechanism=MECHANISM,
        guarantee=_guarantee(eps, max(sensitivities), len(quantiles), adjacency),
        details={
            "qs": [str(q) for q in quantiles],
            **_details(share, max(sensitivities), candidates, len(quantiles), integers),
        },
    )
