"""An independent neighbour harness: datasets and their neighbours, captured mechanism inputs, measured changes.

Nothing here reads the plan's sensitivity bookkeeping to *prove* a sensitivity: the plan's stated
sensitivity and ε are only the claims under test. What is measured comes from two real releases
(``dp.Session`` on a SQLite ledger, DuckDB engine), one on a dataset ``x`` and one on a neighbour
``y``, run under the same deterministic entropy so that both bound the unchanged units' rows alike
(the salted row choice of a unit depends on that unit's rows and the salt only):

* the pre-noise vector every global-sensitivity step receives (``additive_noise`` wrapped where the
  executor looks it up), the per-key unit counts of private partition selection and the log2 histogram
  of ``approx_bounds`` (binned here, not by the product);
* per group, the records each data-dependent mechanism receives (``dpsense.mechanisms.*`` wrapped as
  ``release/_data_dependent.py`` and ``release/_steps.py`` look them up), with the ε, rank / q, public n
  and the number of records it is calibrated for.

The measurements are computed here from those captures: the L1 / L2 change of each global vector; the
record changes per group (multiset differences; for the public-n statistics, replacements between the
two datasets resized here to every public n); and, for the exponential-mechanism quantile and the
inverse-sensitivity order statistic, the exact output law over the public cells, implemented here
from the mechanisms' documented definitions, whose largest log-ratio between ``x`` and ``y`` is the
exact privacy loss of the step (parallel groups: the joint law is the product).
"""

from __future__ import annotations

import itertools
import math
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

import numpy as np
import pandas as pd
import pytest
from numpy.typing import NDArray

import dpsense as dp
from dpsense import mechanisms as mech
from dpsense.core.adjacency import Adjacency
from dpsense.core.errors import ChargedFailure, DPSenseError
from dpsense.engine.duckdb._engine import DuckDBEngine
from dpsense.noise.testing import deterministic_entropy
from dpsense.query import PlanStep, StepPart
from dpsense.release import _data_dependent, _executor
from dpsense.sensitivity import Norm, Sqrt
from dpsense.statistics import _steps
from tests.system.release.support import policy as support_policy

F64 = NDArray[np.float64]

#: Public schema of every generated dataset.
GROUPS = ("a", "b", "c")
OUTSIDE_GROUP = "z"  # present in the data, not a public key: never released
SELECT_KEYS = ("p", "q", "r")  # the column grouped without public keys (private partition selection)
WARDS = ("x", "y")  # the second public group column ``w`` (grouping by several columns)
VERTICES = tuple(range(6))
LOW, HIGH = 0, 100
#: The recording step of v declared in the contexts with declared caps (v holds whole numbers).
STEP = "0.5"
#: Number of public cells of the order-statistic mechanisms (their documented default).
RESOLUTION = 1 << 32
TOLERANCE = 1e-9


# ---------------------------------------------------------------------------------------------------
# datasets and neighbours


@dataclass(frozen=True)
class Context:
    """One column of the coverage table: adjacency x grouping x filter."""

    adjacency: str  # "add_remove" | "replace"
    grouped: bool
    filtered: bool
    columns: int = 1  # grouped by g alone, or by (g, w): groups are value pairs
    #: the steward declares a groups-per-unit bound for g and w at registration: the engine then counts
    #: each unit's groups once and windows only the units above the query's cap (``_indexed_view``),
    #: and a recording step of v (``STEP``): its quantiles choose among the step's points
    declared_caps: bool = False

    @property
    def label(self) -> str:
        grouping = "ungrouped" if not self.grouped else "grouped" if self.columns == 1 else f"grouped{self.columns}"
        declared = "-declared" if self.declared_caps else ""
        return f"{self.adjacency}-{grouping}{declared}-{'where' if self.filtered else 'all'}"

    @property
    def group_columns(self) -> tuple[str, ...]:
        """The public group columns of a grouped query in this context."""
        return ("g", "w")[: self.columns]


@dataclass
class Pair:
    """Two neighbouring datasets under the context's adjacency (``x`` and ``y``) and their public bounds."""

    seed: int
    rows_per_unit: int  # C, declared at registration
    groups_per_unit: int  # the query's max_groups_per_unit
    x: pd.DataFrame
    y: pd.DataFrame
    note: str


COLUMNS = ("uid", "g", "h", "w", "v", "px", "py", "f", "src", "dst")


def _value(rng: np.random.Generator, style: str) -> float:
    if style == "nan":
        return math.nan
    if style == "bounds":
        return float(rng.choice([LOW, HIGH]))
    if style == "ties":
        return 10.0
    pick = rng.random()
    if pick < 0.08:
        return math.nan  # missing: left out of sums and quantiles, counted by count()
    if pick < 0.30:
        return float(rng.choice([LOW, HIGH]))  # at the bounds
    if pick < 0.45:
        return 10.0  # ties
    if pick < 0.52:
        return float(rng.choice([-7.0, 130.0]))  # outside: clamped at registration
    return float(rng.integers(LOW, HIGH + 1))


