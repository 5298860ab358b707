"""The synthetic benchmark panel of ``benchmarks/estimators.py``: public, deterministic, seed ``PANEL_SEED``.

Every dataset is drawn once from numpy's ``Generator`` (PCG64) seeded by a child of
``SeedSequence(PANEL_SEED)``, so the panel is identical on every machine and run. It is synthetic
public data: the benchmark may look at it freely (true values, errors), a release may not.

Each 1-D dataset carries the PUBLIC domain [L, U] a release would declare (chosen from the kind of
variable, never from the draw):

=========  =====  ==============  ============================================================================
name       n      domain          distribution
=========  =====  ==============  ============================================================================
ages       1000   [0, 120]        integers: 70 % N(40, 15), 30 % U(0, 90), rounded and clipped
incomes    1000   [0, 1e6]        lognormal, median 45 000, sigma 0.9, clipped
heavy      1000   [0, 1e6]        995 x N(50, 10) clipped at 0, plus 5 outliers log-uniform on [1e3, 1e5]
cluster    1000   [0, 120]        U(20, 50) (continuous)
small       101   [0, 120]        N(45, 15), clipped
=========  =====  ==============  ============================================================================

plus ``points`` (n = 200 uniform points in the box [0, 1]^2, for the minimum pairwise distance) and
``graph`` (1 000 vertices, 5 000 distinct uniformly random edges plus 100 triangles planted on disjoint
random vertex triples, for the triangle count, edge-level privacy).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from dpsense.sensitivity.triangles import UndirectedGraph, triangle_count

PANEL_SEED = 20_240_917

GRAPH_VERTICES = 1000
GRAPH_RANDOM_EDGES = 5000
GRAPH_PLANTED_TRIANGLES = 100
POINTS_N = 200


@dataclass(frozen=True)
class Dataset1D:
    """A 1-D dataset with its public domain [low, high]."""

    name: str
    values: NDArray[np.float64]
    low: float
    high: float
    description: str

    @property
    def n(self) -> int:
        return int(self.values.size)

    @property
    def width(self) -> float:
        return self.high - self.low


@dataclass(frozen=True)
class PointSet:
    """Points in the public box [low, high]^d."""

    name: str
    points: NDArray[np.float64]
    low: float
    high: float
    description: str


@dataclass(frozen=True)
class GraphData:
    """A simple undirected graph on the public vertex set [n]."""

    name: str
    graph: UndirectedGraph
    num_vertices: int
    num_edges: int
    triangles: int
    description: str


def _generators(count: int) -> list[np.random.Generator]:
    return [np.random.default_rng(s) for s in np.random.SeedSequence(PANEL_SEED).spawn(count)]


def _ages(rng: np.random.Generator, n: int = 1000) -> NDArray[np.float64]:
    bulk = rng.normal(40.0, 15.0, n)
    spread = rng.uniform(0.0, 90.0, n)
    raw = np.where(rng.random(n) < 0.7, bulk, spread)
    return np.clip(np.round(raw), 0, 120).astype(np.float64)


def _incomes(rng: np.random.Generator, n: int = 1000) -> NDArray[np.float64]:
    return np.clip(rng.lognormal(np.log(45_000.0), 0.9, n), 0.0, 1e6)


def _heavy(rng: np.random.Generator, n: int = 1000, outliers: int = 5) -> NDArray[np.float64]:
    bulk = np.clip(rng.normal(50.0, 10.0, n - outliers), 0.0, None)
    tail = np.exp(rng.uniform(np.log(1e3), np.log(1e5), outliers))
    values = np.concatenate([bulk, tail])
    rng.shuffle(values)
    return values


def _cluster(rng: np.random.Generator, n: int = 1000) -> NDArray[np.float64]:
    return rng.uniform(20.0, 50.0, n)


def _small(rng: np.random.Generator, n: int = 101) -> NDArray[np.float64]:
    return np.clip(rng.normal(45.0, 15.0, n), 0.0, 120.0)


def _graph(rng: np.random.Generator) -> tuple[NDArray[np.int64], int]:
    n = GRAPH_VERTICES
    seen: set[tuple[int, int]] = set()
    while len(seen) < GRAPH_RANDOM_EDGES:
        u, v = (int(a) for a in rng.integers(0, n, 2))
        if u != v:
            seen.add((min(u, v), max(u, v)))
    triples = rng.permutation(n)[: 3 * GRAPH_PLANTED_TRIANGLES].reshape(-1, 3)
    for a, b, c in triples.tolist():
        for u, v in ((a, b), (b, c), (a, c)):
            seen.add((min(u, v), max(u, v)))
    edges = np.array(sorted(seen), dtype=np.int64)
    return edges, n


def build_panel() -> tuple[list[Dataset1D], PointSet, GraphData]:
    """The whole panel, deterministic in ``PANEL_SEED``."""
    g = _generators(7)
    one_d = [
        Dataset1D("ages", _ages(g[0]), 0.0, 120.0, "integer ages, mixture N(40,15)/U(0,90), n=1000, [0,120]"),
        Dataset1D("incomes", _incomes(g[1]), 0.0, 1e6, "lognormal incomes, median 45k, sigma 0.9, n=1000, [0,1e6]"),
        Dataset1D("heavy", _heavy(g[2]), 0.0, 1e6, "995 x N(50,10) + 5 outliers log-U[1e3,1e5], n=1000, [0,1e6]"),
        Dataset1D("cluster", _cluster(g[3]), 0.0, 120.0, "tight cluster U(20,50), n=1000, [0,120]"),
        Dataset1D("small", _small(g[4]), 0.0, 120.0, "small N(45,15), n=101, [0,120]"),
    ]
    pts = PointSet("unif2d", g[5].random((POINTS_N, 2)), 0.0, 1.0, f"{POINTS_N} uniform points in [0,1]^2")
    edges, n = _graph(g[6])
    graph = UndirectedGraph(edges, num_vertices=n)
    gd = GraphData(
        "sparse1000",
        graph,
        n,
        int(edges.shape[0]),
        triangle_count(graph),
        f"{n} vertices, {GRAPH_RANDOM_EDGES} random edges + {GRAPH_PLANTED_TRIANGLES} planted triangles",
    )
    return one_d, pts, gd
