"""Reading `clean`'s input without losing a row or a column, and saying which file is wrong.

Local inputs are listed and checked here, in Python, before Spark reads them: every Parquet
footer (readable, not empty, one type per column; columns missing from some files are merged,
never dropped), stale Hadoop `.crc` files, file names Hadoop cannot open. Spark then gets the
explicit file list, glob-escaped, so a folder named `run[1]` is read as named.

JSON Lines go through Spark's own parser (`from_json` over the raw lines, PERMISSIVE), plus a
cheap check on each line's skeleton (the line with its strings blanked out) for what that parser
silently ignores: a second object or other data after the first. A bad line is never skipped:
its reason rides in `_bad_line` and the job either fails naming the first one's file and line
(`input.bad_lines: fail`) or sends every one to rejected/ (`reject`). Line numbers are found
afterwards, by a pass over only the files that hold bad lines.
"""

from __future__ import annotations

import bz2
import gzip
import hashlib
import io
import re
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

import pyspark.sql.functions as F
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.types import StringType, StructField, StructType

from corpusclean import schemas
from corpusclean.errors import InputError
from corpusclean.jobs.inputs.paths import is_remote, local_files
from corpusclean.jobs.runtime import log
from corpusclean.pipelines.columns import (
    BAD_LINE,
    CLEAN_RESERVED,
    CORRUPT,
    RAW_LINE,
    SOURCE_FILE,
    reserved_in,
)

JOB = "clean"
# The columns read_input adds for JSON Lines, next to the input's own.
LINE_COLUMNS = (BAD_LINE, SOURCE_FILE, RAW_LINE)
_GLOB = re.compile(r"([\\{}\[\]*?])")
_PARQUET_NAMES = (".parquet", ".parq")


def hadoop_escape(path: str) -> str:
    """`path` with Hadoop's glob characters escaped, so Spark reads it literally."""
    return _GLOB.sub(r"\\\1", path)


def local_path(uri: str) -> str:
    """The local path of a `file:` URI as Spark reports it (`file:///a%20b` -> `/a b`)."""
    if uri.startswith("file:"):
        return unquote(urlparse(uri).path)
    return uri


@dataclass(frozen=True)
class Footer:
    """One Parquet file's footer: its rows and Arrow schema."""

    path: Path
    rows: int
    schema: Any


def _footer(path: Path) -> Footer | None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    size = path.stat().st_size
    is_parquet_name = path.name.lower().endswith(_PARQUET_NAMES)
    if size == 0:
        if is_parquet_name:
            raise InputError(
                f"input file {path} is empty (0 bytes), not a Parquet file; remove or rewrite it"
            )
        return None
    try:
        meta = pq.read_metadata(path)
        return Footer(path, meta.num_rows, meta.schema.to_arrow_schema())
    except (OSError, pa.ArrowException) as exc:
        if not is_parquet_name:
            return None  # a README, a checksum list, ...: not data (the caller says so)
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise InputError(
            f"input file {path} is not a readable Parquet file ({first}); it may be truncated "
            "or corrupt: replace or remove it"
        ) from exc


def _check_names(files: list[Path]) -> None:
    # Hadoop parses `a:b` in any path component as a URI scheme and fails on it.
    for f in files:
        for part in f.absolute().parts:
            if ":" in part:
                what = "file" if part == f.name else "folder"
                raise InputError(
                    f"input file {f}: Spark (Hadoop) cannot read a path with ':' in a {what} "
                    f"name ({part!r}); rename it"
                )


