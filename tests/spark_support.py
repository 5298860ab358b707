"""One local SparkSession for the whole test run (the Spark engine's tests share it; it starts once).

Skips cleanly when pyspark or Java is missing. Settings keep small jobs fast on 2 cores: local[2], no
UI, 2 shuffle partitions, 1 GiB of driver memory, UTC session time, no call-site capture.
"""

from __future__ import annotations

import atexit
import os
import shutil
import sys
from functools import cache
from typing import Any


def spark_available() -> bool:
    """True when pyspark imports and a Java runtime is on the PATH (or JAVA_HOME is set)."""
    try:
        import pyspark  # noqa: F401
    except ImportError:
        return False
    return shutil.which("java") is not None or bool(os.environ.get("JAVA_HOME"))


@cache
def spark_session() -> Any:
    """The shared local SparkSession (created on first use, stopped at interpreter exit)."""
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    from pyspark.sql import SparkSession

    spark = (
        SparkSession.builder.master("local[2]")
        .appName("dpsense-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.default.parallelism", "2")
        .config("spark.driver.memory", "1g")
        .config("spark.sql.session.timeZone", "UTC")
        # PySpark 4 records the Python call site of every column expression (several JVM calls each);
        # the engine builds many small expressions, so this doubles the time of a small release.
        .config("spark.python.sql.dataFrameDebugging.enabled", "false")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    atexit.register(spark.stop)
    return spark
