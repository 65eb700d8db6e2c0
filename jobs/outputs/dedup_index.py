"""Dedup indexes: written with every clean output (`DIR/index/`), built for any corpus by
`corpusclean index`, and opened by `clean --against`.

Layout of an index folder:

- `_params.json`: what must match for two corpora to be compared (content normalisation and
  hash, MinHash and LSH parameters, the kernels' version), the document count, and where the
  indexed texts are (a clean output's `../data`; the input of `corpusclean index`), which
  verification reads for the few pairs too close to the threshold to trust an estimate;
- `docs/`: one row per indexed document: `ix` (int64, unique in the index), `doc_id`,
  `hash` (16-byte BLAKE2b of the normalised text) and `sig` (num_perm little-endian uint32,
  null for a document with no shingle). The doc_id and exact joins read one column of it; the
  signatures are read only for the prior end of a candidate pair;
- `bands/`: one row per (document, band): `band` (int), `key` (int64), `ix`, in the documents'
  order. The candidate join reads only these three integer columns, never a signature or an
  id, and every row of them: no order or split of the folder lets it skip one. So the rows are
  not sorted (a document's rows sit together, sharing an `ix`, which compresses) and the
  folder is not split by band (a folder per band would multiply the files by the band count
  for no read saved).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyspark.sql.functions as F
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.types import (
    BinaryType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
)

from corpusclean import __version__
from corpusclean.errors import ConfigError, InputError
from corpusclean.jobs.inputs.paths import is_remote
from corpusclean.jobs.runtime.atomic import write_json_atomic
from corpusclean.pipelines.columns import BANDS, MINHASH, NORM_HASH, ROW_ID, quoted
from corpusclean.pipelines.minhash import MinHashParams
from corpusclean.pipelines.prior import BAND, DOC_ID, HASH, IX, KEY, SIG, TEXT, PriorIndex
from corpusclean.schemas import DEFAULT_ID_COLUMN, DEFAULT_TEXT_COLUMN

FORMAT = "corpusclean-dedup-index"
FORMAT_VERSION = 1
PARAMS = "_params.json"
DOCS, BANDS_DIR = "docs", "bands"
# The content hash's normalisation (pipelines/content.py: NFKC, case folding, whitespace
# collapsed, BLAKE2b-128) and the shingling/MinHash kernels (pipelines/minhash.py): bumped
# whenever either would give another value for the same text, so old indexes are refused.
CONTENT_HASH = {"normalisation": "nfkc-casefold-collapse-whitespace", "hash": "blake2b-128"}
CONTENT_HASH_VERSION = 1
MINHASH_KERNEL_VERSION = 1
# The MinHash parameters a run and an index must share, by their config key.
_MINHASH_KEYS = ("num_perm", "seed", "tokenizer", "ngram", "char_ngram", "bands", "rows")

DOCS_SCHEMA = StructType(
    [
        StructField(IX, LongType(), False),
        StructField(DOC_ID, StringType(), True),
        StructField(HASH, BinaryType(), True),
        StructField(SIG, BinaryType(), True),
    ]
)
BANDS_SCHEMA = StructType(
    [
        StructField(BAND, IntegerType(), False),
        StructField(KEY, LongType(), False),
        StructField(IX, LongType(), False),
    ]
)


def minhash_params(p: MinHashParams) -> dict[str, Any]:
    """The MinHash section of `_params.json`."""
    return {
        "num_perm": p.num_perm,
        "seed": p.seed,
        "tokenizer": p.tokenizer,
        "ngram": p.ngram,
        "char_ngram": p.char_ngram,
        "bands": p.bands,
        "rows": p.rows,
        "kernel_version": MINHASH_KERNEL_VERSION,
    }


def write_index(
    features: DataFrame,
    folder: Path,
    id_col: str,
    minhash: MinHashParams | None,
    texts: dict[str, str] | None,
    source: str,
    run_id: str,
) -> dict[str, Any]:
    """Write the index of the documents of `features` into `folder`; returns its params.

    Reads `_rid`, `id_col`, `_norm_hash` and, with `minhash`, `_minhash` and `_bands` of
    `features` (one row per document to index). Two writes and one observation: no count job.
    """
    from pyspark.sql import Observation

    counted = Observation("index")
    sig = F.col(MINHASH) if minhash is not None else F.lit(None).cast("binary")
    docs = features.select(
        F.col(ROW_ID).alias(IX),
        F.col(id_col).alias(DOC_ID),
        F.col(NORM_HASH).alias(HASH),
        sig.alias(SIG),
    ).observe(counted, F.count(F.lit(1)).alias("documents"))
    docs.sortWithinPartitions(IX).write.mode("overwrite").parquet(str(folder / DOCS))
    documents = int(counted.get["documents"])
    bands_path = str(folder / BANDS_DIR)
    if minhash is not None:
        rows = features.filter(F.col(BANDS).isNotNull()).select(
            F.col(ROW_ID).alias(IX), F.posexplode(F.col(BANDS)).alias(BAND, KEY)
        )
        # Not sorted by key: the join reads every row anyway, and a sort makes this write
        # slower and the folder larger (docs/figures.md): sorted, a document's rows are
        # scattered, and `ix` no longer comes in runs.
        rows.select(F.col(BAND).cast("int").alias(BAND), KEY, IX).write.mode("overwrite").parquet(
            bands_path
        )
    else:
        features.sparkSession.createDataFrame([], BANDS_SCHEMA).write.mode("overwrite").parquet(
            bands_path
        )
    params = {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "corpusclean": __version__,
        "run_id": run_id,
        "source": source,
        "documents": documents,
        "content_hash": {**CONTENT_HASH, "version": CONTENT_HASH_VERSION},
        "minhash": None if minhash is None else minhash_params(minhash),
        "texts": texts,
        "bytes": _folder_bytes(folder),
    }
    params["bytes_per_document"] = round(params["bytes"] / documents, 1) if documents else 0.0
    write_json_atomic(folder / PARAMS, params)
    return params


def _folder_bytes(folder: Path) -> int:
    total = 0
    for root, _, names in os.walk(folder):
        total += sum(os.path.getsize(Path(root) / n) for n in names if not n.startswith("."))
    return total


@dataclass(frozen=True)
class OpenedIndex:
    """An index named by `--against`: where it is and what `_params.json` says."""

    name: str
    given: str
    folder: Path
    params: dict[str, Any]

    @property
    def documents(self) -> int:
        return int(self.params.get("documents") or 0)


def locate(given: str) -> Path:
    """The index folder `--against` names: a clean output's `index/`, or an index folder."""
    if is_remote(given):
        raise InputError(f"--against {given}: an index must be on a POSIX path")
    path = Path(given.removeprefix("file://"))
    if not path.exists():
        raise InputError(f"--against {given}: no such folder")
    if (path / "index" / PARAMS).is_file():
        return path / "index"
    if (path / PARAMS).is_file():
        return path
    if path.is_dir() and (path / "index").is_dir():
        raise InputError(f"--against {given}: its index has no {PARAMS}; rebuild it")
    raise InputError(
        f"--against {given}: no dedup index there (neither index/{PARAMS} nor {PARAMS}); "
        "build one with `corpusclean index --input CORPUS --output INDEX_DIR`"
    )


