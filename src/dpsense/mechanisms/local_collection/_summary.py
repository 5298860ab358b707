"""Additive sufficient statistics of local-DP reports: strict report validation, merge, strict JSON.

A ``Summary`` holds, per scheme, the counters every estimator needs (docs/math/local-collection.md §13.3):
RAPPOR per-cohort bit counts and cohort sizes; CMS per-hash bucket counts of 1-bits and hash sizes;
HCMS per (hash, coordinate) signed sums; k-RR counts per entry; OUE 1-bit counts per entry; the
prefix scheme per-level CMS counters. Summaries of disjoint report batches add up exactly (``merge``),
so a server can store one per ingested batch and sum them at estimation time. Building one is
post-processing of the reports (Dwork-Roth Prop. 2.1): no privacy cost.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray
from scipy import sparse

from dpsense.core.errors import InvalidData, UsageError
from dpsense.device.schemes import (
    CmsScheme,
    HcmsScheme,
    KrrScheme,
    OueScheme,
    RapporScheme,
    Scheme,
    describe_value,
)

I64 = NDArray[np.int64]
#: The most reports one summary may count (counters stay exact in int64 and in float64 estimates).
MAX_REPORTS = 1 << 40
#: Reports unpacked per pass when summarizing bit vectors (bounds temporary memory).
_CHUNK_REPORTS = 1 << 13
#: Batches up to this size are counted without the sparse product.
_SMALL_BATCH = 64
_HEX = re.compile(r"[0-9a-f]*")


# -----------------------------------------------------------------------------------------------
# Layouts: the counters of each scheme and the report fields they come from
# -----------------------------------------------------------------------------------------------


def layout(scheme: Scheme) -> dict[str, tuple[int, ...]]:
    """The name and shape of every counter array of the scheme's summary."""
    if isinstance(scheme, RapporScheme):
        return {"cohort_n": (scheme.num_cohorts,), "ones": (scheme.num_cohorts, scheme.num_bits)}
    if isinstance(scheme, CmsScheme):
        return {"hash_n": (scheme.num_hashes,), "ones": (scheme.num_hashes, scheme.num_buckets)}
    if isinstance(scheme, HcmsScheme):
        return {"sums": (scheme.num_hashes, scheme.num_buckets)}
    if isinstance(scheme, KrrScheme):
        return {"counts": (len(scheme.dictionary),)}
    if isinstance(scheme, OueScheme):
        return {"ones": (len(scheme.dictionary),)}
    t, k, m = scheme.levels, scheme.num_hashes, scheme.num_buckets
    return {"level_n": (t,), "hash_n": (t, k), "ones": (t, k, m)}


def _report_fields(scheme: Scheme) -> list[tuple[str, str, int]]:
    """(field, "int" or "bits", bound): an int field lies in [0, bound); a bits field has ``bound`` bits."""
    if isinstance(scheme, RapporScheme):
        return [("cohort", "int", scheme.num_cohorts), ("bits", "bits", scheme.num_bits)]
    if isinstance(scheme, CmsScheme):
        return [("hash", "int", scheme.num_hashes), ("bits", "bits", scheme.num_buckets)]
    if isinstance(scheme, HcmsScheme):
        return [("hash", "int", scheme.num_hashes), ("coordinate", "int", scheme.num_buckets), ("bit", "int", 2)]
    if isinstance(scheme, KrrScheme):
        return [("index", "int", len(scheme.dictionary))]
    if isinstance(scheme, OueScheme):
        return [("bits", "bits", len(scheme.dictionary))]
    return [("level", "int", scheme.levels), ("hash", "int", scheme.num_hashes), ("bits", "bits", scheme.num_buckets)]


