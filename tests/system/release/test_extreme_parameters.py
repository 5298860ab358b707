"""Extreme but legal public parameters must not make a release fail after data access (docs/design.md invariant 6).

A failure that happens on one dataset and not on its neighbour is an output with unbounded privacy loss.
Every request below is legal as far as the API's own checks go; each must either be released, or be
refused before the ledger with a ``UsageError`` and nothing charged. A ``ChargedFailure``, any other
exception type (``OverflowError``, ``ValueError`` from ``math``, ``ZeroDivisionError``, ...), a
value column holding NaN or inf, or a release that runs away (a CPU-time deadline per release) fails.

The parameters: ε from 1e-300 to 1e100; δ from 1e-300 to above the policy's δ rule; public bounds very
wide (up to 9e299), very narrow (width 1e-300, 1e-12), far from the data, and a single point [5, 5];
contribution bounds C = 1 and C = 2^40; group caps up to 2^40; quantiles at q = 0, 1e-300, 1/4e18,
1 - 1e-16, 1; trim fractions 0, 1e-300 and just below 1/2. The data: 40 persons with 3 rows each,
all values tied, a whale unit with 400 rows, NaN rows, a single record, an empty filtered view.

The design (statistic x mechanism, short lists of extreme parameter sets, each on a few datasets):

* ``test_epsilon_sweep``: every statistic x mechanism, ungrouped and grouped, at each extreme ε;
* ``test_delta_sweep``, ``test_gaussian_tiny_delta_on_wide_bounds``: the mechanisms that spend δ at
  extreme δ (partition selection too);
* ``test_extreme_bounds``: the bounded statistics on datasets declared with extreme bounds (float and
  integer columns), ``test_extreme_bounds_overrides``: extreme per-query ``bounds=`` overrides;
* ``test_extreme_contribution_bounds``: C = 1 and C = 2^40; ``test_huge_group_cap``: a group cap of 2^40;
* ``test_extreme_quantiles``, ``test_extreme_quantile_lists``, ``test_extreme_trims``: q, lists of q and
  trim fractions at the edges of their domains;
* ``test_degenerate_data_at_extreme_epsilon``: ties, a whale, NaN rows, one record, an empty view,
  ungrouped, over public keys and over privately selected keys;
* ``test_sql_at_extreme_epsilon``: a few SQL releases.

A ``ChargedFailure`` hides its cause on purpose; the module wraps the executor to report the exception
and the innermost dpsense frames behind each one. Runaways are cut by a CPU-time deadline per release
(``SIGVTALRM``; pytest-timeout keeps ``SIGALRM``): a few cases at ε = 1e100 cost the full deadline.
Noise is drawn from a deterministic source (a fixed seed per case), so an outcome reproduces.
On the parent of the change that added ``release._admission._admit_public_range`` and the calibrations'
own guards, 575 of these cases failed (352 after data access) from 11 causes: docs/planner.md, "Refused
before any charge", and ``tests/unit/mechanisms/test_extreme_calibrations.py``.
"""

from __future__ import annotations

import hashlib
import math
import re
import signal
import traceback
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from fractions import Fraction
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

import dpsense as dp
import dpsense.release._session as session_module
from dpsense.core.errors import ChargedFailure, UsageError
from dpsense.noise.testing import deterministic_entropy
from tests.system.release.support import REGIONS, policy

pytestmark = pytest.mark.timeout(300)  # a backstop: each release also has a CPU-time deadline

#: CPU seconds one release may take before it counts as a runaway: every release here takes < 1 s when
#: it behaves, but on C = 2^40 a smooth trimmed mean resizes to n^ = 2^25 values and takes ~5 s.
DEADLINE_S = 5.0
DEADLINE_HUGE_C_S = 20.0

EXTREME_EPSILONS = [1e-300, 1e-30, 1e-17, 1e-9, 1e3, 1e6, 1e12, 1e100]
DELTA = 1e-7  # the δ of a step that uses δ, unless the case varies δ
VERTICES = list(range(8))
POPULATION = 100  # the policy's population: δ rule 1/(10 x 100) = 1e-3


# ---------------------------------------------------------------------------------------------------
# data


