"""An undirected simple graph on a public vertex set [n], validated without revealing its edges.

Used by the triangle-count sensitivities (``dpsense.sensitivity.triangles``). Error messages and the
repr never contain an edge: the edge set is private under edge-level privacy.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeAlias

import numpy as np
import numpy.typing as npt

from dpsense.core.checks import integer_in
from dpsense.core.errors import InvalidData, UsageError

IntArray: TypeAlias = npt.NDArray[np.int64]
# scipy ships no type information: a sparse matrix or array is ``Any`` to mypy.
GraphLike: TypeAlias = "UndirectedGraph | Any"

_WITHHELD = "withheld: private edge data"


def _check_num_vertices(num_vertices: object) -> int:
    if isinstance(num_vertices, np.integer):
        num_vertices = int(num_vertices)
    if not integer_in(num_vertices, 0):
        raise UsageError(
            "the public vertex count must be an integer >= 0",
            num_vertices,
            "declare n from public knowledge of the vertex set, never from the largest vertex id",
        )
    return num_vertices


class UndirectedGraph:
    """A validated simple undirected graph on the public vertex set [n] (canonical symmetric 0/1 CSR).

    Duplicate edges, in either orientation, are merged. The representation never shows the edges: its
    ``repr`` prints only the public n. Build it with ``UndirectedGraph(edges, num_vertices=n)`` or
    ``UndirectedGraph.from_adjacency(matrix)``.
    """

    __slots__ = ("_adjacency", "_num_vertices", "_structure")

    def __init__(self, edges: npt.ArrayLike, *, num_vertices: int) -> None:
        """Validate an edge list (integer array of shape (m, 2)) on the public vertex set [num_vertices].

        Raises:
            UsageError: if ``num_vertices`` is not an integer >= 0.
            InvalidData: if the edges are not an (m, 2) integer array, contain a self loop or a vertex
                outside [0, n). Messages never contain an edge.

        """
        n = _check_num_vertices(num_vertices)
        arr = np.asarray(edges)
        if arr.size == 0 and (arr.ndim == 1 or (arr.ndim == 2 and arr.shape[1] == 2)):
            empty = np.zeros(0, dtype=np.int64)
            self._init(empty, empty, n)
            return
        if arr.ndim != 2 or arr.shape[1] != 2:
            raise InvalidData(
                "an edge list must be an array of shape (m, 2)", f"a {arr.ndim}-d array", "pass one (u, v) row per edge"
            )
        if arr.dtype.kind not in "iu":
            raise InvalidData("edge endpoints must be integers", f"dtype {arr.dtype}", "pass vertex ids in [0, n)")
        if bool(np.any(arr < 0)) or bool(np.any(arr >= n)):
            raise InvalidData(
                f"every vertex id must lie in [0, {n})", _WITHHELD, "declare the full public vertex set as num_vertices"
            )
        u, v = arr[:, 0].astype(np.int64), arr[:, 1].astype(np.int64)
        if bool(np.any(u == v)):
            raise InvalidData("a simple graph has no self loops", _WITHHELD, "drop edges (v, v) before the analysis")
        self._init(np.minimum(u, v), np.maximum(u, v), n)

    def _init(self, lo: IntArray, hi: IntArray, n: int) -> None:
        rows, cols = np.concatenate([lo, hi]), np.concatenate([hi, lo])
        import scipy.sparse as sp  # imported when first used: scipy costs a CLI's start

        adj = sp.csr_array((np.ones(rows.size, dtype=np.int64), (rows, cols)), shape=(n, n))
        adj.sum_duplicates()
        adj.data = np.ones(adj.data.size, dtype=np.int64)
        adj.sort_indices()
        self._adjacency = adj
        self._num_vertices = n
        self._structure: Any = None

    @classmethod
    def from_adjacency(cls, matrix: Any) -> UndirectedGraph:
        """Validate a square symmetric 0/1 adjacency matrix (scipy sparse or dense); n is its side.

        Stored duplicates (COO) are merged and explicit zeros ignored.

        Raises:
            InvalidData: if the matrix is not square, has an entry other than 0/1, a nonzero diagonal (self
                loop) or is not symmetric. Messages never contain an edge.

        """
        import scipy.sparse as sp  # imported when first used: scipy costs a CLI's start

        if sp.issparse(matrix):
            coo = sp.coo_array(matrix)
        else:
            dense = np.asarray(matrix)
            if dense.ndim != 2:
                raise InvalidData("an adjacency matrix must be 2-d", f"a {dense.ndim}-d array", "pass an n x n matrix")
            coo = sp.coo_array(dense)
        if coo.ndim != 2 or coo.shape[0] != coo.shape[1]:
            raise InvalidData("an adjacency matrix must be square", f"shape {coo.shape}", "pass an n x n matrix")
        n = int(coo.shape[0])
        values = np.asarray(coo.data)
        if values.dtype.kind not in "biuf":
            raise InvalidData("adjacency entries must be 0 or 1", f"dtype {values.dtype}", "pass a 0/1 matrix")
        present = values != 0
        if not bool(np.all(values[present] == 1)):
            raise InvalidData("adjacency entries must be 0 or 1", _WITHHELD, "pass the 0/1 pattern of the graph")
        rows, cols = np.asarray(coo.row, dtype=np.int64)[present], np.asarray(coo.col, dtype=np.int64)[present]
        if bool(np.any(rows == cols)):
            raise InvalidData("a simple graph has no self loops", _WITHHELD, "zero the diagonal before the analysis")
        pattern = sp.csr_array((np.ones(rows.size, dtype=np.int64), (rows, cols)), shape=(n, n))
        pattern.sum_duplicates()
        pattern.data = np.ones(pattern.data.size, dtype=np.int64)
        asymmetry = pattern - pattern.T
        asymmetry.eliminate_zeros()
        if asymmetry.nnz:
            raise InvalidData(
                "an undirected adjacency matrix must be symmetric", _WITHHELD, "pass A + A.T or an edge list"
            )
        graph = cls.__new__(cls)
        graph._init(np.minimum(rows, cols), np.maximum(rows, cols), n)
        return graph

    @property
    def num_vertices(self) -> int:
        """The public n."""
        return self._num_vertices

    @property
    def adjacency(self) -> Any:
        """A copy of the canonical symmetric 0/1 CSR adjacency (int64). Private data: never release it."""
        return self._adjacency.copy()

    def __repr__(self) -> str:
        return f"UndirectedGraph(num_vertices={self._num_vertices}, edges=<private>)"

    def derived(self, compute: Callable[[Any, int], Any]) -> Any:
        """A structure computed from the edges once per graph (``compute(adjacency, n)``), memoised."""
        if self._structure is None:
            self._structure = compute(self._adjacency, self._num_vertices)
        return self._structure


def as_graph(graph: GraphLike) -> UndirectedGraph:
    """An ``UndirectedGraph`` as is, or a validated one built from a scipy sparse adjacency matrix.

    Raises:
        UsageError: for a bare edge list or anything else (an edge list needs the public n).
        InvalidData: from ``UndirectedGraph.from_adjacency``.

    """
    import scipy.sparse as sp  # imported when first used: scipy costs a CLI's start

    if isinstance(graph, UndirectedGraph):
        return graph
    if sp.issparse(graph):
        return UndirectedGraph.from_adjacency(graph)
    raise UsageError(
        "a graph must be an UndirectedGraph or a scipy sparse adjacency matrix",
        type(graph).__name__,
        "wrap an edge list as UndirectedGraph(edges, num_vertices=n) with the public vertex count n",
    )
