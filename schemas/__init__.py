"""Data contracts: Spark schemas of every table corpusclean reads or writes.

The Great Expectations suites that check the same contracts at run time are the JSON files
beside this module.
"""

from __future__ import annotations

from pyspark.sql.types import (
    BooleanType,
    DataType,
    LongType,
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


DUPLICATES = StructType(
    [
        StructField("doc_id", StringType(), nullable=False),
        StructField("cluster_id", StringType(), nullable=False),
        StructField("stage", StringType(), nullable=False),  # doc_id | exact | near
        StructField("kept", BooleanType(), nullable=False),
    ]
)

# rejected/ holds the input's columns plus these two.
REJECTED_EXTRA = StructType(
    [
        StructField("reject_reason", StringType(), nullable=False),
        StructField("reject_stage", StringType(), nullable=False),
    ]
)

SHARD_INDEX_ENTRY = StructType(
    [
        StructField("url", StringType(), nullable=False),
        StructField("nsamples", LongType(), nullable=False),
        StructField("filesize", LongType(), nullable=False),
        StructField("sha256", StringType(), nullable=False),
    ]
)


def missing_required(schema: StructType, required: StructType) -> list[str]:
    """Names of required columns absent from `schema`."""
    names = set(schema.fieldNames())
    return [f.name for f in required.fields if f.name not in names]


def wrong_types(schema: StructType, required: StructType) -> list[tuple[str, DataType, DataType]]:
    """(column, found, expected) for required columns present with another type."""
    found = {f.name: f.dataType for f in schema.fields}
    return [
        (f.name, found[f.name], f.dataType)
        for f in required.fields
        if f.name in found and found[f.name] != f.dataType
    ]