@dataclass(frozen=True, eq=False)
class Summary:
    """The additive sufficient statistics of a batch of reports for one scheme (post-processing: no cost).

    Attributes:
        kind: the scheme's kind ("rappor", "cms", "hcms", "krr", "oue", "prefix").
        fingerprint: the scheme's fingerprint; summaries of different schemes never merge.
        n: the number of reports counted.
        counts: the counter arrays (int64), named and shaped as ``layout(scheme)``.

    """

    kind: str
    fingerprint: str
    n: int
    counts: Mapping[str, I64]

    def merge(self, other: Summary) -> Summary:
        """The summary of both batches (counters add up exactly)."""
        if not isinstance(other, Summary) or (other.kind, other.fingerprint) != (self.kind, self.fingerprint):
            raise UsageError(
                "only summaries of one scheme merge",
                f"{self.kind}/{self.fingerprint[:12]} and {getattr(other, 'kind', type(other).__name__)}",
                "merge summaries built with the same scheme",
            )
        if self.n + other.n > MAX_REPORTS:
            raise UsageError(f"a summary counts at most {MAX_REPORTS} reports", self.n + other.n, "split the data")
        return Summary(
            self.kind, self.fingerprint, self.n + other.n, {k: v + other.counts[k] for k, v in self.counts.items()}
        )

    def to_json(self) -> dict[str, Any]:
        """``{"scheme": kind, "fingerprint": hex, "n": int, "counts": {name: nested lists of ints}}``."""
        counts = {name: array.tolist() for name, array in self.counts.items()}
        return {"scheme": self.kind, "fingerprint": self.fingerprint, "n": self.n, "counts": counts}

    @classmethod
    def empty(cls, scheme: Scheme) -> Summary:
        """The summary of no reports."""
        zeros = {name: np.zeros(shape, dtype=np.int64) for name, shape in layout(scheme).items()}
        return cls(scheme.kind, scheme.fingerprint(), 0, zeros)

    @classmethod
    def from_json(cls, scheme: Scheme, obj: object) -> Summary:
        """Rebuild a summary of ``scheme`` from JSON, strictly (``InvalidData`` naming the field otherwise).

        Checks the scheme and fingerprint, the exact key sets, every shape, that every counter is a JSON
        integer (never a bool or a float), and the counters' consistency (each within [0, its size]).
        """
        fix = "pass the dict of Summary.to_json() for this scheme"
        if not isinstance(obj, Mapping) or set(obj) != {"scheme", "fingerprint", "n", "counts"}:
            raise InvalidData(
                "a summary must be an object with keys scheme, fingerprint, n, counts", describe_value(obj), fix
            )
        if obj["scheme"] != scheme.kind or obj["fingerprint"] != scheme.fingerprint():
            raise InvalidData(
                "summary: scheme or fingerprint differs from the scheme's", describe_value(obj["scheme"]), fix
            )
        n = obj["n"]
        if type(n) is not int or not 0 <= n <= MAX_REPORTS:
            raise InvalidData(f"summary: field 'n' must be an integer in [0, {MAX_REPORTS}]", describe_value(n), fix)
        shapes = layout(scheme)
        raw = obj["counts"]
        if not isinstance(raw, Mapping) or set(raw) != set(shapes):
            raise InvalidData(
                f"summary: 'counts' must have exactly the keys {sorted(shapes)}", describe_value(raw), fix
            )
        counts = {name: _int_array(f"counts.{name}", raw[name], shape) for name, shape in shapes.items()}
        summary = cls(scheme.kind, scheme.fingerprint(), n, counts)
        _check_consistent(scheme, summary)
        return summary


def _int_array(field: str, value: object, shape: tuple[int, ...]) -> I64:
    """A nested list of JSON integers of exactly ``shape``, as int64."""
    flat: list[object] = [value]
    for depth, size in enumerate(shape):
        nxt: list[object] = []
        for item in flat:
            if not isinstance(item, list) or len(item) != size:
                raise InvalidData(
                    f"summary: {field} must be nested lists of shape {shape}",
                    f"{describe_value(item)} at depth {depth}",
                    "pass the counters of Summary.to_json() for this scheme",
                )
            nxt.extend(item)
        flat = nxt
    if not all(type(x) is int and -MAX_REPORTS <= x <= MAX_REPORTS for x in flat):  # type(x) is int: no bools
        raise InvalidData(f"summary: {field} must hold integers only", "a non-integer entry", "pass integer counters")
    return np.array(flat, dtype=np.int64).reshape(shape)


