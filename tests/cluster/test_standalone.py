"""The jobs on a real standalone Spark cluster, submitted from a wheel install outside the checkout.

One master and two workers (1 core each) on 127.0.0.1. Executors never run this test's
interpreter: clean's get their Python from the installed venv packed by `corpusclean submit
--env-archive`, pack's and check's run the installed venv's Python in place (submit's other way).
The cluster's clean and pack each lose a worker half-way, and their outputs are compared with
local mode's on the same input and config: a worker is SIGKILLed in the middle of clean's
near-dedup and of pack's shard writes. (An application with the packed venv unpacks it on the
driver and on every executor, about 6 s of CPU each here, so the fault runs are the cluster runs
rather than extra ones, and only clean ships the archive.)

How a kill is made to land mid-stage: the tasks of the stage hold at a test hold point
(corpusclean.testhook: `near.verify` in near-dedup's verification tasks, `pack.task` in pack's
write tasks) until released. A watcher sees them arrive, asks the driver's REST API
(`/api/v1/applications/APP/stages?status=active` and the stage's task list) which executor runs
a task of the stage named in its job description (`corpusclean clean: near`, `corpusclean pack:
write`), SIGKILLs the worker that started that executor (found by its work dir), and only then
releases the tasks. The event log proves it afterwards: that executor was removed while a stage
of that name was running, and its task was run again elsewhere.
"""

from __future__ import annotations

import hashlib
import json
import os
import shlex
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.dataset as ds
import pytest

from corpusclean.jobs.samples.dedup import generate

pytestmark = [pytest.mark.cluster, pytest.mark.e2e]

CHECKOUT = Path(__file__).parents[2]

N_DOCS = 4_000
# Executors of 1 GB on 3 GB workers; 8 shuffle partitions where local mode uses 4, so the
# comparison also shows the output does not depend on partitioning.
SMALL = [
    "--conf",
    "spark.executor.memory=1g",
    "--conf",
    "spark.driver.memory=1g",
    "--conf",
    "spark.sql.shuffle.partitions=8",
    # Every JVM of these runs is short and its data small: C1 alone spares the two cores the
    # optimising compiler's work (as a local run on a small input does, jobs/runtime/session.py).
    "--conf",
    "spark.driver.extraJavaOptions=-XX:TieredStopAtLevel=1",
    "--conf",
    "spark.executor.extraJavaOptions=-XX:TieredStopAtLevel=1",
]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Runs:
    """Folders of the runs shared by the tests of this module."""

    root: Path
    raw: Path
    archive: Path
    # Per fault run (by hold point): whether the event log shows the killed executor lost
    # mid-stage, and the run's output tail for the failure message.
    faults: dict[str, tuple[bool, str]] = field(default_factory=dict)


@pytest.fixture(scope="module")
def runs(installed, tmp_path_factory) -> Runs:
    root = tmp_path_factory.mktemp("cluster-runs")
    raw = root / "raw"
    generate(raw, N_DOCS, seed=21)
    archive = root / "env.tar.gz"
    proc = installed.run("submit", "--env-archive", str(archive), cwd=root)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert archive.is_file()
    return Runs(root, raw, archive)


def test_env_archive_leaves_out_what_tasks_never_import(runs: Runs) -> None:
    """pyspark's jars (the cluster has its own Spark), packages' test suites and pip are not
    shipped; the modules the tasks import are."""
    import tarfile

    with tarfile.open(runs.archive) as tar:
        names = tar.getnames()
    site = next(n for n in names if n.endswith("/site-packages/corpusclean/__init__.py"))
    prefix = site.removesuffix("corpusclean/__init__.py")
    assert not [n for n in names if n.startswith(prefix + "pyspark/jars/")]
    assert not [n for n in names if n.startswith(prefix + "pip/")]
    assert not [n for n in names if n.startswith(prefix) and "/tests/" in n]
    for module in ("pyspark/daemon.py", "pyarrow/__init__.py", "numba/__init__.py"):
        assert prefix + module in names, module


