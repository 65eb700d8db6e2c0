"""`clean` resumes a crashed run of the same work, and refuses one it cannot trust.

The crashes here are exceptions raised inside the job (a Spark failure, Ctrl-C), run in this
process on the shared session; the SIGKILL chain through every stage is in test_clean_crash.py.
Every resumed output is compared with an uninterrupted run's: the same rows in data/,
duplicates/ and rejected/, and the same report.json but for timings and run ids.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pyarrow.dataset as ds
import pytest

from corpusclean.jobs import clean
from corpusclean.jobs.samples.dedup import generate

pytestmark = [pytest.mark.spark, pytest.mark.e2e]

TABLES = ("data", "duplicates", "rejected")
# What may differ between a resumed run's report and an uninterrupted one's; `spark` holds the
# shared test session's settings, which other tests may have changed in between.
TIMINGS = {"seconds", "jobs", "run_id", "resumed_from", "output", "started", "spark"}
BAD = [b"{not json", b"[1, 2]"]


@pytest.fixture(scope="module")
def corpus(tmp_path_factory, spark) -> dict[str, Path]:
    """A JSON Lines sample with every kind of duplicate and two bad lines, and the output of
    an uninterrupted run on it."""
    root = tmp_path_factory.mktemp("resume")
    generate(root / "raw", 400, seed=2121, fmt="jsonl")
    part = next((root / "raw").glob("*.jsonl"))
    part.write_bytes(part.read_bytes() + b"\n".join(BAD) + b"\n")
    ref = root / "ref"
    assert clean.main(_args(root / "raw", ref)) == 0
    return {"raw": root / "raw", "ref": ref}


def _args(raw: Path, out: Path, *extra: str) -> list[str]:
    return ["--input", str(raw), "--output", str(out), "--set", "input.bad_lines=reject", *extra]


def _rows(out: Path, table: str) -> list[dict[str, Any]]:
    rows = ds.dataset(out / table, format="parquet").to_table().to_pylist()
    return sorted(rows, key=lambda r: json.dumps(r, sort_keys=True, default=str))


def _untimed(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _untimed(v) for k, v in value.items() if k not in TIMINGS}
    if isinstance(value, list):
        return [_untimed(v) for v in value]
    return value


def _report(out: Path) -> dict[str, Any]:
    return json.loads((out / "report.json").read_text())


def assert_same_output(out: Path, ref: Path) -> None:
    for table in TABLES:
        assert _rows(out, table) == _rows(ref, table), f"{table}/ differs"
    assert _untimed(_report(out)) == _untimed(_report(ref))


def _crash(monkeypatch: pytest.MonkeyPatch, step: str, exc: BaseException) -> None:
    """Make the job's `step` raise `exc`, as a Spark failure or an interrupt there would."""

    def boom(*args: object, **kwargs: object) -> None:
        raise exc

    monkeypatch.setattr(clean, step, boom)


def _failed_run(corpus: dict[str, Path], out: Path, step: str, exc: BaseException, capsys) -> Path:
    """A run that crashed in `step`; returns its kept staging folder."""
    with pytest.MonkeyPatch.context() as mp:
        _crash(mp, step, exc)
        assert clean.main(_args(corpus["raw"], out)) != 0
    err = capsys.readouterr().err
    runs = [p for p in (out.parent / f".{out.name}.runs").iterdir() if p.is_dir()]
    assert len(runs) == 1, runs
    assert f"run {runs[0].name} failed; its finished stages are kept in {runs[0]}" in err, err
    owner = json.loads((runs[0].parent / f"{runs[0].name}.owner.json").read_text())
    assert owner["state"] == "failed"
    return runs[0]


@pytest.mark.parametrize(
    ("step", "exc", "resumes_at"),
    [
        ("_dedup", RuntimeError("executor lost"), "doc_id (read was done)"),
        ("_gate_and_audit", KeyboardInterrupt(), "gate (write was done)"),
    ],
)
def test_a_crashed_run_is_resumed_after_its_last_finished_stage(
    corpus, tmp_path: Path, capsys, step: str, exc: BaseException, resumes_at: str
) -> None:
    out = tmp_path / "clean"
    staging = _failed_run(corpus, out, step, exc, capsys)
    assert not out.exists(), "a crashed run publishes nothing"

    assert clean.main(_args(corpus["raw"], out)) == 0
    err = capsys.readouterr().err
    assert f"resuming run {staging.name} from stage {resumes_at}" in err, err
    if step == "_gate_and_audit":
        assert "read       started" not in err and "write      started" not in err
    assert_same_output(out, corpus["ref"])
    report = _report(out)
    assert report["resumed_from"]["run_id"] == staging.name
    assert report["rejected"] == _report(corpus["ref"])["rejected"], "bad lines came back"
    assert not (tmp_path / ".clean.runs").exists(), "the adopted staging became the output"


def test_a_read_pass_that_kept_no_refused_texts_still_resumes(
    corpus, tmp_path: Path, capsys
) -> None:
    """A staging whose read pass did not keep the refused rows' texts (an earlier build's)
    resumes with rejected/ whole: the texts are read from the input again."""
    out = tmp_path / "clean"
    build = clean._read_spec
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(
            clean,
            "_read_spec",
            lambda *a, **k: dataclasses.replace(build(*a, **k), refused_text=False),
        )
        staging = _failed_run(corpus, out, "_dedup", RuntimeError("executor lost"), capsys)
    assert clean.main(_args(corpus["raw"], out)) == 0
    err = capsys.readouterr().err
    assert f"resuming run {staging.name} from stage doc_id (read was done)" in err, err
    assert_same_output(out, corpus["ref"])
    assert any(r["text"] for r in _rows(out, "rejected"))


