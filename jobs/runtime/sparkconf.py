"""Spark settings checked before Spark starts: a typo or a bad value is a config error, not a hang.

Spark accepts any `spark.*` key and ignores the ones it does not know, and a driver memory
string it cannot parse kills the JVM before PySpark can say why (JAVA_GATEWAY_EXITED). So every
setting a user gives (`--set spark.x=...`, a config's `spark:` section) is checked here first:
the key against the settings the installed Spark defines, the value against its type where the
key's type is known.

The known keys come from the installed Spark itself: every `spark.*` string constant in the
classes of its config packages (ConfigBuilder and SQLConf entries are such constants), read from
the jars that ship with pyspark (once per process, before the JVM starts), so the list always
matches the Spark that will run. Settings whose names are built at run time (`spark.hadoop.*`,
`spark.executorEnv.*`, catalog and resource settings) and those of common plugins are accepted
by prefix.
"""

from __future__ import annotations

import difflib
import functools
import os
import re
import zipfile
from pathlib import Path

# Families whose keys are made at run time, and plugins users put on the classpath.
PASSTHROUGH_PREFIXES = (
    "spark.hadoop.",
    "spark.executorEnv.",
    "spark.yarn.appMasterEnv.",
    "spark.kubernetes.",
    "spark.sql.catalog.",
    "spark.metrics.conf.",
    "spark.driver.resource.",
    "spark.executor.resource.",
    "spark.worker.resource.",
    "spark.task.resource.",
    "spark.history.",
    "spark.ssl.",
    "spark.sql.hive.",
    "spark.rapids.",
    "spark.delta.",
    "spark.databricks.",
    "spark.openlineage.",
    "spark.cassandra.",
    "spark.mongodb.",
    "spark.es.",
    "spark.jars.",
    "spark.plugins",
)
# A plugin not listed above can still be configured: its keys are then passed on unchecked.
UNCHECKED_ENV = "CORPUSCLEAN_SPARK_UNCHECKED"

_BYTES_RE = re.compile(r"^\s*\d+\s*(b|k|kb|m|mb|g|gb|t|tb|p|pb)?\s*$", re.IGNORECASE)
_TIME_RE = re.compile(r"^\s*\d+\s*(us|ms|s|m|min|h|d)?\s*$", re.IGNORECASE)
_MASTER_RE = re.compile(
    r"^(local(\[(\*|\d+)(,\s*\d+)?\])?|local-cluster\[\d+,\s*\d+,\s*\d+\]"
    r"|spark://.+|yarn|k8s://.+|mesos://.+)$"
)
_BYTES_KEYS = {
    "spark.driver.memory",
    "spark.executor.memory",
    "spark.driver.memoryOverhead",
    "spark.executor.memoryOverhead",
    "spark.executor.pyspark.memory",
    "spark.driver.maxResultSize",
    "spark.memory.offHeap.size",
    "spark.reducer.maxSizeInFlight",
    "spark.shuffle.file.buffer",
    "spark.broadcast.blockSize",
    "spark.kryoserializer.buffer",
    "spark.kryoserializer.buffer.max",
    "spark.sql.files.maxPartitionBytes",
    "spark.sql.files.openCostInBytes",
    "spark.sql.adaptive.advisoryPartitionSizeInBytes",
}
_INT_KEYS = {
    "spark.sql.shuffle.partitions",
    "spark.default.parallelism",
    "spark.executor.cores",
    "spark.driver.cores",
    "spark.cores.max",
    "spark.executor.instances",
    "spark.task.cpus",
    "spark.task.maxFailures",
    "spark.sql.execution.arrow.maxRecordsPerBatch",
    "spark.sql.files.maxPartitionNum",
    "spark.sql.files.minPartitionNum",
}
_TIME_KEYS = {"spark.network.timeout", "spark.executor.heartbeatInterval"}
_KEY_RE = re.compile(rb"\x01(..)(spark(?:\.[A-Za-z0-9_\-]+)+)")


