"""Input discovery and output safety: formats by extension, and paths that must not collide."""

from __future__ import annotations

import glob
import os
from pathlib import Path
from urllib.parse import urlparse

from corpusclean.errors import InputError

_REMOTE_SCHEMES = {"hdfs", "s3a", "s3", "gs", "abfs", "abfss", "wasb", "wasbs", "file", "viewfs"}
_FORMAT_BY_SUFFIX = {
    ".parquet": "parquet",
    ".jsonl": "jsonl",
    ".json": "jsonl",
    ".ndjson": "jsonl",
    ".jsonl.gz": "jsonl",
    ".json.gz": "jsonl",
    ".ndjson.gz": "jsonl",
}


def is_remote(path: str) -> bool:
    """True for Hadoop-style URLs (hdfs://, s3a://, ...) that only Spark can list."""
    scheme = urlparse(path).scheme
    return scheme in _REMOTE_SCHEMES and scheme != "file"


def _format_of_name(name: str) -> str | None:
    lower = name.lower()
    for suffix in sorted(_FORMAT_BY_SUFFIX, key=len, reverse=True):
        if lower.endswith(suffix):
            return _FORMAT_BY_SUFFIX[suffix]
    return None


def local_files(path: str) -> list[Path]:
    """The data files a local path, folder or glob stands for (hidden and `_` files skipped)."""
    local = path[len("file://") :] if path.startswith("file://") else path
    # A path that exists is read as named, even with `[` in it; only a missing one is a glob.
    if any(ch in local for ch in "*?[") and not Path(local).exists():
        matches = [Path(p) for p in sorted(glob.glob(local, recursive=True))]
        if not matches:
            raise InputError(f"input {path}: the pattern matches no files")
    else:
        p = Path(local)
        if not p.exists():
            raise InputError(f"input {path} does not exist")
        if not os.access(p, os.R_OK) or (p.is_dir() and not os.access(p, os.X_OK)):
            raise InputError(f"input {path} is not readable (permission denied)")
        matches = [p]
    files: list[Path] = []
    for m in matches:
        if m.is_dir():
            for root, dirs, names in os.walk(m):
                dirs[:] = sorted(d for d in dirs if not d.startswith((".", "_")))
                files += [Path(root, n) for n in sorted(names) if not n.startswith((".", "_"))]
        elif m.is_file():
            files.append(m)
    return files


def detect_format(path: str, configured: str) -> str:
    """`parquet` or `jsonl`: the configured format, or the one the path's files say."""
    if configured != "auto":
        return configured
    by_name = _format_of_name(path.rstrip("/"))
    if by_name is not None:
        return by_name
    if is_remote(path):
        raise InputError(
            f"input {path}: cannot tell the format from the name; set input.format=parquet|jsonl"
        )
    files = local_files(path)
    if not files:
        raise InputError(f"input {path} holds no data files")
    formats = {f for f in (_format_of_name(p.name) for p in files) if f is not None}
    if len(formats) == 1:
        return formats.pop()
    if not formats:
        raise InputError(
            f"input {path}: no .parquet or .jsonl files found; set input.format=parquet|jsonl"
        )
    raise InputError(f"input {path} mixes Parquet and JSON Lines files; point at one kind")


def resolved(path: str) -> Path:
    """An absolute, symlink-free local path (for comparing inputs and outputs)."""
    local = path[len("file://") :] if path.startswith("file://") else path
    if Path(local).exists():
        return Path(local).expanduser().resolve()
    base = local.split("*", 1)[0].split("?", 1)[0].split("[", 1)[0]
    return Path(base or ".").expanduser().resolve()


def check_output_vs_input(inputs: list[str], output: str) -> None:
    """Refuse an output that is an input, lies inside one, or would replace a folder holding one."""
    if is_remote(output):
        raise InputError(
            f"output {output}: publishing needs a POSIX path (local disk or a shared filesystem "
            "such as NFS or Lustre); write there and copy to object storage afterwards"
        )
    out = resolved(output)
    for item in inputs:
        if is_remote(item):
            continue
        inp = resolved(item)
        if out == inp or inp in out.parents:
            raise InputError(
                f"output {output} is the input {item} or inside it; choose a separate folder"
            )
        if out in inp.parents:
            raise InputError(
                f"output {output} contains the input {item}; publishing would replace it — "
                "choose a separate folder"
            )
