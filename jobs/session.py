"""The SparkSession: local defaults from conf/spark/local.properties, the config's `spark.*`.

Under `spark-submit` the master and resources come from spark-submit; only the config's
`spark.*` keys are applied on top, so the same job file runs on a laptop and on a cluster.
"""

from __future__ import annotations

import os
import sys
from importlib import resources

from pyspark.sql import SparkSession

from corpusclean.jobs.console import console_progress


def read_properties(name: str) -> dict[str, str]:
    """A `conf/spark/<name>.properties` file shipped with the package, as a dict."""
    text = resources.files("corpusclean.conf").joinpath("spark", f"{name}.properties").read_text()
    props: dict[str, str] = {}
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith(("#", "!")):
            continue
        key, _, value = line.replace("\t", " ").partition(" ")
        props[key.strip()] = value.strip()
    return props


def under_spark_submit() -> bool:
    """True when this Python process was started by spark-submit (the JVM already exists)."""
    return "PYSPARK_GATEWAY_PORT" in os.environ


def build_session(app_name: str, spark_conf: dict[str, str] | None = None) -> SparkSession:
    """A SparkSession for a job; reuses the active one (tests, notebooks) if there is one."""
    active = SparkSession.getActiveSession()
    conf = dict(spark_conf or {})
    if active is not None:
        for key, value in conf.items():
            # Runtime SQL settings can change on a live session; static ones cannot, and
            # trying would fail the job for a setting that only tunes it.
            if not key.startswith("spark.sql."):
                continue
            active.conf.set(key, value)
        return active
    # Executors must run the same interpreter as the driver, or the MinHash kernel would be
    # imported into a Python that may not have corpusclean installed.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    builder = SparkSession.builder.appName(app_name)
    settings: dict[str, str] = {} if under_spark_submit() else read_properties("local")
    settings.update(conf)
    settings.update(console_progress(conf))
    for key, value in settings.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel(os.environ.get("CORPUSCLEAN_SPARK_LOG_LEVEL", "WARN"))
    return spark
