"""Write-audit-publish on the local filesystem, and paths that must not collide."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from corpusclean.jobs import publish as pub
from corpusclean.jobs.errors import InputError
from corpusclean.jobs.paths import check_output_vs_input, detect_format
from corpusclean.jobs.publish import Publisher


def _stage(p: Publisher, content: str) -> None:
    staging = p.prepare()
    (staging / "data").mkdir()
    (staging / "data" / "part.txt").write_text(content)


def test_first_publish_and_replace(tmp_path: Path) -> None:
    out = tmp_path / "out"
    first = Publisher(out, "clean")
    _stage(first, "one")
    first.publish()
    assert (out / "_SUCCESS").exists()
    assert json.loads((out / pub.MARKER).read_text())["run_id"] == first.run_id
    second = Publisher(out, "clean")
    _stage(second, "two")
    # Until publish, readers see the first run's output.
    assert (out / "data" / "part.txt").read_text() == "one"
    second.publish()
    assert (out / "data" / "part.txt").read_text() == "two"
    assert not second.runs_dir.exists(), "nothing left behind after a clean publish"


def test_two_rename_fallback(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(pub, "_exchange", lambda a, b: False)
    out = tmp_path / "out"
    for content in ("one", "two"):
        p = Publisher(out, "clean")
        _stage(p, content)
        p.publish()
    assert (out / "data" / "part.txt").read_text() == "two"


def test_repair_after_crash_between_renames(tmp_path: Path) -> None:
    out = tmp_path / "out"
    p = Publisher(out, "clean")
    _stage(p, "one")
    p.publish()
    # Simulate a crash after `output -> .replaced` and before `staging -> output`.
    crashed = Publisher(out, "clean")
    crashed.runs_dir.mkdir()
    out.rename(crashed.runs_dir / "x.replaced")
    Publisher(out, "clean").prepare()
    assert (out / "data" / "part.txt").read_text() == "one"


def test_refuses_foreign_or_other_job_folders(tmp_path: Path) -> None:
    foreign = tmp_path / "mine"
    foreign.mkdir()
    (foreign / "notes.txt").write_text("keep me")
    with pytest.raises(InputError, match="did not write"):
        Publisher(foreign, "clean").prepare()
    assert (foreign / "notes.txt").read_text() == "keep me"
    packed = tmp_path / "packed"
    p = Publisher(packed, "pack")
    _stage(p, "x")
    p.publish()
    with pytest.raises(InputError, match="corpusclean pack"):
        Publisher(packed, "clean").prepare()


def test_discard_leaves_published_output(tmp_path: Path) -> None:
    out = tmp_path / "out"
    p = Publisher(out, "clean")
    _stage(p, "one")
    p.publish()
    failed = Publisher(out, "clean")
    _stage(failed, "broken")
    failed.discard()
    assert (out / "data" / "part.txt").read_text() == "one"
    assert not failed.staging.exists()


def test_output_must_not_collide_with_input(tmp_path: Path) -> None:
    inp = tmp_path / "raw"
    inp.mkdir()
    for bad in (inp, inp / "clean", tmp_path):
        with pytest.raises(InputError):
            check_output_vs_input([str(inp)], str(bad))
    check_output_vs_input([str(inp)], str(tmp_path / "clean"))
    check_output_vs_input([str(inp / "*.parquet")], str(tmp_path / "clean"))


def test_detect_format(tmp_path: Path) -> None:
    assert detect_format("x.parquet", "auto") == "parquet"
    assert detect_format("x.jsonl.gz", "auto") == "jsonl"
    assert detect_format("whatever", "jsonl") == "jsonl"
    folder = tmp_path / "d"
    folder.mkdir()
    (folder / "a.jsonl").write_text("{}\n")
    (folder / "_SUCCESS").write_text("")
    assert detect_format(str(folder), "auto") == "jsonl"
    (folder / "b.parquet").write_text("")
    with pytest.raises(InputError, match="mixes"):
        detect_format(str(folder), "auto")
    with pytest.raises(InputError, match="does not exist"):
        detect_format(str(tmp_path / "missing"), "auto")
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(InputError, match="no data files"):
        detect_format(str(empty), "auto")
    with pytest.raises(InputError, match=r"input\.format"):
        detect_format("hdfs://nn/corpus/", "auto")
