"""Spark's console progress bar: on a terminal only, unless the user set it."""

from __future__ import annotations

import os
import sys


def console_progress(conf: dict[str, str], tty: bool | None = None) -> dict[str, str]:
    """Spark's carriage-return progress bar only on a terminal (it garbles logs), unless set."""
    key = "spark.ui.showConsoleProgress"
    if key in conf or ("PYSPARK_GATEWAY_PORT" in os.environ and _submitted_conf_has(key)):
        return {}
    return {key: str(sys.stderr.isatty() if tty is None else tty).lower()}


def _submitted_conf_has(key: str) -> bool:
    from pyspark import SparkConf, SparkContext

    SparkContext._ensure_initialized()  # joins spark-submit's JVM, which holds its --conf
    return SparkConf().contains(key)