def unit_rows(
    rng: np.random.Generator,
    uid: str,
    rows_per_unit: int,
    *,
    style: str = "mixed",
    f_rate: float = 0.6,
    rows: int | None = None,
    groups: Sequence[str] | None = None,
) -> list[dict[str, Any]]:
    """The rows of one unit: up to C + 2 of them (a whale when more than C), in one or two groups."""
    count = rows if rows is not None else int(rng.integers(1, rows_per_unit + 3))
    if groups is None:
        pool = [*GROUPS, OUTSIDE_GROUP]
        groups = list(rng.choice(pool, size=int(rng.integers(1, 3)), replace=False))
    selects = list(rng.choice(SELECT_KEYS, size=int(rng.integers(1, 3)), replace=False))
    out = []
    for _ in range(count):
        src, dst = (int(a) for a in rng.choice(VERTICES, size=2, replace=True))
        out.append(
            {
                "uid": uid,
                "g": str(rng.choice(groups)),
                "h": str(rng.choice(selects)),
                "w": WARDS[(src + dst) % 2],  # no draw of its own: the other columns' draws stay as they were
                "v": _value(rng, style),
                "px": _value(rng, style),
                "py": _value(rng, style),
                "f": int(rng.random() < f_rate),
                "src": src,
                "dst": dst,
            }
        )
    return out


def frame(rows: list[dict[str, Any]]) -> pd.DataFrame:
    """A dataset with the fixed column types (also when empty)."""
    df = pd.DataFrame(rows, columns=list(COLUMNS))
    types = {"uid": str, "g": str, "h": str, "w": str, "v": "float64", "px": "float64", "py": "float64", "f": "int64"}
    return df.astype(types).astype({"src": "int64", "dst": "int64"})


def _moved(rows: list[dict[str, Any]], rng: np.random.Generator) -> list[dict[str, Any]]:
    """The same rows in another public group: the unit moves between groups (replace adjacency)."""
    current = {r["g"] for r in rows}
    others = [g for g in GROUPS if g not in current] or list(GROUPS)
    target = str(rng.choice(others))
    return [{**r, "g": target} for r in rows]


def make_pair(ctx: Context, seed: int) -> Pair:
    """The ``seed``-th pair of the context; the first seeds are the directed edge cases."""
    rng = np.random.default_rng(seed)
    c = int(rng.choice([1, 2, 3]))
    k = int(rng.choice([1, 2]))
    case = seed % 7
    units: dict[str, list[dict[str, Any]]] = {}
    note = "random"
    m = int(rng.integers(1, 6))
    if case == 0:  # a unit at the bounds with C rows, moving between groups / added or removed
        note = "bounds"
        for i in range(m):
            units[f"u{i}"] = unit_rows(rng, f"u{i}", c, style="bounds", rows=c, groups=["a"])
    elif case == 1:  # filtered view: empty on one side, only the target's rows on the other
        note = "empty-vs-single-view"
        for i in range(m):
            units[f"u{i}"] = unit_rows(rng, f"u{i}", c, f_rate=0.0)
    elif case == 2:
        note = "nan-and-ties"
        for i in range(m):
            units[f"u{i}"] = unit_rows(rng, f"u{i}", c, style=str(rng.choice(["nan", "ties"])))
    elif case == 3:  # a whale at the bounds
        note = "whale"
        for i in range(m):
            units[f"u{i}"] = unit_rows(rng, f"u{i}", c)
        units["whale"] = unit_rows(rng, "whale", c, style="bounds", rows=3 * c + 1)
    else:
        for i in range(m):
            units[f"u{i}"] = unit_rows(rng, f"u{i}", c)
    target = "t"
    if case == 1:
        style = "nan" if rng.random() < 0.3 else "mixed"  # sometimes no complete point at all
        target_rows = unit_rows(rng, target, c, f_rate=1.0, style=style)
        other_rows = unit_rows(rng, target, c, f_rate=0.0)
    elif case == 0:
        target_rows = unit_rows(rng, target, c, style="bounds", rows=c, groups=["a"])
        other_rows = _moved(target_rows, rng)
    elif case == 4:  # C rows of distinct interior values moving between groups (not hidden by the pads)
        note = "interior-mover"
        target_rows = unit_rows(rng, target, c, rows=c, groups=["a"])
        for i, r in enumerate(target_rows):
            r["v"] = float(20 + 7 * i)
        other_rows = _moved(target_rows, rng)
    else:  # the target lives in one public group; under replace it moves (same rows) or is redrawn
        home = [str(rng.choice(GROUPS))]
        target_rows = unit_rows(rng, target, c, groups=home)
        other_rows = _moved(target_rows, rng) if rng.random() < 0.5 else unit_rows(rng, target, c)
    base = [r for rows in units.values() for r in rows]
    if ctx.adjacency == "add_remove":
        x, y = base, base + target_rows
        if case == 1 and rng.random() < 0.5:
            y = base + other_rows  # the added unit is outside the filter
    else:
        x, y = base + target_rows, base + other_rows
    if rng.random() < 0.5:
        x, y = y, x
    return Pair(seed, c, k, frame(x), frame(y), note)


# ---------------------------------------------------------------------------------------------------
# capture of the release path


@dataclass
class Call:
    """One mechanism input captured on the release path (one group of one step)."""

    agg: str
    kind: str  # additive | order | resized | points | graph | bounds | partition
    step: PlanStep | None
    values: Any
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass
class Capture:
    """Everything the release path handed to its mechanisms, in call order."""

    calls: list[Call] = field(default_factory=list)
    agg: str = ""
    steps: list[PlanStep] = field(default_factory=list)
    pending: Call | None = None
    last_rows: list[Any] = field(default_factory=list)

    def value_step(self) -> PlanStep | None:
        from dpsense.query import StepPart

        for s in self.steps:
            if s.part is StepPart.VALUE:
                return s
        return self.steps[0] if self.steps else None

    def add(self, kind: str, step: PlanStep | None, values: Any, **extra: Any) -> Call:
        call = Call(self.agg, kind, step, values, dict(extra))
        self.calls.append(call)
        return call


