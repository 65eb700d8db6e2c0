"""Checks of one shard file against its index.json entry, shared by `pack --verify` and `bench`.

Light on imports (no Spark, no webdataset), so that `bench` can run them before it measures.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from corpusclean.jobs.errors import RejectedError

TAR_BLOCK = 512


def size_problem(path: Path, entry: dict[str, Any]) -> str | None:
    """What is wrong with the shard's presence or size against its index entry, or None."""
    url = entry["url"]
    if not path.is_file():
        return f"{url}: missing"
    size = path.stat().st_size
    want = entry.get("filesize")
    if isinstance(want, int) and size != want:
        return f"{url}: {size:,} bytes on disk, the index says {want:,} (truncated?)"
    if not isinstance(want, int) and size % TAR_BLOCK:
        # Without an index, a tar is still whole 512-byte blocks.
        return f"{url}: {size:,} bytes, not whole {TAR_BLOCK}-byte tar blocks (truncated?)"
    return None


def sha256_problem(path: Path, entry: dict[str, Any]) -> str | None:
    """A sha256 mismatch against the index entry (none when the entry has no sha256)."""
    want = entry.get("sha256")
    if not isinstance(want, str):
        return None
    sha = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            sha.update(chunk)
    if sha.hexdigest() != want:
        return f"{entry['url']}: sha256 differs from the index"
    return None


def damaged_error(problems: Sequence[str], total: int, fix: str | None = None) -> RejectedError:
    """The one-line exit-3 error naming the first damaged shards (and the fix, if given)."""
    shown = "; ".join(problems[:3]) + (
        f"; and {len(problems) - 3} more" if len(problems) > 3 else ""
    )
    tail = f"; {fix}" if fix else ""
    return RejectedError(f"{len(problems)} of {total} shards fail verification: {shown}{tail}")
