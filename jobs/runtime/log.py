"""Progress lines on stderr: one per stage as it starts and ends, with rows and seconds.

Levels follow `logging`'s numbers (DEBUG 10, INFO 20, WARNING 30, ERROR 40); the level is one
module-level setting that `-q`, `-v` and `--log-level` (jobs/runtime/runner.py) change for a run.
Machine output (JSON summaries, check lines) goes to stdout and is never filtered here.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Protocol

DEBUG, INFO, WARNING, ERROR = 10, 20, 30, 40
LEVELS: dict[str, int] = {"debug": DEBUG, "info": INFO, "warning": WARNING, "error": ERROR}
# Seconds between the periodic task lines of a long stage; 0 turns them off.
PROGRESS_ENV = "CORPUSCLEAN_PROGRESS_SECONDS"
DEFAULT_PROGRESS_SECONDS = 10.0

_level = INFO
# The periodic reporter prints from its own thread: one lock keeps lines whole.
_lock = threading.Lock()


def parse_level(value: str | int) -> int:
    """`debug|info|warning|error` (any case, `warn` too) or a number, as a level number."""
    if isinstance(value, int):
        return value
    name = value.strip().lower()
    if name == "warn":
        name = "warning"
    if name in LEVELS:
        return LEVELS[name]
    if name.isdigit():
        return int(name)
    raise ValueError(f"unknown log level {value!r}; use one of {', '.join(LEVELS)}")


def set_level(value: str | int) -> int:
    """Set the level lines must reach to be printed; returns the previous level."""
    global _level
    previous, _level = _level, parse_level(value)
    return previous


def enabled(level: int) -> bool:
    """True when a line of `level` would be printed."""
    return level >= _level


def _emit(level: int, job: str, message: str) -> None:
    if level < _level:
        return
    with _lock:
        print(f"[{job}] {message}", file=sys.stderr, flush=True)


def debug(job: str, message: str) -> None:
    """A detail only `-v` / `--log-level debug` shows."""
    _emit(DEBUG, job, message)


def info(job: str, message: str) -> None:
    """One progress line, prefixed by the job's name."""
    _emit(INFO, job, message)


def warn(job: str, message: str) -> None:
    """A line that needs a person's attention but does not stop the job (kept by -q)."""
    _emit(WARNING, job, f"WARNING: {message}")


class Timer:
    """Wall-clock seconds of a block, read after it ends."""

    def __init__(self) -> None:
        self.seconds = 0.0

    @contextmanager
    def __call__(self) -> Iterator[Timer]:
        start = time.perf_counter()
        try:
            yield self
        finally:
            self.seconds = time.perf_counter() - start


def fmt_rows(n: int | None) -> str:
    """`1,234,567` or `?` for an unknown count."""
    return "?" if n is None else f"{n:,}"


def fmt_seconds(seconds: float) -> str:
    """`4.2s`, `3m05s` or `1h02m`: short enough for a progress line."""
    if seconds < 60:
        return f"{seconds:.1f}s"
    minutes, secs = divmod(round(seconds), 60)
    if minutes < 60:
        return f"{minutes}m{secs:02d}s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m"


def fmt_rate(rows: int | None, seconds: float) -> str:
    """`12,345 docs/s`, or '' when either figure is missing."""
    if rows is None or seconds <= 0:
        return ""
    return f"{rows / seconds:,.0f} docs/s"


def progress_interval() -> float:
    """Seconds between periodic lines, from CORPUSCLEAN_PROGRESS_SECONDS (0: none)."""
    raw = os.environ.get(PROGRESS_ENV, "").strip()
    if not raw:
        return DEFAULT_PROGRESS_SECONDS
    try:
        return max(0.0, float(raw))
    except ValueError:
        return DEFAULT_PROGRESS_SECONDS


# --------------------------------------------------------------------------- periodic lines


class StageInfo(Protocol):
    """What the reporter reads of `pyspark.status.SparkStageInfo`."""

    numTasks: int  # noqa: N815 (Spark's names)
    numCompletedTasks: int  # noqa: N815


class StatusTracker(Protocol):
    """What the reporter reads of `SparkContext.statusTracker()`."""

    def getActiveStageIds(self) -> list[int]: ...  # noqa: N802 (Spark's names)

    def getStageInfo(self, stageId: int) -> StageInfo | None: ...  # noqa: N802, N803


