"""Shared fixtures: one session-scoped local[2] SparkSession for every Spark test."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
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


@pytest.fixture
def small_fs(tmp_path: Path) -> Iterator[Path]:
    """A 5 MiB tmpfs mounted at tmp_path/fs, for disk-full tests (skipped where mounting is
    not allowed: it needs root or CAP_SYS_ADMIN)."""
    path = tmp_path / "fs"
    path.mkdir()
    mount = ["mount", "-t", "tmpfs", "-o", "size=5m", "tmpfs", str(path)]
    mounted = subprocess.run(mount, capture_output=True, text=True, check=False)
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a small tmpfs here ({mounted.stderr.strip()[:200]})")
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], check=False)


def _fill(folder: Path, leave: int) -> None:
    stat = os.statvfs(folder)
    (folder / "filler").write_bytes(bytes(max(0, stat.f_bavail * stat.f_frsize - leave)))


@pytest.fixture
def fill_disk() -> object:
    """`fill_disk(folder, leave)` writes `folder/filler` so that about `leave` bytes stay free
    on the folder's filesystem."""
    return _fill
