"""On a cluster the output must be on storage the executors see: a probe finds out up front."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from corpusclean.errors import InputError
from corpusclean.jobs.runtime.session import check_shared_output


class _FakeRDD:
    def __init__(self, answers: list[tuple[str, bool]]) -> None:
        self.answers = answers

    def map(self, fn: Any) -> _FakeRDD:
        self.fn = fn
        return self

    def collect(self) -> list[tuple[str, bool]]:
        return self.answers


class _FakeContext:
    def __init__(self, master: str, answers: list[tuple[str, bool]]) -> None:
        self.master = master
        self.defaultParallelism = len(answers)
        self.answers = answers

    def parallelize(self, data: range, slices: int) -> _FakeRDD:
        return _FakeRDD(self.answers)


class _FakeSpark:
    def __init__(self, context: _FakeContext) -> None:
        self.sparkContext = context


def test_an_executor_that_does_not_see_the_output_is_named(tmp_path: Path) -> None:
    spark = _FakeSpark(_FakeContext("spark://h:7077", [("node-a", True), ("node-b", False)]))
    with pytest.raises(InputError, match=r"executors on node-b do not see .*every node mounts"):
        check_shared_output(spark, str(tmp_path / "out"))  # type: ignore[arg-type]
    assert not list(tmp_path.glob(".corpusclean-probe-*"))  # the probe is removed


def test_shared_storage_and_local_mode_pass(tmp_path: Path) -> None:
    shared = _FakeSpark(_FakeContext("spark://h:7077", [("node-a", True), ("node-b", True)]))
    check_shared_output(shared, str(tmp_path / "out"))  # type: ignore[arg-type]
    local = _FakeSpark(_FakeContext("local[2]", [("node-a", False)]))
    check_shared_output(local, str(tmp_path / "out"))  # type: ignore[arg-type]
    assert not list(tmp_path.glob(".corpusclean-probe-*"))
