"""Every bookkeeping column the jobs add next to a user's columns, named once.

A job adds these to the frame that holds the input's own columns, so an input column of the
same name would be overwritten (and published) or would make the plan ambiguous. The jobs
check the input's columns against `CLEAN_RESERVED` / `PACK_RESERVED` before Spark runs anything
(`reserved_in`) and refuse with the column's name. The modules that use a name import it from
here, so a new bookkeeping column cannot be forgotten in the check.
"""

from __future__ import annotations

from collections.abc import Iterable

# clean: the row frame (jobs/clean.py, pipelines/content.py, pipelines/dedup.py)
ROW_ID = "_rid"
ROW_HASH = "_row_hash"
REASON = "_reject_reason"
TEXT_LEN = "_text_len"
STAGE = "_stage"
DOCID_GROUP = "_docid_group"
DOCID_KEPT = "_docid_kept"
EXACT_CLUSTER = "_exact_cluster"
NEAR_CLUSTER = "_near_cluster"
# The prior index a row duplicates (clean --against), null for rows removed within the batch.
AGAINST = "_against"
RANK = "__rank"
# The dedup windows' partition key, "still in the corpus" (pipelines/dedup.py), as a column:
# Spark names an expression in a window's PARTITION BY afresh in each window it extracts, so
# two windows over `_stage IS NULL` would each shuffle and sort the frame; over one column, a
# stage's windows share one exchange and sort.
LIVE = "__live"
# A batch row's match in a prior index (clean --against, pipelines/prior.py): the key asked
# for, the prior document's doc_id and the index's name, while they are joined to the rows.
PRIOR_KEY = "__prior_key"
PRIOR_ID = "__prior_id"
PRIOR_AGAINST = "__against"
# clean: content features (pipelines/content.py) and near dedup (pipelines/near_dedup.py)
NORM_HASH = "_norm_hash"
BAD_CHARS = "_bad_chars"
# The text of a row a filter refused, from the read pass (null for every other row): rejected/
# is then written without reading every input row's text a second time.
REFUSED_TEXT = "__refused_text"
# clean with `tokens.tokenizer`: each document's tokens (published in data/ as `n_tokens`) and
# its text's UTF-8 bytes (for the measured bytes per token), from the read pass.
TOKENS = "__n_tokens"
TEXT_BYTES = "__text_bytes"
MINHASH = "_minhash"
BANDS = "_bands"
SHINGLES = "_shingles"
SIZE = "__size"
# clean: JSON Lines input (jobs/inputs/files.py): the raw line, its file, why it is not a document
CORRUPT = "_corrupt_record"
RAW_LINE = "_raw_line"
SOURCE_FILE = "_source_file"
BAD_LINE = "_bad_line"
# clean: the audit's helper columns on the staged output (jobs/audit/quality.py)
AUDIT_COLUMNS = ("_dup_doc_id", "_bad_char_ratio", "_removed_in", "_text_checks")
# Spark's hidden file-metadata column: a user column of this name hides it.
METADATA = "_metadata"
# clean: a filter's scores (pipelines/base.py), `_score_<name>`; every name with this prefix
# is reserved.
SCORE_PREFIX = "_score_"

# pack (jobs/pack.py, pipelines/shards.py, jobs/shards/pack_io.py)
# The document id while the shuffle sorts by it; named back to the id column after the sort.
PACK_ID = "_id"
SHUFFLE_HASH = "_h"
UNIT = "_unit"
PARTITION_KEY = "_pkey"
TXT = "_txt"
JSON = "_json"
LINE = "_line"
FILE = "_file"
ROW = "_row"

CLEAN_RESERVED: frozenset[str] = frozenset(
    {
        ROW_ID,
        ROW_HASH,
        REASON,
        TEXT_LEN,
        STAGE,
        DOCID_GROUP,
        DOCID_KEPT,
        EXACT_CLUSTER,
        NEAR_CLUSTER,
        AGAINST,
        RANK,
        LIVE,
        PRIOR_KEY,
        PRIOR_ID,
        PRIOR_AGAINST,
        NORM_HASH,
        BAD_CHARS,
        REFUSED_TEXT,
        TOKENS,
        TEXT_BYTES,
        MINHASH,
        BANDS,
        SHINGLES,
        SIZE,
        CORRUPT,
        RAW_LINE,
        SOURCE_FILE,
        BAD_LINE,
        METADATA,
        *AUDIT_COLUMNS,
    }
)
# pack builds each sample's payload from the input's columns before it adds its own (_h, _unit,
# _file, _row...), and then keeps only the payload and the id: a user column named like one of
# them comes back unchanged. Only Spark's hidden file-metadata column cannot share its name.
PACK_RESERVED: frozenset[str] = frozenset({METADATA})


def score_column(name: str) -> str:
    """The column of a filter's score `name` (pipelines/filters/)."""
    return SCORE_PREFIX + name


def reserved_in(
    columns: Iterable[str], reserved: frozenset[str], prefixes: tuple[str, ...] = ()
) -> list[str]:
    """The names of `columns` that are bookkeeping names in `reserved` or start with one of
    `prefixes`, in input order."""
    return [c for c in columns if c in reserved or c.startswith(prefixes)]


def quoted(name: str) -> str:
    """`name` as a Spark column reference that never parses dots or backticks inside it."""
    return "`" + name.replace("`", "``") + "`"
