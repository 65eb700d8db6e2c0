"""`corpusclean index`: the dedup index of a corpus corpusclean did not clean.

A released dataset in Parquet or JSON Lines becomes an index folder (jobs/outputs/dedup_index.py)
that `clean --against` reads like a clean output's own `index/`. It takes the same config as `clean`
(`columns`, `input`, `near_dedup`, `publish`), so the index is built with the parameters the
runs that name it use. Rows without an id or a text are left out: nothing could name them.

One pass reads the texts (normalised-content hash, MinHash signature and band keys, the same
Arrow pass as clean's); its result is checkpointed in the staging folder before the index is
written, and the folder is published atomically. A killed run is resumed by the same command
after that pass (`--no-resume` starts afresh); the input's files and the config must be the
same, as for clean (jobs/outputs/resume.py).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pyspark.sql.functions as F
from pyspark.sql import SparkSession
from pyspark.sql.types import StructType

from corpusclean.jobs.inputs.paths import is_remote
from corpusclean.jobs.inputs.read import Input, check_roles, open_input, read_input
from corpusclean.jobs.outputs.dedup_index import write_index
from corpusclean.jobs.outputs.publish import check_output
from corpusclean.jobs.outputs.resume import fingerprint
from corpusclean.jobs.outputs.staged import StagedRun, reread
from corpusclean.jobs.runtime import log
from corpusclean.jobs.runtime.config import CleanConfig, load_clean_config
from corpusclean.jobs.runtime.runner import new_parser, run_job
from corpusclean.jobs.runtime.session import build_session
from corpusclean.pipelines.columns import NORM_HASH, REASON, ROW_ID, STAGE, quoted
from corpusclean.pipelines.content import ReadPass, run_read_pass
from corpusclean.testhook import hold

JOB = "index"
FEATURES = "features"
# The config sections an index depends on besides its dedup stages' own (its fingerprint):
# the rest of clean's do not change what an index holds.
_SECTIONS = ("input", "columns", "stages")


def preflight(input_path: str, output: str, cfg: CleanConfig) -> Input:
    """Everything that needs no Spark: the format, the output's place and state, the input's
    files (footers, checksums, names); handed to `build_index`."""
    source = open_input(input_path, cfg.input.format, output)
    check_output(output, JOB)
    return source


def build_index(
    spark: SparkSession,
    input_path: str,
    output: str,
    cfg: CleanConfig,
    resume: bool = True,
    source: Input | None = None,
) -> dict[str, Any]:
    """Index `input_path` into `output` (published atomically); returns `_params.json`.

    `source` is pre-flight's result for this input (opened here when not given)."""
    source = source or preflight(input_path, output, cfg)
    id_col, text_col = cfg.columns.id, cfg.columns.text
    pipe = cfg.pipeline()
    minhash = pipe.signature_params()
    resolved = cfg.resolved()
    sections = (*_SECTIONS, *pipe.dedup_sections())
    with StagedRun(spark, JOB, output, cfg.publish) as staged_run:
        raw = read_input(spark, source)
        fields = {f.name: f.dataType for f in raw.schema.fields}
        check_roles(input_path, fields, id_col, text_col)
        fp = fingerprint(spark, raw, source.format, {k: resolved.get(k) for k in sections})
        with staged_run.staging(fp, resume) as staging:
            work, checkpoints = staging.work, staging.checkpoints
            if staging.resumed_from is None or checkpoints.last() is None:
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
                features = tuple(pipe.text_features())
                passed = run_read_pass(marked, ReadPass(text_col, (), features, False))
                keep = [ROW_ID, id_col, NORM_HASH] + [f.name for x in features for f in x.fields()]
                narrow = passed.select(*[F.col(quoted(c)) for c in keep])
                with log.stage(JOB, "read", spark=spark) as st:
                    narrow.write.mode("overwrite").parquet(str(work / FEATURES))
                    st.note = "one pass: content hash, signatures, band keys"
                checkpoints.save(0, FEATURES, {"schema": narrow.schema.json()})
                hold("index.features")
            else:
                log.info(JOB, f"resuming run {staging.resumed_from}: its read pass is reused")
            state = checkpoints.last()
            assert state is not None
            schema = StructType.fromJson(json.loads(state.state["schema"]))
            feats = reread(spark, schema, work / FEATURES)
            where = input_path if is_remote(input_path) else str(Path(input_path).absolute())
            texts = {"path": where, "format": source.format, "id": id_col, "text": text_col}
            with log.stage(JOB, "write", spark=spark) as st:
                params = write_index(
                    feats, staging.folder, id_col, minhash, texts, where, staged_run.run_id
                )
                st.rows_out = params["documents"]
            hold("index.publish")
    log.info(
        JOB,
        f"published the index of {params['documents']:,} documents to {output} "
        f"({params['bytes_per_document']:.0f} bytes a document)",
    )
    return params


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
        source = preflight(args.input, args.output, cfg)
        spark = build_session("corpusclean-index", cfg.spark, [args.input])
        params = build_index(spark, args.input, args.output, cfg, not args.no_resume, source)
        print(json.dumps({k: params[k] for k in ("documents", "bytes", "bytes_per_document")}))
        return 0

    return run_job(JOB, parser, body, argv)


if __name__ == "__main__":
    sys.exit(main())
