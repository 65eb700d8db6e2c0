"""`clean` under SIGKILL and concurrent runs: the published output is always one complete run.

Each killed run is a real `corpusclean clean` process in its own session, held at a named point
by the CORPUSCLEAN_TEST_HOLD hook (corpusclean.testhook) or caught while Spark writes, then killed
with its whole process group (the JVM and the Python workers with it). The points are seeded
choices (see `_kill_points`), so a run of the suite is repeatable.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.parquet as pq
import pytest

from corpusclean.jobs import clean
from corpusclean.jobs.outputs.publish import check_output
from corpusclean.jobs.samples.dedup import generate
from corpusclean.testhook import ENV

pytestmark = [pytest.mark.spark, pytest.mark.e2e]

CLI = str(Path(sys.executable).with_name("corpusclean"))
FAST = ["--set", "near_dedup.enabled=false", "--set", "audit.enabled=false"]
# Spark settings by their full names in a config file (the `spark:` section takes them as is).
SPARK_YAML = """spark:
  spark.master: local[2]
  spark.driver.memory: 1g
  spark.sql.shuffle.partitions: 4
  spark.ui.showConsoleProgress: false
"""


@pytest.fixture(scope="module")
def corpora(tmp_path_factory, spark) -> dict[str, Path]:
    """Two seeded corpora, and the output an uninterrupted run publishes for the second."""
    root = tmp_path_factory.mktemp("crash")
    paths = {"a": root / "raw-a", "b": root / "raw-b", "ref": root / "ref-b"}
    generate(paths["a"], 200, seed=191)
    generate(paths["b"], 200, seed=192)
    (root / "spark.yaml").write_text(SPARK_YAML)
    paths["conf"] = root / "spark.yaml"
    assert clean.main(["--input", str(paths["b"]), "--output", str(paths["ref"]), *FAST]) == 0
    return paths


# The Spark-side kill points: "spark-write" is caught while Spark writes the staged features,
# the others are the hold points of corpusclean.testhook. A seed picks one of them (each costs a
# Spark start); CORPUSCLEAN_CRASH_SEED explores others, CORPUSCLEAN_CRASH_POINTS=all takes all.
SPARK_POINTS = ["spark-write", "read", "dedup", "write"]
SEED = int(os.environ.get("CORPUSCLEAN_CRASH_SEED", "19"))


def _kill_points() -> list[tuple[str, list[str]]]:
    """(point, extra args) of each killed run, in run order; the last one runs the audit."""
    if os.environ.get("CORPUSCLEAN_CRASH_POINTS") == "all":
        chosen = SPARK_POINTS
    else:
        chosen = random.Random(SEED).sample(SPARK_POINTS, 1)
    return [(p, FAST) for p in chosen] + [("publish", ["--set", "near_dedup.enabled=false"])]


def _rows(out: Path) -> pa.Table:
    assert (out / "_SUCCESS").is_file(), f"{out} is not a complete output"
    return ds.dataset(out / "data", format="parquet").to_table().sort_by("doc_id")


def _args(corpora: dict[str, Path], inp: str, out: Path, *extra: str) -> list[str]:
    return [
        CLI,
        "clean",
        "--input",
        str(corpora[inp]),
        "--output",
        str(out),
        "--config",
        str(corpora["conf"]),
        *extra,
    ]


def _start(args: list[str], out: Path, hold: Path | None, points: str) -> subprocess.Popen:
    env = dict(os.environ)
    if hold is not None:
        env[ENV] = f"{points}@{hold}"
    log = open(out.parent / f"log-{points or 'run'}.txt", "a")  # noqa: SIM115 (closed by the OS)
    return subprocess.Popen(
        args, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
    )


def _wait_for(proc: subprocess.Popen, ready, what: str, timeout: float = 400) -> None:
    deadline = time.monotonic() + timeout
    while not ready():
        if proc.poll() is not None:
            pytest.fail(f"run ended (rc {proc.returncode}) before {what}")
        if time.monotonic() > deadline:
            os.killpg(proc.pid, signal.SIGKILL)
            pytest.fail(f"run did not reach {what}")
        time.sleep(0.02)


def _kill(proc: subprocess.Popen) -> None:
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()


def _stagings(out: Path) -> list[Path]:
    runs = out.parent / f".{out.name}.runs"
    return sorted(p for p in runs.iterdir() if p.is_dir()) if runs.exists() else []


def test_sigkill_at_any_point_keeps_the_previous_output(corpora, tmp_path: Path) -> None:
    out = tmp_path / "clean"
    assert clean.main(["--input", str(corpora["a"]), "--output", str(out), *FAST]) == 0
    before = _rows(out)
    ref = _rows(corpora["ref"])
    assert not before.equals(ref), "the two corpora must publish different rows"
    hold = tmp_path / "hold"
    hold.mkdir()

    # Every kill is before the swap, so the output must stay the old one (the points after the
    # swap are Publisher's own, killed in tests/unit/test_publish.py).
    kills = _kill_points()
    for point, extra in kills:
        args = _args(corpora, "b", out, *extra)
        if point == "spark-write":
            proc = _start(args, out, None, "")
            _wait_for(
                proc,
                lambda: any((s / "_work" / "features").exists() for s in _stagings(out)),
                "the features write",
            )
        else:
            proc = _start(args, out, hold, point)
            _wait_for(proc, (hold / f"{point}.reached").exists, f"point {point}")
        _kill(proc)
        assert _rows(out).equals(before), f"output changed by a kill at {point}"
        # Each run clears the staging of the run killed before it: at most the last one stays.
        assert len(_stagings(out)) <= 1, _stagings(out)
        check_output(str(out), "clean")  # the killed run's lock is not stuck

    rerun = _start(_args(corpora, "b", out, *FAST), out, None, "")
    assert rerun.wait(timeout=600) == 0, (out.parent / "log-run.txt").read_text()[-3000:]
    assert _rows(out).equals(ref), "a rerun gives the rows of an uninterrupted run"
    assert not (tmp_path / ".clean.runs").exists(), "no staging left behind"
    assert not (tmp_path / ".clean.lock").exists(), "no lock left behind"


def test_concurrent_runs_one_is_refused(corpora, tmp_path: Path) -> None:
    out = tmp_path / "clean"
    hold = tmp_path / "hold"
    hold.mkdir()
    first = _start(_args(corpora, "b", out, *FAST), out, hold, "prepared")
    try:
        _wait_for(first, (hold / "prepared.reached").exists, "its lock")
        second = subprocess.run(
            _args(corpora, "a", out, *FAST),
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert second.returncode == 1, second.stderr[-3000:]
        lines = [ln for ln in second.stderr.splitlines() if ln.startswith("corpusclean clean:")]
        assert len(lines) == 1 and "Traceback" not in second.stderr, second.stderr[-3000:]
        assert f"pid {first.pid} on host" in lines[0]
        assert str(tmp_path / ".clean.lock") in lines[0]
        (hold / "prepared.go").write_text("")
        assert first.wait(timeout=300) == 0
    finally:
        if first.poll() is None:
            _kill(first)
    assert _rows(out).equals(_rows(corpora["ref"])), "the published output is the first run's"
    assert not (tmp_path / ".clean.runs").exists()


def test_an_output_holding_foreign_files_is_refused_before_spark(tmp_path: Path) -> None:
    from corpusclean.jobs.outputs.publish import Publisher

    out = tmp_path / "clean"
    p = Publisher(out, "clean")
    (p.prepare() / "data").mkdir()
    (p.staging / "data" / "part-0.parquet").write_text("")
    p.publish()
    (out / "my-notes.md").write_text("keep me")
    pq.write_table(pa.table({"doc_id": ["a"], "text": ["x" * 200]}), tmp_path / "raw.parquet")
    proc = subprocess.run(
        [CLI, "clean", "--input", str(tmp_path / "raw.parquet"), "--output", str(out)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 1
    assert proc.stderr.splitlines() == [
        f"corpusclean clean: error: output {out} holds 1 file(s) corpusclean did not write "
        "(my-notes.md); publishing replaces the whole folder, so move them out of it (or choose "
        "another --output) and rerun"
    ], "one line, and before Spark starts (no input error, no Spark output)"
    assert (out / "my-notes.md").read_text() == "keep me"


# Each killed run of the resume chain: where it is killed, and the stage the run after it starts
# with (the points are after a checkpoint: the read pass, the doc_id+exact unit, a frame near
# dedup materialised, the staged output).
RESUME_CHAIN = [
    ("read", "doc_id (read was done)"),
    ("decided:1", "near (decided-2 was done)"),
    ("materialised:1", "near (decided-2 was done)"),
    ("write", "gate (write was done)"),
]


def test_sigkill_after_each_stage_is_resumed_to_the_uninterrupted_output(
    corpora, tmp_path: Path
) -> None:
    ref = tmp_path / "ref"
    assert clean.main(["--input", str(corpora["b"]), "--output", str(ref)]) == 0
    out = tmp_path / "clean"
    hold = tmp_path / "hold"
    hold.mkdir()
    args = _args(corpora, "b", out)
    logs: list[str] = []
    for i, (point, _) in enumerate(RESUME_CHAIN):
        before = _stagings(out)
        proc = _start(args, out, hold, point)
        name = point.split(":")[0]
        _wait_for(proc, (hold / f"{name}.reached").exists, f"point {point}")
        _kill(proc)
        (hold / f"{name}.reached").unlink()
        logs.append((out.parent / f"log-{point}.txt").read_text())
        if i:
            want = f"resuming run {before[0].name} from stage {RESUME_CHAIN[i - 1][1]}"
            assert want in logs[-1], logs[-1][-3000:]
        assert len(_stagings(out)) == 1, "the killed run's staging is kept, and only it"
        assert not out.exists()
    assert "near       reusing" in logs[3], "the frame near dedup materialised is not redone"

    last = _stagings(out)[0].name
    final = _start(args, out, None, "")
    assert final.wait(timeout=600) == 0, (out.parent / "log-run.txt").read_text()[-3000:]
    log = (out.parent / "log-run.txt").read_text()
    assert f"resuming run {last} from stage {RESUME_CHAIN[-1][1]}" in log, log[-3000:]
    for table in ("data", "duplicates", "rejected"):
        got = ds.dataset(out / table, format="parquet").to_table()
        want = ds.dataset(ref / table, format="parquet").to_table()
        keys = [(c, "ascending") for c in ("doc_id", "cluster_id") if c in got.column_names]
        assert got.sort_by(keys).equals(want.sort_by(keys)), f"{table}/ differs"
    report = json.loads((out / "report.json").read_text())
    report_ref = json.loads((ref / "report.json").read_text())
    assert report["resumed_from"]["run_id"] == last
    # The funnel and every figure but timings (Spark settings differ: the runs above read
    # them from a config file, the reference shares the test session).
    untimed = {"seconds", "jobs", "run_id", "resumed_from", "output", "spark", "config"}
    assert _strip(report, untimed) == _strip(report_ref, untimed)
    assert not (tmp_path / ".clean.runs").exists() and not (tmp_path / ".clean.lock").exists()


def _strip(value: Any, keys: set[str]) -> Any:
    if isinstance(value, dict):
        return {k: _strip(v, keys) for k, v in value.items() if k not in keys}
    if isinstance(value, list):
        return [_strip(v, keys) for v in value]
    return value
