"""Conformance: the steward's registration steps (fingerprint, data quality, policies, forget)."""

from __future__ import annotations

import math
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

from dpsense.core.errors import InvalidBounds, InvalidData, UsageError
from dpsense.engine import ColumnQuality, Engine, UnknownColumn, UnknownTable
from dpsense.noise.entropy import random_bytes
from tests.conformance.test_engine_conformance import SECRET, bound, people

KEY = bytes(range(32))


def fingerprint_of(engine: Engine, source: object, key: bytes = KEY) -> str:
    name = f"t{len(engine.temporary_names())}_{id(source)}"
    engine.register(name, source)
    try:
        return engine.fingerprint(name, key)
    finally:
        engine.forget(name)


# -- fingerprint -------------------------------------------------------------------------------------


def test_fingerprint_is_a_keyed_hex_digest_independent_of_row_order(engine: Engine) -> None:
    df = people()
    first = fingerprint_of(engine, df)
    assert re.fullmatch(r"[0-9a-f]{64}", first)
    assert fingerprint_of(engine, df.sample(frac=1.0, random_state=1).reset_index(drop=True)) == first
    assert fingerprint_of(engine, df.iloc[::-1].reset_index(drop=True)) == first
    assert fingerprint_of(engine, pa.Table.from_pandas(df, preserve_index=False)) == first
    assert SECRET not in first and KEY.hex() not in first


def test_fingerprint_changes_with_any_change_of_the_multiset(engine: Engine) -> None:
    df = people()
    base = fingerprint_of(engine, df)
    changed = df.copy()
    changed.loc[3, "hours"] = -4.000001
    duplicated = pd.concat([df, df.iloc[[4]]], ignore_index=True)
    removed = df.drop(index=7).reset_index(drop=True)
    swapped = df.copy()  # the same values per column, but two rows exchange their hours
    swapped.loc[[0, 3], "hours"] = swapped.loc[[3, 0], "hours"].to_numpy()
    renamed = df.rename(columns={"hours": "hrs"})
    reordered = df[["region", "person", "hours", "note"]]
    retyped = df.assign(person=df["person"].astype(float))
    variants = [changed, duplicated, removed, swapped, renamed, reordered, retyped]
    prints = [fingerprint_of(engine, v) for v in variants]
    assert len({base, *prints}) == len(variants) + 1
    assert fingerprint_of(engine, df, key=bytes(reversed(KEY))) != base


def test_fingerprint_tells_multiplicities_apart(engine: Engine) -> None:
    a_a_b = pd.DataFrame({"x": [1, 1, 2]})
    a_b_b = pd.DataFrame({"x": [1, 2, 2]})
    assert fingerprint_of(engine, a_a_b) != fingerprint_of(engine, a_b_b)
    assert fingerprint_of(engine, pd.DataFrame({"x": [1, 2]})) != fingerprint_of(engine, a_a_b)
    # Values that print alike stay apart: the row encoding is injective.
    joined = pd.DataFrame({"a": ["x,1:y"], "b": ["z"]})
    split = pd.DataFrame({"a": ["x"], "b": ["1:y,z"]})
    assert fingerprint_of(engine, joined) != fingerprint_of(engine, split)
    nulls = pd.DataFrame({"a": pa.array([None, "-"], type=pa.string())})
    assert fingerprint_of(engine, pa.table(nulls)) != fingerprint_of(engine, pa.table({"a": ["-", "-"]}))


def test_fingerprint_refuses_short_or_non_byte_keys(engine: Engine) -> None:
    engine.register("t", people())
    for key in (b"", b"0123456789abcde", "0123456789abcdef0123", 12345):
        with pytest.raises(UsageError, match="at least 16 secret bytes") as err:
            engine.fingerprint("t", key)  # type: ignore[arg-type]
        assert "0123456789" not in str(err.value)
    with pytest.raises(UnknownTable):
        engine.fingerprint("nope", KEY)
    assert len(engine.fingerprint("t", random_bytes(16))) == 64