def _jars_dir() -> Path | None:
    try:
        import pyspark
    except ImportError:
        return None
    jars = Path(pyspark.__file__).parent / "jars"
    return jars if jars.is_dir() else None


@functools.lru_cache(maxsize=1)
def known_keys() -> frozenset[str]:
    """Every setting the installed Spark defines (empty when its jars cannot be read)."""
    jars = _jars_dir()
    if jars is None:
        return frozenset()
    keys: set[str] = set()
    for jar in sorted(jars.glob("spark-*.jar")):
        try:
            with zipfile.ZipFile(jar) as zf:
                for name in zf.namelist():
                    lower = name.lower()
                    if not name.endswith(".class") or "conf" not in lower:
                        continue
                    for size, key in _KEY_RE.findall(zf.read(name)):
                        # A class-file UTF8 constant: the 2-byte length must cover the match.
                        if int.from_bytes(size, "big") == len(key):
                            keys.add(key.decode("ascii"))
        except (OSError, zipfile.BadZipFile):
            continue
    return frozenset(keys)


def normalise_key(key: str) -> str:
    """`sql.shuffle.partitions` and `spark.sql.shuffle.partitions` both name the Spark key."""
    key = key.strip()
    return key if key.startswith("spark.") else f"spark.{key}"


def _check_value(key: str, value: str) -> str | None:
    """Why `value` cannot be `key`'s value, or None when it can (or its type is unknown)."""
    why = _value_problem(key, value)
    return None if why is None else f"{key}={value!r} {why}"


_KINDS: dict[str, tuple[re.Pattern[str], str]] = {
    "bytes": (_BYTES_RE, "is not a size (an integer with an optional unit: 512m, 4g, 1t)"),
    "int": (re.compile(r"^\s*[1-9]\d*\s*$"), "is not a positive integer"),
    "time": (_TIME_RE, "is not a duration (120s, 10min)"),
    "master": (_MASTER_RE, "is not a master URL (local[*], spark://HOST:PORT, yarn, k8s://...)"),
    "bool": (re.compile(r"^\s*(true|false)\s*$", re.IGNORECASE), "is not true or false"),
}


def _kind(key: str) -> str | None:
    if key in _BYTES_KEYS or key.endswith(("memory", "memoryOverhead")):
        return "bytes"
    if key in _INT_KEYS:
        return "int"
    if key in _TIME_KEYS:
        return "time"
    if key == "spark.master":
        return "master"
    if key.endswith(".enabled") or key in (
        "spark.ui.showConsoleProgress",
        "spark.python.worker.reuse",
    ):
        return "bool"
    return None


def _value_problem(key: str, value: str) -> str | None:
    kind = _kind(key)
    if kind is None:
        return None
    pattern, why = _KINDS[kind]
    return None if pattern.match(value.strip()) else why


def check_setting(key: str, value: str) -> str | None:
    """Why `key=value` is not a usable Spark setting, or None when it is."""
    if key.startswith(PASSTHROUGH_PREFIXES) or os.environ.get(UNCHECKED_ENV):
        return _check_value(key, value)
    known = known_keys()
    if known and key not in known:
        close = difflib.get_close_matches(key, sorted(known), n=1, cutoff=0.75)
        hint = f" (did you mean {close[0]}?)" if close else ""
        return (
            f"{key} is not a setting of the installed Spark{hint}; a plugin's setting passes "
            f"unchecked with {UNCHECKED_ENV}=1"
        )
    return _check_value(key, value)


def parse_properties(text: str) -> dict[str, str]:
    """Spark's properties-file format (`key value` or `key=value`, `#` comments) as a dict."""
    props: dict[str, str] = {}
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith(("#", "!")):
            continue
        key, value = _split_property(line.replace("\t", " "))
        props[key] = value
    return props


def _split_property(line: str) -> tuple[str, str]:
    space, equals = line.find(" "), line.find("=")
    cut = min(i for i in (space, equals, len(line)) if i >= 0)
    key, rest = line[:cut].strip(), line[cut:].strip()
    if rest.startswith("="):
        rest = rest[1:].strip()
    return key, rest