def _materialize(x: Any) -> F64:
    if isinstance(x, np.ndarray):
        return np.array(x, dtype=np.float64, copy=True)
    size = int(x.size)
    return np.asarray(x.ranks(1, size), dtype=np.float64).copy() if size else np.zeros(0)


def _graph_edges(graph: Any) -> list[tuple[int, int]]:
    import scipy.sparse as sp

    upper = sp.triu(graph._adjacency, k=1).tocoo()
    return sorted((int(a), int(b)) for a, b in zip(upper.row, upper.col, strict=True))


_ATTACHED = (
    "em_quantile",
    "recursive_quantiles",
    "inverse_sensitivity_order_statistic",
    "smooth_quantile",
    "smooth_trimmed_mean",
    "inverse_sensitivity_trimmed_mean",
    "ptr_order_statistic",
    "ptr_trimmed_mean",
)
_POINTS = ("smooth_min_distance", "inverse_sensitivity_min_distance", "ptr_min_distance")
_GRAPHS = ("smooth_triangle_count", "inverse_sensitivity_triangle_count", "ptr_triangle_count")


@contextmanager
def capturing() -> Iterator[Capture]:
    """Wrap the release path's mechanism entry points (where they are looked up) to record their inputs."""
    cap = Capture()
    with pytest.MonkeyPatch.context() as mp:
        original_run = _executor._Runner.run

        def run(self: Any, agg: Any, steps: list[PlanStep]) -> Any:
            cap.agg, cap.steps = agg.name, list(steps)
            return original_run(self, agg, steps)

        mp.setattr(_executor._Runner, "run", run)

        original_select = _data_dependent.DataDependentSteps.select_keys

        def select_keys(self: Any, step: PlanStep) -> Any:
            cap.agg, cap.steps = "__keys__", [step]
            return original_select(self, step)

        mp.setattr(_data_dependent.DataDependentSteps, "select_keys", select_keys)

        original_additive = _steps.additive_noise

        def additive(step: PlanStep, values: Any, **kw: Any) -> Any:
            cap.add("additive", step, np.array(values, dtype=np.float64, copy=True).reshape(-1))
            return original_additive(step, values, **kw)

        for module in (_steps, _data_dependent):  # the statistics call _steps.additive_noise through the module
            mp.setattr(module, "additive_noise", additive)

        original_order = _steps.order_release

        def order_release(
            step: PlanStep,
            x: Any,
            q: Fraction,
            bounds: Any,
            eps: Fraction,
            adj: Any,
            *,
            integers: bool = False,
            decimal_points: bool = False,
            recording_step: Any = None,
        ) -> Any:
            cap.pending = cap.add("order", step, _materialize(x), q=q, bounds=bounds, eps=eps)
            try:
                return original_order(
                    step,
                    x,
                    q,
                    bounds,
                    eps,
                    adj,
                    integers=integers,
                    decimal_points=decimal_points,
                    recording_step=recording_step,
                )
            finally:
                cap.pending = None

        # order_releases runs order_release group by group, except the EM quantile's groups, drawn together
        mp.setattr(_steps, "order_release", order_release)

        original_em_groups = mech.em_quantile_groups

        def em_quantile_groups(groups: Any, **kw: Any) -> Any:
            for x in groups:  # one "order" call per group, as order_release records, with its mechanism attached
                call = cap.add(
                    "order", cap.value_step(), _materialize(x), q=kw["q"], bounds=kw["bounds"], eps=kw["epsilon"]
                )
                call.extra["mechanisms"] = [("em_quantile", dict(kw), _materialize(x))]
            return original_em_groups(groups, **kw)

        mp.setattr(mech, "em_quantile_groups", em_quantile_groups)

        original_joint = _data_dependent.joint_release

        def joint_release(
            step: PlanStep,
            x: Any,
            qs: Any,
            bounds: Any,
            eps: Fraction,
            adj: Any,
            *,
            decimal_points: bool = False,
            recording_step: Any = None,
        ) -> Any:
            cap.pending = cap.add("order", step, _materialize(x), qs=qs, bounds=bounds, eps=eps)
            try:
                return original_joint(
                    step, x, qs, bounds, eps, adj, decimal_points=decimal_points, recording_step=recording_step
                )
            finally:
                cap.pending = None

        mp.setattr(_data_dependent, "joint_release", joint_release)

        original_resized = _data_dependent.DataDependentSteps._resized_release

        def resized(self: Any, agg: Any, step: PlanStep, x: Any, n: int, bounds: Any, q: Any) -> Any:
            cap.pending = cap.add("resized", step, _materialize(x), n=n, bounds=bounds)
            try:
                return original_resized(self, agg, step, x, n, bounds, q)
            finally:
                cap.pending = None

        mp.setattr(_data_dependent.DataDependentSteps, "_resized_release", resized)

        def attached(name: str) -> Callable[..., Any]:
            original = getattr(mech, name)

            def wrapper(values: Any, **kw: Any) -> Any:
                call = cap.pending if cap.pending is not None else cap.add("order", cap.value_step(), None)
                call.extra.setdefault("mechanisms", []).append((name, dict(kw), _materialize(values)))
                return original(values, **kw)

            return wrapper

        for name in _ATTACHED:
            mp.setattr(mech, name, attached(name))

        def points(name: str) -> Callable[..., Any]:
            original = getattr(mech, name)

            def wrapper(values: Any, **kw: Any) -> Any:
                arr = np.array(values, dtype=np.float64, copy=True)
                cap.add("points", cap.value_step(), arr, mechanism=name, kwargs=dict(kw))
                return original(values, **kw)

            return wrapper

        for name in _POINTS:
            mp.setattr(mech, name, points(name))

        def graphs(name: str) -> Callable[..., Any]:
            original = getattr(mech, name)

            def wrapper(graph: Any, **kw: Any) -> Any:
                cap.add("graph", cap.value_step(), _graph_edges(graph), mechanism=name, kwargs=dict(kw))
                return original(graph, **kw)

            return wrapper

        for name in _GRAPHS:
            mp.setattr(mech, name, graphs(name))

        original_bounds = mech.approx_bounds

        def approx_bounds(values: Any, **kw: Any) -> Any:
            cap.add("bounds", cap.value_step(), np.array(values, dtype=np.float64, copy=True), kwargs=dict(kw))
            return original_bounds(values, **kw)

        mp.setattr(mech, "approx_bounds", approx_bounds)

        original_groups = DuckDBEngine.group_aggregates

        def group_aggregates(self: Any, view: Any, **kw: Any) -> Any:
            rows = original_groups(self, view, **kw)
            if kw.get("keys") is None and kw.get("group_column") is not None:
                cap.last_rows = list(rows)
            return rows

        mp.setattr(DuckDBEngine, "group_aggregates", group_aggregates)

        original_partitions = mech.select_partitions

        def select_partitions(unit_counts: Any, **kw: Any) -> Any:
            keys = [  # the candidates select_keys passes: no NULL in any group column
                r.key for r in cap.last_rows if r.key is not None and not (isinstance(r.key, tuple) and None in r.key)
            ]
            counts = np.array(unit_counts, dtype=np.int64, copy=True).reshape(-1)
            cap.add("partition", cap.value_step(), counts, keys=keys, kwargs=dict(kw))
            return original_partitions(unit_counts, **kw)

        mp.setattr(mech, "select_partitions", select_partitions)
        yield cap