def test_fingerprint_of_an_empty_table(engine: Engine) -> None:
    empty = people().iloc[:0]
    assert fingerprint_of(engine, empty) != fingerprint_of(engine, people().iloc[:1])


# -- data quality ------------------------------------------------------------------------------------


def quality_table() -> pa.Table:
    inf, nan = math.inf, math.nan
    return pa.table(
        {
            "person": pa.array([1, 2, None, 4, 5, 6], type=pa.int64()),
            "x": pa.array([1.0, nan, None, inf, -inf, nan]),
            "y": pa.array([0.5, None, 2.0, 3.0, -1.0, 7.0], type=pa.float32()),
            "n": pa.array([1, None, None, 4, 5, 6], type=pa.int32()),
            "s": pa.array(["a", None, "nan", "inf", "b", None]),
        }
    )


def test_data_quality_counts_missing_nan_and_infinite(engine: Engine) -> None:
    engine.register("t", quality_table())
    got = engine.data_quality("t", ["x", "y", "n", "s", "person"])
    assert got == {
        "x": ColumnQuality(missing=1, nan=2, infinite=2),
        "y": ColumnQuality(missing=1, nan=0, infinite=0),
        "n": ColumnQuality(missing=2, nan=0, infinite=0),
        "s": ColumnQuality(missing=2, nan=0, infinite=0),
        "person": ColumnQuality(missing=1, nan=0, infinite=0),
    }
    assert list(got) == ["x", "y", "n", "s", "person"]
    assert engine.data_quality("t", []) == {}
    with pytest.raises(UnknownColumn):
        engine.data_quality("t", ["x", "z"])
    with pytest.raises(UsageError, match="list of column names"):
        engine.data_quality("t", "x")


# -- policies ----------------------------------------------------------------------------------------


def persons(engine: Engine) -> list[int]:
    """The units of every row of ``t`` (rows without a unit are dropped by the bound)."""
    return engine.collect(bound(engine, c=1000), columns=["person"])["person"].tolist()


def test_drop_missing_and_drop_nonfinite(engine: Engine) -> None:
    engine.register("t", quality_table())
    info = engine.table_info("t")
    assert engine.apply_policies("t", drop_missing=["n"]) == info
    assert persons(engine) == [1, 4, 5, 6]
    assert engine.apply_policies("t", drop_nonfinite=["x", "s"]) == info  # a string column: nothing to drop
    assert persons(engine) == [1]
    assert engine.table_info("t") == info


def test_drop_nonfinite_keeps_nulls(engine: Engine) -> None:
    engine.register("t", quality_table())
    engine.apply_policies("t", drop_nonfinite=["x"], drop_missing=["person"])
    assert engine.data_quality("t", ["x"]) == {"x": ColumnQuality(missing=0, nan=0, infinite=0)}
    engine.forget("t")
    engine.register("t", quality_table())
    engine.apply_policies("t", drop_nonfinite=["x"])
    assert engine.data_quality("t", ["x", "person"]) == {
        "x": ColumnQuality(missing=1, nan=0, infinite=0),
        "person": ColumnQuality(missing=1, nan=0, infinite=0),
    }


def test_clamp_clips_infinities_and_out_of_range_values_keeping_missing(engine: Engine) -> None:
    engine.register("t", quality_table())
    info = engine.table_info("t")
    assert engine.apply_policies("t", clamp={"x": (-0.5, 0.75), "y": (0.0, 2.5), "n": (1.5, 4.2)}) == info
    assert engine.data_quality("t", ["x", "y", "n"]) == {
        "x": ColumnQuality(missing=1, nan=2, infinite=0),
        "y": ColumnQuality(missing=1, nan=0, infinite=0),
        "n": ColumnQuality(missing=2, nan=0, infinite=0),
    }
    view = engine.bounded_rows("t", unit_column="s", max_rows_per_unit=10, salt=random_bytes(32))
    got = engine.collect(view, columns=["s", "x", "y", "n"])  # the rows with s, x, y and n present
    by_s = {s: (x, y, n) for s, x, y, n in zip(*(got[c].tolist() for c in ("s", "x", "y", "n")), strict=True)}
    assert by_s == {"a": (0.75, 0.5, 2), "inf": (0.75, 2.5, 4), "b": (-0.5, 0.0, 4)}
    assert got["n"].dtype == np.int32 and got["y"].dtype == np.float32


