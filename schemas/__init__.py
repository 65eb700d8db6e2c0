"""Data contracts: the raw-docs columns `clean` requires (checked by `check_schema` in
jobs/clean.py) and the duplicates table's schema (written by clean, read by check and the
audit).

The Great Expectations suites that check the same contracts at run time are the JSON files
beside this module.
"""

from __future__ import annotations

from pyspark.sql.types import (
    BooleanType,
    DataType,
    StringType,
    StructField,
    StructType,
)


def raw_docs_required(id_col: str = "doc_id", text_col: str = "text") -> StructType:
    """The columns a raw input must have; any other columns are carried through unchanged."""
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
# Names the output contract adds next to the input's columns: an input column of such a name
# would clash with them in rejected/ or duplicates/.
OUTPUT_COLUMNS = frozenset({REJECT_REASON, REJECT_STAGE, SOURCE_FILE, SOURCE_LINE, RAW_LINE})

DUPLICATES = StructType(
    [
        StructField(DOC_ID, StringType(), nullable=False),
        StructField(CLUSTER_ID, StringType(), nullable=False),
        StructField(DUP_STAGE, StringType(), nullable=False),
        StructField(KEPT, BooleanType(), nullable=False),
    ]
)


def missing_required(schema: StructType, required: StructType) -> list[str]:
    """Names of required columns absent from `schema`."""
    names = set(schema.fieldNames())
    return [f.name for f in required.fields if f.name not in names]


def wrong_types(schema: StructType, required: StructType) -> list[tuple[str, DataType, DataType]]:
    """(column, found, expected) for required columns present with another type (by kind:
    a collated string is a string)."""
    found = {f.name: f.dataType for f in schema.fields}
    return [
        (f.name, found[f.name], f.dataType)
        for f in required.fields
        if f.name in found and not isinstance(found[f.name], type(f.dataType))
    ]