def _frame(kind: str) -> pd.DataFrame:
    """A small deterministic dataset: persons, a region (public keys), hours, age, a point column, edges."""
    if kind == "normal":
        person = np.repeat(np.arange(40), 3)
        hours = 1.0 + (np.arange(person.size) % 17) * 0.731
        age = 20 + (person * 7) % 61
    elif kind == "ties":
        person = np.repeat(np.arange(30), 2)
        hours = np.full(person.size, 5.0)
        age = np.full(person.size, 40)
    elif kind == "whale":  # one unit with 400 rows at the upper bounds, 29 ordinary units
        person = np.concatenate([np.zeros(400, dtype=np.int64), np.repeat(np.arange(1, 30), 2)])
        hours = np.concatenate([np.full(400, 24.0), 1.0 + np.arange(58) % 7])
        age = np.concatenate([np.full(400, 120), 20 + np.arange(58)])
    elif kind == "nan":  # every third hours value missing
        person = np.repeat(np.arange(30), 2)
        hours = np.where(np.arange(person.size) % 3 == 0, np.nan, 2.0 + np.arange(person.size) % 5)
        age = 20 + np.arange(person.size)
    elif kind == "one":
        person = np.array([0])
        hours = np.array([3.0])
        age = np.array([30])
    elif kind == "huge":  # values near the edges of bounds (-1e299, 1e299)
        person = np.repeat(np.arange(30), 2)
        sign = np.where(np.arange(person.size) % 2 == 0, 1.0, -1.0)
        hours = sign * 1e299 / (1 + np.arange(person.size) % 3)
        age = (sign * (10**17) * (1 + np.arange(person.size) % 3)).astype(np.int64)
    else:  # pragma: no cover - a typo in the table below
        raise AssertionError(kind)
    return pd.DataFrame(
        {
            "person_id": [f"p{p}" for p in person],
            "region": np.array(REGIONS)[person % 4],
            "team": np.array(["a", "b", "c"])[person % 3],  # no declared keys: grouped releases select them
            "hours": np.asarray(hours, dtype=np.float64),
            "age": np.asarray(age, dtype=np.int64),
            "x": np.asarray(hours, dtype=np.float64),  # a point column (min_distance)
            "src": np.asarray(person % 8, dtype=np.int64),  # edges (triangle_count)
            "dst": np.asarray((person * 3 + np.arange(person.size)) % 8, dtype=np.int64),
        }
    )


@dataclass(frozen=True)
class Spec:
    """One registration: its data, the declared bounds of hours (and x) and age, and C."""

    data: str
    hours: tuple[Any, Any] = (0, 24)
    age: tuple[Any, Any] = (0, 120)
    rows: int = 5


DATASETS: dict[str, Spec] = {
    "base": Spec("normal"),
    "ties": Spec("ties"),
    "whale": Spec("whale"),
    "nan": Spec("nan"),
    "one": Spec("one"),
    "c1": Spec("normal", rows=1),
    "c_huge": Spec("normal", rows=2**40),
    "wide": Spec("huge", hours=(-1e299, 1e299), age=("-9e299", "9e299")),  # the largest legal magnitudes
    "wide_positive": Spec("normal", hours=(0, 9e299), age=(0, 10**299)),
    "wide_1e15": Spec("normal", hours=(-1e15, 1e15), age=(-(10**15), 10**15)),
    "tiny": Spec("normal", hours=(0, "1e-300"), age=(0, 1)),  # every value clamped to the top
    "narrow": Spec("normal", hours=(1, 1 + 1e-12), age=(1000, 1001)),  # every value clamped to the bottom
    "far": Spec("normal", hours=(1e12, 1e12 + 1), age=(10**12, 10**12 + 1)),
    "point": Spec("normal", hours=(5, 5), age=(40, 40)),  # L == U is accepted at registration
}


def _register(s: dp.Session, name: str, spec: Spec) -> None:
    s.register_dataset(
        name,
        source=_frame(spec.data).assign(copy=name),  # distinct data: no link to another registration
        privacy_unit="person_id",
        bounds={"hours": spec.hours, "x": spec.hours, "age": spec.age},
        keys={"region": REGIONS, "src": VERTICES, "dst": VERTICES},
        kinds={"x": "point", "src": "edge", "dst": "edge"},
        policies={"hours": "clamp", "x": "clamp", "age": "clamp"},  # NaN kept missing, values clamped
        max_rows_per_unit=spec.rows,
        max_groups_per_unit={"region": 1},
        hierarchies={"geo": {"levels": ["region"], "keys": [[r] for r in REGIONS]}},
        budget=dp.Budget(epsilon=10**120, delta=1e-3),
        policy=policy(
            population=POPULATION,
            per_release_epsilon=10**110,
            delta_rationale="δ = 1e-3 <= 1/(10 x population)",
        ),
    )