# ---------------------------------------------------------------------------------------------------
# releases on both sides


@dataclass
class Outcome:
    """A release's result on one side: ``ok``, ``refused`` (before data access) or ``failed``."""

    status: str
    error: str = ""
    calls: list[Call] = field(default_factory=list)
    plan: Any = None
    #: the query's output names -> the labels the Session planned and ran them under (``query._meaning``)
    names: dict[str, str] = field(default_factory=dict)


def policy() -> dp.PrivacyPolicy:
    """The release tests' policy with a small population (the harness's views hold few units)."""
    return support_policy(
        protected="a person and all their rows",
        population=1000,
        planned_releases=10_000,
        delta_rationale="δ = 1e-6, well below 1/population",
        per_release_epsilon=1000,
        minimum_useful_accuracy="none: a test",
    )


def register(session: dp.Session, name: str, data: pd.DataFrame, ctx: Context, rows_per_unit: int) -> dp.Dataset:
    """Register with public keys for ``g`` and the vertices, bounds [0, 100], NaN kept as missing (clamp)."""
    return session.register_dataset(
        name,
        source=data,
        privacy_unit="uid",
        adjacency=ctx.adjacency,
        bounds={"v": (LOW, HIGH), "px": (LOW, HIGH), "py": (LOW, HIGH)},
        keys={
            "g": list(GROUPS),
            **({"w": list(WARDS)} if "w" in data.columns else {}),  # frames made elsewhere may lack it
            "src": list(VERTICES),
            "dst": list(VERTICES),
        },
        kinds={"px": "point", "py": "point", "src": "edge", "dst": "edge"},
        policies={"v": "clamp", "px": "clamp", "py": "clamp"},
        max_rows_per_unit=rows_per_unit,
        max_groups_per_unit={"g": 2, "w": 2} if ctx.declared_caps else None,
        steps={"v": STEP} if ctx.declared_caps else None,
        budget=dp.Budget(epsilon=10**7, delta=Fraction(1, 10**6)),
        policy=policy(),
    )


def release(session: dp.Session, query: dp.Query, *, epsilon: Any, delta: Any, seed: int, request_id: str) -> Outcome:
    """One release under deterministic entropy ``seed``, with its captured mechanism inputs."""
    with capturing() as cap, deterministic_entropy(seed):
        try:
            plan = session.preview(query, epsilon=epsilon, delta=delta)
        except DPSenseError as exc:
            plan = None
            refused_early = f"{type(exc).__name__}: {exc}"
        else:
            refused_early = ""
        try:
            released = session.release(query, epsilon=epsilon, delta=delta, request_id=request_id)
        except ChargedFailure:
            return Outcome("failed", "ChargedFailure (a failure after data access)", cap.calls, plan)
        except DPSenseError as exc:
            return Outcome("refused", f"{type(exc).__name__}: {exc}", cap.calls, plan)
        except Exception as exc:  # anything else is a defect too
            return Outcome("failed", f"{type(exc).__name__}: {exc}", cap.calls, plan)
    if refused_early:
        return Outcome("failed", f"preview refused but the release ran: {refused_early}", cap.calls, plan)
    return Outcome("ok", "", cap.calls, plan, dict(released.names))


# ---------------------------------------------------------------------------------------------------
# independent measurements


def norm_change(a: F64, b: F64, norm: Norm) -> float:
    """The L1 or L2 distance of two pre-noise vectors of the same groups."""
    diff = np.abs(np.asarray(a, dtype=np.float64) - np.asarray(b, dtype=np.float64))
    if norm is Norm.L1:
        return float(diff.sum())
    return float(math.sqrt(float((diff * diff).sum())))