def _check_crc(files: list[Path]) -> None:
    """A Hadoop `.NAME.crc` beside a file must be for that file's size, or Spark fails on it.

    Its length is fixed by the data's (a header and a CRC32 per chunk), so a stale one left by
    an earlier version of the file is found from two `stat`s, without reading the data.
    """
    for f in files:
        crc = f.with_name(f".{f.name}.crc")
        if not crc.is_file():
            continue
        with crc.open("rb") as fh:
            head = fh.read(8)
        if len(head) < 8 or head[:4] != b"crc\x00":
            expected = -1
        else:
            chunk = max(1, int.from_bytes(head[4:8], "big"))
            expected = 8 + 4 * -(-f.stat().st_size // chunk)
        if crc.stat().st_size != expected:
            raise InputError(
                f"input file {f} does not match its checksum file {crc.name} (stale or "
                f"corrupt); delete {crc} if {f.name} is right"
            )


def _merge_schemas(footers: list[Footer], path: str) -> list[str]:
    """Refuse a column whose type differs between files; return those not in every file."""
    first: dict[str, tuple[Any, Path]] = {}
    count: dict[str, int] = {}
    for ft in footers:
        for field in ft.schema:
            seen = first.get(field.name)
            if seen is None:
                first[field.name] = (field.type, ft.path)
            elif not seen[0].equals(field.type):
                raise InputError(
                    f"input file {ft.path} has column {field.name!r} as {field.type}, but "
                    f"{seen[1]} has it as {seen[0]}; make the files agree on its type"
                )
            count[field.name] = count.get(field.name, 0) + 1
    partial = [name for name in first if count[name] < len(footers)]
    if partial:
        detail = ", ".join(f"{n!r} ({count[n]} of {len(footers)} files)" for n in partial)
        log.info(
            JOB,
            f"input {path}: its files do not all have the same columns; merging their schemas "
            f"(missing values are null): {detail}",
        )
    return partial


@dataclass(frozen=True)
class InputFiles:
    """What Spark is given to read: paths (escaped) and reader options."""

    paths: list[str]
    options: dict[str, str]
    rows: int | None = None
    schema: Any = None  # Parquet: the files' columns (Arrow), merged
    partitioned: bool = False  # files under `key=value/` folders: Spark adds those columns


def plan_input(path: str, fmt: str) -> InputFiles:
    """Check a local input's files before Spark sees them; remote paths pass as they are."""
    if is_remote(path):
        # Spark lists remote folders itself; merging costs a footer pass but keeps every column.
        options = {"mergeSchema": "true"} if fmt == "parquet" else {}
        if fmt == "parquet":
            log.info(JOB, f"input {path}: remote, schemas of its files are merged (mergeSchema)")
        return InputFiles([path], options)
    import pyarrow as pa

    files = local_files(path)
    root = Path(path.removeprefix("file://"))
    options: dict[str, str] = {}
    if root.is_dir():
        # Partition folders (`lang=en/`) stay columns, as when Spark lists the folder itself.
        options["basePath"] = str(root.absolute())
    if fmt == "parquet":
        with ThreadPoolExecutor(max_workers=16) as pool:
            footers = list(pool.map(_footer, files))
        ignored = [f for f, ft in zip(files, footers, strict=True) if ft is None]
        for f in ignored:
            log.warn(JOB, f"ignoring {f}: not a Parquet file")
        found = [ft for ft in footers if ft is not None]
        if not found:
            raise InputError(f"input {path} holds no Parquet files")
        data = [ft.path for ft in found]
        _check_names(data)
        _check_crc(data)
        if _merge_schemas(found, path):
            options["mergeSchema"] = "true"
        rows = sum(ft.rows for ft in found)
        schema = pa.unify_schemas([ft.schema for ft in found])
    else:
        data = [f for f in files if _is_jsonl_name(f.name)]
        for f in files:
            if f not in data:
                log.warn(JOB, f"ignoring {f}: not a JSON Lines file (.jsonl, .json, .ndjson, .gz)")
        if not data:
            raise InputError(f"input {path} holds no JSON Lines files")
        _check_names(data)
        _check_crc(data)
        rows = None
        schema = None
    partitioned = root.is_dir() and any(
        "=" in part for f in data for part in f.relative_to(root).parent.parts
    )
    return InputFiles(
        [hadoop_escape(str(f.absolute())) for f in data], options, rows, schema, partitioned
    )


def _is_jsonl_name(name: str) -> bool:
    lower = name.lower()
    for ext in (".gz", ".bz2"):
        lower = lower.removesuffix(ext)
    return lower.endswith((".jsonl", ".json", ".ndjson"))


# --------------------------------------------------------------------------- JSON Lines


def read_jsonl(spark: SparkSession, plan: InputFiles) -> DataFrame:
    """The documents of JSON Lines files, with `_bad_line`, `_source_file`, `_raw_line`.

    Every non-blank line is one row. `_bad_line` is null for a line holding exactly one JSON
    object, else why not: `invalid_utf8`, `not_an_object` (an array, a scalar), `malformed_json`
    or `multiple_objects` (anything after the first object: Spark's parser would keep the first
    and drop the rest without a word).
    """
    reader = spark.read.options(mode="PERMISSIVE", columnNameOfCorruptRecord=CORRUPT)
    inferred = reader.json(plan.paths).schema  # the same inference pass as before
    fields = [f for f in inferred.fields if f.name != CORRUPT]
    if not fields and CORRUPT not in inferred.names:
        raise InputError(f"input {local_path(plan.paths[0])} holds no rows (no non-blank line)")
    if not fields:
        raise InputError(
            f"input {local_path(plan.paths[0])}: no line of it parses as a JSON object; is it "
            "JSON Lines (one object per line)?"
        )
    clash = reserved_in([f.name for f in fields], CLEAN_RESERVED)
    if clash:
        raise InputError(
            f"input {plan.paths[0]} has a field {clash[0]!r}, a name clean uses for its own "
            f"bookkeeping (reserved: {', '.join(sorted(CLEAN_RESERVED))}); rename that field "
            "in the input and rerun"
        )
    schema = StructType([*fields, StructField(CORRUPT, StringType(), True)])
    value = F.col("value")
    lines = spark.read.text(plan.paths).select(
        value,
        F.col("_metadata.file_path").alias(SOURCE_FILE),
        F.from_json(
            value, schema, {"mode": "PERMISSIVE", "columnNameOfCorruptRecord": CORRUPT}
        ).alias("__doc"),
    )
    doc = F.col("__doc")
    # Blank lines separate nothing and hold nothing (Spark's JSON reader skips them too); the
    # parser gives them no row, so only those rows are tested for blankness.
    lines = lines.filter(doc.isNotNull() | (F.trim(value, F.lit(" \t\r\f")) != F.lit("")))
    # After a `}` or `]`, valid JSON has only `,`, `}`, `]` or the end: anything else is a
    # second value. A pattern on the raw line is one scan; only the lines it matches (a `} x`
    # inside a string, say) get the exact test on the skeleton, the line with its escapes
    # dropped and every string emptied (AND and CASE WHEN evaluate lazily, so the skeleton is
    # never built for the other lines; bench/jsonl_read.py).
    after = r"[}\]]\s*[^\s,}\]]"
    skeleton = F.regexp_replace(F.regexp_replace(value, r"\\.", ""), r'"[^"]*"', '""')
    second_value = value.rlike(after) & skeleton.rlike(after)
    reason = (
        F.when(~F.is_valid_utf8(value), F.lit("invalid_utf8"))
        .when(doc.isNull() | ~F.ltrim(value).startswith("{"), F.lit("not_an_object"))
        .when(doc[CORRUPT].isNotNull(), F.lit("malformed_json"))
        .when(second_value, F.lit("multiple_objects"))
    )
    return lines.select(
        *[doc.getField(f.name).alias(f.name) for f in fields],
        reason.alias(BAD_LINE),
        F.col(SOURCE_FILE),
        value.alias(RAW_LINE),
    )


def _open_lines(path: str) -> Iterator[bytes]:
    """The lines of a local file as Hadoop's line reader splits them (\\n, \\r\\n or \\r)."""
    opener: Any = open
    if path.endswith(".gz"):
        opener = gzip.open
    elif path.endswith(".bz2"):
        opener = bz2.open
    with opener(path, "rb") as raw:
        # latin-1 maps bytes to characters one to one, so encoding back gives the exact bytes.
        text = io.TextIOWrapper(raw, encoding="latin-1", newline=None)
        for i, line in enumerate(text):
            data = line.rstrip("\n").encode("latin-1")
            if i == 0 and data.startswith(b"\xef\xbb\xbf"):
                data = data[3:]  # Hadoop's reader drops a UTF-8 BOM at the start of a file
            yield data


def line_numbers(path: str, wanted: set[str]) -> Iterator[tuple[int, str]]:
    """(1-based line number, md5) of each line of `path` whose md5 hex digest is in `wanted`."""
    for number, data in enumerate(_open_lines(path), start=1):
        digest = hashlib.md5(data, usedforsecurity=False).hexdigest()
        if digest in wanted:
            yield number, digest


def first_bad_line(bad: DataFrame) -> tuple[str, int | None, str, int, int]:
    """(file, line or None, reason, bad lines in all, files) of the first bad line."""
    per_file = bad.groupBy(SOURCE_FILE).agg(F.count(F.lit(1)).alias("n")).collect()
    total = sum(int(r["n"]) for r in per_file)
    uri = min(str(r[SOURCE_FILE]) for r in per_file)
    rows = (
        bad.filter(F.col(SOURCE_FILE) == F.lit(uri))
        .select(F.md5(F.col(RAW_LINE)).alias("md5"), F.col(BAD_LINE))
        .distinct()
        .collect()
    )
    reasons = {str(r["md5"]): str(r[BAD_LINE]) for r in rows}
    path = local_path(uri)
    if not is_remote(uri):
        for number, digest in line_numbers(path, set(reasons)):
            return path, number, reasons[digest], total, len(per_file)
    return path, None, min(reasons.values()), total, len(per_file)


def bad_line_rows(spark: SparkSession, bad: DataFrame, work: Path) -> DataFrame:
    """One row per bad line: `source_file`, `source_line`, `reject_reason`, `raw_line`.

    Spark decides which lines are bad; the driver finds their numbers by reading only the files
    that hold them and matching each line's md5. Identical bad lines of a file share an md5 and
    get its line numbers in order; if the numbers cannot be matched (a remote file, a line
    split differently) the rows stay, with a null line number.
    """
    import pyarrow as pa
    import pyarrow.parquet as pq

    md5 = F.md5(F.col(RAW_LINE)).alias("md5")
    wanted: dict[str, set[str]] = {}
    for r in bad.select(F.col(SOURCE_FILE), md5).distinct().collect():
        wanted.setdefault(str(r[SOURCE_FILE]), set()).add(str(r["md5"]))
    found: dict[str, list[Any]] = {"uri": [], "md5": [], "line": []}
    for uri in sorted(wanted):
        if is_remote(uri):
            continue
        for number, digest in line_numbers(local_path(uri), wanted[uri]):
            found["uri"].append(uri)
            found["md5"].append(digest)
            found["line"].append(number)
    numbers_path = work / "bad_line_numbers.parquet"
    numbers_path.parent.mkdir(parents=True, exist_ok=True)
    table = pa.table(
        {
            "uri": pa.array(found["uri"], pa.string()),
            "md5": pa.array(found["md5"], pa.string()),
            "line": pa.array(found["line"], pa.int64()),
        }
    )
    pq.write_table(table, numbers_path)
    numbers = (
        spark.read.parquet(str(numbers_path))
        .groupBy("uri", "md5")
        .agg(F.array_sort(F.collect_list("line")).alias("lines"))
    )
    groups = bad.groupBy(F.col(SOURCE_FILE).alias("uri"), md5).agg(
        F.count(F.lit(1)).alias("n"),
        F.min(F.col(BAD_LINE)).alias(schemas.REJECT_REASON),
        F.min(F.make_valid_utf8(F.col(RAW_LINE))).alias(schemas.RAW_LINE),
    )
    lines = F.when(F.size(F.col("lines")) == F.col("n"), F.col("lines")).otherwise(
        F.array_repeat(F.lit(None).cast("long"), F.col("n").cast("int"))
    )
    path_of = F.udf(local_path, StringType())
    return (
        groups.join(numbers, ["uri", "md5"], "left")
        .select(
            path_of(F.col("uri")).alias(schemas.SOURCE_FILE),
            F.explode(lines).alias(schemas.SOURCE_LINE),
            F.col(schemas.REJECT_REASON),
            F.col(schemas.RAW_LINE),
        )
        .select(schemas.SOURCE_FILE, schemas.SOURCE_LINE, schemas.REJECT_REASON, schemas.RAW_LINE)
    )


# --------------------------------------------------------------------------- Spark's errors

_READ_FILE = re.compile(r"Encountered error while reading file (\S+?)\.?\s")
_CHECKSUM = re.compile(r"Checksum error: (\S+) at \d+")
_CAUSE = re.compile(r"Caused by: ([\w.$]+): ?([^\n]*)")


def explain_read_error(exc: BaseException) -> InputError | None:
    """A one-line InputError for a Spark failure that comes from an input file, else None."""
    text = str(exc)
    if hasattr(exc, "java_exception"):
        text += "\n" + str(getattr(exc, "java_exception", ""))
    checksum = _CHECKSUM.search(text)
    if checksum:
        path = local_path(checksum.group(1))
        name = Path(path).name
        return InputError(
            f"input file {path} does not match its checksum file .{name}.crc (stale or corrupt);"
            f" delete the .crc file if {name} is right, else replace the file"
        )
    match = _READ_FILE.search(text)
    if not match:
        return None
    path = local_path(match.group(1))
    causes = _CAUSE.findall(text)
    kind, message = causes[-1] if causes else ("", "")
    lower = f"{kind} {message}".lower()
    if "eofexception" in lower or "unexpected end" in lower:
        what = "it is truncated (the compressed stream ends early)"
    elif "zipexception" in lower or "not in gzip format" in lower or "gzip" in lower:
        what = f"it is not valid gzip ({message.strip()[:120]})"
    elif "parquet" in lower or "not a parquet file" in text.lower():
        what = f"it is not a readable Parquet file ({message.strip()[:160]})"
    else:
        what = f"{kind.rsplit('.', 1)[-1]}: {message.strip()[:200]}" if kind else "unreadable"
    return InputError(f"input file {path} cannot be read: {what}; replace or remove it")