def test_clamp_rounds_bounds_inwards_to_the_column_type(engine: Engine) -> None:
    engine.register("t", pa.table({"person": [1, 2, 3], "n": pa.array([-9, 0, 9], type=pa.int8())}))
    engine.apply_policies("t", clamp={"n": (-2.5, 1e300)})
    got = engine.collect(bound(engine), columns=["n"])["n"].tolist()
    assert got == [-2, 0, 9]
    with pytest.raises(UsageError, match="no value of the column's type"):
        engine.apply_policies("t", clamp={"n": (0.2, 0.8)})
    with pytest.raises(UsageError, match="no value of the column's type"):
        engine.apply_policies("t", clamp={"n": (1000.0, 2000.0)})


def test_policy_errors_are_judged_from_the_schema(engine: Engine) -> None:
    engine.register("t", people())
    with pytest.raises(UnknownColumn):
        engine.apply_policies("t", drop_missing=["nope"])
    with pytest.raises(UnknownColumn):
        engine.apply_policies("t", drop_nonfinite=["nope"])
    with pytest.raises(UnknownColumn):
        engine.apply_policies("t", clamp={"nope": (0, 1)})
    with pytest.raises(InvalidData, match="numeric to be clamped") as err:
        engine.apply_policies("t", clamp={"note": (0, 1)})
    assert SECRET not in str(err.value)
    with pytest.raises(InvalidBounds):
        engine.apply_policies("t", clamp={"hours": (2, 1)})
    with pytest.raises(InvalidBounds):
        engine.apply_policies("t", clamp={"hours": (0, math.inf)})
    with pytest.raises(UsageError, match="low, high"):
        engine.apply_policies("t", clamp={"hours": (0,)})  # type: ignore[dict-item]
    with pytest.raises(UsageError, match="list of column names"):
        engine.apply_policies("t", drop_missing="hours")
    with pytest.raises(UnknownTable):
        engine.apply_policies("nope", drop_missing=["hours"])
    assert engine.data_quality("t", ["hours"]) == {"hours": ColumnQuality(0, 0, 0)}


def test_policies_apply_to_csv_and_parquet_snapshots(engine: Engine, tmp_path: Path) -> None:
    df = pd.DataFrame({"person": [1, 2, 3], "x": [1e9, 2.0, None]})
    base = tmp_path
    df.to_csv(base / "d.csv", index=False)
    df.to_parquet(base / "d.parquet", index=False)
    for name, path in (("c", base / "d.csv"), ("p", base / "d.parquet")):
        info = engine.register(name, path)
        assert engine.apply_policies(name, clamp={"x": (0.0, 1.0)}, drop_missing=["x"]) == info
        view = engine.bounded_rows(name, unit_column="person", max_rows_per_unit=5, salt=random_bytes(32))
        assert engine.collect(view, columns=["x"])["x"].tolist() == [1.0, 1.0]


# -- forget ------------------------------------------------------------------------------------------


def test_forget_unregisters_and_is_idempotent(engine: Engine) -> None:
    engine.register("t", people())
    engine.forget("t")
    engine.forget("t")
    engine.forget("never-registered")
    with pytest.raises(UnknownTable):
        engine.table_info("t")
    engine.register("t", people())  # the name is free again
    assert engine.table_info("t").column_names[0] == "person"
