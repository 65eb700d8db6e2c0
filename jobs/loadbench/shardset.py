"""The shards a bench run measures: found through index.json (or `*.tar`), checked, chosen."""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from corpusclean.errors import InputError
from corpusclean.jobs.shards import integrity as shardcheck
from corpusclean.jobs.shards.integrity import INDEX as INDEX_FILE
from corpusclean.jobs.shards.integrity import INDEX_KIND, MEGATRON_KIND


class ShardSet:
    """The shard files of a folder, from its wids `index.json` or, without one, `*.tar`."""

    def __init__(
        self,
        folder: Path,
        paths: list[Path],
        source: str,
        nsamples: dict[Path, int],
        entries: dict[Path, dict[str, Any]] | None = None,
        index: dict[str, Any] | None = None,
    ):
        self.folder = folder
        self.paths = paths
        self.source = source
        self.nsamples = nsamples
        # Each shard's index.json entry (url, filesize, sha256); without an index, its name.
        self.entries = entries or {p: {"url": p.name} for p in paths}
        # index.json itself (its tokenizer, its clean output), None without one.
        self.index = index or {}

    @property
    def kind(self) -> str:
        """`text` (tar shards of text), `tokens` (tar shards of `.npy` ids) or `megatron`."""
        if self.index.get("__kind__") == MEGATRON_KIND:
            return "megatron"
        return "tokens" if self.index.get("tokenizer") else "text"

    @property
    def dtype_bytes(self) -> int | None:
        """Bytes an id takes in a token shard (None for text)."""
        dtype = (self.index.get("tokenizer") or {}).get("dtype")
        return None if dtype is None else int(np.dtype(dtype).itemsize)

    @property
    def total_bytes(self) -> int:
        """Bytes of all shards."""
        return sum(p.stat().st_size for p in self.paths)


def discover_shards(shards: str) -> ShardSet:
    """The shards under `shards`; `InputError` names what is missing or malformed."""
    folder = Path(shards).expanduser()
    if not folder.exists():
        raise InputError(f"--shards {shards} does not exist")
    if not folder.is_dir():
        raise InputError(f"--shards {shards} is not a folder of .tar shards")
    folder = folder.resolve()
    index = folder / INDEX_FILE
    if not index.is_file():
        paths = sorted(p for p in folder.glob("*.tar") if p.is_file())
        if not paths:
            raise InputError(f"--shards {shards} holds no {INDEX_FILE} and no *.tar shards")
        return ShardSet(folder, paths, "glob", {})
    try:
        data = json.loads(index.read_text("utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise InputError(f"{index} is not readable JSON ({exc}); fix or remove it") from exc
    if not isinstance(data, dict) or not isinstance(data.get("shardlist"), list):
        raise InputError(f"{index} has no `shardlist` list (expected the wids index form)")
    kind = data.get("__kind__")
    if kind is not None and kind not in (INDEX_KIND, MEGATRON_KIND):
        raise InputError(f"{index}: __kind__ is {kind!r}, expected {INDEX_KIND!r}")
    paths: list[Path] = []
    nsamples: dict[Path, int] = {}
    entries: dict[Path, dict[str, Any]] = {}
    for i, entry in enumerate(data["shardlist"]):
        url = entry.get("url") if isinstance(entry, dict) else None
        if not isinstance(url, str) or not url:
            raise InputError(f"{index}: shardlist[{i}] has no url")
        if url.startswith("file://"):
            url = url[len("file://") :]
        elif "://" in url:
            raise InputError(f"{index}: shard {url} is remote; bench reads local shards only")
        path = Path(url) if os.path.isabs(url) else folder / url
        if not path.is_file():
            raise InputError(f"{index} lists {url}, which does not exist under {folder}")
        paths.append(path)
        entries[path] = {**entry, "url": url}
        if isinstance(entry.get("nsamples"), int):
            nsamples[path] = entry["nsamples"]
    if not paths:
        raise InputError(f"{index} lists no shards")
    return ShardSet(folder, paths, INDEX_FILE, nsamples, entries, data)


def check_shards(shards: ShardSet, used: Sequence[Path]) -> None:
    """Refuse damaged shards before measuring them (RejectedError, exit 3, naming them).

    Every shard's size is checked against index.json (a stat each); the shards to be read are
    checksummed too where the index gives a sha256 (one read, before the cold passes evict).
    The same checks as `corpusclean pack --verify`, which also re-reads the samples.
    """
    entries = shards.entries
    problems = [p for p in (shardcheck.size_problem(f, entries[f]) for f in shards.paths) if p]
    if not problems:
        problems = [p for p in (shardcheck.sha256_problem(f, entries[f]) for f in used) if p]
    if problems:
        raise shardcheck.damaged_error(
            problems,
            len(shards.paths),
            f"nothing measured; run `corpusclean pack --verify {shards.folder}`, then repack",
        )


def select_shards(paths: Sequence[Path], max_bytes: int) -> list[Path]:
    """Whole shards in order up to `max_bytes` (always at least one)."""
    chosen: list[Path] = []
    total = 0
    for path in paths:
        size = path.stat().st_size
        if chosen and total + size > max_bytes:
            break
        chosen.append(path)
        total += size
    return chosen


def default_output(folder: Path) -> Path:
    """`PARENT/NAME.bench.json` for the shard folder `PARENT/NAME`: beside it, never inside."""
    return folder.parent / f"{folder.name}.bench.json"


def check_outside(path: Path, folder: Path, what: str) -> None:
    resolved = path.expanduser().resolve()
    if resolved == folder or folder in resolved.parents:
        raise InputError(
            f"{what} {path} lies inside the shard folder {folder}; choose a path outside it"
        )
