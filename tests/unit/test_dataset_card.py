"""The dataset card pack writes: every column's type as `datasets` should read its JSON."""

from __future__ import annotations

import pyarrow as pa
import yaml

from corpusclean.jobs.shards.card import config_name, features, render

SCHEMA = pa.schema(
    [
        ("doc_id", pa.string()),
        ("text", pa.large_string()),
        ("quality", pa.float64()),
        ("score32", pa.float32()),
        ("n", pa.int32()),
        ("big", pa.uint64()),
        ("ok", pa.bool_()),
        ("timestamp", pa.timestamp("us", tz="UTC")),
        ("day", pa.date32()),
        ("blob", pa.binary()),
        ("price", pa.decimal128(10, 2)),
        ("tags", pa.list_(pa.string())),
        ("meta", pa.struct([("a", pa.int64()), ("b", pa.string())])),
    ]
)


def test_each_column_gets_the_type_its_json_value_has() -> None:
    (meta, txt) = features(SCHEMA, "text", 1)
    assert txt == {"name": "txt", "dtype": "string"}
    assert meta["name"] == "json"
    assert meta["struct"] == [
        {"name": "doc_id", "dtype": "string"},
        {"name": "quality", "dtype": "float64"},
        {"name": "score32", "dtype": "float32"},
        {"name": "n", "dtype": "int32"},
        {"name": "big", "dtype": "int64"},
        {"name": "ok", "dtype": "bool"},
        {"name": "timestamp", "dtype": "string"},
        {"name": "day", "dtype": "string"},
        {"name": "blob", "dtype": "string"},
        {"name": "price", "dtype": "float64"},
        {"name": "tags", "list": "string"},
        {
            "name": "meta",
            "struct": [{"name": "a", "dtype": "int64"}, {"name": "b", "dtype": "string"}],
        },
    ]


def test_types_json_cannot_keep_are_left_to_inference() -> None:
    with_map = SCHEMA.append(pa.field("attrs", pa.map_(pa.string(), pa.string())))
    assert features(with_map, "text", 1) is None
    nested = SCHEMA.append(pa.field("spans", pa.list_(pa.list_(pa.int64()))))
    assert features(nested, "text", 1) is None
    assert features(SCHEMA, "text", 4) is None  # a .jsonl member per sample


def test_the_card_names_the_shards_and_parses_as_yaml() -> None:
    shas = ["aa" * 32, "bb" * 32]
    name = config_name("shard", shas)
    totals = {"docs": 12_345, "samples": 12_345, "shards": 3}
    card = render("shard", shas, SCHEMA, "text", 1, totals)
    assert card.startswith("---\n")
    header = yaml.safe_load(card.split("---\n")[1])
    assert header["configs"] == [
        {"config_name": name, "data_files": [{"split": "train", "path": "shard-*.tar"}]}
    ]
    assert header["dataset_info"] == {"config_name": name, "features": features(SCHEMA, "text", 1)}
    assert "12,345 documents" in card
    multi = render("part", shas, SCHEMA, "text", 4, {"docs": 8, "samples": 2, "shards": 1})
    assert "dataset_info" not in yaml.safe_load(multi.split("---\n")[1])
    # A pack of an output with no data file: the shards are named, no types declared.
    empty = render("shard", [], None, "text", 1, {"docs": 0, "samples": 0, "shards": 0})
    assert "dataset_info" not in yaml.safe_load(empty.split("---\n")[1])


def test_the_config_is_named_after_the_shards_content() -> None:
    a = config_name("shard", ["aa" * 32, "bb" * 32])
    assert a.startswith("shard-") and len(a) == len("shard-") + 16
    assert a == config_name("shard", ["aa" * 32, "bb" * 32])
    assert a != config_name("shard", ["aa" * 32, "cc" * 32])
