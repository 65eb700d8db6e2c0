"""The jobs on a real standalone Spark cluster (master + worker on 127.0.0.1), via spark-submit."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pyarrow.dataset as ds
import pytest

from corpusclean.jobs.sample import generate

pytestmark = [pytest.mark.cluster, pytest.mark.e2e]

BIN = Path(sys.executable).parent


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _wait_for_port(port: int, proc: subprocess.Popen, timeout: float = 90) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"process exited with {proc.returncode} before listening")
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.5)
    raise TimeoutError(f"nothing listens on 127.0.0.1:{port} after {timeout}s")


def _spark_class() -> str:
    import pyspark

    return str(Path(pyspark.__file__).parent / "bin" / "spark-class")


def _start(args: list[str], log: Path) -> subprocess.Popen:
    env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1", "SPARK_NO_DAEMONIZE": "1"}
    return subprocess.Popen(
        [_spark_class(), *args],
        stdout=log.open("w"),
        stderr=subprocess.STDOUT,
        env=env,
        start_new_session=True,  # its own process group, so teardown stops all it started
    )


def _stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


@pytest.fixture(scope="module")
def cluster(tmp_path_factory) -> Iterator[str]:
    logs = tmp_path_factory.mktemp("cluster-logs")
    port, ui, wport, wui = (_free_port() for _ in range(4))
    master = _start(
        [
            "org.apache.spark.deploy.master.Master",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--webui-port",
            str(ui),
        ],
        logs / "master.log",
    )
    worker = None
    try:
        _wait_for_port(port, master)
        url = f"spark://127.0.0.1:{port}"
        worker = _start(
            [
                "org.apache.spark.deploy.worker.Worker",
                url,
                "--host",
                "127.0.0.1",
                "--port",
                str(wport),
                "--webui-port",
                str(wui),
                "--cores",
                "2",
                "--memory",
                "3g",
            ],
            logs / "worker.log",
        )
        _wait_for_port(wport, worker)
        deadline = time.monotonic() + 60
        while "Successfully registered" not in (logs / "worker.log").read_text():
            if time.monotonic() > deadline:
                raise TimeoutError("the worker never registered with the master")
            time.sleep(0.5)
        yield url
    finally:
        if worker is not None:
            _stop(worker)
        _stop(master)


def _env() -> dict[str, str]:
    return {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1", "PYSPARK_PYTHON": sys.executable}


def test_clean_on_a_standalone_cluster(cluster: str, tmp_path: Path) -> None:
    raw = tmp_path / "raw"
    generate(raw, 1_500, seed=21)
    out = tmp_path / "clean"
    cmd = [
        str(BIN / "corpusclean"),
        "submit",
        "--master",
        cluster,
        "--properties-file",
        str(Path(__file__).parents[2] / "conf/spark/cluster.properties"),
        # The test worker has 3 GB: the cluster defaults ask for more per executor.
        "--conf",
        "spark.executor.memory=1g",
        "--conf",
        "spark.driver.memory=1g",
        "clean",
        "--input",
        str(raw),
        "--output",
        str(out),
        "--set",
        "audit.enabled=false",
        "--set",
        "spark.sql.shuffle.partitions=4",
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=_env(), timeout=420)
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = json.loads((out / "report.json").read_text())
    assert report["spark"]["master"] == cluster
    assert (out / "_SUCCESS").exists()
    data = ds.dataset(out / "data").to_table(columns=["doc_id"])
    assert data.num_rows == report["output_rows"] > 1_000


def test_plain_spark_submit_local(tmp_path: Path) -> None:
    raw = tmp_path / "raw"
    generate(raw, 500, seed=22)
    out = tmp_path / "clean"
    import pyspark

    submit = str(Path(pyspark.__file__).parent / "bin" / "spark-submit")
    job = Path(__file__).parents[2] / "jobs" / "clean.py"
    cmd = [
        submit,
        "--master",
        "local[2]",
        str(job),
        "--input",
        str(raw),
        "--output",
        str(out),
        "--set",
        "audit.enabled=false",
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=_env(), timeout=420)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert json.loads((out / "report.json").read_text())["spark"]["master"] == "local[2]"
    bad = subprocess.run(
        [
            submit,
            "--master",
            "local[1]",
            str(job),
            "--input",
            str(tmp_path / "nope"),
            "--output",
            str(tmp_path / "o"),
        ],
        capture_output=True,
        text=True,
        env=_env(),
        timeout=300,
    )
    assert bad.returncode == 1
    # spark-submit merges the Python driver's stderr into its stdout.
    assert "does not exist" in bad.stdout + bad.stderr
