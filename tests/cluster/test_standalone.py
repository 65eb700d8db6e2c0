"""The jobs on a real standalone Spark cluster (master + worker on 127.0.0.1), via spark-submit."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pyarrow.dataset as ds
import pytest

from corpusclean.jobs.sample import generate

pytestmark = [pytest.mark.cluster, pytest.mark.e2e]

BIN = Path(sys.executable).parent


def _env() -> dict[str, str]:
    return {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1", "PYSPARK_PYTHON": sys.executable}


def test_clean_on_a_standalone_cluster(standalone_cluster, tmp_path: Path) -> None:
    cluster = standalone_cluster.url
    raw = tmp_path / "raw"
    generate(raw, 1_500, seed=21)
    out = tmp_path / "clean"
    cmd = [
        str(BIN / "corpusclean"),
        "submit",
        "--master",
        cluster,
        "--properties-file",
        "cluster",
        "--master-ui",
        standalone_cluster.ui,
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