def within(measured: float, stated: Fraction | Sqrt, norm: Norm) -> bool:
    """measured <= stated (a Sqrt compared through its square), with a relative float tolerance."""
    if isinstance(stated, Sqrt):
        bound = float(stated.squared)
        return measured * measured <= bound * (1 + TOLERANCE) + TOLERANCE
    bound = float(stated)
    return measured <= bound * (1 + TOLERANCE) + TOLERANCE


def log2_bins(values: F64, smallest: int = -20, largest: int = 62) -> Counter[int]:
    """approx_bounds' public bins (module docstring): 0 for |x| < 2^kmin, +-j for 2^(kmin+j-1) <= |x| < 2^(kmin+j)."""
    out: Counter[int] = Counter()
    top = largest - smallest
    for x in values:
        if math.isnan(x):
            continue
        mag = abs(x)
        if mag < 2.0**smallest:
            j = 0
        else:
            j = min(top, math.floor(math.log2(mag)) - smallest + 1) if math.isfinite(mag) else top
            while j > 1 and mag < 2.0 ** (smallest + j - 1):  # guard log2 rounding
                j -= 1
            while j < top and mag >= 2.0 ** (smallest + j):
                j += 1
        out[j if x >= 0 else -j] += 1
    return out


def counter_l1(a: Counter[Any], b: Counter[Any]) -> int:
    return sum(abs(a.get(k, 0) - b.get(k, 0)) for k in set(a) | set(b))


def _multiset(values: Any) -> Counter[Any]:
    return Counter(values)


def record_changes(a: Sequence[Any], b: Sequence[Any]) -> int:
    """Record-level edit distance: max(|a \\ b|, |b \\ a|) on multisets (one replacement or one add/remove each)."""
    ma, mb = _multiset(a), _multiset(b)
    return max(sum((ma - mb).values()), sum((mb - ma).values()))


def symmetric_difference(a: Sequence[Any], b: Sequence[Any]) -> int:
    """|a (+) b| on multisets: additions and removals counted one each."""
    ma, mb = _multiset(a), _multiset(b)
    return sum((ma - mb).values()) + sum((mb - ma).values())


def resize(values: F64, n: int, low: float, high: float) -> list[float]:
    """The documented public-n resizing: clip, sort; pad ceil((n-m)/2) L and the rest U, or drop
    ceil((m-n)/2) smallest and floor((m-n)/2) largest.
    """
    x = sorted(min(max(float(v), low), high) for v in values if not math.isnan(v))
    m = len(x)
    if m >= n:
        drop_low = (m - n + 1) // 2
        return x[drop_low : drop_low + n]
    pads_low = (n - m + 1) // 2
    return [low] * pads_low + x + [high] * (n - m - pads_low)


def replacements_any_n(a: F64, b: F64, low: float, high: float, extra: Sequence[int] = ()) -> int:
    """Worst number of replacements between the two resized datasets over every public n that matters."""
    top = max(a.size, b.size) + 3
    ns = set(range(1, top + 1)) | {n for n in extra if n >= 1}
    return max(record_changes(resize(a, n, low, high), resize(b, n, low, high)) for n in ns)


# ---------------------------------------------------------------------------------------------------
# exact laws of the exponential-mechanism quantile and of the inverse-sensitivity order statistic


def to_cells(values: F64, low: float, high: float, resolution: int = RESOLUTION) -> list[int]:
    """The public cell of each value: [L, U] cut into K equal cells (halved arithmetic keeps U - L finite)."""
    out = []
    for v in values:
        c = min(max(float(v), low), high)
        if high == low:
            out.append(0)
            continue
        position = (c * 0.5 - low * 0.5) / (high * 0.5 - low * 0.5)
        out.append(int(min(max(math.floor(position * resolution), 0), resolution - 1)))
    return sorted(out)


@dataclass(frozen=True)
class Law:
    """A piecewise-constant law on cells [0, K): log weight per segment start, and log Z."""

    starts: tuple[int, ...]
    resolution: int
    log_weight: Callable[[int], float]
    log_z: float
    #: Unnormalised log weights of extra point candidates (the integers of [L, U]), when the law has them.
    atoms: F64 | None = None

    def log_p(self, cell: int) -> float:
        return self.log_weight(cell) - self.log_z


def _breakpoints(cells: Sequence[int], resolution: int) -> list[int]:
    points = {0, resolution}
    for c in cells:
        points.add(c)
        points.add(min(c + 1, resolution))
    return sorted(points)


def _law(cells: list[int], resolution: int, log_weight: Callable[[int], float]) -> Law:
    points = _breakpoints(cells, resolution)
    terms = [math.log(b - a) + log_weight(a) for a, b in itertools.pairwise(points) if b > a]
    top = max(terms)
    log_z = top + math.log(sum(math.exp(t - top) for t in terms))
    return Law(tuple(points[:-1]), resolution, log_weight, log_z)


