"""The dataset card of a pack folder (README.md), so `datasets.load_dataset(SHARD_DIR)` loads it.

Without a card, Hugging Face `datasets` picks its builder from the folder's most common file
extension (the JSON one, for index.json and the stats files) and reads the wrong files; and its
WebDataset builder infers the json member's types from the first five samples, so a column
that is null there (a mostly-empty `license`) is typed null and the load then fails on the
first sample that has a value ("Couldn't cast array of type string to null"). The card's YAML
header names the shards (`configs` / `data_files`) and declares every member's type
(`dataset_info.features`) from the clean output's own schema, as pack's JSON writer renders
each type (pipelines/shards.py: Spark's `to_json`).
"""

from __future__ import annotations

import hashlib
from typing import Any

import pyarrow as pa
import yaml

CARD = "README.md"


def _dtype(t: pa.DataType) -> Any:
    """The `datasets` feature of a value of Arrow type `t` once rendered by Spark's to_json,
    in the card's YAML form; None when no declared type fits every value (a map's keys)."""
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        return "string"
    if pa.types.is_boolean(t):
        return "bool"
    if pa.types.is_integer(t):
        # JSON has one integer kind; unsigned ones may not fit their signed namesake.
        return f"int{t.bit_width}" if pa.types.is_signed_integer(t) else "int64"
    if pa.types.is_float32(t):
        return "float32"
    if pa.types.is_floating(t) or pa.types.is_decimal(t):
        return "float64"
    # Timestamps and dates are ISO strings, binary values base64 text.
    if pa.types.is_temporal(t) or pa.types.is_binary(t) or pa.types.is_large_binary(t):
        return "string"
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        # Lists of plain values only: nested lists and lists of structs are left to
        # inference rather than declared in a YAML form `datasets` versions read differently.
        inner = _dtype(t.value_type)
        return {"list": inner} if isinstance(inner, str) else None
    if pa.types.is_struct(t):
        fields = _fields([t.field(i) for i in range(t.num_fields)])
        return None if fields is None else {"struct": fields}
    return None


def _fields(fields: list[pa.Field]) -> list[dict[str, Any]] | None:
    out: list[dict[str, Any]] = []
    for f in fields:
        dtype = _dtype(f.type)
        if dtype is None:
            return None
        entry: dict[str, Any] = {"name": f.name}
        entry.update({"dtype": dtype} if isinstance(dtype, str) else dtype)
        out.append(entry)
    return out


def features(schema: pa.Schema, text_col: str, docs_per_sample: int) -> list[dict] | None:
    """The samples' features in the card's YAML form, or None when they cannot be declared
    (a column type JSON cannot keep typed, or several documents per sample: a `.jsonl`
    member, which `datasets` hands over as bytes)."""
    if docs_per_sample != 1:
        return None
    meta = _fields([f for f in schema if f.name != text_col])
    if meta is None:
        return None
    return [{"name": "json", "struct": meta}, {"name": "txt", "dtype": "string"}]


def config_name(prefix: str, shard_sha256: list[str]) -> str:
    """The card's one config, named after the shards' content: `datasets` caches a local
    folder's dataset under its folder name and config name only, so a config called `default`
    would have a re-packed folder (or another pack folder of the same name) load the rows
    cached from the first one."""
    digest = hashlib.sha256("\n".join(shard_sha256).encode()).hexdigest()[:16]
    return f"{prefix}-{digest}"


def render(
    prefix: str,
    shard_sha256: list[str],
    schema: pa.Schema | None,
    text_col: str,
    docs_per_sample: int,
    totals: dict[str, int],
) -> str:
    """README.md of a pack folder: YAML header for `datasets` (one config, see `config_name`;
    no types without a `schema`), then a few lines for people."""
    name = config_name(prefix, shard_sha256)
    header: dict[str, Any] = {
        "configs": [
            {"config_name": name, "data_files": [{"split": "train", "path": f"{prefix}-*.tar"}]}
        ]
    }
    feats = None if schema is None else features(schema, text_col, docs_per_sample)
    if feats is not None:
        # Bound to the config by name: unnamed, `datasets` applies it to `default` only.
        header["dataset_info"] = {"config_name": name, "features": feats}
    member = "`.json` (every column but the text) and `.txt` (the text)"
    if docs_per_sample != 1:
        member = f"`.jsonl` ({docs_per_sample} documents a sample, one JSON line each)"
    body = (
        f"# {prefix}\n\n"
        f"WebDataset shards written by `corpusclean pack`: {totals['docs']:,} documents in "
        f"{totals['samples']:,} samples over {totals['shards']:,} shards. Each sample holds "
        f"{member}; `index.json` lists the shards with their sizes and SHA-256 (the wids "
        "shard-index format).\n\n"
        '```python\nimport datasets\n\nds = datasets.load_dataset("PATH/TO/THIS/FOLDER", '
        'split="train")\n```\n'
    )
    front = yaml.safe_dump(header, sort_keys=False, allow_unicode=True)
    return f"---\n{front}---\n\n{body}"


def render_megatron(prefix: str, totals: dict[str, int], tokenizer: dict[str, Any]) -> str:
    """README.md of a Megatron token pack: for people, no `datasets` config (its loaders do
    not read Megatron's .bin/.idx)."""
    return (
        f"# {prefix}\n\n"
        f"Megatron-LM indexed datasets written by `corpusclean pack`: {totals['docs']:,} "
        f"documents, {totals.get('tokens', 0):,} tokens of tokenizer "
        f"`{tokenizer.get('name')}` (vocabulary {tokenizer.get('vocab_size', 0):,}, SHA-256 "
        f"{str(tokenizer.get('sha256'))[:16]}...) in {totals['shards']:,} `.bin`/`.idx` pairs. "
        "`index.json` lists them with their sizes, tokens and SHA-256; `data_path.txt` is the "
        "`--data-path` that trains on all of them, each weighted by its tokens:\n\n"
        "```\npretrain_gpt.py ... --data-path $(cat PATH/TO/THIS/FOLDER/data_path.txt)\n```\n"
        "\n`report.json` and `report.html` give the counts and the planner's figures.\n"
    )
