"""Checks of one shard file against its index.json entry, shared by `pack --verify` and `bench`,
and the readers they use (a hashing stream, webdataset's sample grouping, a file's sha256).

Light on imports (no Spark; webdataset only inside `read_samples`), so that `bench` can run them
before it measures.
"""

from __future__ import annotations

import hashlib
import io
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import IO, Any

from corpusclean.errors import RejectedError

TAR_BLOCK = 512


# A pack folder's index, written last (a folder with it is a finished pack), and its
# `__kind__`: the wids shard-index form for tar shards; Megatron token shards take the same
# layout under their own kind, as no wids reader takes a .bin.
INDEX = "index.json"
INDEX_KIND = "wids-shard-index-v1"
MEGATRON_KIND = "corpusclean-megatron-index-v1"


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
    if file_sha256(path)[1] != want:
        return f"{entry['url']}: sha256 differs from the index"
    return None


def damaged_error(problems: Sequence[str], total: int, fix: str | None = None) -> RejectedError:
    """The one-line exit-3 error naming the first damaged shards (and the fix, if given)."""
    shown = "; ".join(problems[:3]) + (
        f"; and {len(problems) - 3} more" if len(problems) > 3 else ""
    )
    tail = f"; {fix}" if fix else ""
    return RejectedError(f"{len(problems)} of {total} shards fail verification: {shown}{tail}")


def file_sha256(path: str | Path) -> tuple[int, str]:
    """(size, sha256) of a file, read in 1 MiB chunks."""
    sha = hashlib.sha256()
    size = 0
    with open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            sha.update(chunk)
            size += len(chunk)
    return size, sha.hexdigest()


class HashingReader(io.RawIOBase):
    """A read-only stream over a file that hashes every byte read through it."""

    def __init__(self, raw: IO[bytes]) -> None:
        self._raw = raw
        self.sha = hashlib.sha256()
        self.count = 0

    def readable(self) -> bool:
        """Always True."""
        return True

    def readinto(self, buffer: Any) -> int:
        """Read into `buffer`, updating the hash."""
        n = self._raw.readinto(buffer)
        if n:
            view = memoryview(buffer)[:n]
            self.sha.update(view)
            self.count += n
        return n or 0

    def drain(self) -> None:
        """Read (and hash) whatever the tar reader left unread after the end blocks."""
        while chunk := self._raw.read(1 << 20):
            self.sha.update(chunk)
            self.count += len(chunk)


def read_samples(stream: IO[bytes], url: str) -> Iterator[dict[str, Any]]:
    """The samples of one shard as WebDataset's own reader groups them (key -> member bytes)."""
    from webdataset.tariterators import group_by_keys, tar_file_expander

    source = [{"url": url, "stream": stream}]
    return group_by_keys(tar_file_expander(source))
