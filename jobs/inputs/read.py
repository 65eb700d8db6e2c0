"""An input as the jobs take it: opened once before Spark starts, read by Spark after.

`open_input` is pre-flight's half: the format (configured, or what the files say) and, for a
local input, every file checked (Parquet footers and `.crc` files, JSON Lines names) without
Spark, so a bad input is refused in a second. Its result is handed to the run, whose
`read_input` gives Spark the checked file list and reader options; nothing is listed or read
twice. `check_columns` and `check_schema` hold the raw-docs contract (schemas/) against the
footers' columns before Spark, and against Spark's schema after.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pyarrow.types as pa_types
from pyspark.sql.types import DataType, NumericType, StringType, StructType

from corpusclean.errors import ConfigError, InputError
from corpusclean.jobs.inputs.files import (
    LINE_COLUMNS,
    InputFiles,
    explain_read_error,
    plan_input,
    read_jsonl,
)
from corpusclean.jobs.inputs.paths import check_output_vs_input, detect_format
from corpusclean.pipelines.columns import CLEAN_RESERVED, SCORE_PREFIX, reserved_in
from corpusclean.schemas import N_TOKENS, raw_docs_required

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from corpusclean.jobs.runtime.config import CleanConfig
    from corpusclean.pipelines.base import Pipeline


@dataclass(frozen=True)
class Input:
    """An input as pre-flight found it: the path given, its format, its checked files."""

    path: str
    format: str
    files: InputFiles

    @property
    def lines(self) -> bool:
        """JSON Lines input: every line is accounted for (bad lines have a funnel line)."""
        return self.format == "jsonl"


def open_input(path: str, configured_format: str = "auto", output: str | None = None) -> Input:
    """The input at `path`: its format and, for a local path, its files checked (no Spark).

    With `output`, an output that is the input, lies inside it or would replace a folder
    holding it is refused first, before any file is read.
    """
    fmt = detect_format(path, configured_format)
    if output is not None:
        check_output_vs_input([path], output)
    return Input(path, fmt, plan_input(path, fmt))


def read_input(spark: SparkSession, source: Input, line_columns: bool = False) -> DataFrame:
    """The raw documents as a DataFrame (Parquet file/folder/glob or JSON Lines, .gz too).

    With `line_columns`, JSON Lines come with `_bad_line`, `_source_file` and `_raw_line` next
    to the documents' columns (`LINE_COLUMNS`); without, a bad line is a row of what Spark's
    parser made of it.
    """
    plan = source.files
    try:
        if source.format == "parquet":
            return spark.read.options(**plan.options).parquet(*plan.paths)
        docs = read_jsonl(spark, plan)
        return docs if line_columns else docs.drop(*LINE_COLUMNS)
    except InputError:
        raise
    except Exception as exc:  # Spark's AnalysisException for a path it cannot read
        explained = explain_read_error(exc)
        if explained is not None:
            raise explained from exc
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise InputError(f"cannot read {source.format} input {source.path}: {first}") from exc


def reserved_message(path: str, name: str) -> str:
    """The refusal of an input column named like one of clean's bookkeeping columns."""
    return (
        f"input {path} has a column {name!r}, a name clean uses for its own bookkeeping "
        f"(reserved: {', '.join(sorted(CLEAN_RESERVED))} and every name starting with "
        f"{SCORE_PREFIX}); rename that column in the input and rerun"
    )


def _is_kind(dtype: Any, expected: DataType) -> bool:
    """`dtype` (Spark or Arrow) is of `expected`'s kind: a collated string is a string."""
    if isinstance(dtype, DataType):
        return isinstance(dtype, type(expected))
    if isinstance(expected, StringType):
        return bool(pa_types.is_string(dtype) or pa_types.is_large_string(dtype))
    return False


def _type_name(dtype: Any) -> str:
    return dtype.simpleString() if isinstance(dtype, DataType) else str(dtype)


def check_roles(path: str, fields: Mapping[str, Any], id_col: str, text_col: str) -> None:
    """The raw-docs contract's columns (`raw_docs_required`: the id and the text) exist and
    are of its types (`fields`: name -> a Spark or an Arrow type, so the same check runs on
    Parquet footers and on Spark's schema)."""
    have = ", ".join(fields) or "none"
    required = raw_docs_required(id_col, text_col).fields
    for key, field in zip(("columns.id", "columns.text"), required, strict=True):
        name = field.name
        if name not in fields:
            raise InputError(
                f"input {path} has no column {name!r} (its columns: {have}); set {key}=NAME"
            )
        if not _is_kind(fields[name], field.dataType):
            raise InputError(
                f"input {path}: column {name!r} ({key}) must be a "
                f"{field.dataType.simpleString()}, found {_type_name(fields[name])}"
            )


def check_reserved(path: str, names: Sequence[str]) -> None:
    """No input column takes one of clean's bookkeeping names."""
    clash = reserved_in(names, CLEAN_RESERVED, (SCORE_PREFIX,))
    if clash:
        raise InputError(reserved_message(path, clash[0]))


def check_published(path: str, names: Sequence[str], cfg: CleanConfig) -> None:
    """No input column takes a name clean adds to data/ on request (`n_tokens`)."""
    if cfg.tokens.tokenizer is not None and N_TOKENS in names:
        raise ConfigError(
            f"input {path} has a column {N_TOKENS!r}, the name clean gives each document's "
            "token count in data/ (tokens.tokenizer is set); rename that column in the input"
        )


def check_columns(source: Input, cfg: CleanConfig) -> None:
    """Pre-flight's half of the raw-docs contract, on a local Parquet input's footers: no
    reserved name, and string id and text columns. `check_schema` checks again on Spark's
    schema (JSON Lines and remote inputs have no footers to read)."""
    if source.files.rows == 0:
        raise InputError(f"input {source.path} holds no rows")
    schema = source.files.schema
    if schema is None:
        return
    fields = {f.name: f.type for f in schema}
    check_reserved(source.path, list(fields))
    check_published(source.path, list(fields), cfg)
    if source.files.partitioned:
        return  # partition columns come from folder names, which footers do not hold
    check_roles(source.path, fields, cfg.columns.id, cfg.columns.text)


def check_schema(
    df: DataFrame, cfg: CleanConfig, pipe: Pipeline, path: str, internal: Sequence[str] = ()
) -> None:
    """The raw-docs contract and what each listed stage reads (`Step.check`), on Spark's
    schema of the input. `internal` names the columns `read_input` added itself."""
    schema = StructType([f for f in df.schema.fields if f.name not in internal])
    fields = {f.name: f.dataType for f in schema.fields}
    check_reserved(path, list(fields))
    check_published(path, list(fields), cfg)
    check_roles(path, fields, cfg.columns.id, cfg.columns.text)
    for name in cfg.missing.numeric:
        if name not in fields:
            raise ConfigError(f"missing.numeric names column {name!r}, which the input lacks")
        if not isinstance(fields[name], NumericType):
            raise ConfigError(
                f"missing.numeric.{name}: column is {fields[name].simpleString()}, not numeric"
            )
    refused = pipe.check(fields)
    if refused is not None:
        raise ConfigError(refused[1])
