"""Row rules: mark rows that cannot be used for training, with the reason, instead of dropping."""

from __future__ import annotations

from collections.abc import Iterable

import pyspark.sql.functions as F
from pyspark.sql import Column, DataFrame

from corpusclean.pipelines.columns import REASON, TEXT_LEN

# Characters that show nothing: Unicode whitespace, format characters (Cf: zero-width space,
# joiners, word joiner, BOM, soft hyphen, bidi marks), controls (Cc), the combining grapheme
# joiner and the Hangul fillers. A text made only of these is as blank as an empty one.
_INVISIBLE = r"\s\p{Cf}\p{Cc}\x{034F}\x{115F}\x{1160}\x{3164}\x{FFA0}"


def is_blank(col: Column) -> Column:
    """True for a string of whitespace or invisible characters only (zero-width spaces, BOMs)."""
    return col.rlike(rf"(?U)^[{_INVISIBLE}]*$")


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