def read_params(given: str, folder: Path) -> dict[str, Any]:
    """`_params.json` of an index, checked to be one corpusclean can read."""
    try:
        params = json.loads((folder / PARAMS).read_text("utf-8"))
    except (OSError, ValueError) as exc:
        raise InputError(f"--against {given}: {PARAMS} is not valid JSON") from exc
    if not isinstance(params, dict) or params.get("format") != FORMAT:
        raise InputError(
            f"--against {given}: {PARAMS} is not a corpusclean dedup index "
            f"(format {params.get('format') if isinstance(params, dict) else None!r})"
        )
    version = params.get("format_version")
    if not isinstance(version, int) or version > FORMAT_VERSION:
        raise InputError(
            f"--against {given}: index format version {version!r}, this corpusclean reads up "
            f"to {FORMAT_VERSION}; upgrade corpusclean or rebuild the index"
        )
    return params


def mismatch(params: dict[str, Any], minhash: MinHashParams | None) -> str | None:
    """The first parameter an index and a run differ in, in words; None when they match.

    `minhash`: the run's near-dedup parameters, None when near-dedup does not run (then only
    the content hash must match)."""
    content = params.get("content_hash") or {}
    if content.get("version") != CONTENT_HASH_VERSION:
        return (
            f"its content hash is version {content.get('version')!r}, this corpusclean's is "
            f"{CONTENT_HASH_VERSION}; rebuild the index"
        )
    if minhash is None:
        return None
    theirs = params.get("minhash")
    if theirs is None:
        return (
            "it has no MinHash signatures (built with near-dedup off); rebuild it, or set "
            "near_dedup.enabled=false"
        )
    if theirs.get("kernel_version") != MINHASH_KERNEL_VERSION:
        return (
            f"its MinHash kernel is version {theirs.get('kernel_version')!r}, this "
            f"corpusclean's is {MINHASH_KERNEL_VERSION}; rebuild the index"
        )
    mine = minhash_params(minhash)
    for key in _MINHASH_KEYS:
        if theirs.get(key) != mine[key]:
            return (
                f"near_dedup.{key} is {theirs.get(key)!r} in the index and {mine[key]!r} in "
                f"this run; run with --set near_dedup.{key}={theirs.get(key)} or rebuild the index"
            )
    return None