def _fresh(s: dp.Session, like: str, name: str) -> str:
    """A new registration with ``like``'s declarations (for a release that spends most of a budget)."""
    _register(s, name, DATASETS[like])
    return name


@pytest.fixture(scope="module")
def session(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dp.Session]:
    path: Path = tmp_path_factory.mktemp("extreme") / "ledger.db"
    with dp.Session.open(f"sqlite:///{path}", analyst="steward", role="steward", allow_test_noise=True) as s:
        for name, spec in DATASETS.items():
            _register(s, name, spec)
        yield s


# ---------------------------------------------------------------------------------------------------
# the root cause of a charged failure (ChargedFailure hides it on purpose: ``raise ... from None``)

_CAUSE: list[str] = []


@pytest.fixture(scope="module", autouse=True)
def _record_causes() -> Iterator[None]:
    """Wrap the executor to keep the traceback of a failure after data access (the test reports it)."""
    original = getattr(session_module, "execute")  # noqa: B009 - not re-exported: mypy wants getattr

    def execute(*args: Any, **kwargs: Any) -> Any:
        try:
            return original(*args, **kwargs)
        except BaseException:
            _CAUSE.append(traceback.format_exc())
            raise

    mp = pytest.MonkeyPatch()
    mp.setattr(session_module, "execute", execute)
    yield
    mp.undo()


def _where(tb: str, depth: int = 4) -> str:
    """The exception line of a traceback and its innermost dpsense frames (``file:line func``, innermost first)."""
    frames = re.findall(r'File ".*?/src/dpsense/([^"]+)", line (\d+), in (\S+)', tb)
    last = tb.strip().splitlines()[-1] if tb.strip() else "?"
    where = " < ".join(f"{f}:{n} {fn}" for f, n, fn in reversed(frames[-depth:]))
    return f"{last} at {where or '?'}"


# ---------------------------------------------------------------------------------------------------
# a CPU-time deadline per release (SIGVTALRM: pytest-timeout keeps SIGALRM)


class _Runaway(BaseException):
    """Raised in the release by the deadline."""


@contextmanager
def _deadline(seconds: float) -> Iterator[list[bool]]:
    """Interrupt the block after ``seconds`` of CPU time; the yielded list records that it fired."""
    fired: list[bool] = []

    def fire(signum: int, frame: Any) -> None:
        fired.append(True)
        raise _Runaway

    previous = signal.signal(signal.SIGVTALRM, fire)
    signal.setitimer(signal.ITIMER_VIRTUAL, seconds)
    try:
        yield fired
    finally:
        signal.setitimer(signal.ITIMER_VIRTUAL, 0)
        signal.signal(signal.SIGVTALRM, previous)


# ---------------------------------------------------------------------------------------------------
# one release, judged


def _nonfinite(released: Any) -> list[str]:
    """The non-finite numbers among the released values (error columns aside; a PTR refusal is a None)."""
    stored = released.record.value
    bad = []
    for row in stored["rows"]:
        for column, cell in zip(stored["columns"], row, strict=True):
            if column.endswith("_error95") or isinstance(cell, bool):
                continue
            if isinstance(cell, (float, np.floating)) and not math.isfinite(float(cell)):
                bad.append(f"{column}={cell}")
    return bad


def attempt(session: dp.Session, dataset: str, run: Callable[[], Any], *, seed: int, what: str) -> Any:
    """Run one release; fail unless it is released (finite values) or refused before the ledger."""
    deadline = DEADLINE_HUGE_C_S if DATASETS.get(dataset, DATASETS["base"]).rows > 1000 else DEADLINE_S
    before = session.budget(dataset).spent
    charges = len(session.ledger.charges(dataset))
    _CAUSE.clear()
    fired: list[bool] = []
    try:
        with deterministic_entropy(seed), _deadline(deadline) as fired:
            released = run()
    except ChargedFailure:
        if fired:
            at = _where(_CAUSE[-1], depth=6).partition(" at ")[2] if _CAUSE else "?"
            pytest.fail(f"{what}: a runaway release (over {deadline} s of CPU, interrupted after data access at {at})")
        cause = _where(_CAUSE[-1]) if _CAUSE else "? (outside the executor)"
        pytest.fail(f"{what}: ChargedFailure after data access; cause: {cause}")
    except _Runaway:
        pytest.fail(f"{what}: a runaway request before data access (over {deadline} s of CPU, nothing charged)")
    except UsageError as exc:
        spent = session.budget(dataset).spent
        assert spent == before and len(session.ledger.charges(dataset)) == charges, (
            f"{what}: refused ({type(exc).__name__}) but charged: {before} -> {spent}"
        )
        return None
    except Exception as exc:
        charged = session.budget(dataset).spent != before
        pytest.fail(
            f"{what}: {type(exc).__name__} (not a UsageError) {'after' if charged else 'before'} the ledger; "
            f"at {_where(traceback.format_exc())}"
        )
    bad = _nonfinite(released)
    assert not bad, f"{what}: released non-finite values {bad[:4]}"
    return released


