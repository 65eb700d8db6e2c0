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


DUPLICATES = StructType(
    [
        StructField("doc_id", StringType(), nullable=False),
        StructField("cluster_id", StringType(), nullable=False),
        StructField("stage", StringType(), nullable=False),  # the dedup stage's name
        StructField("kept", BooleanType(), nullable=False),
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