def check_files(given: str, folder: Path, params: dict[str, Any]) -> None:
    """Every data file of a local index has a readable Parquet footer, and docs/ holds the
    documents `_params.json` counts: a truncated or partly copied index is refused here,
    before any work, not half-way through a join."""
    import pyarrow.parquet as pq

    counts: dict[str, int] = {}
    for part in (DOCS, BANDS_DIR):
        root = folder / part
        if not root.is_dir():
            raise InputError(f"--against {given}: the index has no {part}/ folder")
        rows = 0
        for dirpath, _, names in os.walk(root):
            for name in sorted(names):
                if not name.endswith(".parquet"):
                    continue
                path = Path(dirpath) / name
                try:
                    rows += pq.read_metadata(path).num_rows
                except Exception as exc:  # pyarrow's ArrowInvalid / OSError on a cut file
                    raise InputError(
                        f"--against {given}: index file {path} is not readable Parquet "
                        f"(truncated or damaged: {str(exc).splitlines()[0]}); rebuild the index"
                    ) from exc
        counts[part] = rows
    if counts[DOCS] != params.get("documents"):
        raise InputError(
            f"--against {given}: the index's docs/ holds {counts[DOCS]:,} documents, its "
            f"{PARAMS} says {params.get('documents')!r}; the index is incomplete, rebuild it"
        )


def open_indexes(given: list[str], minhash: MinHashParams | None, output: str) -> list[OpenedIndex]:
    """Every `--against` index, checked: found, readable, built with this run's parameters,
    complete, not the output itself, each named once. No Spark; one-line errors."""
    opened: list[OpenedIndex] = []
    names: dict[str, str] = {}
    out = Path(output).absolute().resolve()
    for item in given:
        folder = locate(item)
        owner = folder.parent if folder.name == "index" else folder
        if owner.resolve() == out or folder.resolve() == out:
            raise ConfigError(
                f"--against {item} is the output itself; the new batch is published elsewhere "
                "and named with --against afterwards"
            )
        params = read_params(item, folder)
        why = mismatch(params, minhash)
        if why is not None:
            raise ConfigError(f"--against {item}: {why}")
        check_files(item, folder, params)
        name = owner.name
        if name in names:
            raise ConfigError(
                f"--against names two indexes called {name!r} ({names[name]} and {item}); "
                "duplicates/ tells them apart by folder name, so rename one"
            )
        names[name] = item
        opened.append(OpenedIndex(name, item, folder, params))
    return opened


def prior_frames(spark: SparkSession, index: OpenedIndex, order: int, near: bool) -> PriorIndex:
    """The frames of an opened index for the dedup stages (no job: schemas are given)."""
    docs = spark.read.schema(DOCS_SCHEMA).parquet(str(index.folder / DOCS))
    bands = spark.read.schema(BANDS_SCHEMA).parquet(str(index.folder / BANDS_DIR))
    return PriorIndex(
        index.name, order, docs, bands, _texts(spark, index), near and bool(index.params["minhash"])
    )


def _texts(spark: SparkSession, index: OpenedIndex) -> DataFrame | None:
    """The indexed documents' texts as `doc_id, text`, when the index says where they are and
    they are still there; None otherwise (verification then keeps the estimates)."""
    texts = index.params.get("texts")
    if not isinstance(texts, dict) or not texts.get("path"):
        return None
    path = texts["path"]
    if not is_remote(path):
        local = Path(path) if Path(path).is_absolute() else index.folder / path
        if not local.exists():
            return None
        path = str(local.resolve())
    id_col = str(texts.get("id", DEFAULT_ID_COLUMN))
    text_col = str(texts.get("text", DEFAULT_TEXT_COLUMN))
    # Given, not inferred: inferring a JSON Lines schema would scan the whole old corpus.
    schema = StructType([StructField(id_col, StringType()), StructField(text_col, StringType())])
    reader = spark.read.schema(schema)
    frame = reader.parquet(path) if texts.get("format") == "parquet" else reader.json(path)
    return frame.select(F.col(quoted(id_col)).alias(DOC_ID), F.col(quoted(text_col)).alias(TEXT))
