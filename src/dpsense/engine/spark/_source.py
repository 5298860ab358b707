"""Sources for ``SparkEngine.register``: Spark DataFrames, catalog tables, files and in-memory tables.

Files are CSV (``.csv``, ``.csv.gz``, ``.tsv``) or Parquet (``.parquet``, ``.pq``; a single file or the
directory Spark writes), as local paths or as URIs any executor can read (``hdfs://``, ``s3a://``).

In-memory tables (pandas, pyarrow, polars) go to Spark through Arrow: no Python worker, no pandas
conversion (PySpark's pandas path turns a missing string into the text "NaN"). Results come back the
same way and become numpy arrays shaped like DuckDB's ``fetchnumpy`` output.
"""

from __future__ import annotations

from collections.abc import Callable
from os import PathLike, fspath
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray
from pyspark.sql import DataFrame, SparkSession

from dpsense.core.errors import InvalidData, UnsupportedRequest
from dpsense.engine._errors import UnknownTable

_CSV_SUFFIXES = (".csv", ".csv.gz", ".tsv")
_PARQUET_SUFFIXES = (".parquet", ".pq")
_FRAME_MODULES = frozenset({"pandas", "pyarrow", "polars"})

#: Runs a Spark action, turning Spark's errors (which can quote data) into errors without the text.
Runner = Callable[..., Any]


def source_frame(spark: SparkSession, source: object, run: Runner) -> tuple[DataFrame, bool]:
    """The source as a DataFrame, and whether it was read from a file."""
    if isinstance(source, DataFrame):
        return source, False
    if isinstance(source, str | PathLike):
        path = fspath(source)
        lowered = path.lower().rstrip("/")
        if lowered.endswith(_CSV_SUFFIXES) or lowered.endswith(_PARQUET_SUFFIXES):
            # A URI (hdfs://, s3a://, file://) is for Spark to resolve; a local path (a file, or the
            # directory Spark writes) is checked here, so a typo is refused before Spark starts a job.
            if "://" not in path and not Path(path).exists():
                raise InvalidData("the source file does not exist", path, "check the path")
            reader = spark.read
            if lowered.endswith(_PARQUET_SUFFIXES):
                return run(lambda: reader.parquet(path), file=path), True
            separator = "\t" if lowered.endswith(".tsv") else ","
            return run(lambda: reader.csv(path, header=True, inferSchema=True, sep=separator), file=path), True
        if isinstance(source, str) and run(lambda: spark.catalog.tableExists(source)):
            return spark.table(source), False
        raise UnknownTable(
            str(source), "pass a .csv/.parquet path, a DataFrame or Arrow table, or an existing Spark table name"
        )
    module = type(source).__module__.split(".")[0]
    if module not in _FRAME_MODULES:
        raise UnsupportedRequest(
            "a source must be a Spark/pandas/polars DataFrame, a pyarrow Table, a CSV or Parquet path, or a table name",
            type(source).__name__,
            "convert the data to one of those",
        )
    arrow = to_arrow(source)
    try:
        return spark.createDataFrame(arrow), False
    except Exception:  # Spark's conversion errors vary in type; the message is not needed
        raise UnsupportedRequest(
            "Spark cannot hold one of the table's column types", str(arrow.schema.types), "cast the column first"
        ) from None


def to_arrow(source: object) -> Any:
    """A pandas / pyarrow / polars table as a pyarrow Table (NaN in pandas float columns becomes NULL, as in DuckDB)."""
    import pyarrow as pa

    if isinstance(source, pa.Table):
        return source
    if isinstance(source, pa.RecordBatch):
        return pa.Table.from_batches([source])
    to_arrow_method = getattr(source, "to_arrow", None)
    if callable(to_arrow_method):  # polars
        return to_arrow_method()
    return pa.Table.from_pandas(source, preserve_index=False)


def numpy_column(column: Any, kind: str) -> NDArray[Any]:
    """An Arrow column as numpy, as DuckDB's ``fetchnumpy`` gives it (decimals as float64)."""
    array = np.asarray(column.to_numpy())
    if kind == "decimal":
        return array.astype(np.float64)
    return array