class TaskProgress:
    """Completed/total tasks of Spark's active stages and an ETA, one line per `tick()`.

    The ETA of a Spark stage is its remaining tasks at the completion rate seen since this
    reporter first saw that stage; active stages run side by side, so the line's ETA is the
    longest of theirs. `tick()` is the whole logic (tests call it with a fake tracker); `start()`
    runs it every `interval` seconds on a daemon thread until `stop()`.
    """

    def __init__(
        self,
        tracker: StatusTracker,
        emit: Callable[[str], None],
        interval: float,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.tracker = tracker
        self.emit = emit
        self.interval = interval
        self.clock = clock
        self.started = clock()
        self._first: dict[int, tuple[float, int]] = {}
        self._idle = False
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def line(self) -> str | None:
        """The progress line for the tracker's state now; None for a repeated idle line."""
        now = self.clock()
        elapsed = fmt_seconds(now - self.started)
        ids = sorted(self.tracker.getActiveStageIds())
        stages = [(i, s) for i in ids if (s := self.tracker.getStageInfo(i)) is not None]
        if not stages:
            # Between Spark jobs (driver work): said once, not every interval.
            was_idle, self._idle = self._idle, True
            return None if was_idle else f"running {elapsed}: no Spark stage active"
        self._idle = False
        done = total = 0
        etas: list[float | None] = []
        for stage_id, stage in stages:
            n, completed = int(stage.numTasks), int(stage.numCompletedTasks)
            done, total = done + completed, total + n
            first_at, first_done = self._first.setdefault(stage_id, (now, completed))
            rate = (completed - first_done) / (now - first_at) if now > first_at else 0.0
            etas.append((n - completed) / rate if rate > 0 else None)
        pct = f" ({done / total:.0%})" if total else ""
        which = "stage" if len(stages) == 1 else "stages"
        names = ",".join(str(i) for i, _ in stages)
        known = [e for e in etas if e is not None]
        eta = fmt_seconds(max(known)) if known and len(known) == len(etas) else "?"
        return f"running {elapsed}: Spark {which} {names}: {done:,}/{total:,} tasks{pct}, ETA {eta}"

    def tick(self) -> None:
        """Emit one line; a tracker that fails (a stopped context) emits nothing."""
        try:
            text = self.line()
        except Exception:  # the line is a courtesy: never let it fail the job
            return
        if text is not None:
            self.emit(text)

    def _loop(self) -> None:
        while not self._stop.wait(self.interval):
            self.tick()

    def start(self) -> TaskProgress:
        """Start the daemon thread (a daemon, so a crash never waits for it)."""
        self._thread = threading.Thread(target=self._loop, name="corpusclean-progress", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop the thread and wait for it, so no line follows the stage's end line."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None


def _tracker(spark: Any) -> StatusTracker | None:
    try:
        return spark.sparkContext.statusTracker()
    except Exception:  # Spark Connect has no SparkContext: no task counts, no reporter
        return None


# --------------------------------------------------------------------------- stage lines


@dataclass
class StageLog:
    """A stage's figures as the caller learns them; read by `stage()` for its end line."""

    name: str
    rows_in: int | None = None
    rows_out: int | None = None
    note: str | None = None
    seconds: float = 0.0
    extra: dict[str, Any] = field(default_factory=dict)


def _label(name: str) -> str:
    return f"{name:<10}"


def stage_line(st: StageLog) -> str:
    """`NAME done: IN -> OUT rows in 4.2s (1,234 docs/s) (note)`."""
    if st.rows_in is None and st.rows_out is None:
        rows = ""
    elif st.rows_in is None:
        rows = f"{fmt_rows(st.rows_out)} rows "
    else:
        rows = f"{fmt_rows(st.rows_in)} -> {fmt_rows(st.rows_out)} rows "
    rate = fmt_rate(st.rows_in if st.rows_in is not None else st.rows_out, st.seconds)
    parts = [f"{_label(st.name)} done: {rows}in {fmt_seconds(st.seconds)}"]
    if rate:
        parts.append(f"({rate})")
    if st.note:
        parts.append(f"({st.note})")
    return " ".join(parts)


def stage_note(job: str, name: str, rows_in: int | None, rows_out: int | None, note: str) -> None:
    """The line of a stage whose work ran inside another stage: rows, no seconds of its own."""
    info(job, f"{_label(name)} {fmt_rows(rows_in)} -> {fmt_rows(rows_out)} rows ({note})")


@contextmanager
def tasks(job: str, name: str, spark: Any, interval: float | None = None) -> Iterator[None]:
    """While the block runs, print Spark's completed/total tasks and an ETA every `interval` s.

    `interval` defaults to CORPUSCLEAN_PROGRESS_SECONDS (10; 0 turns the lines off); nothing
    runs below INFO level or without a SparkContext. The thread has stopped when the block ends.
    """
    every = progress_interval() if interval is None else interval
    reporter: TaskProgress | None = None
    if spark is not None and every > 0 and enabled(INFO):
        tracker = _tracker(spark)
        if tracker is not None:
            reporter = TaskProgress(
                tracker, lambda text: info(job, f"{_label(name)} {text}"), every
            ).start()
    try:
        yield
    finally:
        if reporter is not None:
            reporter.stop()


@contextmanager
def described(spark: Any, job: str, name: str) -> Iterator[None]:
    """Spark jobs started in the block carry `corpusclean JOB: NAME` as their description.

    The Spark UI, its REST API and the event log then tell which stage a job belongs to (the
    cluster tier and bench/scaling.py read it there).
    """
    sc = getattr(spark, "sparkContext", None)
    if sc is None:
        yield
        return
    key = "spark.job.description"
    previous = sc.getLocalProperty(key)
    sc.setJobDescription(f"corpusclean {job}: {name}")
    try:
        yield
    finally:
        sc.setLocalProperty(key, previous)  # type: ignore[arg-type]  (None clears it)


@contextmanager
def stage(
    job: str,
    name: str,
    rows_in: int | None = None,
    spark: Any = None,
    interval: float | None = None,
) -> Iterator[StageLog]:
    """Print NAME's start line now and its end line (rows, seconds, docs/s) when the block ends.

    The block sets `rows_in`/`rows_out`/`note` on the yielded record as it learns them. With a
    SparkSession, a daemon thread prints Spark's completed/total tasks and an ETA every
    `interval` seconds (default: CORPUSCLEAN_PROGRESS_SECONDS, 10) while the block runs.
    A block that raises prints a `failed after` line and re-raises.
    """
    record = StageLog(name, rows_in=rows_in)
    start_rows = f" ({fmt_rows(rows_in)} rows in)" if rows_in is not None else ""
    info(job, f"{_label(name)} started{start_rows}")
    t0 = time.perf_counter()
    try:
        with described(spark, job, name), tasks(job, name, spark, interval):
            yield record
    except BaseException:
        record.seconds = time.perf_counter() - t0
        info(job, f"{_label(name)} failed after {fmt_seconds(record.seconds)}")
        raise
    record.seconds = time.perf_counter() - t0
    info(job, stage_line(record))