# ---------------------------------------------------------------------------------------------------
# statistics x mechanisms


@dataclass(frozen=True)
class Stat:
    """An aggregate builder over a column (``col``) and per-query bounds (``b``), and its needs."""

    make: Callable[[str, Any], dp.Aggregate]
    uses_delta: bool = False
    ungrouped_only: bool = False
    numeric: bool = True  # takes a numeric column and bounds


def _agg(name: str, *args: Any, **fixed: Any) -> Callable[[str, Any], dp.Aggregate]:
    """``dp.<name>(col, *args, **fixed)``, with ``bounds=`` when the case overrides them."""

    def make(col: str, bounds: Any) -> dp.Aggregate:
        kw = dict(fixed)
        if bounds is not None:
            kw["bounds"] = bounds
        aggregate: dp.Aggregate = getattr(dp, name)(col, *args, **kw)
        return aggregate

    return make


def _quantile(q: Any, **fixed: Any) -> Callable[[str, Any], dp.Aggregate]:
    return _agg("quantile", q, **fixed)


def _trimmed(t: Any, **fixed: Any) -> Callable[[str, Any], dp.Aggregate]:
    return _agg("trimmed_mean", t, **fixed)


def _quantiles(qs: list[Any]) -> Callable[[str, Any], dp.Aggregate]:
    def make(col: str, bounds: Any) -> dp.Aggregate:
        return dp.quantiles(col, qs) if bounds is None else dp.quantiles(col, qs, bounds=bounds)

    return make


def _fixed(build: Callable[[], dp.Aggregate]) -> Callable[[str, Any], dp.Aggregate]:
    return lambda col, bounds: build()


STATS: dict[str, Stat] = {}
for _m in ("laplace", "gaussian", "geometric"):
    STATS[f"count-{_m}"] = Stat(_fixed(partial(dp.count, mechanism=_m)), _m == "gaussian", numeric=False)
    STATS[f"count_units-{_m}"] = Stat(_fixed(partial(dp.count_units, mechanism=_m)), _m == "gaussian", numeric=False)
    STATS[f"clipped_count-{_m}"] = Stat(_agg("clipped_count", mechanism=_m), _m == "gaussian")
    STATS[f"histogram-{_m}"] = Stat(
        _fixed(partial(dp.histogram, "region", mechanism=_m)), _m == "gaussian", True, numeric=False
    )
for _s in ("sum", "mean", "variance"):
    for _m in ("laplace", "gaussian"):
        STATS[f"{_s}-{_m}"] = Stat(_agg(_s, mechanism=_m), _m == "gaussian")
