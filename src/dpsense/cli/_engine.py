"""Which engine a CLI command runs on: embedded DuckDB (the default) or Apache Spark.

The choice comes from the release spec (``engine: spark``, ``spark_master: spark://host:7077``,
``spark_collect_limit: N``) or from the options ``--engine``, ``--spark-master`` and
``--spark-collect-limit`` (env ``DPSENSE_ENGINE``, ``DPSENSE_SPARK_MASTER``,
``DPSENSE_SPARK_COLLECT_LIMIT``). Nothing is guessed: a Spark setting without the Spark engine, a
master URL of no known form, or a spec and an option that name different values are refused before
the ledger is opened or any data is read.

``open_engine`` is the one place an engine is built. DuckDB is left to the ``Session`` (it owns its
default engine). For Spark, pyspark is imported only then (a missing install names ``pip install
'dpsense[spark]'``), a ``SparkSession`` is built for the master (an active session on the same
master is reused and left running, as in tests that run the CLI in-process) and wrapped in
``SparkEngine(spark, collect_limit=...)``. The collect limit is a public, per-deployment bound on the
rows one ``collect`` may bring to the driver (points and edges of the geometric statistics): Spark
refuses to collect without one, and a view found to hold more is a charged failure.
"""

from __future__ import annotations

import os
import re
import shutil
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from enum import Enum
from typing import TYPE_CHECKING, TypeVar

from dpsense.cli._errors import SpecError
from dpsense.core.errors import UsageError

if TYPE_CHECKING:
    from dpsense.engine import Engine

DEFAULT_SPARK_MASTER = "local[2]"
#: Rows one ``collect`` may bring to the Spark driver unless the deployment sets its own bound.
DEFAULT_COLLECT_LIMIT = 1_000_000
SPARK_EXTRA = "pip install 'dpsense[spark]'"
MASTER_FORMS = "local, local[N], local[*], spark://HOST:PORT, yarn or k8s://https://HOST:PORT"
_MASTER = re.compile(r"^(local(\[(\d+|\*)(,\d+)?\])?|local-cluster\[\d+,\d+,\d+\]|spark://\S+|yarn|k8s://\S+)$")
#: Spark settings of every CLI session: no progress bar on stderr (it fights the status line), and no
#: Python call-site capture per column expression (it doubles the time of a small release).
_SPARK_CONF = {
    "spark.ui.showConsoleProgress": "false",
    "spark.python.sql.dataFrameDebugging.enabled": "false",
}


class EngineName(str, Enum):
    """The engines the CLI can run on."""

    DUCKDB = "duckdb"
    SPARK = "spark"


ENGINES = tuple(e.value for e in EngineName)


def valid_master(url: str) -> bool:
    """True for a Spark master URL of a known form (``MASTER_FORMS``)."""
    return bool(_MASTER.match(url))


@dataclass(frozen=True)
class EngineChoice:
    """The engine of one command, resolved from the spec and the options."""

    name: EngineName = EngineName.DUCKDB
    spark_master: str = DEFAULT_SPARK_MASTER
    collect_limit: int = DEFAULT_COLLECT_LIMIT


@dataclass(frozen=True)
class EngineSettings:
    """Engine settings as one source states them (``None``: not stated there)."""

    engine: EngineName | None = None
    spark_master: str | None = None
    spark_collect_limit: int | None = None


_T = TypeVar("_T", EngineName, str, int)


def choose_engine(options: EngineSettings, spec: EngineSettings | None = None) -> EngineChoice:
    """The engine from the command's options and (for ``release`` / ``preview``) the spec.

    A spec's settings were checked with the spec (Spark settings only with ``engine: spark``); here the
    options are checked the same way and must agree with whatever the spec states.
    """
    if options.spark_master is not None and not valid_master(options.spark_master):
        raise SpecError("--spark-master", "not a Spark master URL", options.spark_master, f"use {MASTER_FORMS}")
    if options.spark_collect_limit is not None and options.spark_collect_limit < 1:
        raise SpecError("--spark-collect-limit", "must be an integer >= 1", options.spark_collect_limit, "e.g. 1000000")
    stated = spec or EngineSettings()
    name = _agree("engine", "--engine", stated.engine, options.engine) or EngineName.DUCKDB
    master = _agree("spark_master", "--spark-master", stated.spark_master, options.spark_master)
    limit = _agree(
        "spark_collect_limit", "--spark-collect-limit", stated.spark_collect_limit, options.spark_collect_limit
    )
    if name is EngineName.SPARK:
        return EngineChoice(name, master or DEFAULT_SPARK_MASTER, limit or DEFAULT_COLLECT_LIMIT)
    for option, value in (("--spark-master", master), ("--spark-collect-limit", limit)):
        if value is not None:
            raise SpecError(option, "only valid with the Spark engine", value, f"add --engine spark, or drop {option}")
    return EngineChoice()


def _agree(field: str, option: str, in_spec: _T | None, given: _T | None) -> _T | None:
    """The value the spec or the option states; both may state it only if they agree."""
    if in_spec is not None and given is not None and in_spec != given:
        raise SpecError(
            f"release spec {field}",
            f"the spec and {option} disagree",
            f"{_shown(in_spec)} vs {_shown(given)}",
            f"drop {option} (or its DPSENSE_ variable), or change {field}: in the spec",
        )
    return in_spec if in_spec is not None else given


def _shown(value: object) -> object:
    return value.value if isinstance(value, EngineName) else value


@contextmanager
def open_engine(choice: EngineChoice) -> Iterator[Engine | None]:
    """The engine to pass to ``Session.open`` (``None``: the Session's own DuckDB), closed on exit."""
    if choice.name is EngineName.DUCKDB:
        yield None
        return
    yield from _spark_engine(choice)


def _spark_engine(choice: EngineChoice) -> Iterator[Engine]:
    try:
        from pyspark.sql import SparkSession

        from dpsense.engine import SparkEngine
    except ImportError:
        raise UsageError("the Spark engine needs pyspark", "engine: spark", SPARK_EXTRA) from None
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        raise UsageError(
            "the Spark engine needs a Java 17 runtime", "engine: spark", "install Java 17 or set JAVA_HOME"
        )
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    active = SparkSession.getActiveSession()
    if active is not None and active.sparkContext.master != choice.spark_master:
        raise UsageError(
            "a SparkSession on another master is already running in this process",
            f"{active.sparkContext.master} vs {choice.spark_master}",
            f"use spark_master: {active.sparkContext.master}, or stop that session first",
        )
    builder = SparkSession.builder.master(choice.spark_master).appName("dpsense")
    for key, value in _SPARK_CONF.items():
        builder = builder.config(key, value)
    try:
        spark = builder.getOrCreate()
    except Exception:  # pyspark and py4j raise many types when the JVM or the master cannot be reached
        raise UsageError(
            "Spark did not start", choice.spark_master, "check the master URL, that it is reachable, and JAVA_HOME"
        ) from None
    if active is None:
        spark.sparkContext.setLogLevel("ERROR")  # Spark's WARN lines would drown the CLI's own stderr
    engine = SparkEngine(spark, collect_limit=choice.collect_limit)
    try:
        yield engine
    finally:
        engine.close()
        if active is None:
            spark.stop()
