"""Independent Spark actions side by side (jobs/runtime/session.py `run_together`), as clean's
writes."""

from __future__ import annotations

import threading
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from corpusclean.jobs.runtime.session import count_jobs, run_together

pytestmark = pytest.mark.spark


def test_every_action_runs_as_one_of_the_callers_jobs(spark, tmp_path: Path) -> None:
    sc = spark.sparkContext
    sc.setJobGroup("together", "corpusclean test: together")
    seen: list[str] = []

    def write(n: int) -> None:
        seen.append(threading.current_thread().name)
        spark.range(n * 10).write.parquet(str(tmp_path / f"out-{n}"))

    try:
        run_together([lambda n=n: write(n) for n in range(1, 5)])
        jobs = count_jobs(spark, "together")
    finally:
        sc.setLocalProperty("spark.jobGroup.id", None)  # type: ignore[arg-type]
    for n in range(1, 5):
        assert pq.read_table(tmp_path / f"out-{n}").num_rows == n * 10
    # The first in the caller's thread, the others in threads of their own, all of whose
    # jobs belong to the caller's job group (one write job each, at least).
    assert seen.count(threading.current_thread().name) == 1 and len(set(seen)) == 4
    assert jobs >= 4


def test_the_first_failure_in_order_is_raised_after_all_have_ended(spark, tmp_path: Path) -> None:
    ended: list[int] = []

    def ok(n: int) -> None:
        spark.range(n).write.parquet(str(tmp_path / f"ok-{n}"))
        ended.append(n)

    def fail(message: str) -> None:
        raise OSError(message)

    with pytest.raises(OSError, match="second"):
        run_together([lambda: ok(1), lambda: fail("second"), lambda: fail("third"), lambda: ok(4)])
    assert sorted(ended) == [1, 4], "every action ran to its end before the error was raised"
