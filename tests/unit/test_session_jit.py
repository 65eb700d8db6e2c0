"""The driver JVM's JIT choice for a local run (jobs/runtime/session.py: `with_quick_jit`)."""

from __future__ import annotations

from pathlib import Path

import pytest

from corpusclean.jobs.runtime.classcache import OPTIONS
from corpusclean.jobs.runtime.session import (
    QUICK_JIT,
    SMALL_INPUT_BYTES,
    input_bytes,
    with_quick_jit,
)


def test_input_bytes_sums_the_files_under_folders_and_files(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "part-0.parquet").write_bytes(b"x" * 100)
    (tmp_path / "a" / "sub").mkdir()
    (tmp_path / "a" / "sub" / "part-1.parquet").write_bytes(b"x" * 50)
    (tmp_path / "b.jsonl").write_bytes(b"y" * 7)
    assert input_bytes([str(tmp_path / "a"), str(tmp_path / "b.jsonl")]) == 157
    assert input_bytes([f"file://{tmp_path / 'b.jsonl'}"]) == 7


@pytest.mark.parametrize("path", ["s3a://bucket/corpus", "hdfs://nn:8020/corpus"])
def test_a_remote_input_has_no_known_size(path: str) -> None:
    assert input_bytes([path]) is None


def test_a_small_input_gets_c1_alone_after_the_users_own_options() -> None:
    got = with_quick_jit({OPTIONS: "-Dfoo=1"}, 1000)
    assert got[OPTIONS] == f"-Dfoo=1 {QUICK_JIT}"
    assert with_quick_jit({}, SMALL_INPUT_BYTES)[OPTIONS] == QUICK_JIT


@pytest.mark.parametrize("size", [SMALL_INPUT_BYTES + 1, None])
def test_a_large_or_unknown_input_keeps_the_full_jit(size: int | None) -> None:
    assert with_quick_jit({"spark.master": "local[2]"}, size) == {"spark.master": "local[2]"}


@pytest.mark.parametrize(
    "own", ["-XX:TieredStopAtLevel=4", "-XX:-TieredCompilation", "-Xint", "-Xcomp"]
)
def test_a_user_who_chose_the_jit_keeps_the_choice(own: str) -> None:
    assert with_quick_jit({OPTIONS: own}, 10) == {OPTIONS: own}


def test_the_walk_stops_once_the_input_is_known_to_be_large(tmp_path: Path) -> None:
    for i in range(3):
        (tmp_path / f"d{i}").mkdir()
        (tmp_path / f"d{i}" / "part.parquet").write_bytes(b"x" * 10)
    assert input_bytes([str(tmp_path)]) == 30
    assert 10 < input_bytes([str(tmp_path)], stop_above=15) < 30
