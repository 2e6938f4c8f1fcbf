"""Fail early and clearly when Spark's prerequisites are missing.

Without pyarrow the Python data-source worker dies on import and Spark reports only a socket time-out
after ~15 s; without Java, ``SparkSession.builder.getOrCreate()`` fails with a gateway error. Checking
both up front turns those into one sentence that says what to install.
"""

from __future__ import annotations

import importlib.util
import os
import shutil

from txmq.common import errors

INSTALL_HINT = "pip install 'txmq[spark]'"


class SparkUnavailable(errors.Unsupported):
    """pyspark, pyarrow or a Java runtime is missing, so the Spark integration cannot run."""


def java_executable() -> str | None:
    """The ``java`` Spark would start: ``$JAVA_HOME/bin/java`` if set, else the first on PATH."""
    home = os.environ.get("JAVA_HOME")
    if home:
        candidate = os.path.join(home, "bin", "java")
        if os.access(candidate, os.X_OK):
            return candidate
    return shutil.which("java")


def missing_modules() -> list[str]:
    return [name for name in ("pyspark", "pyarrow") if importlib.util.find_spec(name) is None]


def require_spark(*, need_java: bool = True) -> None:
    """Raise ``SparkUnavailable`` unless pyspark, pyarrow (and, by default, Java 17+) are present."""
    missing = missing_modules()
    if missing:
        raise SparkUnavailable(
            f"txmq.spark needs {' and '.join(missing)}, which is not installed: run {INSTALL_HINT}"
        )
    if need_java and java_executable() is None:
        raise SparkUnavailable(
            "txmq.spark needs a Java runtime (17 or 21) for Spark: install one (e.g. openjdk-17-jre-headless)"
            " and put it on PATH or set JAVA_HOME"
        )
