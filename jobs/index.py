"""`corpusclean index`: the dedup index of a corpus corpusclean did not clean.

A released dataset in Parquet or JSON Lines becomes an index folder (jobs/dedup_index.py) that
`clean --against` reads like a clean output's own `index/`. It takes the same config as `clean`
(`columns`, `input`, `near_dedup`, `publish`), so the index is built with the parameters the
runs that name it use. Rows without an id or a text are left out: nothing could name them.

One pass reads the texts (normalised-content hash, MinHash signature and band keys, the same
Arrow pass as clean's); its result is checkpointed in the staging folder before the index is
written, and the folder is published atomically. A killed run is resumed by the same command
after that pass (`--no-resume` starts afresh); the input's files and the config must be the
same, as for clean (jobs/resume.py).
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pyspark.sql.functions as F
from pyspark.sql import SparkSession
from pyspark.sql.types import StringType, StructType

from corpusclean.jobs import log
from corpusclean.jobs.clean import near_minhash, read_input, reread
from corpusclean.jobs.config import CleanConfig, load_clean_config
from corpusclean.jobs.dedup_index import write_index
from corpusclean.jobs.errors import CorpusCleanError, InputError
from corpusclean.jobs.paths import check_output_vs_input, detect_format, is_remote
from corpusclean.jobs.publish import Publisher, check_output
from corpusclean.jobs.resume import Checkpoints, fingerprint, refusal
from corpusclean.jobs.runner import new_parser, run_job
from corpusclean.jobs.session import build_session
from corpusclean.pipelines.columns import BANDS, MINHASH, NORM_HASH, REASON, ROW_ID, STAGE, quoted
from corpusclean.pipelines.content import ReadPass, run_read_pass
from corpusclean.pipelines.near_dedup import MinHashFeature
from corpusclean.testhook import hold

JOB = "index"
FEATURES = "features"
# The config sections an index depends on (its fingerprint): the rest of clean's do not
# change what an index holds.
_SECTIONS = ("input", "columns", "near_dedup", "stages")


def build_index(
    spark: SparkSession, input_path: str, output: str, cfg: CleanConfig, resume: bool = True
) -> dict[str, Any]:
    """Index `input_path` into `output` (published atomically); returns `_params.json`."""
    fmt = detect_format(input_path, cfg.input.format)
    check_output_vs_input([input_path], output)
    publisher = Publisher(
        output, JOB, stale_hours=cfg.publish.stale_hours, keep_rejected=cfg.publish.keep_rejected
    )
    id_col, text_col = cfg.columns.id, cfg.columns.text
    raw = read_input(spark, input_path, fmt)
    _check_columns(raw.schema, input_path, id_col, text_col)
    minhash = near_minhash(cfg.pipeline())
    resolved = cfg.resolved()
    fp = fingerprint(spark, raw, fmt, {k: resolved.get(k) for k in _SECTIONS})
    adopt = (lambda folder: refusal(folder, fp)) if resume else None
    spark.sparkContext.setJobGroup(publisher.run_id, f"corpusclean index {publisher.run_id}")
    staging = publisher.prepare(adopt=adopt)
    work = staging / "_work"
    checkpoints = Checkpoints(work)
    try:
        checkpoints.write_fingerprint(fp)
        done = checkpoints.last() if publisher.resumed_from is not None else None
        if done is None:
            marked = raw.filter(
                F.col(quoted(id_col)).isNotNull()
                & (F.trim(F.col(quoted(id_col))) != "")
                & F.col(quoted(text_col)).isNotNull()
            ).select(
                F.monotonically_increasing_id().alias(ROW_ID),
                F.col(quoted(id_col)),
                F.col(quoted(text_col)),
                F.lit(None).cast("string").alias(REASON),
                F.lit(None).cast("string").alias(STAGE),
            )
            features = () if minhash is None else (MinHashFeature(minhash),)
            passed = run_read_pass(marked, ReadPass(text_col, (), features, False))
            keep = [ROW_ID, id_col, NORM_HASH] + ([MINHASH, BANDS] if minhash else [])
            narrow = passed.select(*[F.col(quoted(c)) for c in keep])
            with log.stage(JOB, "read", spark=spark) as st:
                narrow.write.mode("overwrite").parquet(str(work / FEATURES))
                st.note = "one pass: content hash, signatures, band keys"
            checkpoints.save(0, FEATURES, {"schema": narrow.schema.json()})
            hold("index.features")
        else:
            log.info(JOB, f"resuming run {publisher.resumed_from}: its read pass is reused")
        state = checkpoints.last()
        assert state is not None
        schema = StructType.fromJson(json.loads(state.state["schema"]))
        feats = reread(spark, schema, str(work / FEATURES))
        source = input_path if is_remote(input_path) else str(Path(input_path).absolute())
        texts = {"path": source, "format": fmt, "id": id_col, "text": text_col}
        with log.stage(JOB, "write", spark=spark) as st:
            params = write_index(feats, staging, id_col, minhash, texts, source, publisher.run_id)
            st.rows_out = params["documents"]
        shutil.rmtree(work, ignore_errors=True)
        hold("index.publish")
        publisher.publish()
    except BaseException as exc:
        if isinstance(exc, CorpusCleanError) or checkpoints.last() is None:
            publisher.discard()
        else:
            publisher.keep_failed()
            log.info(JOB, f"run failed; rerun the same command to resume from {staging}")
        raise
    finally:
        publisher.close()
        spark.sparkContext.setLocalProperty("spark.jobGroup.id", None)  # type: ignore[arg-type]
    log.info(
        JOB,
        f"published the index of {params['documents']:,} documents to {output} "
        f"({params['bytes_per_document']:.0f} bytes a document)",
    )
    return params


def _check_columns(schema: StructType, path: str, id_col: str, text_col: str) -> None:
    fields = {f.name: f.dataType for f in schema.fields}
    have = ", ".join(fields) or "none"
    for key, name in (("columns.id", id_col), ("columns.text", text_col)):
        if name not in fields:
            raise InputError(
                f"input {path} has no column {name!r} (its columns: {have}); set {key}=NAME"
            )
        if not isinstance(fields[name], StringType):
            raise InputError(
                f"input {path}: column {name!r} ({key}) must be a string, "
                f"found {fields[name].simpleString()}"
            )


def build_parser() -> argparse.ArgumentParser:
    parser = new_parser(JOB, "Build the dedup index of a corpus, for clean --against.")
    parser.add_argument("--input", required=True, help="Parquet or JSON Lines: file, folder, glob")
    parser.add_argument("--output", required=True, help="index folder to publish into")
    parser.add_argument("--config", help="YAML run config (clean's layout: columns, near_dedup)")
    parser.add_argument(
        "--set", action="append", default=[], metavar="KEY=VALUE", help="override a config key"
    )
    parser.add_argument(
        "--no-resume", action="store_true", help="start afresh even when a killed run left work"
    )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """`corpusclean index --input PATH --output INDEX_DIR [--config F] [--set k=v]...`."""
    parser = build_parser()

    def body(args: argparse.Namespace) -> int:
        cfg = load_clean_config(args.config, args.set)
        # Everything that needs no Spark first: the format, the output's place and state.
        detect_format(args.input, cfg.input.format)
        check_output_vs_input([args.input], args.output)
        check_output(args.output, JOB)
        spark = build_session("corpusclean-index", cfg.spark, [args.input])
        params = build_index(spark, args.input, args.output, cfg, resume=not args.no_resume)
        print(json.dumps({k: params[k] for k in ("documents", "bytes", "bytes_per_document")}))
        return 0

    return run_job(JOB, parser, body, argv)


if __name__ == "__main__":
    sys.exit(main())
