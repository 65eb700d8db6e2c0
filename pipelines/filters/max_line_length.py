"""`max_line_length`: reject documents with a line longer than a bound.

A line of tens of thousands of characters is minified code, a base64 blob or a table flattened
into one line: text a model learns nothing from, and that bloats a training batch. This is
the worked example of an Arrow scorer in the README's "Adding a step".
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pydantic import Field

from corpusclean.pipelines.base import Bound, Filter, Rule, StepParams, register
from corpusclean.pipelines.columns import score_column

SCORE = score_column("max_line_length")


class MaxLineLengthParams(StepParams):
    # Longest line allowed, in characters (newline-separated lines).
    max_chars: int = Field(10_000, ge=1)


@register
class MaxLineLength(Filter):
    """Reads the text; scores `_score_max_line_length` (characters of the longest line);
    rejects with `line_too_long` above `max_chars`."""

    name = "max_line_length"
    Params = MaxLineLengthParams
    params: MaxLineLengthParams

    def reads(self) -> list[str]:
        return [self.roles.text]

    def score_fields(self) -> list[pa.Field]:
        return [pa.field(SCORE, pa.int64())]

    def score(self, batch: pa.RecordBatch) -> dict[str, pa.Array]:
        lines = pc.split_pattern(batch.column(self.roles.text), "\n")
        lengths = pc.utf8_length(pc.list_flatten(lines)).to_numpy(zero_copy_only=False)
        parents = pc.list_parent_indices(lines).to_numpy(zero_copy_only=False)
        longest = np.zeros(batch.num_rows, dtype=np.int64)
        np.maximum.at(longest, parents, lengths)
        return {SCORE: pa.array(longest)}

    def keep_rules(self) -> list[Rule]:
        # The one threshold, written once: the verdict and the report's bound both come from it.
        return [Bound("line_too_long", SCORE, "<=", self.params.max_chars)]