def _submit(
    installed, cluster, runs: Runs, *job: str, conf: list[str] = (), archive: bool = True
) -> Any:
    """`corpusclean submit` of `job`; executors get their Python from the packed venv, or
    with `archive=False` run the installed venv's interpreter by its path (what submit does
    where every node has the environment at the same place)."""
    args = ["submit", "--master", cluster.url, "--master-ui", cluster.ui]
    args += ["--properties-file", "cluster"]
    if archive:
        args += ["--env-archive", str(runs.archive)]
    args += [*SMALL, *conf, *job]
    return installed.run(*args, cwd=runs.root, timeout=900)


def _local(installed, runs: Runs, *job: str) -> Any:
    return installed.run(*job, cwd=runs.root, timeout=900)


def _table(folder: Path) -> pa.Table:
    table = ds.dataset(folder, format="parquet").to_table()
    keys = [(c, "ascending") for c in ("doc_id", "cluster_id", "stage") if c in table.column_names]
    return table.sort_by(keys)


def _shard_hashes(folder: Path) -> dict[str, str]:
    return {
        p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(folder.glob("*.tar"))
    }


@pytest.fixture(scope="module")
def local_clean(installed, runs: Runs) -> Path:
    """Local mode, the wheel install run from the checkout's root: Spark's Python workers put
    their working directory first on sys.path, so a checkout folder named like the package would
    shadow the installed one in every task."""
    out = runs.root / "local-clean"
    # The audit does not change the output; the cluster run has it on.
    args = ["clean", "--input", str(runs.raw), "--output", str(out), "--set", "audit.enabled=false"]
    # The README's own example: the setting must reach Spark (and the report must show it).
    args += ["--set", "spark.sql.shuffle.partitions=4"]
    proc = installed.run(*args, cwd=CHECKOUT, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "Ignoring non-Spark config property" not in proc.stderr
    report = json.loads((out / "report.json").read_text())
    assert report["spark"]["shuffle_partitions"] == "4"
    assert report["spark"]["settings"] == {"spark.sql.shuffle.partitions": "4"}
    return out


@pytest.fixture(scope="module")
def cluster_clean(installed, standalone_cluster, runs: Runs) -> Path:
    """clean on the cluster, audit on, losing a worker in the middle of near-dedup."""
    out = runs.root / "cluster-clean"
    job = ["clean", "--input", str(runs.raw), "--output", str(out)]
    proc = _faulty_run(
        standalone_cluster,
        runs,
        "corpusclean clean: near",
        "near.verify",
        lambda conf: _submit(installed, standalone_cluster, runs, *job, conf=conf),
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return out


def test_clean_on_the_cluster_equals_local_mode(local_clean: Path, cluster_clean: Path) -> None:
    for part in ("data", "duplicates", "rejected"):
        assert _table(cluster_clean / part).equals(_table(local_clean / part)), part
    report = json.loads((cluster_clean / "report.json").read_text())
    assert report["spark"]["master"].startswith("spark://127.0.0.1:")
    # One of the two executors was killed with its worker; the restarted worker's executor
    # may or may not have registered by the time the report is written.
    assert report["spark"]["executors"] in (1, 2)
    assert report["audit"]["ran"] and report["audit"]["passed"]
    assert json.loads((local_clean / "report.json").read_text())["spark"]["executors"] == 0
    assert not json.loads((local_clean / "report.json").read_text())["audit"]["ran"]


@pytest.fixture(scope="module")
def local_pack(installed, runs: Runs, local_clean: Path) -> Path:
    out = runs.root / "local-shards"
    proc = _local(installed, runs, "pack", "--input", str(local_clean), "--output", str(out))
    assert proc.returncode == 0, proc.stderr[-3000:]
    return out


@pytest.fixture(scope="module")
def cluster_pack(installed, standalone_cluster, runs: Runs, cluster_clean: Path) -> Path:
    """pack on the cluster, run from the line `submit --print-command` prints (a user's
    script), its executors running the installed venv's Python in place, losing a worker
    while it writes shards."""
    out = runs.root / "cluster-shards"
    job = ["pack", "--input", str(cluster_clean), "--output", str(out)]
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYSPARK_", "PYTHONPATH"))}

    def run(conf: list[str]) -> Any:
        printed = _submit(
            installed, standalone_cluster, runs, "--print-command", *job, conf=conf, archive=False
        )
        assert printed.returncode == 0, printed.stderr[-2000:]
        cmd = shlex.split(printed.stdout.strip())
        assert str(installed.bin.parent) in cmd[cmd.index("--input") - 1]  # the installed job
        # Executors run the installed venv's Python in place (the clean run covers the packed
        # venv, which every application unpacks on the driver and on each executor).
        assert f"spark.pyspark.python={installed.bin / 'python'}" in cmd
        return subprocess.run(
            cmd, cwd=runs.root, env=env, capture_output=True, text=True, timeout=900
        )

    proc = _faulty_run(standalone_cluster, runs, "corpusclean pack: write", "pack.task", run)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    return out


def test_pack_on_the_cluster_equals_local_mode(
    installed, runs: Runs, local_pack: Path, cluster_pack: Path
) -> None:
    hashes = _shard_hashes(cluster_pack)
    assert hashes and hashes == _shard_hashes(local_pack)
    verify = _local(installed, runs, "pack", "--verify", str(cluster_pack))
    assert verify.returncode == 0, verify.stderr[-2000:]


def test_check_runs_on_the_cluster(
    installed, standalone_cluster, runs: Runs, cluster_clean: Path
) -> None:
    """check on the cluster, its executors running the installed venv's Python in place (the
    clean run covers the packed venv)."""
    report = runs.root / "check.json"
    job = ["check", "--input", str(cluster_clean), "--report", str(report)]
    proc = _submit(installed, standalone_cluster, runs, *job, archive=False)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert json.loads(report.read_text())["verdict"] == "pass"
    assert f"spark.pyspark.python={installed.bin / 'python'}" in proc.stderr


def test_submit_refuses_executors_no_worker_can_hold(
    installed, standalone_cluster, runs: Runs
) -> None:
    """The shipped cluster properties ask for 4g executors; the workers have 3 GB each."""
    args = ["submit", "--master", standalone_cluster.url, "--master-ui", standalone_cluster.ui]
    args += ["--properties-file", "cluster", "clean", "--input", str(runs.raw), "--output", "x"]
    proc = installed.run(*args, cwd=runs.root, timeout=120)
    assert proc.returncode == 1
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "no alive worker of" in lines[0], proc.stderr[-2000:]
    assert "spark.executor.memory=3072m" in lines[0]
    assert not (runs.root / "x").exists()


class Killer:
    """Kills the worker running a task that holds at `point`, then lets the tasks go on.

    The job's tasks wait at the hold point (corpusclean.testhook, passed to the executors as
    spark.executorEnv.CORPUSCLEAN_TEST_HOLD) until the `.go` file exists, so the kill cannot
    fall between two short tasks: the watcher sees `POINT.reached`, asks the driver's REST API
    which executors run tasks of the stage named `stage`, kills the worker of one, and only
    then writes `POINT.go`.
    """

    def __init__(self, cluster, ui_port: int, stage: str, point: str, holds: Path) -> None:
        self.cluster = cluster
        self.api = f"http://127.0.0.1:{ui_port}/api/v1/applications"
        self.stage, self.point, self.holds = stage, point, holds
        self.killed: int | None = None
        self.executor: str | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True)

    def __enter__(self) -> Killer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=30)
        self._release()

    def _release(self) -> None:
        (self.holds / f"{self.point}.go").write_text("")

    def _get(self, path: str) -> Any:
        with urllib.request.urlopen(f"{self.api}{path}", timeout=5) as resp:
            return json.loads(resp.read())

    def _watch(self) -> None:
        reached = self.holds / f"{self.point}.reached"
        deadline = time.monotonic() + 600
        while not self._stop.is_set() and time.monotonic() < deadline:
            time.sleep(0.2)
            if not reached.exists():
                continue
            try:
                if self._kill_one():
                    break
            except (OSError, ValueError, KeyError):
                continue  # the driver's UI is busy; ask again
        self._release()

    def _kill_one(self) -> bool:
        (app,) = self._get("")
        for stage in self._get(f"/{app['id']}/stages?status=active"):
            if self.stage not in (stage.get("description") or ""):
                continue
            tasks = self._get(
                f"/{app['id']}/stages/{stage['stageId']}/{stage['attemptId']}/taskList?length=10000"
            )
            running = {t["executorId"] for t in tasks if t.get("status") == "RUNNING"}
            for executor in sorted(running - {"driver"}):
                worker = self.cluster.worker_of(app["id"], executor)
                if worker is not None:
                    self.cluster.kill_worker(worker)
                    self.killed, self.executor = worker, executor
                    return True
        return False


