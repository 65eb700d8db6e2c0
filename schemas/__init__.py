"""Data contracts: the raw-docs columns `clean` requires (checked by `check_roles` in
jobs/inputs/read.py), the column names the output contract adds and the duplicates table's
schema (written by clean, read by check and the audit).

The Great Expectations suites that check the same contracts at run time are the JSON files
beside this module.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql.types import StructType

# The input's id and text columns unless the config names others (`columns.id`,
# `columns.text` of clean and pack).
DEFAULT_ID_COLUMN = "doc_id"
DEFAULT_TEXT_COLUMN = "text"


def raw_docs_required(
    id_col: str = DEFAULT_ID_COLUMN, text_col: str = DEFAULT_TEXT_COLUMN
) -> StructType:
    """The columns a raw input must have; any other columns are carried through unchanged."""
    from pyspark.sql.types import StringType, StructField, StructType

    return StructType(
        [
            StructField(id_col, StringType(), nullable=True),
            StructField(text_col, StringType(), nullable=True),
        ]
    )


# The columns the output contract adds (README, "Output of clean"), named once: every writer,
# reader and suite of these folders takes the names from here.
# duplicates/: one row per member of a duplicate group.
DOC_ID = "doc_id"
CLUSTER_ID = "cluster_id"
DUP_STAGE = "stage"  # the dedup stage that grouped it: doc_id | exact | near
KEPT = "kept"
AGAINST = "against"  # the prior index a row duplicates (`clean --against`), null within the batch
# rejected/: the input's columns, then why and by which stage; bad JSON lines say where.
REJECT_REASON = "reject_reason"
REJECT_STAGE = "reject_stage"
SOURCE_FILE = "source_file"
SOURCE_LINE = "source_line"
RAW_LINE = "raw_line"
# data/: each document's tokens, when clean counts them (`tokens.tokenizer`).
N_TOKENS = "n_tokens"


def __getattr__(name: str) -> StructType:
    # DUPLICATES, the duplicates table's Spark schema, is built on first use: the names above
    # are read by commands that never start Spark (`corpusclean report`), and importing
    # pyspark would add its start-up time to theirs.
    if name != "DUPLICATES":
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from pyspark.sql.types import BooleanType, StringType, StructField, StructType

    schema = StructType(
        [
            StructField(DOC_ID, StringType(), nullable=False),
            StructField(CLUSTER_ID, StringType(), nullable=False),
            StructField(DUP_STAGE, StringType(), nullable=False),
            StructField(KEPT, BooleanType(), nullable=False),
        ]
    )
    globals()[name] = schema
    return schema
