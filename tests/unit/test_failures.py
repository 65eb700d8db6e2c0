"""Known failure causes become one-line job errors (jobs/runtime/failures.py,
jobs/runtime/runner.py)."""

from __future__ import annotations

import errno
import os

import pytest

from corpusclean.errors import CorpusCleanError
from corpusclean.jobs.runtime.failures import disk_full, known_failure
from corpusclean.jobs.runtime.runner import new_parser, run_job

JAVA_TEXT = (
    "An error occurred while calling o91.parquet.\n"
    ": org.apache.spark.SparkException: Job aborted due to stage failure: Task 0 in stage 3.0 "
    "failed 1 times, most recent failure: Lost task 0.0: org.apache.spark.SparkException: "
    "[TASK_WRITE_FAILED] Task failed while writing rows to file:/mnt/small/.out.runs/r1/data.\n"
    "Caused by: java.io.IOException: No space left on device\n"
    "\tat java.base/java.io.FileOutputStream.writeBytes(Native Method)\n"
)


class FakePy4JError(Exception):
    """Stands for py4j's Py4JJavaError, whose str() is the Java stack trace."""


def test_python_enospc_names_the_given_path_or_its_own() -> None:
    exc = OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), "/mnt/small/out/x.tar")
    assert "writing /data/out;" in str(disk_full(exc, "/data/out"))
    assert "writing /mnt/small/out/x.tar;" in str(disk_full(exc))
    assert str(disk_full(exc)).startswith("disk full: no space left on the device")


def test_spark_text_and_exception_chains_are_recognised() -> None:
    java = FakePy4JError(JAVA_TEXT)
    # a path in a staging folder is said as the output it stands for
    assert "writing /mnt/small/out;" in str(known_failure(java))
    # raised from a task's Python OSError, wrapped in a job's own error
    try:
        try:
            raise OSError(errno.ENOSPC, "No space left on device")
        except OSError as inner:
            raise CorpusCleanError("writing shards failed") from inner
    except CorpusCleanError as outer:
        assert "writing /out;" in str(disk_full(outer, "/out"))


@pytest.mark.parametrize(
    "exc", [OSError(errno.EACCES, "Permission denied"), ValueError("bad"), RuntimeError("")]
)
def test_other_failures_are_not_disk_full(exc: Exception) -> None:
    assert known_failure(exc) is None


def test_run_job_prints_one_disk_full_line(capsys: pytest.CaptureFixture[str]) -> None:
    def body(args: object) -> int:
        raise FakePy4JError(JAVA_TEXT)

    assert run_job("clean", new_parser("clean", "test"), body, []) == 1
    err = capsys.readouterr().err
    assert err.startswith("corpusclean clean: error: disk full: no space left on the device")
    assert "writing /mnt/small/out;" in err and len(err.strip().splitlines()) == 1
