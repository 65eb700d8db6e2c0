"""Log levels (-q, -v, --log-level), stage lines and the periodic Spark task reporter."""

from __future__ import annotations

import argparse
import threading
from dataclasses import dataclass
from typing import Any

import pytest

from corpusclean.jobs.runtime import log
from corpusclean.jobs.runtime.console import console_progress
from corpusclean.jobs.runtime.runner import new_parser, run_job


@pytest.fixture(autouse=True)
def _info_level() -> Any:
    previous = log.set_level("info")
    yield
    log.set_level(previous)


def _lines(text: str) -> list[str]:
    return [ln for ln in text.splitlines() if ln]


def test_levels_filter_info_warn_and_debug(capsys: pytest.CaptureFixture[str]) -> None:
    log.debug("j", "d1")
    log.info("j", "i1")
    log.warn("j", "w1")
    log.set_level("warning")
    log.info("j", "i2")
    log.warn("j", "w2")
    log.set_level("debug")
    log.debug("j", "d3")
    log.set_level("error")
    log.warn("j", "w4")
    captured = capsys.readouterr()
    assert captured.out == "", "logs never go to stdout"
    assert _lines(captured.err) == [
        "[j] i1",
        "[j] WARNING: w1",
        "[j] WARNING: w2",
        "[j] d3",
    ]


def test_parse_level_names_numbers_and_errors() -> None:
    assert log.parse_level("WARN") == log.WARNING
    assert log.parse_level("Debug") == log.DEBUG
    assert log.parse_level("15") == 15
    with pytest.raises(ValueError, match="unknown log level"):
        log.parse_level("loud")


def _job(argv: list[str]) -> int:
    parser = new_parser("demo-job", "a test job")

    def body(args: argparse.Namespace) -> int:
        log.debug("demo-job", "debug line")
        log.info("demo-job", "info line")
        log.warn("demo-job", "warn line")
        print('{"machine": "output"}')
        return 0

    return run_job("demo-job", parser, body, argv)