def em_law(
    values: F64,
    *,
    q: Fraction,
    epsilon: Fraction,
    low: float,
    high: float,
    add_remove: bool = False,
    integers: bool = False,
    decimal_points: bool = False,
    step: Fraction | None = None,
) -> Law:
    """Smith's EM quantile with tie-aware ranks, written from its definition (not from the sampler).

    p(c) ~ m(c) exp(-eps dist(q n, [#{< c}, #{<= c}]) / (2 Δu)) over the public candidates (2^32 cells of
    [L, U]; or the integers of [L, U]; or the cells and the points of the decimal grids of [L, U], the
    cells with half the mass and each grid an equal share of the other half; or the multiples k s of a
    declared step in [L, U], each record at its nearest, as cells 0..K-1 of the indices);
    Δu = max(q, 1 - q) under add/remove, else 1. With decimal points a point of G_e also pays 1/16 rank
    for each clipped record that is not the double of a point of G_e (the fit, math §8.6), and the points
    run at Δu + 1/16 (the fit's count moves by at most one), the cells at the rank term's Δu, their ratio
    rounded down to a multiple of 1/64 (math §8.7). The grids weigh 2^-k of the cells together, k the least
    with 2^-k <= eps / (2 Δu) (math §8.8).
    """
    rank_sens = max(q, 1 - q) if add_remove else Fraction(1)
    shift = 0
    while Fraction(1, 2**shift) > Fraction(epsilon) / (2 * rank_sens):
        shift += 1
    grids = (
        ()
        if integers or step is not None or not decimal_points
        else mech.quantile.point_grids((low, high), shift=shift)
    )
    fit = Fraction(1, 16)
    if step is not None:
        first, last = math.ceil(Fraction(low) / step), math.floor(Fraction(high) / step)
        cells = sorted(min(max(round(Fraction(float(v)) / step), first), last) - first for v in values)
        resolution = last - first + 1
    elif integers:
        first, last = math.ceil(low), math.floor(high)
        cells = sorted(round(min(max(float(v), first), last)) - first for v in values)
        resolution = last - first + 1
    else:
        cells, resolution = to_cells(values, low, high), RESOLUTION
    n = len(cells)
    eps = Fraction(epsilon)
    sens = cells_sens = rank_sens
    if grids:
        sens += fit
        # the cells' speed-up sens / cells_sens, rounded down to a multiple of 1/64 (math §8.7)
        cells_sens = sens / Fraction(math.floor(sens / cells_sens * 64), 64)

    def log_weight(c: int) -> float:
        below = sum(1 for x in cells if x < c)
        at_most = sum(1 for x in cells if x <= c)
        dist = max(below - q * n, q * n - at_most, Fraction(0))
        return -float(eps * dist / (2 * cells_sens))

    if not grids:
        return _law(cells, resolution, log_weight)
    # base measure: 2^20 per cell; each of the J decimal grids 2^20 K / (J 2^k) in all, rounded down per point
    cell_law = _law(cells, resolution, lambda c: math.log(2**20) + log_weight(c))
    clipped = np.sort(np.clip(np.asarray(values, dtype=np.float64), low, high))
    qn = float(q * n)
    atoms = []
    for grid in grids:
        step = Fraction(10) ** grid.exponent
        points = np.array([float(k * step) for k in range(grid.first, grid.last + 1)])  # the decimals' doubles
        below = np.searchsorted(clipped, points, side="left").astype(np.float64)
        at_most = np.searchsorted(clipped, points, side="right").astype(np.float64)
        dist = np.maximum(np.maximum(below - qn, qn - at_most), 0.0)
        off = int(np.sum(~np.isin(clipped, points)))  # records that are no point of this grid
        measure = (2**20 * resolution) // (len(grids) * (grid.last - grid.first + 1) * 2**shift)
        atoms.append(math.log(measure) - float(eps / (2 * sens)) * (dist + float(fit * off)))
    atom = np.concatenate(atoms)
    top = max(cell_law.log_z, float(atom.max()))
    log_z = top + math.log(math.exp(cell_law.log_z - top) + float(np.exp(atom - top).sum()))
    return Law(cell_law.starts, resolution, cell_law.log_weight, log_z, atom)


def inverse_sensitivity_law(values: F64, *, rank: int, epsilon: Fraction, low: float, high: float) -> Law:
    """Asi-Duchi on cells: p(c) ~ exp(-eps len(c) / 2), len(c) = max(0, #{< c} - r + 1, r - #{<= c})."""
    cells = to_cells(values, low, high)
    eps = Fraction(epsilon)

    def log_weight(c: int) -> float:
        below = sum(1 for x in cells if x < c)
        at_most = sum(1 for x in cells if x <= c)
        return -float(eps * max(0, below - rank + 1, rank - at_most) / 2)

    return _law(cells, RESOLUTION, log_weight)


def uniform_law(resolution: int = RESOLUTION) -> Law:
    """The law of an empty group: a uniform public cell."""
    return Law((0,), resolution, lambda c: 0.0, math.log(resolution))


def log_ratio_range(a: Law, b: Law) -> tuple[float, float]:
    """(min, max) over cells of log p_a(c) - log p_b(c) (both laws constant between merged breakpoints)."""
    starts = sorted(set(a.starts) | set(b.starts))
    ratios = [a.log_p(s) - b.log_p(s) for s in starts if s < a.resolution]
    if a.atoms is not None and b.atoms is not None:
        points = (a.atoms - a.log_z) - (b.atoms - b.log_z)
        ratios += [float(points.min()), float(points.max())]
    elif (a.atoms is None) != (b.atoms is None):
        raise AssertionError("the two sides released over different candidate sets")
    return min(ratios), max(ratios)


def joint_log_ratio(ranges: Sequence[tuple[float, float]]) -> float:
    """max over joint outputs of |log p(out|x) - log p(out|y)| for independent groups (product laws)."""
    return max(sum(hi for _, hi in ranges), -sum(lo for lo, _ in ranges), 0.0)