def _lost_mid_stage(events_dir: Path, stage: str, executor: str) -> bool:
    """True when the event log shows `executor` removed while a `stage` stage was running."""
    logs = [p for p in events_dir.iterdir() if p.is_file() and not p.name.startswith(".")]
    assert len(logs) == 1, f"expected one event log in {events_dir}, found {logs}"
    running: set[int] = set()
    for line in logs[0].read_text().splitlines():
        event = json.loads(line)
        kind = event.get("Event")
        if kind == "SparkListenerStageSubmitted":
            props = event.get("Properties") or {}
            if stage in props.get("spark.job.description", ""):
                running.add(event["Stage Info"]["Stage ID"])
        elif kind == "SparkListenerStageCompleted":
            running.discard(event["Stage Info"]["Stage ID"])
        elif kind == "SparkListenerExecutorRemoved" and event["Executor ID"] == executor:
            return bool(running)
    return False


def _faulty_run(
    cluster, runs: Runs, stage: str, point: str, submit: Callable[[list[str]], Any]
) -> Any:
    """`submit(conf)` with a worker killed while a task of `stage` holds at `point`; the
    evidence that the kill landed mid-stage goes to `runs.faults[point]`."""
    name = point.replace(".", "-")
    events, holds = runs.root / f"events-{name}", runs.root / f"holds-{name}"
    events.mkdir()
    holds.mkdir()
    port = _free_port()
    conf = [
        "--conf",
        f"spark.ui.port={port}",
        "--conf",
        f"spark.executorEnv.CORPUSCLEAN_TEST_HOLD={point}@{holds}",
        "--conf",
        "spark.eventLog.enabled=true",
        "--conf",
        f"spark.eventLog.dir=file://{events}",
        # Spark 4 rolls and zstd-compresses event logs by default: one plain file is read here.
        "--conf",
        "spark.eventLog.rolling.enabled=false",
        "--conf",
        "spark.eventLog.compress=false",
    ]
    with Killer(cluster, port, stage, point, holds) as killer:
        proc = submit(conf)
    try:
        tail = proc.stdout[-1500:] + proc.stderr[-1500:]
        lost = (
            killer.killed is not None
            and killer.executor is not None
            and _lost_mid_stage(events, stage, killer.executor)
        )
        runs.faults[point] = (
            lost,
            f"killed worker {killer.killed}, executor {killer.executor}: {tail}",
        )
    finally:
        if killer.killed is not None:
            cluster.start_worker(killer.killed)
    return proc


