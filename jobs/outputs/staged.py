"""The staged-run protocol of the jobs that publish a folder from Spark (`clean`, `index`).

A run has one run id, and every Spark job it starts carries it as its job group (the report
counts them). Its work goes to a staging folder beside the output (jobs/outputs/publish.py),
under the output's lock: `_work/` holds the intermediates and their checkpoints
(jobs/outputs/resume.py), next to the fingerprint of what they were computed from. The body
runs inside `StagedRun.staging()`, and how it ends decides what happens to that folder:

- it returns: `_work/` is removed and the staging is published (an atomic swap);
- a gate or audit refuses (`RejectedError`): the staging is kept for inspection;
- it crashes after a checkpoint (a lost executor, an interrupt): the staging is kept, and the
  same command run again adopts it and resumes after the last checkpoint;
- anything else (bad input or config, a full disk, nothing finished yet): it is removed.

The previously published output is untouched in every case but the first.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any

from corpusclean.errors import CorpusCleanError, RejectedError
from corpusclean.jobs.inputs.files import explain_read_error
from corpusclean.jobs.outputs.publish import Publisher
from corpusclean.jobs.outputs.resume import Checkpoints, refusal
from corpusclean.jobs.runtime import log
from corpusclean.jobs.runtime.failures import disk_full

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.types import StructType

    from corpusclean.jobs.runtime.config import PublishSection

WORK = "_work"


@dataclass(frozen=True)
class Staging:
    """A run's staging folder as its body sees it."""

    folder: Path  # becomes the output when the run publishes
    work: Path  # intermediates and checkpoints, removed before publishing
    checkpoints: Checkpoints
    resumed_from: str | None  # the gone run whose staging this run adopted


class StagedRun:
    """One run of `job` publishing `output`: a context that tags the session's jobs with the
    run id, and `staging()`, the folder the run writes into."""

    def __init__(self, spark: SparkSession, job: str, output: str, publish: PublishSection) -> None:
        self.spark = spark
        self.job = job
        self.publisher = Publisher(
            output, job, stale_hours=publish.stale_hours, keep_rejected=publish.keep_rejected
        )
        self.run_id = self.publisher.run_id

    def __enter__(self) -> StagedRun:
        # Every job of the run in one group, so the report can count them.
        self.spark.sparkContext.setJobGroup(self.run_id, f"corpusclean {self.job} {self.run_id}")
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        # A shared session (tests, notebooks) must not tag its later jobs with this run.
        self.spark.sparkContext.setLocalProperty("spark.jobGroup.id", None)  # type: ignore[arg-type]

    @contextmanager
    def staging(self, fingerprint: dict[str, Any], resume: bool) -> Iterator[Staging]:
        """Take the output's lock and a staging folder (with `resume`, the staging of a gone
        run whose fingerprint is equal), run the body in it, then publish, keep or discard
        it as the module says. The lock is released on every path."""
        adopt = (lambda folder: refusal(folder, fingerprint)) if resume else None
        folder = self.publisher.prepare(adopt=adopt)
        try:
            work = folder / WORK
            checkpoints = Checkpoints(work)
            checkpoints.write_fingerprint(fingerprint)
            staged = Staging(folder, work, checkpoints, self.publisher.resumed_from)
            try:
                yield staged
            except RejectedError:
                self.publisher.reject()  # kept for inspection, as the message says
                raise
            except BaseException as exc:
                explained = explain_read_error(exc)
                if (
                    explained is None
                    and not isinstance(exc, CorpusCleanError)
                    # A full disk gets its space back (the previous output stays, as always).
                    and disk_full(exc) is None
                    and checkpoints.last() is not None
                ):
                    self.publisher.keep_failed()
                    log.info(
                        self.job,
                        f"run {self.run_id} failed; its finished stages are kept in {folder}: "
                        "rerun the same command to resume (--no-resume starts afresh)",
                    )
                else:
                    self.publisher.discard()
                if explained is not None:
                    raise explained from exc
                raise
            shutil.rmtree(work, ignore_errors=True)
            self.publisher.publish()
        finally:
            self.publisher.close()


def reread(spark: SparkSession, schema: StructType, path: str | Path) -> DataFrame:
    """A Parquet folder this run has just written, read back with the schema it was written
    with: without it, Spark starts a job to infer the schema from the files' footers."""
    return spark.read.schema(schema).parquet(str(path))
