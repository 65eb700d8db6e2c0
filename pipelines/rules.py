"""Row rules: mark rows that cannot be used for training, with the reason, instead of dropping."""

from __future__ import annotations

from collections.abc import Iterable

import pyspark.sql.functions as F
from pyspark.sql import Column, DataFrame

REASON = "_reject_reason"
TEXT_LEN = "_text_len"


def is_blank(col: Column) -> Column:
    """True for a string of whitespace only (Unicode whitespace, tabs and newlines included)."""
    return col.rlike(r"(?U)^\s*$")


def mark_row_rules(
    df: DataFrame,
    id_col: str,
    text_col: str,
    min_chars: int,
    max_chars: int,
    required_numeric: Iterable[str] = (),
) -> DataFrame:
    """Mark rows unusable for training.

    Reads `id_col`, `text_col` and each column of `required_numeric`; adds `_text_len`
    (characters of the text, null when the text is null) and `_reject_reason` (null for a usable
    row, otherwise the first rule it breaks: null_id, blank_id, null_text, blank_text,
    too_short, too_long, null_<column>).
    """
    doc_id, text = F.col(id_col), F.col(text_col)
    length = F.length(text)
    reason = (
        F.when(doc_id.isNull(), F.lit("null_id"))
        .when(is_blank(doc_id), F.lit("blank_id"))
        .when(text.isNull(), F.lit("null_text"))
        .when(is_blank(text), F.lit("blank_text"))
        .when(length < F.lit(min_chars), F.lit("too_short"))
        .when(length > F.lit(max_chars), F.lit("too_long"))
    )
    for name in required_numeric:
        reason = reason.when(F.col(name).isNull(), F.lit(f"null_{name}"))
    return df.withColumn(TEXT_LEN, length).withColumn(REASON, reason)
