"""Stages registered by name run end to end: a filter defined in this test module, the shipped
`max_line_length` scorer, and the stage list's effect on the funnel, rejected/ and the report."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator, Mapping
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
import pyarrow.parquet as pq
import pyspark.sql.functions as F
import pytest
from pydantic import Field
from pyspark import cloudpickle
from pyspark.sql import Column
from pyspark.sql.types import StringType, StructField, StructType

from corpusclean.jobs import clean
from corpusclean.jobs.samples.dedup import generate
from corpusclean.pipelines.base import Filter, StepParams, register, unregister
from corpusclean.pipelines.columns import score_column

pytestmark = [pytest.mark.spark, pytest.mark.e2e]

SHOUT = score_column("shouting")
# The end-to-end run's stages: two filters defined here, the shipped scorer, the built-ins.
STAGES = ["rules", "marker", "shouting", "max_line_length", "doc_id", "exact", "near"]


class ShoutingParams(StepParams):
    # Fraction of letters that are upper case above which a document is shouting.
    max_upper: float = Field(0.5, ge=0.0, le=1.0)


class Shouting(Filter):
    """An Arrow scorer: the share of upper-case letters, rejected above `max_upper`."""

    name = "shouting"
    Params = ShoutingParams
    params: ShoutingParams

    def reads(self) -> list[str]:
        return [self.roles.text]

    def score_fields(self) -> list[pa.Field]:
        return [pa.field(SHOUT, pa.float64())]

    def score(self, batch: pa.RecordBatch) -> dict[str, pa.Array]:
        text = batch.column(self.roles.text)
        upper = pc.count_substring_regex(text, "[A-Z]").cast(pa.float64())
        letters = pc.count_substring_regex(text, "[A-Za-z]").cast(pa.float64())
        return {SHOUT: pc.divide(upper, pc.max_element_wise(letters, 1.0))}

    def verdict(self, scores: Mapping[str, pa.Array]) -> pa.Array:
        loud = pc.greater(scores[SHOUT], self.params.max_upper)
        return pc.if_else(loud, pa.scalar("shouting"), pa.scalar(None, pa.string()))


class Marker(Filter):
    """An expression filter: no Python, a Spark `Column` giving the reason."""

    name = "marker"

    def reads(self) -> list[str]:
        return [self.roles.text]

    def reason(self) -> Column:
        return F.when(F.col(self.roles.text).contains("FORBIDDEN-MARK"), F.lit("has_marker"))


@pytest.fixture(scope="module")
def registered() -> Iterator[None]:
    # Spark's Python workers unpickle the scorer: this module is not importable there, so its
    # classes travel by value.
    cloudpickle.register_pickle_by_value(sys.modules[__name__])
    register(Shouting)
    register(Marker)
    yield
    unregister("shouting")
    unregister("marker")
    cloudpickle.unregister_pickle_by_value(sys.modules[__name__])


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("steps") / "raw"
    generate(path, 1_500, seed=5)
    schema = pq.read_schema(path / "part-00000.parquet")
    body = "plain words of a document that is long enough to pass the length rules. " * 3
    extra = {
        "loud-1": body.upper(),
        "loud-2": ("SHOUTING HERE " * 20) + "ok",
        "mark-1": body + " FORBIDDEN-MARK",
        # The sample's own documents are one line of up to ~19k characters.
        "long-line-1": "x" * 25_000 + "\n" + body,
        "both-1": body.upper() + " FORBIDDEN-MARK",  # the first listed filter gives the reason
    }
    cols = {
        f.name: pa.nulls(len(extra), f.type) for f in schema if f.name not in ("doc_id", "text")
    }
    table = pa.table(
        {**cols, "doc_id": list(extra), "text": list(extra.values())}, schema=schema
    ).select(schema.names)
    pq.write_table(table, path / "part-extra.parquet")
    return path


def test_registered_filters_run_in_the_one_pass_with_reasons_stages_and_scores(
    spark, registered, corpus: Path, tmp_path: Path
) -> None:
    out = tmp_path / "out"
    args = [
        "--input",
        str(corpus),
        "--output",
        str(out),
        "--set",
        f"stages=[{', '.join(STAGES)}]",
        "--set",
        "near_dedup.enabled=false",
        "--set",
        "max_line_length.max_chars=20000",
        "--set",
        "audit.enabled=false",
    ]
    assert clean.main(args) == 0
    report = json.loads((out / "report.json").read_text())
    names = [s["name"] for s in report["stages"]]
    assert names[:8] == ["read", *STAGES]
    # A listed stage switched off keeps its funnel line and its figures say so.
    near = next(s for s in report["stages"] if s["name"] == "near")
    assert near["note"] == "disabled" and near["rows_in"] == near["rows_out"]
    assert report["near_dedup"] == {"enabled": False, "ran": False}
    assert list(report["removed"]) == STAGES
    assert report["removed"]["near"] == 0
    assert report["config"]["stages"] == names[1:8]
    assert report["config"]["max_line_length"] == {"enabled": True, "max_chars": 20_000}
    rejected = ds.dataset(out / "rejected").to_table().to_pylist()
    # The funnel counts what rejected/ holds (the sample has upper-case variants and long
    # one-line documents of its own, so the filters find more than the planted rows).
    for stage in ("rules", "marker", "shouting", "max_line_length"):
        n = sum(r["reject_stage"] == stage for r in rejected)
        assert report["removed"][stage] == n > 0, stage
    assert report["removed"]["marker"] == 2
    by_id = {r["doc_id"]: r for r in rejected}
    assert by_id["mark-1"]["reject_reason"] == "has_marker"
    assert by_id["mark-1"]["reject_stage"] == "marker"
    assert by_id["both-1"]["reject_stage"] == "marker"  # filters apply in the listed order
    assert by_id["loud-1"]["reject_reason"] == "shouting"
    assert by_id["loud-1"]["reject_stage"] == "shouting"
    assert by_id["loud-1"][SHOUT] == pytest.approx(1.0)
    assert by_id["long-line-1"]["reject_reason"] == "line_too_long"
    assert by_id["long-line-1"][score_column("max_line_length")] == 25_000
    # Rows another filter refused first were never scored.
    assert by_id["both-1"][SHOUT] is None
    rules = [r for r in rejected if r["reject_stage"] == "rules"]
    assert rules and all(r[SHOUT] is None for r in rules)
    assert report["rejected"]["shouting"] == report["removed"]["shouting"]
    assert report["rejected"]["line_too_long"] == report["removed"]["max_line_length"]
    kept = set(ds.dataset(out / "data").to_table(columns=["doc_id"])["doc_id"].to_pylist())
    assert not kept & set(by_id)
    # data/ holds the input's columns only: no score or bookkeeping column leaks into it.
    assert (
        ds.dataset(out / "data").schema.names == pq.read_schema(corpus / "part-00000.parquet").names
    )
    html = (out / "report.html").read_text()
    assert "shouting" in html and "max_line_length" in html


def test_an_unknown_stage_is_refused_in_one_line_before_spark(
    registered, corpus: Path, tmp_path: Path, capsys
) -> None:
    args = ["--input", str(corpus), "--output", str(tmp_path / "out")]
    assert clean.main([*args, "--set", "stages=[rules, shoutin]"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "unknown stage 'shoutin'" in err[0]
    assert not (tmp_path / "out").exists()


def test_only_enabled_scorers_and_features_join_the_read_pass(registered) -> None:
    from corpusclean.jobs.runtime.config import load_clean_config
    from corpusclean.pipelines.content import ReadPass

    stages = "stages=[rules, shouting, max_line_length, doc_id, exact, near]"
    cfg = load_clean_config(None, [stages, "shouting.enabled=false", "near_dedup.enabled=false"])
    pipe = cfg.pipeline()
    assert [f.name for f in pipe.scorers()] == ["max_line_length"]
    assert pipe.text_features() == []
    schema = StructType([StructField("doc_id", StringType()), StructField("text", StringType())])
    out = ReadPass("text", tuple(pipe.scorers()), tuple(pipe.text_features())).schema(schema)
    assert out.fieldNames() == ["doc_id", score_column("max_line_length"), "_norm_hash"]