def _check_consistent(scheme: Scheme, s: Summary) -> None:
    """Every counter lies in [0, the number of reports it counts], and the sizes add up to n."""
    c, n = s.counts, s.n
    checks: list[tuple[str, bool]]
    if isinstance(scheme, RapporScheme):
        checks = [
            ("cohort_n sums to n", int(c["cohort_n"].sum()) == n and bool((c["cohort_n"] >= 0).all())),
            ("0 <= ones <= cohort_n", bool(((c["ones"] >= 0) & (c["ones"] <= c["cohort_n"][:, None])).all())),
        ]
    elif isinstance(scheme, CmsScheme):
        checks = [
            ("hash_n sums to n", int(c["hash_n"].sum()) == n and bool((c["hash_n"] >= 0).all())),
            ("0 <= ones <= hash_n", bool(((c["ones"] >= 0) & (c["ones"] <= c["hash_n"][:, None])).all())),
        ]
    elif isinstance(scheme, HcmsScheme):
        checks = [("sum of |sums| <= n", int(np.abs(c["sums"]).sum()) <= n)]
    elif isinstance(scheme, KrrScheme):
        checks = [("counts are >= 0 and sum to n", int(c["counts"].sum()) == n and bool((c["counts"] >= 0).all()))]
    elif isinstance(scheme, OueScheme):
        checks = [("0 <= ones <= n", bool(((c["ones"] >= 0) & (c["ones"] <= n)).all()))]
    else:
        level_n, hash_n, ones = c["level_n"], c["hash_n"], c["ones"]
        checks = [
            ("level_n sums to n", int(level_n.sum()) == n and bool((level_n >= 0).all())),
            ("hash_n sums to level_n", bool((hash_n.sum(axis=1) == level_n).all() and (hash_n >= 0).all())),
            ("0 <= ones <= hash_n", bool(((ones >= 0) & (ones <= hash_n[:, :, None])).all())),
        ]
    for rule, ok in checks:
        if not ok:
            raise InvalidData(
                f"summary: the counters are inconsistent ({rule} fails)", "counters", "pass an unaltered summary"
            )


# -----------------------------------------------------------------------------------------------
# summarize: strict validation of every report, then vectorised counting
# -----------------------------------------------------------------------------------------------


def _bad(index: int, field: str, rule: str, value: object) -> InvalidData:
    return InvalidData(
        f"report {index}: field {field!r} {rule}",
        describe_value(value),
        "send reports exactly as the device client makes them",
    )


def _int_below(bound: int) -> Callable[[object], bool]:
    return lambda v: type(v) is int and 0 <= v < bound  # type(v) is int: no bools, no numpy integers


def _hex_of(length: int) -> Callable[[object], bool]:
    return lambda v: type(v) is str and len(v) == length and _HEX.fullmatch(v) is not None


def _first_bad(name: str, col: list[Any], ok: Callable[[object], bool], rule: str) -> InvalidData:
    index = next(i for i, v in enumerate(col) if not ok(v))
    return _bad(index, name, rule, col[index])