# ---------------------------------------------------------------------------------------------------
# the checks of one aggregate on one pair


def _by_agg(calls: list[Call], agg: str) -> list[Call]:
    return [c for c in calls if c.agg == agg]


def _mechanism(call: Call) -> tuple[str, dict[str, Any], F64] | None:
    found = call.extra.get("mechanisms") or []
    return found[-1] if found else None


def check_global(agg: str, xs: list[Call], ys: list[Call]) -> list[str]:
    """Every global-sensitivity step: the measured change of its pre-noise vector <= the stated sensitivity."""
    problems: list[str] = []
    ax = [c for c in xs if c.kind in ("additive", "bounds", "partition")]
    ay = [c for c in ys if c.kind in ("additive", "bounds", "partition")]
    if [(c.kind, c.step and c.step.part) for c in ax] != [(c.kind, c.step and c.step.part) for c in ay]:
        return [f"{agg}: the two sides ran different global steps"]
    clipped = any(c.kind == "bounds" and c.step is not None and c.step.part is StepPart.CLIP for c in ax)
    for cx, cy in zip(ax, ay, strict=True):
        step = cx.step
        if step is None or step.sensitivity is None or step.norm is None:
            problems.append(f"{agg}: a global step without a stated sensitivity")
            continue
        if cx.kind == "additive":
            if clipped and step != cy.step:
                # calibrated at run time to the clip an earlier step of the statistic released: its sensitivity
                # holds given that release (adaptive composition), so the two sides compare only when they
                # released the same clip; the clip's own histogram is checked as its "bounds" call
                continue
            if cx.values.shape != cy.values.shape:
                problems.append(f"{agg}/{step.part.value}: vectors of different shapes {cx.values.shape}")
                continue
            measured = norm_change(cx.values, cy.values, step.norm)
        elif cx.kind == "bounds":
            measured = float(counter_l1(log2_bins(cx.values), log2_bins(cy.values)))
        else:  # partition selection: distinct units per candidate key, absent = 0
            cnt_x = Counter(dict(zip(cx.extra["keys"], cx.values.tolist(), strict=True)))
            cnt_y = Counter(dict(zip(cy.extra["keys"], cy.values.tolist(), strict=True)))
            measured = float(counter_l1(cnt_x, cnt_y))
        if not within(measured, step.sensitivity, step.norm):
            problems.append(
                f"{agg}/{step.part.value} ({step.mechanism}): measured {step.norm.value} change {measured:g} > "
                f"stated sensitivity {step.sensitivity}"
            )
    return problems


def _group_changes(cx: Call, cy: Call) -> tuple[int, int, Fraction, Fraction]:
    """(record changes d, records calibrated for k, ε per group, δ per record) of one group's mechanism."""
    mx, my = _mechanism(cx), _mechanism(cy)
    name, kw, _ = mx or my or ("", {}, np.zeros(0))
    low, high = (float(b) for b in cx.extra["bounds"])
    if cx.kind == "order":
        d = record_changes(cx.values.tolist(), cy.values.tolist())
        eps = Fraction(kw.get("epsilon", cx.extra["eps"]))
        return d, 1, eps, Fraction(0)
    ns = [int(cx.extra["n"]), int(cy.extra["n"])]
    d = replacements_any_n(cx.values, cy.values, low, high, ns)
    if name.startswith("ptr_"):
        return d, 1, Fraction(kw["epsilon_test"]) + Fraction(kw["epsilon_release"]), Fraction(kw["delta"])
    if name.startswith("smooth_"):
        return d, int(kw.get("max_records_per_unit", 1)), Fraction(kw["epsilon"]), Fraction(0)
    return d, 1, Fraction(kw["epsilon"]), Fraction(0)


