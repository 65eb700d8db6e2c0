"""The SparkSession: local defaults from conf/spark/local.properties, the config's `spark.*`.

Under `spark-submit` the master and resources come from spark-submit; only the config's
`spark.*` keys are applied on top, so the same job file runs on a laptop and on a cluster.

In a local run the JVM's own output (log4j, Java stack traces of failed tasks, the Python
workers' stderr) goes to a log file rather than the user's terminal: a failure is reported in one
line that names that file. `--debug` leaves the JVM's output on the terminal.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import shutil
import sys
import tempfile
import threading
from collections.abc import Callable, Iterator, Sequence
from importlib import resources
from pathlib import Path
from typing import IO

import pyarrow as pa
from pyspark import SparkConf, SparkContext
from pyspark.sql import SparkSession

from corpusclean.jobs.runtime import log
from corpusclean.jobs.runtime.classcache import OPTIONS, with_class_archive
from corpusclean.jobs.runtime.console import console_progress
from corpusclean.jobs.runtime.sparkconf import parse_properties

DEBUG_ENV = "CORPUSCLEAN_DEBUG"
# A local run's one JVM runs every task. On a small input much of its CPU goes to C2, the JIT's
# optimising tier, compiling code the run then barely uses; on a large one C2's faster code
# repays it. bench/jit.py finds where the two cross (docs/figures.md), and a local run on at
# most SMALL_INPUT_BYTES of input gets C1 alone.
QUICK_JIT = "-XX:TieredStopAtLevel=1"
SMALL_INPUT_BYTES = 256 << 20
# Options by which a user's own spark.driver.extraJavaOptions already chooses the JIT.
_JIT_CHOICES = ("Tiered", "-Xint", "-Xcomp", "UseCompiler")
_state: dict[str, object] = {"log": None}


def read_properties(name: str) -> dict[str, str]:
    """A `conf/spark/<name>.properties` file shipped with the package, as a dict."""
    text = resources.files("corpusclean.conf").joinpath("spark", f"{name}.properties").read_text()
    return parse_properties(text)


def under_spark_submit() -> bool:
    """True when this Python process was started by spark-submit (the JVM already exists)."""
    return "PYSPARK_GATEWAY_PORT" in os.environ


def debugging() -> bool:
    """`--debug` (set by the runner, inherited by spark-submit's driver): JVM output shown."""
    return os.environ.get(DEBUG_ENV) == "1"


def spark_log() -> Path | None:
    """The file this process's JVM writes its output to, when there is one."""
    path = _state["log"]
    return path if isinstance(path, Path) else None


def _launch_jvm(conf: dict[str, str], app_name: str) -> None:
    """Start the py4j JVM with its stdout and stderr in a log file (local runs, no --debug)."""
    from pyspark.java_gateway import launch_gateway

    folder = Path(tempfile.mkdtemp(prefix=f"corpusclean-{app_name.removeprefix('corpusclean-')}-"))
    path = folder / "spark.log"
    sink: IO[bytes] = path.open("ab")
    spark_conf = SparkConf(loadDefaults=False)
    for key, value in conf.items():
        spark_conf.set(key, value)
    # The documented hook for capturing the JVM's output; SparkContext reuses this gateway.
    SparkContext._gateway = launch_gateway(
        spark_conf, popen_kwargs={"stdout": sink, "stderr": sink}
    )
    SparkContext._jvm = SparkContext._gateway.jvm
    _state["log"] = path
    atexit.register(_forget_log, folder)


def _forget_log(folder: Path) -> None:
    # A run that ended well leaves no log behind; a failed one keeps it for its error line.
    if not _state.get("failed"):
        shutil.rmtree(folder, ignore_errors=True)


def mark_failed() -> None:
    """Keep the Spark log after exit: the error line names it."""
    _state["failed"] = True


def input_bytes(paths: Sequence[str], stop_above: int | None = None) -> int | None:
    """The bytes of the files under local `paths` (folders walked), or None when one is not
    a local path (a URI of another filesystem) or cannot be read: size unknown. With
    `stop_above`, the walk ends as soon as the total passes it (a huge input is not listed
    file by file just to learn that it is large)."""
    total = 0
    for path in paths:
        if "://" in path and not path.startswith("file://"):
            return None
        root = Path(path.removeprefix("file://")).expanduser()
        try:
            if root.is_file():
                total += root.stat().st_size
                continue
            for folder, _, files in os.walk(root):
                for name in files:
                    total += (Path(folder) / name).lstat().st_size
                if stop_above is not None and total > stop_above:
                    return total
        except OSError:
            return None
    return total


def with_quick_jit(settings: dict[str, str], size: int | None) -> dict[str, str]:
    """`settings` with C1 alone for the driver JVM (`QUICK_JIT`) when the input is known to be
    small, unless the user's own driver options already choose the JIT."""
    if size is None or size > SMALL_INPUT_BYTES:
        return settings
    current = settings.get(OPTIONS, "")
    if any(choice in current for choice in _JIT_CHOICES):
        return settings
    return {**settings, OPTIONS: f"{current} {QUICK_JIT}".strip()}


def build_session(
    app_name: str, spark_conf: dict[str, str] | None = None, inputs: Sequence[str] = ()
) -> SparkSession:
    """A SparkSession for a job; reuses the active one (tests, notebooks) if there is one.

    A local run that starts its own JVM sizes `inputs` (the paths the job reads) to choose
    the JIT (`with_quick_jit`)."""
    active = SparkSession.getActiveSession()
    conf = dict(spark_conf or {})
    if active is not None:
        for key, value in conf.items():
            if active.conf.get(key, None) == value:
                continue
            # Runtime SQL settings can change on a live session; static ones cannot.
            if active.conf.isModifiable(key):
                active.conf.set(key, value)
            else:
                log.warn(
                    "spark",
                    f"{key}={value} cannot change on the running session "
                    f"(it is {active.conf.get(key, None)!r}); ignored",
                )
        return active
    # Executors must run the same interpreter as the driver, or the MinHash kernel would be
    # imported into a Python that may not have corpusclean installed.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    settings: dict[str, str] = {} if under_spark_submit() else read_properties("local")
    settings.update(conf)
    if not under_spark_submit() and SparkContext._gateway is None:
        # This process starts the JVM: map the class archive of earlier runs
        # (jobs/runtime/classcache.py).
        settings = with_class_archive(settings)
        if inputs:
            size = input_bytes(inputs, stop_above=SMALL_INPUT_BYTES)
            settings = with_quick_jit(settings, size)
    if not under_spark_submit() and SparkContext._gateway is None and not debugging():
        # The JVM's stderr goes to the log file: the bar would only fill it with carriage
        # returns, and corpusclean's own progress lines say the same on the terminal.
        settings.update(console_progress(conf, tty=False))
        _launch_jvm(settings, app_name)
    else:
        settings.update(console_progress(conf))
    started = not under_spark_submit() and SparkContext._active_spark_context is None
    builder = SparkSession.builder.appName(app_name)
    for key, value in settings.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel(os.environ.get("CORPUSCLEAN_SPARK_LOG_LEVEL", "WARN"))
    if started:
        start_python_workers(spark)
    return spark


def _warm(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    # The modules every job's first Python stage unpickles its function from.
    import corpusclean.pipelines.content
    import corpusclean.pipelines.near_dedup  # noqa: F401

    yield from batches


def start_python_workers(spark: SparkSession) -> threading.Thread:
    """Start a local run's Python workers, one a core, in the background.

    The first Spark job that runs Python (clean's read pass) would otherwise start them itself:
    the worker daemon, a worker a core, their imports, and the JVM's side of the Arrow hop
    (bench/startup.py `first_job` measures it). Started here, that overlaps the
    driver's own work before that job (reading the input's schema, fingerprinting the input,
    checking the config against it), and the job finds the workers idle, ready for reuse
    (`spark.python.worker.reuse`). A plain thread's job belongs to no job group: it is not
    one of the run's jobs. A failure here is left to the run's own first Python job to meet.
    """
    cores = max(1, spark.sparkContext.defaultParallelism)

    def run() -> None:
        # The session may stop first (a bad input found by the driver); the run's own first
        # Python job reports any other failure.
        with contextlib.suppress(Exception):
            spark.range(cores, numPartitions=cores).mapInArrow(_warm, "id long").collect()

    thread = threading.Thread(target=run, name="corpusclean-python-workers", daemon=True)
    thread.start()
    return thread


def run_together(actions: Sequence[Callable[[], object]]) -> None:
    """Run `actions` (independent Spark actions, such as the writes of one stage) at once: the
    first in this thread, each other in a thread of its own that inherits this thread's local
    properties (job group and description, so its jobs count as the run's and the stage's).

    A local run's small jobs are mostly the driver's planning, one query at a time per thread;
    side by side, one query's planning overlaps another's tasks. Returns when all are done;
    raises the exception of the first action (in the given order) that raised one.
    """
    from pyspark.util import InheritableThread

    errors: list[BaseException | None] = [None] * len(actions)

    def guarded(i: int) -> Callable[[], None]:
        def body() -> None:
            try:
                actions[i]()
            except BaseException as exc:  # re-raised in the caller's thread below
                errors[i] = exc

        return body

    threads = [
        InheritableThread(target=guarded(i), name=f"corpusclean-action-{i}", daemon=True)
        for i in range(1, len(actions))
    ]
    for thread in threads:
        thread.start()
    try:
        if actions:
            guarded(0)()
    finally:
        for thread in threads:
            thread.join()
    for exc in errors:
        if exc is not None:
            raise exc


def count_jobs(spark: SparkSession, group: str) -> int:
    """Spark jobs started so far under the job group `group` (set with `setJobGroup`).

    Read from Spark's status store, which keeps the last `spark.ui.retainedJobs` (1000) jobs:
    a run of more jobs than that is counted as 1000. The length is asked of the Java array:
    PySpark's `statusTracker()` copies it an element per py4j call.
    """
    tracker = spark.sparkContext._jsc.statusTracker()
    return len(tracker.getJobIdsForGroup(group))


def effective_settings(spark: SparkSession, keys: list[str]) -> dict[str, str | None]:
    """What the running session holds for each of `keys` (for the report)."""
    out: dict[str, str | None] = {}
    for key in keys:
        value = spark.conf.get(key, None)
        if value is None:
            value = spark.sparkContext.getConf().get(key)
        out[key] = value
    return out


def executor_facts(spark: SparkSession) -> dict[str, int]:
    """Executors registered now (the driver not counted; 0 in local mode) and their cores.

    `defaultParallelism` is the total of the executors' cores on a cluster and N of local[N].
    """
    sc = spark.sparkContext
    executors = sc._jsc.sc().getExecutorIds().size()
    return {"executors": int(executors), "cores": int(sc.defaultParallelism)}


def _sees(path: str) -> tuple[str, bool]:
    import socket

    return socket.gethostname(), os.path.exists(path)


def check_shared_output(spark: SparkSession, output: str) -> None:
    """On a cluster, refuse an output folder the executors cannot see, before any work.

    Executors write the output's files and the driver renames them into place, so both must
    see one filesystem (NFS, Lustre, GPFS...). A probe file made by the driver beside the output
    is looked for by a few tasks; a node that does not see it is named in the error.
    """
    sc = spark.sparkContext
    if sc.master.startswith("local"):
        return
    import secrets

    from corpusclean.errors import InputError

    parent = Path(output.removeprefix("file://")).expanduser().absolute().parent
    parent.mkdir(parents=True, exist_ok=True)
    probe = parent / f".corpusclean-probe-{secrets.token_hex(6)}"
    probe.write_bytes(b"")
    try:
        tasks = max(2, int(sc.defaultParallelism))
        seen = sc.parallelize(range(tasks), tasks).map(lambda _: _sees(str(probe))).collect()
    finally:
        probe.unlink(missing_ok=True)
    blind = sorted({host for host, ok in seen if not ok})
    if blind:
        raise InputError(
            f"output {output}: executors on {', '.join(blind)} do not see {parent}; on a "
            "cluster the output must be on a filesystem every node mounts (NFS, Lustre, GPFS)"
        )