def _check_column(name: str, what: str, bound: int, col: list[Any]) -> None:
    """Check a whole column at C speed; on a failure, find and name the first bad report."""
    if what == "int":
        rule, ok = f"must be an integer in [0, {bound})", _int_below(bound)
        if set(map(type, col)) - {int}:  # bools, floats, numpy integers, strings...
            raise _first_bad(name, col, ok, rule)
        if col and not 0 <= min(col) <= max(col) < bound:
            raise _first_bad(name, col, ok, rule)
        return
    length = 2 * ((bound + 7) // 8)
    rule, ok = f"must be a string of {length} lowercase hex digits ({bound} bits)", _hex_of(length)
    if set(map(type, col)) - {str} or set(map(len, col)) - {length} or not _HEX.fullmatch("".join(col)):
        raise _first_bad(name, col, ok, rule)


def _columns(scheme: Scheme, reports: Sequence[Mapping[str, Any]]) -> dict[str, list[Any]]:
    """Validate every report and return its fields column by column."""
    spec = _report_fields(scheme)
    keys = {name for name, _, _ in spec}
    names = [name for name, _, _ in spec]
    for i, report in enumerate(reports):
        if (type(report) is not dict and not isinstance(report, Mapping)) or report.keys() != keys:
            got = sorted(str(k)[:20] for k in report)[:8] if isinstance(report, Mapping) else describe_value(report)
            raise InvalidData(
                f"report {i} must be an object with exactly the keys {sorted(keys)}",
                got,
                "send reports exactly as the device client makes them",
            )
    cols = {name: [report[name] for report in reports] for name in names}
    for name, what, bound in spec:
        _check_column(name, what, bound, cols[name])
    return cols


def _unpack(hexes: list[str], num_bits: int, start: int) -> NDArray[np.uint8]:
    """The (len(hexes), num_bits) 0/1 matrix of a chunk; refuses set padding bits (naming the report)."""
    width = (num_bits + 7) // 8
    raw = np.frombuffer(bytes.fromhex("".join(hexes)), dtype=np.uint8).reshape(len(hexes), width)
    bits = np.unpackbits(raw, axis=1, bitorder="little")
    if num_bits % 8:
        padded = np.flatnonzero(bits[:, num_bits:].any(axis=1))
        if padded.size:
            raise _bad(start + int(padded[0]), "bits", f"has padding bits set beyond bit {num_bits}", "hex string")
    return bits[:, :num_bits]


def _bit_sums(keys: I64, hexes: list[str], num_bits: int, num_keys: int) -> I64:
    """Per key, the number of reports with each bit set: a (num_keys, num_bits) int64 array."""
    out = np.zeros((num_keys, num_bits), dtype=np.int64)
    if len(hexes) <= _SMALL_BATCH:  # a few reports: skip the sparse product's set-up
        np.add.at(out, keys, _unpack(hexes, num_bits, 0))
        return out
    for start in range(0, len(hexes), _CHUNK_REPORTS):
        bits = _unpack(hexes[start : start + _CHUNK_REPORTS], num_bits, start)
        rows = bits.shape[0]
        # A sparse one-hot (key x report) times the bit matrix: the per-key column sums, exact in
        # float32 (at most _CHUNK_REPORTS < 2^24 per entry).
        one_hot = sparse.csr_matrix(
            (np.ones(rows, dtype=np.float32), (keys[start : start + rows], np.arange(rows))), shape=(num_keys, rows)
        )
        out += np.rint(one_hot @ bits).astype(np.int64)
    return out


def summarize(scheme: Scheme, reports: Sequence[Mapping[str, Any]]) -> Summary:
    """The additive sufficient statistics of ``reports`` (post-processing: no privacy cost).

    Guarantee: counting is post-processing of ε-LDP reports (Dwork-Roth Prop. 2.1), so the scheme's
    local guarantee (``scheme.guarantee()``: ε per report, RAPPOR ε∞ per value; adjacency "replace one
    user's input") is unchanged; docs/math/local-collection.md §13.3.

    Every report is validated strictly against the scheme before anything is counted: exactly the
    client's keys, integers (never bools) in range, bit vectors as lowercase hex of the exact length
    with zero padding. A bad report raises ``InvalidData`` naming its index and field; the message
    describes the bad value by type and size only.
    """
    if len(reports) > MAX_REPORTS:
        raise UsageError(f"summarize counts at most {MAX_REPORTS} reports per call", len(reports), "split the batch")
    cols = _columns(scheme, reports)
    n = len(reports)
    shapes = layout(scheme)
    ints = {name: np.asarray(v, dtype=np.int64) for name, v in cols.items() if name != "bits"}
    counts: dict[str, I64]
    if isinstance(scheme, RapporScheme):
        m, k = shapes["ones"]
        counts = {
            "cohort_n": np.bincount(ints["cohort"], minlength=m),
            "ones": _bit_sums(ints["cohort"], cols["bits"], k, m),
        }
    elif isinstance(scheme, CmsScheme):
        kh, m = shapes["ones"]
        counts = {
            "hash_n": np.bincount(ints["hash"], minlength=kh),
            "ones": _bit_sums(ints["hash"], cols["bits"], m, kh),
        }
    elif isinstance(scheme, HcmsScheme):
        kh, m = shapes["sums"]
        signed = np.bincount(ints["hash"] * m + ints["coordinate"], weights=2 * ints["bit"] - 1, minlength=kh * m)
        counts = {"sums": np.rint(signed).astype(np.int64).reshape(kh, m)}
    elif isinstance(scheme, KrrScheme):
        counts = {"counts": np.bincount(ints["index"], minlength=shapes["counts"][0])}
    elif isinstance(scheme, OueScheme):
        d = shapes["ones"][0]
        counts = {"ones": _bit_sums(np.zeros(n, dtype=np.int64), cols["bits"], d, 1)[0]}
    else:
        t, kh, m = shapes["ones"]
        key = ints["level"] * kh + ints["hash"]
        counts = {
            "level_n": np.bincount(ints["level"], minlength=t),
            "hash_n": np.bincount(key, minlength=t * kh).reshape(t, kh),
            "ones": _bit_sums(key, cols["bits"], m, t * kh).reshape(t, kh, m),
        }
    return Summary(scheme.kind, scheme.fingerprint(), n, {name: counts[name].astype(np.int64) for name in shapes})