def check_data_dependent(agg: str, xs: list[Call], ys: list[Call]) -> list[str]:
    """Group privacy per group and parallel groups: sum_g ceil(d_g / k) eps_g <= the step's charged ε.

    For the EM quantile and inverse sensitivity also the exact joint log-ratio of the output laws.
    """
    problems: list[str] = []
    gx = [c for c in xs if c.kind in ("order", "resized")]
    gy = [c for c in ys if c.kind in ("order", "resized")]
    if not gx and not gy:
        return problems
    if len(gx) != len(gy):
        return [f"{agg}: {len(gx)} groups on one side, {len(gy)} on the other"]
    step = gx[0].step
    if step is None:
        return [f"{agg}: a data-dependent call without its step"]
    spent = Fraction(0)
    delta = 0.0
    detail = []
    ranges = []
    exact = True
    for cx, cy in zip(gx, gy, strict=True):
        d, k, eps, delta_r = _group_changes(cx, cy)
        chunks = -(-d // k)
        spent += chunks * eps
        if delta_r:
            eps_r = float(eps)
            delta += d * math.exp((d - 1) * eps_r) * float(delta_r) if d else 0.0
        detail.append(f"d={d}/k={k}@{eps}")
        laws = [_exact_law(c) for c in (cx, cy)]
        if laws[0] is None or laws[1] is None:
            exact = False
        else:
            ranges.append(log_ratio_range(laws[0], laws[1]))
    charged = step.loss.epsilon
    if spent > charged:
        problems.append(
            f"{agg} ({step.mechanism}, {step.adjacency.value}): group privacy over the measured record changes "
            f"gives ε = {float(spent):.4g} > charged {float(charged):.4g} [{', '.join(detail)}]"
        )
    step_delta = float(getattr(step.loss, "delta", 0))
    if delta > step_delta * (1 + 1e-6) + 1e-300:
        problems.append(f"{agg} ({step.mechanism}): group-privacy δ {delta:.3g} > charged δ {step_delta:.3g}")
    if exact and ranges:
        loss = joint_log_ratio(ranges)
        if loss > float(charged) + TOLERANCE:
            problems.append(
                f"{agg} ({step.mechanism}, {step.adjacency.value}): exact joint log-ratio of the output laws "
                f"{loss:.6g} > charged ε {float(charged):.6g}"
            )
    return problems


def _exact_law(call: Call) -> Law | None:
    """The exact output law of an EM / inverse-sensitivity order-statistic group (uniform when empty)."""
    if call.kind != "order":
        return None
    found = _mechanism(call)
    low, high = (float(b) for b in call.extra["bounds"])
    if found is None:
        return uniform_law() if call.values.size == 0 else None
    name, kw, values = found
    if (kw.get("resolution") or RESOLUTION) != RESOLUTION:
        return None
    if name == "em_quantile":
        add_remove = kw.get("adjacency") is Adjacency.ADD_REMOVE
        q, eps, integers = Fraction(kw["q"]), Fraction(kw["epsilon"]), bool(kw.get("integers"))
        points = bool(kw.get("decimal_points"))
        declared = kw.get("step")
        return em_law(
            values,
            q=q,
            epsilon=eps,
            low=low,
            high=high,
            add_remove=add_remove,
            integers=integers,
            decimal_points=points,
            step=None if declared is None else Fraction(declared.text()),
        )
    if name == "inverse_sensitivity_order_statistic":
        return inverse_sensitivity_law(
            values, rank=int(kw["rank"]), epsilon=Fraction(kw["epsilon"]), low=low, high=high
        )
    return None


def check_points_and_graphs(agg: str, xs: list[Call], ys: list[Call]) -> list[str]:
    """Minimum distance (points, add/remove one point) and triangles (edge-level): d eps_record <= charged ε."""
    problems: list[str] = []
    px = [c for c in xs if c.kind in ("points", "graph")]
    py = [c for c in ys if c.kind in ("points", "graph")]
    if len(px) != len(py):
        return [f"{agg}: the two sides ran different mechanisms"]
    for cx, cy in zip(px, py, strict=True):
        step = cx.step
        if step is None:
            problems.append(f"{agg}: a mechanism call without its step")
            continue
        kw = cx.extra["kwargs"]
        if cx.kind == "points":
            a = [tuple(r) for r in np.asarray(cx.values).tolist()]
            b = [tuple(r) for r in np.asarray(cy.values).tolist()]
        else:
            a, b = cx.values, cy.values
        d = symmetric_difference(a, b)
        if "epsilon_test" in kw:
            eps = Fraction(kw["epsilon_test"]) + Fraction(kw["epsilon_release"])
            dlt = d * math.exp((d - 1) * float(eps)) * float(kw["delta"]) if d else 0.0
            if dlt > float(getattr(step.loss, "delta", 0)) * (1 + 1e-6):
                problems.append(f"{agg} ({step.mechanism}): group-privacy δ {dlt:.3g} > charged")
        else:
            eps = Fraction(kw["epsilon"])
        if d * eps > step.loss.epsilon:
            problems.append(
                f"{agg} ({step.mechanism}): {d} record changes x ε {float(eps):.4g} = {float(d * eps):.4g} > charged "
                f"{float(step.loss.epsilon):.4g}"
            )
    return problems


def check_pair(name: str, ox: Outcome, oy: Outcome, *, private_keys: bool = False) -> list[str]:
    """Totality, then every captured step of the output ``name`` on the pair (x, y).

    The Session runs each statistic under a label of its meaning (``query._meaning``): the captured
    calls and the plan's steps carry that label, which the outcome maps from the query's name.
    """
    agg = ox.names.get(name, oy.names.get(name, name))
    if ox.status == "failed" or oy.status == "failed":
        return [f"{agg}: not total: x {ox.status} {ox.error!r}; y {oy.status} {oy.error!r}"]
    if ox.status == "refused" or oy.status == "refused":
        if (ox.status, ox.error) != (oy.status, oy.error):
            return [f"{agg}: refusal differs between neighbours: x {ox.error!r}; y {oy.error!r}"]
        return []
    xs, ys = _by_agg(ox.calls, agg), _by_agg(oy.calls, agg)
    if private_keys:
        # a statistic over privately selected keys: its sensitivity is the one given the released keys,
        # so only pairs where both sides released the same keys compare (no key released: nothing to check)
        same = [c.values.shape for c in xs if c.kind == "additive"] == [
            c.values.shape for c in ys if c.kind == "additive"
        ]
        if not same or not xs:
            return []
    if not xs or not ys:
        return [f"{agg}: nothing captured (x {len(xs)} calls, y {len(ys)} calls)"]
    if not private_keys and ox.plan is not None:  # every planned global step was captured: a move of code cannot
        planned = [  # make the check vacuous
            s
            for s in ox.plan.steps
            if (s.output == agg and s.mechanism.is_global) or (agg == "__keys__" and s.part is StepPart.KEYS)
        ]
        captured = [c for c in xs if c.kind in ("additive", "bounds", "partition")]
        if len(planned) != len(captured):
            return [f"{agg}: {len(planned)} global steps planned, {len(captured)} captured"]
    return [*check_global(agg, xs, ys), *check_data_dependent(agg, xs, ys), *check_points_and_graphs(agg, xs, ys)]