STATS["sum-adaptive_clip"] = Stat(_agg("sum", mechanism="adaptive_clip"))
STATS["mean-adaptive_clip"] = Stat(_agg("mean", mechanism="adaptive_clip"))
STATS["approx_bounds"] = Stat(lambda col, bounds: dp.approx_bounds(col), ungrouped_only=True)
STATS["median-em_quantile"] = Stat(_agg("median", mechanism="em_quantile"))
STATS["median-inverse_sensitivity"] = Stat(_agg("median", mechanism="inverse_sensitivity_median"))
STATS["median-smooth"] = Stat(_agg("median", mechanism="smooth_median"))
STATS["median-ptr"] = Stat(_agg("median", mechanism="ptr_order_statistic", proposed_bound=1), True)
STATS["quantile-em_quantile"] = Stat(_quantile(0.3, mechanism="em_quantile"))
STATS["quantile-inverse_sensitivity"] = Stat(_quantile(0.3, mechanism="inverse_sensitivity_order_statistic"))
STATS["quantile-smooth"] = Stat(_quantile(0.3, mechanism="smooth_quantile"))
STATS["quantile-ptr"] = Stat(_quantile(0.3, mechanism="ptr_order_statistic", proposed_bound=1), True)
STATS["quantiles-recursive"] = Stat(_quantiles([0.25, 0.5, 0.9]))
STATS["trimmed_mean-smooth"] = Stat(_trimmed(0.1, mechanism="smooth_trimmed_mean"))
STATS["trimmed_mean-inverse_sensitivity"] = Stat(_trimmed(0.1, mechanism="inverse_sensitivity_trimmed_mean"))
STATS["trimmed_mean-ptr"] = Stat(_trimmed(0.1, mechanism="ptr_trimmed_mean", proposed_bound=1), True)
STATS["min_distance-smooth"] = Stat(
    lambda col, b: dp.min_distance(["x"], mechanism="smooth_min_distance", **({"bounds": b} if b else {})),
    ungrouped_only=True,
)
STATS["min_distance-inverse_sensitivity"] = Stat(
    lambda col, b: dp.min_distance(["x"], mechanism="inverse_sensitivity_min_distance", **({"bounds": b} if b else {})),
    ungrouped_only=True,
)
STATS["min_distance-ptr"] = Stat(
    lambda col, b: dp.min_distance(
        ["x"], mechanism="ptr_min_distance", proposed_bound=1, **({"bounds": b} if b else {})
    ),
    True,
    True,
)
STATS["triangle_count-smooth"] = Stat(
    _fixed(lambda: dp.triangle_count(["src", "dst"], mechanism="smooth_triangle_count")),
    ungrouped_only=True,
    numeric=False,
)
STATS["triangle_count-inverse_sensitivity"] = Stat(
    _fixed(lambda: dp.triangle_count(["src", "dst"], mechanism="inverse_sensitivity_triangle_count")),
    ungrouped_only=True,
    numeric=False,
)
STATS["triangle_count-ptr"] = Stat(
    _fixed(lambda: dp.triangle_count(["src", "dst"], mechanism="ptr_triangle_count", proposed_bound=1)),
    True,
    True,
    numeric=False,
)
STATS["hierarchical_count"] = Stat(_fixed(lambda: dp.hierarchical_count("geo")), ungrouped_only=True, numeric=False)

#: The statistics whose noise depends on the value column's bounds (for the bounds sweeps).
BOUNDED = [n for n, s in STATS.items() if s.numeric and n != "approx_bounds"]
#: The statistics that spend δ.
DELTA_STATS = [n for n, s in STATS.items() if s.uses_delta]


def _query(
    session: dp.Session,
    dataset: str,
    grouping: str,
    draw: int,
    aggregate: dp.Aggregate,
    *,
    empty: bool = False,
    group_cap: int = 1,
) -> dp.Query:
    query = session.dataset(dataset).query()
    # a filter true of every row (or of none): a new question per draw, so the Session draws again
    query = query.filter("age", ">", 119) if empty else query.filter("age", ">=", -(10**15) - draw)
    if grouping == "keys":
        query = query.group_by("region").max_groups_per_unit(group_cap)
    elif grouping == "select":
        query = query.group_by("team").max_groups_per_unit(group_cap)  # partition selection (δ)
    return query.agg(v=aggregate)


def _seed(case_id: str) -> int:
    """A fixed seed per case (stable across runs and workers)."""
    return int(hashlib.sha256(case_id.encode()).hexdigest()[:12], 16)


def _release(
    session: dp.Session,
    case_id: str,
    dataset: str,
    stat: str | tuple[str, Stat],
    *,
    epsilon: Any,
    delta: Any = None,
    grouping: str = "none",
    column: str = "hours",
    bounds: Any = None,
    empty: bool = False,
    group_cap: int = 1,
    draws: int = 2,
) -> None:
    stat, spec = (stat, STATS[stat]) if isinstance(stat, str) else stat
    if delta is None:
        delta = DELTA if spec.uses_delta or grouping == "select" else 0
    for draw in range(draws):
        what = (
            f"{stat} on {dataset!r} (column {column}, bounds={bounds}, {grouping}, empty={empty}) "
            f"at ε={epsilon!r}, δ={delta!r}, draw {draw}"
        )
        seed = _seed(f"{case_id}/{draw}")

        def run(draw: int = draw) -> dp.Release:
            aggregate = spec.make(column, bounds)
            query = _query(session, dataset, grouping, draw, aggregate, empty=empty, group_cap=group_cap)
            return session.release(query, epsilon=epsilon, delta=delta)

        attempt(session, dataset, run, seed=seed, what=what)