@pytest.mark.parametrize(
    ("argv", "shown"),
    [
        ([], ["info line", "WARNING: warn line"]),
        (["-q"], ["WARNING: warn line"]),
        (["--quiet"], ["WARNING: warn line"]),
        (["-v"], ["debug line", "info line", "WARNING: warn line"]),
        (["--log-level", "error"], []),
        (["--log-level", "debug"], ["debug line", "info line", "WARNING: warn line"]),
    ],
)
def test_every_job_parser_takes_q_v_and_log_level(
    argv: list[str], shown: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    assert _job(argv) == 0
    captured = capsys.readouterr()
    assert captured.out == '{"machine": "output"}\n', "stdout holds only the machine output"
    assert _lines(captured.err) == [f"[demo-job] {s}" for s in shown]
    assert log.enabled(log.INFO) and not log.enabled(log.DEBUG), "the level is restored"


def test_a_nested_job_without_options_keeps_the_callers_level(
    capsys: pytest.CaptureFixture[str],
) -> None:
    parser = new_parser("outer", "calls another job, as demo does")
    codes: list[int] = []

    def body(args: argparse.Namespace) -> int:
        codes.append(_job([]))
        return 0

    assert run_job("outer", parser, body, ["-q"]) == 0
    assert codes == [0]
    assert _lines(capsys.readouterr().err) == ["[demo-job] WARNING: warn line"]


def test_level_options_conflict_or_bad_value_is_a_usage_error(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert _job(["-q", "-v"]) == 2
    assert "not allowed with argument" in capsys.readouterr().err
    assert _job(["--log-level", "loud"]) == 2
    assert "unknown log level 'loud'" in capsys.readouterr().err


# ----------------------------------------------------------------- periodic reporter


@dataclass
class FakeStage:
    numTasks: int  # noqa: N815 (Spark's names)
    numCompletedTasks: int  # noqa: N815


class FakeTracker:
    """Stands in for SparkContext.statusTracker(): stages set by the test."""

    def __init__(self) -> None:
        self.stages: dict[int, FakeStage] = {}
        self.fail = False

    def getActiveStageIds(self) -> list[int]:  # noqa: N802
        if self.fail:
            raise RuntimeError("context stopped")
        return list(self.stages)

    def getStageInfo(self, stageId: int) -> FakeStage | None:  # noqa: N802, N803
        return self.stages.get(stageId)


class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_task_progress_counts_tasks_and_estimates_the_eta() -> None:
    tracker, clock, lines = FakeTracker(), FakeClock(), []
    reporter = log.TaskProgress(tracker, lines.append, interval=10, clock=clock)
    reporter.tick()
    reporter.tick()  # still idle: not repeated
    tracker.stages[3] = FakeStage(100, 10)
    clock.now += 10
    reporter.tick()  # first sight of stage 3: no rate yet
    clock.now += 10
    tracker.stages[3] = FakeStage(100, 30)  # 20 tasks in 10 s: 70 left, 35 s
    reporter.tick()
    tracker.stages[4] = FakeStage(50, 0)  # a second stage without a rate: ETA unknown
    reporter.tick()
    tracker.stages.clear()
    reporter.tick()  # idle again: said once more
    reporter.tick()
    tracker.fail = True
    reporter.tick()  # a failing tracker prints nothing and raises nothing
    assert lines == [
        "running 0.0s: no Spark stage active",
        "running 10.0s: Spark stage 3: 10/100 tasks (10%), ETA ?",
        "running 20.0s: Spark stage 3: 30/100 tasks (30%), ETA 35.0s",
        "running 20.0s: Spark stages 3,4: 30/150 tasks (20%), ETA ?",
        "running 20.0s: no Spark stage active",
    ]


def test_task_progress_thread_prints_until_stopped() -> None:
    tracker = FakeTracker()
    tracker.stages[1] = FakeStage(4, 1)
    seen = threading.Event()
    lines: list[str] = []

    def emit(text: str) -> None:
        lines.append(text)
        seen.set()

    reporter = log.TaskProgress(tracker, emit, interval=0.01).start()
    assert seen.wait(30), "the daemon thread printed a line"
    reporter.stop()
    after = len(lines)
    assert reporter._thread is None
    assert len(lines) == after, "no line after stop() returns"
    assert "1/4 tasks (25%)" in lines[0]


class FakeSpark:
    def __init__(self, tracker: FakeTracker) -> None:
        self.sparkContext = self
        self._tracker = tracker
        self.local: dict[str, str | None] = {}

    def statusTracker(self) -> FakeTracker:  # noqa: N802
        return self._tracker

    def getLocalProperty(self, key: str) -> str | None:  # noqa: N802
        return self.local.get(key)

    def setLocalProperty(self, key: str, value: str | None) -> None:  # noqa: N802
        self.local[key] = value

    def setJobDescription(self, value: str) -> None:  # noqa: N802
        self.local["spark.job.description"] = value


def test_a_stage_names_its_spark_jobs_and_restores_the_description() -> None:
    spark = FakeSpark(FakeTracker())
    spark.local["spark.job.description"] = "outer"
    with log.stage("clean", "near", spark=spark, interval=0):
        assert spark.local["spark.job.description"] == "corpusclean clean: near"
    assert spark.local["spark.job.description"] == "outer"


def test_stage_prints_start_then_end_with_rows_rate_and_note(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with log.stage("clean", "doc_id", rows_in=1000, spark=FakeSpark(FakeTracker()), interval=0):
        pass
    with log.stage("clean", "read") as st:
        st.rows_out = 2000
        st.note = "one pass"
    with pytest.raises(KeyError), log.stage("clean", "near", rows_in=5):
        raise KeyError("boom")
    err = _lines(capsys.readouterr().err)
    assert err[0] == "[clean] doc_id     started (1,000 rows in)"
    assert err[1].startswith("[clean] doc_id     done: 1,000 -> ? rows in ")
    assert err[2] == "[clean] read       started"
    assert err[3].startswith("[clean] read       done: 2,000 rows in ")
    assert "docs/s" in err[3] and err[3].endswith("(one pass)")
    assert err[4] == "[clean] near       started (5 rows in)"
    assert err[5].startswith("[clean] near       failed after ")
    assert len(err) == 6


def test_stage_lines_are_hidden_by_quiet_and_no_reporter_runs(
    capsys: pytest.CaptureFixture[str],
) -> None:
    log.set_level("warning")
    tracker = FakeTracker()
    tracker.fail = True  # would raise if the reporter asked it anything
    with log.stage("clean", "read", spark=FakeSpark(tracker), interval=0.01):
        pass
    assert capsys.readouterr().err == ""


def test_progress_interval_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(log.PROGRESS_ENV, raising=False)
    assert log.progress_interval() == log.DEFAULT_PROGRESS_SECONDS
    monkeypatch.setenv(log.PROGRESS_ENV, "2.5")
    assert log.progress_interval() == 2.5
    monkeypatch.setenv(log.PROGRESS_ENV, "0")
    assert log.progress_interval() == 0.0
    monkeypatch.setenv(log.PROGRESS_ENV, "soon")
    assert log.progress_interval() == log.DEFAULT_PROGRESS_SECONDS


def test_fmt_seconds() -> None:
    assert log.fmt_seconds(4.25) == "4.2s"
    assert log.fmt_seconds(185) == "3m05s"
    assert log.fmt_seconds(3725) == "1h02m"


def test_console_progress_bar_only_on_a_terminal_unless_set() -> None:
    key = "spark.ui.showConsoleProgress"
    assert console_progress({}, tty=True) == {key: "true"}
    assert console_progress({}, tty=False) == {key: "false"}
    assert console_progress({key: "true"}, tty=False) == {}
