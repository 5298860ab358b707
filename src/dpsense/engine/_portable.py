"""The portable rules: bounding, unit index and fingerprint text that DuckDB and Spark compute alike.

DuckDB's default bounding orders rows by its own 64-bit ``hash()``, which Spark cannot compute. The
portable mode (``DuckDBEngine(portable=True)``; ``SparkEngine`` always) replaces every engine-specific
hash by SHA-256 of a text both engines spell the same, and every wide integer step by arithmetic that
fits in a signed 64-bit integer, so that the same data, salt and request keep the same rows on both.

Rules (``K`` is a 128-bit key in hex, derived from the caller's salt or index key by HMAC-SHA256 in
Python, one per purpose; ``u`` is the unit as text, ``CAST(unit AS VARCHAR)`` / ``cast(unit as
string)``, identical for integer and string columns, the only kinds allowed for units and capped
group columns in this mode):

* Row identity. ``rh``, the first 60 bits of the MD5 of the row's text (the injective text of the
  fingerprint: values joined by commas, ``-`` for NULL, strings length-prefixed, floats as below),
  computed from the snapshot's current content whenever a bound or an index needs it, never stored.
  Within a unit, identical rows share it and are told apart by ``j``, the copy number
  (``row_number - rank + 1`` over the unit's rows ordered by ``rh``; which copy is which does not
  matter, they are identical). So (``rh``, ``j``) names each row by its content: a unit's choice
  depends on its own rows as a multiset and the secret key only, never on the physical row order
  nor on other units, which is the stability argument of ``Engine.bounded_rows``. ``rh`` only names
  content (no key, never output; two different rows of one unit colliding, probability about
  n_u**2 / 2**61, merely lets physical order decide between those two), so the cheaper MD5 serves.
* Keyed orders: ``H(K, a, b, ...)`` is the first 60 bits of ``sha256(K || '|' || a || '|' || b ...)``
  as a BIGINT (integers sort faster than hex text), ties broken by the fields that follow.
* Windowed bound: the unit's rows are ranked by ``H(K_rows, u, rh, j)``, then ``rh``, ``j`` (``rh`` and
  ``j`` spelled in decimal) and the first C stay: a uniformly random C-subset of the unit's rows
  given a fresh salt, each copy of an identical row an independent draw. With a group cap, each
  unit's distinct groups are ranked first by ``H(K_groups, u, g)``, then ``g`` (``g`` is ``'-'``
  for NULL and ``':' || text`` otherwise) and the first G stay; a group of several columns is
  ranked by ``H(K_groups, u, g1, g2, ...)``, then ``g1``, ``g2``, ... (each spelled so).
* Unit index (``index_units``): positions 0..n_u-1 by ``H(K_index, u, rh)``, then ``rh``
  (identical rows tie and take adjacent positions in either engine's order, which no release can
  tell apart: the copies are identical), n_u, and ``uh = H(K_unit, u)``. A release keeps the rows
  with ``(pos + r_u) mod n_u < C`` where ``r_u = r1 * P + r2``, ``P = 2**31 - 1``,
  ``r1 = (a1*hi + a2*lo + b1) mod P``, ``r2 = (a3*hi + a4*lo + b2) mod P``, ``hi = uh >> 30``,
  ``lo = uh & (2**30 - 1)`` and the six keys ``a*, b* < P`` derived from the salt. Every product
  is below 2**61, so no engine overflows or wraps. For a fresh salt, ``b1`` and ``b2`` make ``r_u``
  uniform on [0, P**2) (P**2 > 2**61.9), so ``r_u mod n_u`` is uniform on 0..n_u-1 up to a bias
  below n_u / 2**61.9; the family is pairwise independent across units (a linear hash over the
  prime field), which is all the accuracy argument uses. Privacy does not depend on it.
* Fingerprint text of a float: ``'nan'``, ``'inf'``, ``'-inf'``, ``'0'``, ``'-0'``, or
  ``<m>p<s>`` with ``x = m * 2**s`` exactly, ``s = max(e, -1022) - 52`` and ``2**e <= |x| <
  2**(e+1)``: an integer pair found with log2, powers of two and exact scaling, the same in every
  IEEE-754 engine (a decimal text of a double differs between DuckDB and Java).

The keys are the only secrets that reach the engine; they appear in no catalog. On Spark they are
literals of the query plan (visible to whoever can read that cluster's plans, who can read the data
too); the salt itself never leaves Python.
"""

from __future__ import annotations

import hashlib
import hmac

from dpsense.core.errors import UnsupportedRequest
from dpsense.engine._types import ColumnInfo

#: The row-content hash ``rh`` (60 bits of MD5, a BIGINT), a working column of bounds and indexes.
ROW_HASH = "__dps_rh"
#: Hex digits of a digest kept in an integer (60 bits: a non-negative BIGINT in every engine).
HEX_DIGITS = 15
#: Hidden columns of a portable unit index, in table order after the public columns.
POSITION, UNIT_ROWS, UNIT_HASH = "__dps_pos", "__dps_n", "__dps_uh"
INDEX_COLUMNS = (POSITION, UNIT_ROWS, UNIT_HASH)
#: The Mersenne prime of the rotation hash.
PRIME = (1 << 31) - 1
#: Bits of ``uh`` below the split into ``hi`` and ``lo``.
HALF_BITS = 30
HALF_MASK = (1 << HALF_BITS) - 1
#: The six rotation keys, in the order of ``rotation_keys``.
ROTATION_KEYS = ("a1", "a2", "b1", "a3", "a4", "b2")
#: Column kinds whose text is the same in DuckDB and Spark (units and capped groups need one).
TEXT_KINDS = frozenset({"integer", "string"})


def text_key(secret: bytes, purpose: str) -> str:
    """A 128-bit key in hex, ``HMAC-SHA256(secret, "dpsense/portable/<purpose>")``: one key, one job."""
    return hmac.new(secret, f"dpsense/portable/{purpose}".encode(), hashlib.sha256).hexdigest()[:32]


def rotation_keys(salt: bytes) -> dict[str, int]:
    """The six keys of the rotation hash, each uniform on [0, P) up to a bias below 2**-32."""
    out = {}
    for name in ROTATION_KEYS:
        digest = hmac.new(salt, f"dpsense/portable/rotation/{name}".encode(), hashlib.sha256).digest()
        out[name] = int.from_bytes(digest[:8], "big") % PRIME
    return out


def require_text_column(column: ColumnInfo, role: str) -> None:
    """Refuse a unit or capped group column whose text may differ between engines (judged from the schema)."""
    if column.kind not in TEXT_KINDS:
        raise UnsupportedRequest(
            f"in portable mode the {role} column must be an integer or string column",
            f"{column.name} ({column.sql_type})",
            "cast the column to an integer or a string at registration, or use the engine's default mode",
        )