# ---------------------------------------------------------------------------------------------------
# the sweeps


def _ids(values: list[Any]) -> list[str]:
    return [f"{v!r}" for v in values]


def _stat_groupings(groupings: list[str]) -> list[Any]:
    """(grouping, statistic) pairs, the ungrouped-only statistics ungrouped only."""
    return [
        pytest.param(g, stat, id=f"{g}-{stat}")
        for g in groupings
        for stat in sorted(STATS)
        if g == "none" or not STATS[stat].ungrouped_only
    ]


@pytest.mark.parametrize("epsilon", EXTREME_EPSILONS, ids=_ids(EXTREME_EPSILONS))
@pytest.mark.parametrize(("grouping", "stat"), _stat_groupings(["none", "keys"]))
def test_epsilon_sweep(session: dp.Session, stat: str, epsilon: float, grouping: str) -> None:
    """Every statistic x mechanism at each extreme ε, ungrouped and grouped by public keys."""
    column = "age" if grouping == "keys" else "hours"  # an integer column on the grouped side
    _release(
        session, f"eps/{stat}/{epsilon}/{grouping}", "base", stat, epsilon=epsilon, grouping=grouping, column=column
    )


@pytest.mark.parametrize("stat", ["sum-gaussian"])
def test_gaussian_tiny_delta_on_wide_bounds(session: dp.Session, stat: str) -> None:
    """The analytic Gaussian's calibration at δ = 1e-300 over bounds [0, 9e299]."""
    _release(session, f"gauss/{stat}", "wide_positive", stat, epsilon=1e-9, delta=1e-300, draws=1)


DELTAS = [1e-300, 1e-100, 9e-4, 0.4999]  # 9e-4: just under the policy's δ rule; 0.4999: far above it


@pytest.mark.parametrize("delta", DELTAS, ids=_ids(DELTAS))
@pytest.mark.parametrize("epsilon", [1e-9, 1e3], ids=_ids([1e-9, 1e3]))
@pytest.mark.parametrize("stat", [*DELTA_STATS, "count-laplace@select"])
def test_delta_sweep(session: dp.Session, stat: str, epsilon: float, delta: float) -> None:
    """The mechanisms that spend δ (Gaussian, PTR, partition selection) at extreme δ."""
    grouping = "none"
    if stat.endswith("@select"):
        stat, grouping = stat.removesuffix("@select"), "select"
    dataset = "base"
    if delta == 9e-4:  # spends most of the δ budget (1e-3): a registration of its own
        dataset = _fresh(session, "base", f"d{abs(_seed(f'{stat}/{epsilon}/{grouping}'))}")
    _release(
        session,
        f"delta/{stat}/{epsilon}/{delta}",
        dataset,
        stat,
        epsilon=epsilon,
        delta=delta,
        grouping=grouping,
        draws=1,
    )


BOUND_DATASETS = ["wide", "wide_positive", "wide_1e15", "tiny", "narrow", "far", "point"]
BOUND_EPSILONS = [1e-9, 1.0, 1e100]


def _bounded_columns(columns: list[str]) -> list[Any]:
    """(column, statistic) pairs; min_distance reads the point column x (declared with the hours bounds)."""
    return [
        pytest.param(c, stat, id=f"{c}-{stat}")
        for c in columns
        for stat in BOUNDED
        if c == "hours" or not stat.startswith("min_distance")
    ]


@pytest.mark.parametrize("epsilon", BOUND_EPSILONS, ids=_ids(BOUND_EPSILONS))
@pytest.mark.parametrize("dataset", BOUND_DATASETS)
@pytest.mark.parametrize(("column", "stat"), _bounded_columns(["hours", "age"]))
def test_extreme_bounds(session: dp.Session, stat: str, dataset: str, epsilon: float, column: str) -> None:
    """The bounded statistics on datasets declared with extreme bounds (float and integer columns)."""
    _release(
        session, f"bounds/{stat}/{dataset}/{epsilon}/{column}", dataset, stat, epsilon=epsilon, column=column, draws=1
    )


OVERRIDES = {
    "width_1e-300": ("hours", (0, "1e-300")),
    "width_1e-12": ("hours", (1, 1 + 1e-12)),
    "far_above": ("hours", (1e15, 1e15 + 1)),
    "far_below": ("hours", (-1e299, -1e298)),
    "point": ("hours", (5, 5)),
    "integer_far": ("age", (10**15, 10**15 + 1)),
    "integer_point": ("age", (40, 40)),
}


