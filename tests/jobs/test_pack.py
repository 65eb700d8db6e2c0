"""`corpusclean pack` end to end on small clean outputs built with pyarrow."""

from __future__ import annotations

import datetime as dt
import itertools
import json
import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import webdataset as wds
import yaml

from corpusclean.jobs import pack as pack_job
from corpusclean.jobs.pack import main
from corpusclean.jobs.shards import pack_io as W
from corpusclean.pipelines import shards as S

pytestmark = [pytest.mark.spark, pytest.mark.e2e]

TARGET = 150_000
SPECIAL_IDS = ["a.b.c", "dir/sub/doc", "文档.1", "ünï/cødé.txt", "x" * 90, "a_b_c", "a b c"]


def _docs(n: int, huge: int = 0) -> pa.Table:
    ids = [*SPECIAL_IDS, *(f"doc-{i:05d}" for i in range(n - len(SPECIAL_IDS)))]
    texts = [f"Document {i} says " + "héllo wörld " * (5 + (i * 37) % 180) for i in range(n)]
    if huge:
        texts[n // 2] = "z" * huge
    base = dt.datetime(2024, 1, 1, tzinfo=dt.UTC)
    return pa.table(
        {
            "doc_id": ids,
            "text": texts,
            "url": [None if i % 11 == 0 else f"https://example.org/{i}" for i in range(n)],
            "source": ["web" if i % 3 else "books" for i in range(n)],
            "lang": ["en"] * n,
            "timestamp": pa.array(
                [base + dt.timedelta(seconds=i, microseconds=i) for i in range(n)],
                pa.timestamp("us", tz="UTC"),
            ),
            "quality": [i / n for i in range(n)],
        }
    )


def make_clean(root: Path, table: pa.Table, files: int = 2, success: bool = True) -> Path:
    """A published-looking clean output: data/*.parquet, report.json, _SUCCESS."""
    (root / "data").mkdir(parents=True)
    per = max(1, -(-table.num_rows // files))
    for i in range(files):
        pq.write_table(table.slice(i * per, per), root / "data" / f"part-{i:05d}.parquet")
    (root / "report.json").write_text(json.dumps({"run_id": "clean-run-1"}))
    if success:
        (root / "_SUCCESS").write_text("")
    return root


def pack(clean: Path, out: Path, *sets: str, extra: tuple[str, ...] = ()) -> int:
    args = ["--input", str(clean), "--output", str(out), "--set", f"shard.target_bytes={TARGET}"]
    for item in sets:
        args += ["--set", item]
    return main([*args, *extra])


def read_index(out: Path) -> dict[str, Any]:
    return json.loads((out / "index.json").read_text())


def shard_paths(out: Path) -> list[str]:
    return [str(out / e["url"]) for e in read_index(out)["shardlist"]]


def read_docs(out: Path) -> list[dict[str, Any]]:
    """Every document back from the shards, through webdataset's public reader."""
    docs = []
    for sample in wds.WebDataset(shard_paths(out), shardshuffle=False):
        if "jsonl" in sample:
            docs += [json.loads(line) for line in sample["jsonl"].decode().splitlines()]
        else:
            meta = json.loads(sample["json"])
            docs.append({**meta, "text": sample["txt"].decode(), "__key__": sample["__key__"]})
    return docs


def expected_docs(table: pa.Table) -> dict[str, dict[str, Any]]:
    out = {}
    for row in table.to_pylist():
        ts = row["timestamp"]
        row["timestamp"] = ts.strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        out[row["doc_id"]] = row
    return out


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, pa.Table]:
    table = _docs(400)
    return make_clean(tmp_path_factory.mktemp("clean"), table), table


@pytest.fixture(scope="module")
def packed(
    spark: Any, corpus: tuple[Path, pa.Table], tmp_path_factory: pytest.TempPathFactory
) -> Path:
    out = tmp_path_factory.mktemp("packed") / "shards"
    assert pack(corpus[0], out) == 0
    return out


def test_every_clean_doc_comes_back(corpus: tuple[Path, pa.Table], packed: Path) -> None:
    got = read_docs(packed)
    want = expected_docs(corpus[1])
    assert len(got) == len(want)
    for doc in got:
        key = doc.pop("__key__")
        assert key == S.safe_key(doc["doc_id"])
        assert doc == want[doc["doc_id"]]
    assert {d["doc_id"] for d in got} >= set(SPECIAL_IDS)
    index = read_index(packed)
    assert index["__kind__"] == "wids-shard-index-v1" and index["wids_version"] == 1
    assert index["totals"]["docs"] == index["totals"]["samples"] == 400
    assert index["source"]["report_run_id"] == "clean-run-1"
    assert sorted(os.listdir(packed)) == sorted(
        [
            "README.md",
            "_corpusclean.json",
            "_stats",
            "index.json",
            *(e["url"] for e in index["shardlist"]),
            # DALI's index beside each shard, by default.
            *(e["dali_index"] for e in index["shardlist"]),
        ]
    )
    # The dataset card `datasets.load_dataset(SHARD_DIR)` reads: the shards and every type.
    header = yaml.safe_load((packed / "README.md").read_text().split("---\n")[1])
    assert header["configs"][0]["data_files"] == [{"split": "train", "path": "shard-*.tar"}]
    (meta, txt) = header["dataset_info"]["features"]
    assert txt == {"name": "txt", "dtype": "string"}
    assert {f["name"]: f["dtype"] for f in meta["struct"]} == {
        "doc_id": "string",
        "url": "string",
        "source": "string",
        "lang": "string",
        "timestamp": "string",
        "quality": "float64",
    }


def test_keys_are_safe_and_unique(packed: Path) -> None:
    keys = [s["__key__"] for s in wds.WebDataset(shard_paths(packed), shardshuffle=False)]
    assert len(keys) == len(set(keys)) == 400
    assert all("." not in k and "/" not in k and k.isascii() for k in keys)


def test_shards_stay_within_the_target(corpus: tuple[Path, pa.Table], packed: Path) -> None:
    sizes = [e["filesize"] for e in read_index(packed)["shardlist"]]
    lengths = np.array([len(t.encode()) for t in corpus[1].column("text").to_pylist()])
    biggest_sample = int((S.BLOCK + S.padded_sizes(lengths)).max()) + 1024
    assert len(sizes) > 5
    assert all(size <= TARGET for size in sizes)
    # a shard closes only when the next bucket (here one or two docs) would not fit
    assert all(size >= TARGET - 2 * biggest_sample - S.RECORD for size in sizes[:-1])
    assert sizes == [os.path.getsize(p) for p in shard_paths(packed)]


def test_shuffle_mixes_every_shard(corpus: tuple[Path, pa.Table], packed: Path) -> None:
    first_file = set(corpus[1].column("doc_id").to_pylist()[:200])
    order = [d["doc_id"] for d in read_docs(packed)]
    assert order != corpus[1].column("doc_id").to_pylist()
    for path in shard_paths(packed):
        ids = [json.loads(s["json"])["doc_id"] for s in wds.WebDataset(path, shardshuffle=False)]
        assert any(i in first_file for i in ids) and any(i not in first_file for i in ids)


def test_rerun_gives_byte_identical_shards(
    corpus: tuple[Path, pa.Table], packed: Path, tmp_path: Path
) -> None:
    again = tmp_path / "again"
    assert pack(corpus[0], again) == 0
    assert (again / "index.json").read_bytes() == (packed / "index.json").read_bytes()
    for entry in read_index(packed)["shardlist"]:
        assert (again / entry["url"]).read_bytes() == (packed / entry["url"]).read_bytes()


def test_another_seed_gives_another_spread(
    corpus: tuple[Path, pa.Table], packed: Path, tmp_path: Path
) -> None:
    assert pack(corpus[0], tmp_path / "s", "shard.seed=7") == 0
    first = lambda out: [d["doc_id"] for d in read_docs(out)][:20]  # noqa: E731
    assert first(tmp_path / "s") != first(packed)


def test_shuffle_off_keeps_input_order(corpus: tuple[Path, pa.Table], tmp_path: Path) -> None:
    out = tmp_path / "ordered"
    assert pack(corpus[0], out, "shard.shuffle=false") == 0
    assert [d["doc_id"] for d in read_docs(out)] == corpus[1].column("doc_id").to_pylist()


def test_input_order_writes_each_file_in_one_task(
    corpus: tuple[Path, pa.Table],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    direct = tmp_path / "direct"
    assert pack(corpus[0], direct, "shard.shuffle=false") == 0
    assert "one task per file" in capsys.readouterr().err
    assert not (direct / W.PARTS_DIR).exists()
    again = tmp_path / "again"
    assert pack(corpus[0], again, "shard.shuffle=false") == 0
    index = read_index(direct)
    assert read_index(again) == index
    for entry in index["shardlist"]:
        assert (again / entry["url"]).read_bytes() == (direct / entry["url"]).read_bytes()
    # no shard holds documents of both files, and a shard closes only when the next document
    # would not fit: all but each file's last shard are more than half full
    first_file = set(corpus[1].column("doc_id").to_pylist()[:200])
    ends = []
    for path in shard_paths(direct):
        ids = {json.loads(s["json"])["doc_id"] for s in wds.WebDataset(path, shardshuffle=False)}
        assert ids <= first_file or not ids & first_file
        ends.append(ids <= first_file)
    last_of_file = [a != b for a, b in itertools.pairwise(ends)] + [True]
    for entry, last in zip(index["shardlist"], last_of_file, strict=True):
        assert entry["filesize"] <= TARGET and (last or entry["filesize"] > TARGET / 2)
    # settings that put both small files in one scan task are refused, not packed differently
    together = {
        "spark.sql.files.maxPartitionBytes": "1g",
        "spark.sql.files.openCostInBytes": "1",
        "spark.sql.files.minPartitionNum": "1",
    }
    monkeypatch.setattr(pack_job, "_whole_file_scan", lambda source: together)
    merged = tmp_path / "merged"
    capsys.readouterr()
    assert pack(corpus[0], merged, "shard.shuffle=false") == 1
    err = capsys.readouterr().err
    assert "needs each input file whole in one Spark task" in err and len(err.splitlines()) == 1
    assert not (merged / "index.json").exists()


@contextmanager
def _numbering_killed(monkeypatch: pytest.MonkeyPatch, at: Any) -> Iterator[None]:
    """Within the block, the driver dies renaming a part into place where `at(dst)`."""
    real_replace = os.replace

    def replace(src: Any, dst: Any) -> None:
        if at(str(dst)):
            raise OSError("driver killed")
        real_replace(src, dst)

    with monkeypatch.context() as m, pytest.raises(OSError, match="killed"):
        m.setattr(pack_job.pack.__globals__["os"], "replace", replace)
        yield


@pytest.mark.parametrize("shuffle", [False, True], ids=["input_order", "shuffle"])
def test_resume_after_a_crash_in_writing_or_numbering(
    corpus: tuple[Path, pa.Table],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    shuffle: bool,
) -> None:
    # three hash ranges, so that shuffle on has units to lose as input order has files
    monkeypatch.setattr(pack_job, "shuffle_units", lambda source, target: 3)
    units, what = (3, "hash ranges") if shuffle else (2, "input files")
    mode = f"shard.shuffle={str(shuffle).lower()}"
    config = pack_job.PackConfig(shard=pack_job.ShardSection(shuffle=shuffle, target_bytes=TARGET))
    whole = tmp_path / "whole"
    assert pack(corpus[0], whole, mode) == 0
    # a crash after the write job: every unit written, nothing numbered yet
    out = tmp_path / "crashed"

    def crash(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("driver killed")

    with monkeypatch.context() as m:
        m.setattr(pack_job, "number_parts", crash)
        with pytest.raises(RuntimeError):
            pack_job.pack(str(corpus[0]), str(out), config)
    parts = out / W.PARTS_DIR
    # then: unit 1 as if its task had been killed after its first part, a corrupted part of
    # unit 0, and a task's partial temporary file
    W.unit_marker(out, 1).unlink()
    for stats in sorted(parts.glob("u000001-*.json"))[1:]:
        stats.unlink()
    victim = W.part_files(out, 0, 1).data
    data = bytearray(victim.read_bytes())
    data[700] ^= 1
    victim.write_bytes(bytes(data))
    (out / W.TMP_DIR / "u000001-000003.tar.t9.part").write_bytes(b"partial")
    kept = W.part_files(out, 1, 0).data.stat()
    unit_0_parts = json.loads(W.unit_marker(out, 0).read_text())["parts"]
    capsys.readouterr()
    assert pack(corpus[0], out, mode) == 0
    err = capsys.readouterr().err
    # unit 0 is redone for its changed part; only the parts that are missing are written
    assert f"resume: {units - 2} of {units} {what} already packed" in err
    assert "part u000000-000001.tar changed" in err
    index = read_index(out)
    assert index == read_index(whole)
    for entry in index["shardlist"]:
        assert (out / entry["url"]).read_bytes() == (whole / entry["url"]).read_bytes()
    # unit 1's committed first part was kept: renamed into place, not written again
    numbered = (out / index["shardlist"][unit_0_parts]["url"]).stat()
    assert (numbered.st_ino, numbered.st_mtime_ns) == (kept.st_ino, kept.st_mtime_ns)
    # a crash half-way through numbering: the rerun finishes it without writing anything
    again = tmp_path / "again"
    tars = itertools.count(1)
    with _numbering_killed(monkeypatch, lambda dst: dst.endswith(".tar") and next(tars) == 3):
        pack_job.pack(str(corpus[0]), str(again), config)
    assert not (again / "index.json").exists()
    capsys.readouterr()
    assert pack(corpus[0], again, mode) == 0
    err = capsys.readouterr().err
    assert f"resume: {units} of {units} {what} already packed" in err and "0 written" in err
    assert read_index(again) == read_index(whole)
    for entry in read_index(whole)["shardlist"]:
        assert (again / entry["url"]).read_bytes() == (whole / entry["url"]).read_bytes()


def _same_pack(out: Path, whole: Path) -> None:
    index = read_index(whole)
    assert read_index(out) == index
    for entry in index["shardlist"]:
        for name in (entry["url"], entry.get("dali_index")):
            if name:
                assert (out / name).read_bytes() == (whole / name).read_bytes(), name
    assert main(["--verify", str(out)]) == 0


def test_resume_repairs_what_a_crash_left_behind(
    corpus: tuple[Path, pa.Table],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Crash windows past the write job: parts truncated or lost after their unit finished,
    a numbering cut between a shard's tar and its .idx, a numbered shard that changed."""
    monkeypatch.setattr(pack_job, "shuffle_units", lambda source, target: 3)
    sets = ("shard.dali_index=true",)
    config = pack_job.PackConfig(shard=pack_job.ShardSection(target_bytes=TARGET, dali_index=True))
    whole = tmp_path / "whole"
    assert pack(corpus[0], whole, *sets) == 0

    def crash(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("driver killed")

    out = tmp_path / "lost"
    with monkeypatch.context() as m:
        m.setattr(pack_job, "number_parts", crash)
        with pytest.raises(RuntimeError):
            pack_job.pack(str(corpus[0]), str(out), config)
    truncated, lost = W.part_files(out, 0, 1).data, W.part_files(out, 2, 0).data
    truncated.write_bytes(truncated.read_bytes()[: -S.RECORD])
    lost.unlink()
    # and what a driver killed while writing index.json leaves
    (out / ".index.json.123.abcd.tmp").write_text("{")
    capsys.readouterr()
    assert pack(corpus[0], out, *sets) == 0
    err = capsys.readouterr().err
    assert "part 1 of unit 0 is missing or truncated" in err and "resume: 1 of 3" in err
    _same_pack(out, whole)
    assert not list(out.glob(".*"))

    # a DALI index cut short (its tar intact) is caught by its checksum, like a tar
    idx = tmp_path / "idx"
    with monkeypatch.context() as m:
        m.setattr(pack_job, "number_parts", crash)
        with pytest.raises(RuntimeError):
            pack_job.pack(str(corpus[0]), str(idx), config)
    victim = W.part_files(idx, 1, 0).idx
    victim.write_text(victim.read_text()[:40])
    capsys.readouterr()
    assert pack(corpus[0], idx, *sets) == 0
    err = capsys.readouterr().err
    assert "part u000001-000000.idx changed" in err and "resume: 2 of 3" in err
    _same_pack(idx, whole)

    # numbering stopped after the last shard's tar was renamed and before its .idx was
    last = read_index(whole)["totals"]["shards"] - 1
    cut = tmp_path / "cut"
    with _numbering_killed(monkeypatch, lambda dst: dst.endswith(f"-{last:06d}.idx")):
        pack_job.pack(str(corpus[0]), str(cut), config)
    assert not (cut / f"shard-{last:06d}.idx").exists()
    unit_of = _units_of_shards(cut)
    # then: junk where the last shard's part was (it is renamed already), the .idx of unit 1's
    # first shard lost, and a shard of unit 0 changed
    pending = W.part_files(cut, 2, unit_of.count(2) - 1).data
    assert unit_of[last] == 2 and not pending.exists()
    pending.write_bytes(b"junk")
    (cut / f"shard-{unit_of.index(1):06d}.idx").unlink()
    _flip_a_byte(cut / "shard-000000.tar")
    capsys.readouterr()
    assert pack(corpus[0], cut, *sets) == 0
    err = capsys.readouterr().err
    assert "shard-000000.tar changed since it was written; writing it again" in err
    assert "resume: 1 of 3 hash ranges" in err  # units 0 and 1 are written again
    _same_pack(cut, whole)

    # a unit redone by a resume whose write job then failed has no marker any more: the part
    # counts saved when numbering began still place the numbered shards
    failed = tmp_path / "failed"
    with _numbering_killed(monkeypatch, lambda dst: dst.endswith("-000002.idx")):
        pack_job.pack(str(corpus[0]), str(failed), config)
    unit_of = _units_of_shards(failed)
    W.unit_marker(failed, 2).unlink()
    _flip_a_byte(failed / "shard-000000.tar")
    capsys.readouterr()
    assert pack(corpus[0], failed, *sets) == 0
    err = capsys.readouterr().err
    assert f"resume: {3 - len({unit_of[0], 2})} of 3 hash ranges" in err
    _same_pack(failed, whole)


def _units_of_shards(out: Path) -> list[int]:
    """The unit of each shard number, from the part counts saved when numbering began."""
    counts = json.loads((out / W.PARTS_DIR / "numbering.json").read_text())["parts"]
    return [u for u, n in enumerate(counts) for _ in range(n)]


def _flip_a_byte(path: Path, at: int = 700) -> None:
    data = bytearray(path.read_bytes())
    data[at] ^= 1
    path.write_bytes(bytes(data))


def test_shuffled_shards_do_not_depend_on_the_task_count(
    corpus: tuple[Path, pa.Table], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # eight hash ranges over one task (each batch then straddles ranges), three, or eight
    monkeypatch.setattr(pack_job, "shuffle_units", lambda source, target: 8)
    outs = []
    for tasks in (1, 3, 8):
        with monkeypatch.context() as m:
            m.setattr(pack_job, "write_task_count", lambda *args, n=tasks: n)
            outs.append(tmp_path / f"t{tasks}")
            assert pack(corpus[0], outs[-1], "shard.dali_index=true") == 0
    for out in outs[1:]:
        _same_pack(out, outs[0])


@pytest.mark.parametrize("shuffle", ["true", "false"])
def test_many_docs_per_sample_with_dali_index(
    corpus: tuple[Path, pa.Table], tmp_path: Path, shuffle: str
) -> None:
    out = tmp_path / "jsonl"
    sets = ("shard.docs_per_sample=16", "shard.dali_index=true", f"shard.shuffle={shuffle}")
    assert pack(corpus[0], out, *sets) == 0
    index = read_index(out)
    assert index["format"]["members"] == ["jsonl"]
    assert index["totals"]["docs"] == 400 and index["totals"]["samples"] < 400 / 10
    want = expected_docs(corpus[1])
    got = read_docs(out)
    assert len(got) == 400 and all(doc == want[doc["doc_id"]] for doc in got)
    for entry in index["shardlist"]:
        lines = (out / entry["dali_index"]).read_text().splitlines()
        assert lines[0] == f"v1.2 {entry['nsamples']}" and len(lines) == entry["nsamples"] + 1
    assert main(["--verify", str(out)]) == 0


def test_verify_passes_then_catches_a_truncated_shard(
    packed: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["--verify", str(packed)]) == 0
    copy = tmp_path / "copy"
    shutil.copytree(packed, copy)
    victim = read_index(copy)["shardlist"][2]["url"]
    with open(copy / victim, "r+b") as f:
        f.truncate(os.path.getsize(copy / victim) // 2)
    capsys.readouterr()
    assert main(["--verify", str(copy)]) == 3
    assert victim in capsys.readouterr().err


def test_verify_catches_changed_bytes(
    packed: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    copy = tmp_path / "copy"
    shutil.copytree(packed, copy)
    victim = read_index(copy)["shardlist"][0]["url"]
    data = bytearray((copy / victim).read_bytes())
    data[1000] ^= 0xFF  # inside the first member's data: still a valid tar
    (copy / victim).write_bytes(bytes(data))
    capsys.readouterr()
    assert main(["--verify", str(copy)]) == 3
    err = capsys.readouterr().err
    assert victim in err and "sha256" in err


def test_verify_checks_the_whole_dali_index(
    corpus: tuple[Path, pa.Table], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "dali"
    # a first run killed while writing its marker left only its temporary file
    out.mkdir()
    (out / "._corpusclean.json.99.ab12.tmp").write_text("{")
    assert pack(corpus[0], out, "shard.dali_index=true") == 0
    entry = read_index(out)["shardlist"][0]
    assert len(entry["dali_sha256"]) == 64
    idx = out / entry["dali_index"]
    lines = idx.read_text().splitlines(keepends=True)
    # an offset changed, the header left alone
    lines[1] = lines[1].replace(" 0 ", " 512 ", 1) if " 0 " in lines[1] else lines[1] + " "
    idx.write_text("".join(lines))
    capsys.readouterr()
    assert main(["--verify", str(out)]) == 3
    assert f"{entry['dali_index']}: sha256 differs" in capsys.readouterr().err
    # bytes that are not even text are reported the same way, not a crash
    idx.write_bytes(b"\xff" + idx.read_bytes()[1:])
    assert main(["--verify", str(out)]) == 3
    assert f"{entry['dali_index']}: sha256 differs" in capsys.readouterr().err


def test_empty_input(spark: Any, tmp_path: Path) -> None:
    clean = make_clean(tmp_path / "clean", _docs(10).slice(0, 0), files=1)
    out = tmp_path / "out"
    assert pack(clean, out) == 0
    index = read_index(out)
    assert index["shardlist"] == [] and index["totals"]["docs"] == 0
    assert main(["--verify", str(out)]) == 0


def test_a_single_huge_document(spark: Any, tmp_path: Path) -> None:
    table = _docs(60, huge=400_000)
    clean = make_clean(tmp_path / "clean", table)
    out = tmp_path / "out"
    assert pack(clean, out) == 0
    entries = read_index(out)["shardlist"]
    sizes = sorted(e["filesize"] for e in entries)
    assert sizes[-1] > 400_000 and all(s <= TARGET for s in sizes[:-1])
    huge_id = table.column("doc_id")[30].as_py()
    docs = read_docs(out)
    assert len(docs) == 60
    assert next(d for d in docs if d["doc_id"] == huge_id)["text"] == "z" * 400_000
    assert main(["--verify", str(out)]) == 0


def test_unpublished_input_is_refused(
    spark: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    clean = make_clean(tmp_path / "clean", _docs(10), success=False)
    assert pack(clean, tmp_path / "out") == 1
    assert "_SUCCESS" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_existing_output_needs_overwrite(
    corpus: tuple[Path, pa.Table], packed: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out"
    shutil.copytree(packed, out)
    capsys.readouterr()
    assert pack(corpus[0], out) == 1
    assert "--overwrite" in capsys.readouterr().err
    (out / "stray.txt").write_text("left by someone")
    assert pack(corpus[0], out, "shard.prefix=part", extra=("--overwrite",)) == 0
    assert not (out / "stray.txt").exists()
    assert "1 file(s) that are not part of its pack, which go with it: stray.txt" in (
        capsys.readouterr().err
    )
    assert read_index(out)["shardlist"][0]["url"] == "part-000000.tar"
    foreign = tmp_path / "foreign"
    foreign.mkdir()
    (foreign / "notes.txt").write_text("mine")
    (foreign / "._corpusclean.json.1.ab.tmp").write_text("theirs")
    assert pack(corpus[0], foreign, extra=("--overwrite",)) == 1
    assert sorted(p.name for p in foreign.iterdir()) == ["._corpusclean.json.1.ab.tmp", "notes.txt"]


def test_bad_input_leaves_the_output_alone(
    corpus: tuple[Path, pa.Table], packed: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out"
    shutil.copytree(packed, out)
    before = sorted(p.name for p in out.iterdir())
    capsys.readouterr()
    # even --overwrite keeps a finished pack when the input turns out to be unusable
    assert pack(corpus[0], out, "columns.id=missing", extra=("--overwrite",)) == 1
    assert "no column 'missing'" in capsys.readouterr().err
    assert sorted(p.name for p in out.iterdir()) == before
    # a broken Parquet file is named, and no output folder is started
    broken = tmp_path / "broken"
    shutil.copytree(corpus[0], broken)
    (broken / "data" / "part-00001.parquet").write_bytes(b"")
    assert pack(broken, tmp_path / "fresh") == 1
    err = capsys.readouterr().err
    assert "part-00001.parquet is not a readable Parquet file" in err and len(err.splitlines()) == 1
    assert not (tmp_path / "fresh").exists()
    # files of one clean output must share a schema
    mixed = tmp_path / "mixed"
    shutil.copytree(corpus[0], mixed)
    other = corpus[1].slice(200).drop_columns(["quality"])
    pq.write_table(other, mixed / "data" / "part-00001.parquet")
    assert pack(mixed, tmp_path / "fresh") == 1
    assert "part-00001.parquet has columns" in capsys.readouterr().err
    # tasks write shards as files: an object store is not a place to pack into
    assert main(["--input", str(corpus[0]), "--output", "s3://bucket/shards"]) == 1
    assert "POSIX path" in capsys.readouterr().err


def test_an_unfinished_pack_of_other_settings_is_not_resumed(
    corpus: tuple[Path, pa.Table], packed: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out"
    shutil.copytree(packed, out)
    (out / "index.json").unlink()
    capsys.readouterr()
    assert pack(corpus[0], out, "shard.seed=9") == 1
    assert "another input or config" in capsys.readouterr().err
    # one left by an older corpusclean says so, rather than blaming the command line
    marker = json.loads((out / "_corpusclean.json").read_text())
    del marker["format"]
    (out / "_corpusclean.json").write_text(json.dumps(marker))
    assert pack(corpus[0], out) == 1
    assert "shard format before 5" in capsys.readouterr().err


def test_config_errors_name_the_key(
    corpus: tuple[Path, pa.Table], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert pack(corpus[0], tmp_path / "o", "shard.target_byte=5") == 1
    assert "shard.target_byte" in capsys.readouterr().err
    assert pack(corpus[0], tmp_path / "o", "shard.docs_per_sample=0") == 1
    assert "shard.docs_per_sample" in capsys.readouterr().err
    assert pack(corpus[0], tmp_path / "o", "columns.text=body") == 1
    assert "body" in capsys.readouterr().err


def test_usage(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--verify", str(tmp_path), "--output", str(tmp_path)]) == 2
    assert main(["--input", str(tmp_path)]) == 2
    assert main(["--verify", str(tmp_path)]) == 1
    assert "index.json" in capsys.readouterr().err
    assert main(["--print-config", "--set", "shard.seed=3"]) == 0
    assert "seed: 3" in capsys.readouterr().out


def test_duplicate_doc_ids_are_refused(
    spark: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    table = _docs(30)
    clean = make_clean(tmp_path / "clean", pa.concat_tables([table, table.slice(3, 1)]))
    capsys.readouterr()
    assert pack(clean, tmp_path / "out") == 1
    err = capsys.readouterr().err
    assert "occurs more than once" in err and repr(SPECIAL_IDS[3]) in err


def _snapshot(folder: Path) -> dict[str, bytes]:
    return {
        p.relative_to(folder).as_posix(): p.read_bytes()
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


def test_overwrite_killed_mid_run_keeps_the_previous_pack(
    corpus: tuple[Path, pa.Table],
    packed: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The pack --overwrite replaces stays whole until the new one is finished; a rerun of
    the killed command finishes the new one, byte-identical to an uninterrupted run."""
    out = tmp_path / "out"
    shutil.copytree(packed, out)
    before = _snapshot(out)
    sets = ("shard.prefix=part", "shard.dali_index=true")
    whole = tmp_path / "whole"
    assert pack(corpus[0], whole, *sets) == 0
    config = pack_job.PackConfig(
        shard=pack_job.ShardSection(target_bytes=TARGET, prefix="part", dali_index=True)
    )

    def crash(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("driver killed")

    # killed after the write job, and then half-way through numbering
    with monkeypatch.context() as m:
        m.setattr(pack_job, "number_parts", crash)
        with pytest.raises(RuntimeError):
            pack_job.pack(str(corpus[0]), str(out), config, overwrite=True)
    assert _snapshot(out) == before
    assert main(["--verify", str(out)]) == 0
    tars = itertools.count(1)
    with _numbering_killed(monkeypatch, lambda dst: dst.endswith(".tar") and next(tars) == 2):
        pack_job.pack(str(corpus[0]), str(out), config, overwrite=True)
    assert _snapshot(out) == before
    capsys.readouterr()
    assert pack(corpus[0], out, *sets, extra=("--overwrite",)) == 0
    err = capsys.readouterr().err
    assert "resuming the replacement" in err and "0 written" in err
    _same_pack(out, whole)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out", "whole"]  # no staging left
    assert not (out / "shard-000000.tar").exists()


def test_overwrite_publish_cut_between_renames_is_completed(
    corpus: tuple[Path, pa.Table],
    packed: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Without renameat2 the swap is two renames; a crash between them is repaired."""
    from corpusclean.jobs.shards import staging as pack_staging

    out = tmp_path / "out"
    shutil.copytree(packed, out)
    whole = tmp_path / "whole"
    assert pack(corpus[0], whole, "shard.prefix=part") == 0
    real_rename = os.rename
    calls = itertools.count(1)

    def rename(src: Any, dst: Any) -> None:
        if next(calls) == 2:
            raise OSError("driver killed")
        real_rename(src, dst)

    with monkeypatch.context() as m:
        m.setattr(pack_staging, "_exchange", lambda a, b: False)
        m.setattr(pack_staging.os, "rename", rename)
        assert pack(corpus[0], out, "shard.prefix=part", extra=("--overwrite",)) == 1
    assert not out.exists()
    # any later pack into the output first completes the swap
    assert pack(corpus[0], out, "shard.prefix=part") == 1  # finished: needs --overwrite
    _same_pack(out, whole)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out", "whole"]


def test_disk_full_is_one_line_and_keeps_the_previous_pack(
    corpus: tuple[Path, pa.Table],
    packed: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    small_fs: Path,
    fill_disk: Any,
) -> None:
    fs = small_fs
    out = fs / "out"
    shutil.copytree(packed, out)
    before = _snapshot(out)
    # room for a few shards of a pack, not for all of them
    fill_disk(fs, leave=400_000)
    capsys.readouterr()
    assert pack(corpus[0], fs / "new") == 1
    err = capsys.readouterr().err
    errors = [line for line in err.splitlines() if line.startswith("corpusclean pack:")]
    assert len(errors) == 1 and "Traceback" not in err, err
    assert errors[0].startswith(
        f"corpusclean pack: error: disk full: no space left on the device writing {fs}/new;"
    )
    # a pack written in place keeps what it committed, for a rerun once there is room
    shutil.rmtree(fs / "new")
    # replacing a pack: the previous one stays as it was, and the staging folder goes
    assert pack(corpus[0], out, "shard.seed=5", extra=("--overwrite",)) == 1
    err = capsys.readouterr().err
    errors = [line for line in err.splitlines() if line.startswith("corpusclean pack:")]
    assert len(errors) == 1 and "Traceback" not in err, err
    assert errors[0].startswith("corpusclean pack: error: disk full") and str(out) in errors[0]
    assert _snapshot(out) == before
    assert sorted(p.name for p in fs.iterdir()) == ["filler", "out"]
    assert main(["--verify", str(out)]) == 0


def _killed_at(clean: Path, out: Path, point: str, *sets: str) -> str:
    """Run `corpusclean pack --overwrite` in its own process group until it holds at `point`
    (`NAME[:N]`, src/corpusclean/testhook.py), then SIGKILL the whole group; returns its stderr."""
    import signal
    import subprocess
    import sys
    import tempfile
    import threading
    import time

    args = [str(Path(sys.executable).parent / "corpusclean"), "pack", "--overwrite"]
    args += ["--input", str(clean), "--output", str(out), "--set", f"shard.target_bytes={TARGET}"]
    for item in (*sets, "spark.ui.showConsoleProgress=false", "spark.driver.memory=1g"):
        args += ["--set", item]
    holds = Path(tempfile.mkdtemp(prefix="pack-hold-"))
    reached = holds / f"{point.partition(':')[0]}.reached"
    env = {**os.environ, "CORPUSCLEAN_TEST_HOLD": f"{point}@{holds}"}
    proc = subprocess.Popen(args, stderr=subprocess.PIPE, env=env, start_new_session=True)
    chunks: list[bytes] = []
    reader = threading.Thread(target=lambda: chunks.extend(iter(lambda: proc.stderr.read1(), b"")))
    reader.start()
    deadline = time.monotonic() + 300
    try:
        while not reached.exists():
            assert proc.poll() is None, f"ended before {point}: {b''.join(chunks).decode()[-2000:]}"
            assert time.monotonic() < deadline, f"never reached {point}"
            time.sleep(0.05)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        reader.join()
        shutil.rmtree(holds, ignore_errors=True)
    return b"".join(chunks).decode(errors="replace")


def test_sigkill_anywhere_in_an_overwrite_keeps_the_previous_pack(
    corpus: tuple[Path, pa.Table], packed: Path, tmp_path: Path
) -> None:
    """Crash safety as a property: `pack --overwrite` killed (the whole process group) while
    reading, writing shards, numbering them or publishing; seeded points, so deterministic."""
    import random

    sets = ("shard.seed=3",)
    whole = tmp_path / "whole"
    assert pack(corpus[0], whole, *sets) == 0
    shards = read_index(whole)["totals"]["shards"]
    out = tmp_path / "out"
    shutil.copytree(packed, out)
    before = _snapshot(out)
    rng = random.Random(19)
    # each run resumes what the one before it left, so every phase is reached in turn
    points = [
        "pack.task:1",
        f"pack.part:{rng.randint(1, shards - 1)}",
        f"pack.number:{rng.randint(1, shards)}",
        "pack.publish:1",
    ]
    for point in points:
        _killed_at(corpus[0], out, point, *sets)
        assert _snapshot(out) == before, point
        assert main(["--verify", str(out)]) == 0
    # killed after the swap, before the previous pack (now in the staging folder) is removed
    _killed_at(corpus[0], out, "pack.swapped:1", *sets)
    _same_pack(out, whole)
    assert pack(corpus[0], out, *sets, extra=("--overwrite",)) == 0
    _same_pack(out, whole)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out", "whole"]


@pytest.mark.parametrize("shuffle", ["true", "false"])
def test_column_names_with_dots_or_like_pack_s_own_come_back_unchanged(
    spark: Any, tmp_path: Path, shuffle: str
) -> None:
    table = _docs(60)
    for name in ("meta.source", "_h", "_unit", "_file", "_row", "_json", "_txt"):
        table = table.append_column(name, pa.array([f"{name}-{i}" for i in range(60)]))
    clean = make_clean(tmp_path / "clean", table)
    out = tmp_path / "out"
    assert pack(clean, out, f"shard.shuffle={shuffle}") == 0
    want = expected_docs(table)
    got = read_docs(out)
    assert len(got) == 60
    for doc in got:
        doc.pop("__key__")
        assert doc == want[doc["doc_id"]]
    jsonl = tmp_path / "jsonl"
    assert pack(clean, jsonl, f"shard.shuffle={shuffle}", "shard.docs_per_sample=4") == 0
    assert sorted(read_docs(jsonl), key=lambda d: d["doc_id"]) == sorted(
        want.values(), key=lambda d: d["doc_id"]
    )
