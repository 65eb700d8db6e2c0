"""Shared fixtures: one session-scoped local[2] SparkSession for every Spark test."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

# Workers must run this interpreter, the one that has corpusclean installed.
os.environ["PYSPARK_PYTHON"] = sys.executable
os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
# Spark binds to loopback only: tests never listen on an external interface.
os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")


@pytest.fixture(scope="session")
def spark() -> Iterator[object]:
    """A small local SparkSession shared by all tests (jobs reuse it as the active session)."""
    from pyspark.sql import SparkSession

    session = (
        SparkSession.builder.master("local[2]")
        .appName("corpusclean-tests")
        .config("spark.sql.shuffle.partitions", "4")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.driver.memory", "2g")
        .config("spark.sql.execution.arrow.pyspark.enabled", "true")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


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


@dataclass(frozen=True)
class Cluster:
    """A running standalone cluster: its master URL and the master's web UI."""

    url: str
    ui: str


@pytest.fixture(scope="session")
def standalone_cluster(tmp_path_factory) -> Iterator[Cluster]:
    """A standalone master and one worker (2 cores, 3 GB) on 127.0.0.1, stopped by pid."""
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
        yield Cluster(url, f"http://127.0.0.1:{ui}")
    finally:
        if worker is not None:
            _stop(worker)
        _stop(master)