@pytest.mark.parametrize("epsilon", [1e-9, 1e6], ids=_ids([1e-9, 1e6]))
@pytest.mark.parametrize(
    ("override", "stat"),
    [
        pytest.param(o, stat, id=f"{o}-{stat}")
        for o in sorted(OVERRIDES)
        for stat in BOUNDED
        if OVERRIDES[o][0] == "hours" or not stat.startswith("min_distance")
    ],
)
def test_extreme_bounds_overrides(session: dp.Session, stat: str, override: str, epsilon: float) -> None:
    """Per-query ``bounds=`` overrides (narrower than, or shifted off, the declared bounds)."""
    column, bounds = OVERRIDES[override]
    _release(
        session,
        f"override/{stat}/{override}/{epsilon}",
        "base",
        stat,
        epsilon=epsilon,
        column=column,
        bounds=bounds,
        draws=1,
    )


C_EPSILONS = [1e-300, 1e-9, 1e3]


@pytest.mark.parametrize("epsilon", C_EPSILONS, ids=_ids(C_EPSILONS))
@pytest.mark.parametrize("dataset", ["c1", "c_huge"])
@pytest.mark.parametrize("stat", sorted(STATS))
def test_extreme_contribution_bounds(session: dp.Session, stat: str, dataset: str, epsilon: float) -> None:
    """C = 1 and C = 2^40 rows per unit."""
    _release(session, f"c/{stat}/{dataset}/{epsilon}", dataset, stat, epsilon=epsilon, draws=1)


@pytest.mark.parametrize("epsilon", [1e-3, 1.0], ids=_ids([1e-3, 1.0]))
@pytest.mark.parametrize("stat", sorted(n for n, s in STATS.items() if not s.ungrouped_only))
@pytest.mark.parametrize("grouping", ["keys", "select"])
def test_huge_group_cap(session: dp.Session, stat: str, epsilon: float, grouping: str) -> None:
    """A query's max_groups_per_unit of 2^40 over 4 public keys and over privately selected keys."""
    _release(
        session,
        f"cap/{stat}/{epsilon}/{grouping}",
        "base",
        stat,
        epsilon=epsilon,
        grouping=grouping,
        group_cap=2**40,
        draws=1,
    )


QS = [0, 1e-300, Fraction(1, 4 * 10**18), 1 - 1e-16, 1]
Q_MECHANISMS = {
    "em_quantile": {},
    "inverse_sensitivity_order_statistic": {},
    "smooth_quantile": {},
    "ptr_order_statistic": {"proposed_bound": 1},
}
Q_EPSILONS = [1e-300, 1e-9, 1.0, 1e3, 1e100]


def _grouped_epsilons() -> list[Any]:
    """(grouping, ε) pairs: ε = 1e100 ungrouped only (a runaway there costs the whole deadline)."""
    return [
        pytest.param(g, e, id=f"{g}-{e!r}") for g in ("none", "keys") for e in Q_EPSILONS if g == "none" or e != 1e100
    ]


@pytest.mark.parametrize(("grouping", "epsilon"), _grouped_epsilons())
@pytest.mark.parametrize("q", QS, ids=_ids(QS))
@pytest.mark.parametrize("mechanism", sorted(Q_MECHANISMS))
def test_extreme_quantiles(session: dp.Session, mechanism: str, q: Any, epsilon: float, grouping: str) -> None:
    """quantile(q) at the edges of [0, 1], each quantile mechanism, at small and huge ε."""
    name = f"quantile-{mechanism}-{q!r}"
    spec = Stat(_quantile(q, mechanism=mechanism, **Q_MECHANISMS[mechanism]), mechanism.startswith("ptr"))
    _release(
        session, f"q/{name}/{epsilon}/{grouping}", "base", (name, spec), epsilon=epsilon, grouping=grouping, draws=1
    )


QUANTILE_LISTS: dict[str, list[Any]] = {
    "edges": [1e-300, 0.5, 1 - 1e-16],
    "tiny_pair": [Fraction(1, 4 * 10**18), Fraction(2, 4 * 10**18)],
    "percentiles": [i / 100 for i in range(1, 100)],
}