def test_other_work_starts_afresh_and_removes_the_staging(
    corpus, tmp_path: Path, capsys, spark
) -> None:
    out = tmp_path / "clean"
    staging = _failed_run(corpus, out, "_write", RuntimeError("disk"), capsys)
    # Another config: its work cannot be reused, and it is swept like any gone run's.
    assert clean.main(_args(corpus["raw"], out, "--set", "near_dedup.threshold=0.9")) == 0
    err = capsys.readouterr().err
    assert f"not resuming run {staging.name}: its config section 'near_dedup' differs" in err
    assert "resuming run" not in err.replace("not resuming run", "")
    assert not staging.exists()

    staging = _failed_run(corpus, out, "_write", RuntimeError("disk"), capsys)
    assert clean.main([*_args(corpus["raw"], out), "--no-resume"]) == 0
    err = capsys.readouterr().err
    assert "resuming" not in err and not staging.exists()
    assert_same_output(out, corpus["ref"])

    # Spark settings change how a run executes, not what it computes: they do not count.
    staging = _failed_run(corpus, out, "_write", RuntimeError("disk"), capsys)
    argv = _args(corpus["raw"], out, "--set", "spark.sql.shuffle.partitions=3")
    before = spark.conf.get("spark.sql.shuffle.partitions")
    try:
        assert clean.main(argv) == 0
    finally:
        spark.conf.set("spark.sql.shuffle.partitions", before)  # the shared session's
    assert f"resuming run {staging.name} from stage write" in capsys.readouterr().err
    for table in TABLES:
        assert _rows(out, table) == _rows(corpus["ref"], table), f"{table}/ differs"


def test_a_changed_input_file_is_not_resumed(tmp_path: Path, capsys) -> None:
    raw = tmp_path / "raw"
    generate(raw, 200, seed=7, fmt="jsonl")
    out = tmp_path / "clean"
    corpus = {"raw": raw}
    staging = _failed_run(corpus, out, "_dedup", RuntimeError("executor lost"), capsys)
    part = next(raw.glob("*.jsonl"))
    part.write_bytes(part.read_bytes() + b'{"doc_id": "late", "text": "a late document"}\n')
    assert clean.main(_args(raw, out)) == 0
    err = capsys.readouterr().err
    assert f"not resuming run {staging.name}: input file file://{part} changed" in err, err


def test_row_ids_that_would_differ_start_afresh(corpus, tmp_path: Path, capsys) -> None:
    out = tmp_path / "clean"
    staging = _failed_run(corpus, out, "_dedup", RuntimeError("executor lost"), capsys)
    # As if the killed run's session had split the input another way (other parallelism).
    read = staging / "_work" / "_checkpoints" / "00-read.json"
    state = json.loads(read.read_text())
    state["layout"] = (state["layout"] or 0) ^ 1
    read.write_text(json.dumps(state))
    assert clean.main(_args(corpus["raw"], out)) == 0
    err = capsys.readouterr().err
    assert f"not resuming run {staging.name}: this session splits the input differently" in err
    assert "read       started" in err, "the read pass ran again"
    assert_same_output(out, corpus["ref"])
    assert _report(out)["resumed_from"] is None


def test_bad_input_found_mid_run_keeps_nothing(tmp_path: Path, capsys) -> None:
    raw = tmp_path / "raw"
    generate(raw, 200, seed=8, fmt="jsonl")
    part = next(raw.glob("*.jsonl"))
    part.write_bytes(part.read_bytes() + b"{broken\n")
    out = tmp_path / "clean"
    # input.bad_lines=fail: the read pass finds the line, an input error, not a crash.
    assert clean.main(["--input", str(raw), "--output", str(out)]) == 1
    assert "line 201" in capsys.readouterr().err
    assert not (tmp_path / ".clean.runs").exists(), "a rerun needs another input: nothing kept"


def test_a_near_stage_that_crashed_half_way_reuses_its_frames(
    corpus, tmp_path: Path, capsys
) -> None:
    from corpusclean.pipelines.near_dedup import NearDedup

    out = tmp_path / "clean"
    # Candidates in Spark: pairs, signatures and edges are materialised before the survivors.
    spark_path = ["--set", "near_dedup.driver_max_keys=0"]
    with pytest.MonkeyPatch.context() as mp:

        def boom(*args: object, **kwargs: object) -> None:
            raise RuntimeError("executor lost")

        mp.setattr(NearDedup, "_survivors", boom)
        assert clean.main(_args(corpus["raw"], out, *spark_path)) != 0
    capsys.readouterr()
    assert clean.main(_args(corpus["raw"], out, *spark_path)) == 0
    err = capsys.readouterr().err
    assert "from stage near (decided-2 was done)" in err, err
    for frame in ("pairs", "signatures", "edges"):
        assert f"near       reusing {frame} from the resumed run" in err
    assert "reusing clusters" not in err
    for table in TABLES:
        assert _rows(out, table) == _rows(corpus["ref"], table), f"{table}/ differs"
