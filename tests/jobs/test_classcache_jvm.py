"""A real local JVM records Spark's classes at its exit, and the next one maps them (and its
Python workers import the installed pyspark, as every local run's do)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from corpusclean.jobs.runtime.classcache import MAGIC, SETTLE_S

pytestmark = [pytest.mark.spark, pytest.mark.e2e]

RUN = """
import sys
import time
from corpusclean.jobs.runtime.session import build_session
# The interpreter stands for a small input: the JVM also gets C1 alone (QUICK_JIT).
spark = build_session(
    "classcache-test", {"spark.driver.extraJavaOptions": sys.argv[1]}, [sys.executable]
)
spark.sparkContext.setJobGroup("run", "the run's own jobs")
assert spark.range(100).selectExpr("sum(id)").first()[0] == 4950
args = spark.sparkContext._jvm.java.lang.management.ManagementFactory.getRuntimeMXBean()
args = list(args.getInputArguments())
assert "-XX:TieredStopAtLevel=1" in args and sys.argv[1] in args, args
# The Python workers were started in the background (start_python_workers): one job, outside
# the run's job group, which the run's counts leave out.
tracker = spark.sparkContext.statusTracker()
deadline = time.monotonic() + 120
while time.monotonic() < deadline:
    ungrouped = tracker.getJobIdsForGroup(None)
    if ungrouped and tracker.getJobInfo(ungrouped[0]).status == "SUCCEEDED":
        break
    time.sleep(0.2)
assert len(ungrouped) == 1, ungrouped
assert tracker.getJobInfo(ungrouped[0]).status == "SUCCEEDED"
assert ungrouped[0] not in tracker.getJobIdsForGroup("run")


# Those workers import pyspark and py4j from the installed packages, not from Spark's zips
# (conf/spark/local.properties runs them under corpusclean.sparkdaemon).
def where(batches):
    import py4j
    import pyarrow as pa
    import pyspark

    for _ in batches:
        pass
    yield pa.RecordBatch.from_pydict({"file": [pyspark.__file__, py4j.__file__]})


files = [r.file for r in spark.range(2, numPartitions=2).mapInArrow(where, "file string").collect()]
assert len(files) == 4 and not [f for f in files if ".zip" in f], files
"""


def _run(cache: Path, log: Path) -> None:
    env = {**os.environ, "CORPUSCLEAN_CLASS_CACHE": str(cache)}
    option = f"-Xlog:class+load=info:file={log}"
    subprocess.run([sys.executable, "-c", RUN, option], check=True, env=env, timeout=300)


def _wait_for_recording(cache: Path, timeout: float = 120) -> Path:
    """The recording, once the first run's JVM (which writes it after the run returned) has
    written it."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = list(cache.glob("*.recording"))
        if found and found[0].read_bytes()[:4] == MAGIC:
            return found[0]
        time.sleep(1)
    raise AssertionError(f"no finished recording in {cache} after {timeout}s")


def test_the_second_local_run_maps_the_classes_the_first_recorded(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    _run(cache, tmp_path / "first.log")
    assert "shared objects file (top)" not in (tmp_path / "first.log").read_text()
    recording = _wait_for_recording(cache)
    time.sleep(1)
    past = time.time() - 2 * SETTLE_S
    os.utime(recording, (past, past))  # its JVM is done: no need to wait for it to settle

    _run(cache, tmp_path / "second.log")
    assert [p.suffix for p in cache.iterdir()] == [".jsa"]
    loaded = (tmp_path / "second.log").read_text().splitlines()
    spark = [ln for ln in loaded if " org.apache.spark." in ln]
    mapped = [ln for ln in spark if "source: shared objects file (top)" in ln]
    # Most of Spark's classes come from the archive (4,490 of 7,116 when written); the rest
    # (Scala's lambda classes, which JDK 17 archives only in part, and classes the first run
    # never loaded) still load from the jars.
    assert len(mapped) > 0.5 * len(spark) > 1000, (len(mapped), len(spark))