@pytest.mark.parametrize(("grouping", "epsilon"), _grouped_epsilons())
@pytest.mark.parametrize("qs", sorted(QUANTILE_LISTS))
def test_extreme_quantile_lists(session: dp.Session, qs: str, epsilon: float, grouping: str) -> None:
    """quantiles(...) with extreme lists (the recursive mechanism)."""
    name = f"quantiles-{qs}"
    spec = Stat(_quantiles(QUANTILE_LISTS[qs]))
    _release(
        session, f"qs/{name}/{epsilon}/{grouping}", "base", (name, spec), epsilon=epsilon, grouping=grouping, draws=1
    )


TRIMS = [0, 1e-300, 0.4999999999]
TRIM_MECHANISMS = {
    "smooth_trimmed_mean": {},
    "inverse_sensitivity_trimmed_mean": {},
    "ptr_trimmed_mean": {"proposed_bound": 1},
}


@pytest.mark.parametrize("epsilon", [1e-9, 1.0, 1e6], ids=_ids([1e-9, 1.0, 1e6]))
@pytest.mark.parametrize("trim", TRIMS, ids=_ids(TRIMS))
@pytest.mark.parametrize("mechanism", sorted(TRIM_MECHANISMS))
@pytest.mark.parametrize("dataset", ["base", "ties", "one"])
def test_extreme_trims(session: dp.Session, mechanism: str, trim: float, epsilon: float, dataset: str) -> None:
    """trimmed_mean with trim fractions at 0, 1e-300 and just below 1/2."""
    name = f"trimmed_mean-{mechanism}-{trim!r}"
    spec = Stat(_trimmed(trim, mechanism=mechanism, **TRIM_MECHANISMS[mechanism]), mechanism.startswith("ptr"))
    _release(session, f"trim/{name}/{epsilon}/{dataset}", dataset, (name, spec), epsilon=epsilon, draws=1)


DEGENERATE = ["ties", "whale", "nan", "one", "empty"]


@pytest.mark.parametrize("epsilon", [1e-17, 1e6], ids=_ids([1e-17, 1e6]))
@pytest.mark.parametrize(
    ("view", "grouping", "stat"),
    [  # partition selection (select) on the whale and the empty view only
        pytest.param(v, *p.values, id=f"{v}-{p.id}")
        for v in DEGENERATE
        for p in _stat_groupings(["none", "keys", "select"])
        if p.values[0] != "select" or v in ("whale", "empty")
    ],
)
def test_degenerate_data_at_extreme_epsilon(
    session: dp.Session, stat: str, view: str, epsilon: float, grouping: str
) -> None:
    """Degenerate views (ties, a whale, NaN rows, one record, an empty filter) at a tiny and a huge ε."""
    dataset, empty = ("base", True) if view == "empty" else (view, False)
    _release(
        session,
        f"degenerate/{stat}/{view}/{epsilon}/{grouping}",
        dataset,
        stat,
        epsilon=epsilon,
        grouping=grouping,
        empty=empty,
        draws=1,
    )


SQL = {
    "count": "SELECT COUNT(*) AS v FROM {d} WHERE age >= {i}",
    "sum": "SELECT SUM(hours) AS v FROM {d} WHERE age >= {i}",
    "mean_grouped": "SELECT region, AVG(hours) AS v FROM {d} WHERE age >= {i} GROUP BY region",
    "median": "SELECT MEDIAN(age) AS v FROM {d} WHERE age >= {i}",
    "quantile": "SELECT PERCENTILE_CONT(0.9) WITHIN GROUP (ORDER BY age) AS v FROM {d} WHERE age >= {i}",
    "variance": "SELECT VAR_POP(hours) AS v FROM {d} WHERE age >= {i}",
}


@pytest.mark.parametrize("epsilon", [1e-300, 1e-17, 1e6, 1e100], ids=_ids([1e-300, 1e-17, 1e6, 1e100]))
@pytest.mark.parametrize("sql", sorted(SQL))
@pytest.mark.parametrize("dataset", ["base", "wide"])
def test_sql_at_extreme_epsilon(session: dp.Session, sql: str, epsilon: float, dataset: str) -> None:
    """SQL releases at extreme ε (the SQL front end plans the same statistics)."""
    for draw in range(2):
        text = SQL[sql].format(d=dataset, i=-(10**15) - draw)
        attempt(
            session,
            dataset,
            partial(session.sql, text, epsilon=epsilon),
            seed=_seed(f"sql/{sql}/{epsilon}/{dataset}/{draw}"),
            what=f"SQL {text!r} at ε={epsilon!r}",
        )
