"""The quality presets end to end: `clean --config fineweb` on generated web pages sends each
kind of junk to rejected/ with its filter's reason and scores, publishes `lang`/`lang_score`,
reports each filter's score distribution, and the audit reads the real languages; `zh-web`
keeps Chinese pages that the English recipe removes."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from corpusclean.jobs import clean
from corpusclean.jobs.samples.web import _ZH, generate_web
from corpusclean.pipelines.base import load_steps
from corpusclean.pipelines.columns import score_column

pytestmark = [pytest.mark.spark, pytest.mark.e2e]

FILTERS = ["lang", "gopher_repetition", "gopher_quality", "c4_quality", "fineweb_quality"]
# The filter that must catch each kind of junk page (an earlier filter may take some first).
CAUGHT_BY = {
    "chinese": {"lang"},
    "code": {"c4_quality"},
    "lorem": {"c4_quality", "gopher_quality"},
    "bullets": {"gopher_quality"},
    "table": {"gopher_quality"},
    "boilerplate": {"gopher_repetition"},
    "hashtags": {"gopher_quality"},
    "menu": {"fineweb_quality", "gopher_quality", "gopher_repetition"},
}


@pytest.fixture(scope="module")
def fineweb_run(spark, tmp_path_factory) -> tuple[Path, Path]:
    base = tmp_path_factory.mktemp("presets")
    raw, out = base / "raw", base / "out"
    generate_web(raw, 500, seed=3)
    args = ["--input", str(raw), "--output", str(out), "--config", "fineweb"]
    assert clean.main([*args, "--set", "quality.keep_scores=true"]) == 0
    return raw, out


def test_each_kind_of_junk_is_rejected_by_its_filter_with_reason_and_scores(fineweb_run) -> None:
    raw, out = fineweb_run
    report = json.loads((out / "report.json").read_text())
    assert report["config"]["stages"][:6] == ["rules", *FILTERS]
    for name in FILTERS:
        assert report["removed"][name] > 0, name
    truth = {r["doc_id"]: r["kind"] for r in pq.read_table(raw / "_truth.parquet").to_pylist()}
    rejected = pq.read_table(out / "rejected")
    steps = load_steps()
    for row in rejected.to_pylist():
        stage = row["reject_stage"]
        if stage == "rules":
            continue
        # The scores of the stage that rejected a row are in rejected/ beside its reason.
        for f in steps[stage](steps[stage].Params(), None).score_fields():  # type: ignore[arg-type]
            assert row[f.name] is not None, (stage, f.name)
        kind = truth[row["doc_id"]]
        if kind in CAUGHT_BY:
            # Language ID may take any junk page first: it is not English prose either.
            assert stage in CAUGHT_BY[kind] | {"rules", "lang"}, (kind, stage, row["reject_reason"])
    # Every page of those kinds is gone from data/.
    kept = pq.read_table(out / "data")
    kept_kinds = {truth[i] for i in kept["doc_id"].to_pylist()}
    assert not kept_kinds & {"chinese", "code", "bullets", "table", "boilerplate", "hashtags"}
    assert "article" in kept_kinds


def test_language_and_kept_scores_are_published_and_audited(fineweb_run) -> None:
    _, out = fineweb_run
    data = pq.read_table(out / "data")
    assert {"lang", "lang_score", score_column("gopher_words")} <= set(data.column_names)
    assert set(data["lang"].to_pylist()) == {"en"}
    assert pc.min(data["lang_score"]).as_py() >= 0.65
    assert pc.min(data[score_column("gopher_words")]).as_py() >= 50
    report = json.loads((out / "report.json").read_text())
    check = next(c for c in report["audit"]["checks"] if c["name"] == "lang_allowed")
    assert check["status"] == "pass", check
    quality = report["quality"]
    assert list(quality) == FILTERS
    words = quality["gopher_quality"]["scores"][score_column("gopher_words")]
    assert words["scored"] > 0 and words["quantiles"]["p50"] >= words["quantiles"]["p10"]
    bound = next(b for b in words["bounds"] if b["op"] == ">=")
    assert bound["value"] == 50 and bound["outside"] > 0
    html = (out / "report.html").read_text()
    assert "Quality filters" in html and "gopher_quality" in html


def test_the_zh_preset_keeps_chinese_pages_and_removes_english(spark, tmp_path: Path) -> None:
    raw = tmp_path / "raw"
    raw.mkdir()
    # Thirty different pages of eight of the ten sentences each (near-dedup is off).
    orders = [np.random.default_rng(i).permutation(len(_ZH))[:8] for i in range(30)]
    zh = ["".join(_ZH[k] for k in order) for order in orders]
    en = [
        "The farmer walked to the old mill with his family, and the children watched the "
        f"river rise over the bridge on morning {i}. " * 3
        for i in range(10)
    ]
    texts = zh + en
    pq.write_table(
        pa.table({"doc_id": [f"d{i}" for i in range(len(texts))], "text": texts}),
        raw / "part-0.parquet",
    )
    out = tmp_path / "out"
    args = ["--input", str(raw), "--output", str(out), "--config", "zh-web"]
    assert clean.main([*args, "--set", "near_dedup.enabled=false"]) == 0
    report = json.loads((out / "report.json").read_text())
    assert report["removed"]["lang"] == 10
    data = pq.read_table(out / "data")
    assert set(data["lang"].to_pylist()) == {"zh"}
    # Without quality.keep_scores the scores stay out of data/ (they are in rejected/).
    assert data.column_names == ["doc_id", "text", "lang", "lang_score"]
    rejected = pq.read_table(out / "rejected")
    assert score_column("lang_score") in rejected.column_names
    assert data.num_rows == 30