def test_clean_survives_a_worker_killed_during_near_dedup(runs: Runs, cluster_clean: Path) -> None:
    """The cluster's clean lost an executor while a near-dedup stage ran (the event log says
    so), and still gave local mode's output (test_clean_on_the_cluster_equals_local_mode)."""
    lost, why = runs.faults["near.verify"]
    assert lost, f"no executor was lost mid 'corpusclean clean: near': {why}"


def test_pack_survives_a_worker_killed_while_writing_shards(runs: Runs, cluster_pack: Path) -> None:
    """The cluster's pack lost an executor while writing shards, and its shards are local
    mode's byte for byte (test_pack_on_the_cluster_equals_local_mode) and verify."""
    lost, why = runs.faults["pack.task"]
    assert lost, f"no executor was lost mid 'corpusclean pack: write': {why}"


def _env() -> dict[str, str]:
    return {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1", "PYSPARK_PYTHON": sys.executable}


def test_plain_spark_submit_answers_bad_input_in_one_line(tmp_path: Path) -> None:
    """The job file under a bare spark-submit: a bad input is one line and exit 1 there too."""
    import pyspark

    submit = str(Path(pyspark.__file__).parent / "bin" / "spark-submit")
    job = Path(__file__).parents[2] / "jobs" / "clean.py"
    args = ["--input", str(tmp_path / "nope"), "--output", str(tmp_path / "o")]
    bad = subprocess.run(
        [submit, "--master", "local[1]", str(job), *args],
        capture_output=True,
        text=True,
        env=_env(),
        timeout=300,
    )
    assert bad.returncode == 1
    # spark-submit merges the Python driver's stderr into its stdout.
    assert "does not exist" in bad.stdout + bad.stderr
