"""Row rules: mark rows that cannot be used for training, with the reason, instead of dropping."""

from __future__ import annotations

from collections.abc import Iterable

import pyspark.sql.functions as F
from pydantic import Field, model_validator
from pyspark.sql import Column

from corpusclean.pipelines.base import Filter, StepParams, register

# Characters that show nothing: Unicode whitespace, format characters (Cf: zero-width space,
# joiners, word joiner, BOM, soft hyphen, bidi marks), controls (Cc), the combining grapheme
# joiner and the Hangul fillers. A text made only of these is as blank as an empty one.
_INVISIBLE = r"\s\p{Cf}\p{Cc}\x{034F}\x{115F}\x{1160}\x{3164}\x{FFA0}"


def is_blank(col: Column) -> Column:
    """True for a string of whitespace or invisible characters only (zero-width spaces, BOMs)."""
    return col.rlike(rf"(?U)^[{_INVISIBLE}]*$")


def row_rule_reason(
    id_col: str,
    text_col: str,
    min_chars: int,
    max_chars: int,
    required_numeric: Iterable[str] = (),
) -> Column:
    """The first row rule a row breaks, as a reason (null for a usable row): null_id,
    blank_id, null_text, blank_text, too_short, too_long, null_<column>."""
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
    return reason


class RulesParams(StepParams):
    """`rules:` — length bounds of a usable text (conf/default.yaml explains the defaults)."""

    min_chars: int = Field(100, ge=0)
    max_chars: int = Field(1_000_000, ge=1)

    @model_validator(mode="after")
    def _bounds(self) -> RulesParams:
        if self.min_chars > self.max_chars:
            raise ValueError(
                f"rules.min_chars ({self.min_chars}) is above rules.max_chars ({self.max_chars})"
            )
        return self


@register
class RowRules(Filter):
    """`rules`: rows without a usable id or text, or outside the length bounds, and rows whose
    `missing.numeric: drop` columns are null. Reads the id, the text and those columns."""

    name = "rules"
    Params = RulesParams
    params: RulesParams

    def reads(self) -> list[str]:
        return [self.roles.id, self.roles.text, *self.roles.required]

    def reason(self) -> Column:
        p = self.params
        r = self.roles
        return row_rule_reason(r.id, r.text, p.min_chars, p.max_chars, r.required)

    def audit_params(self) -> dict[str, object]:
        return {"min_chars": self.params.min_chars, "max_chars": self.params.max_chars}
