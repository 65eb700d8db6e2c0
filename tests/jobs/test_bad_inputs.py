"""The bad-input catalogue: the installed CLI on hostile inputs, one case each.

Every case runs `.venv/bin/corpusclean` (or the `corpusclean` next to this interpreter) in a
subprocess, so exit codes and stderr are what a user gets. A failing case must answer with one
`corpusclean JOB: error: ...` line naming the problem, exit 1 (2 for usage), show no Python
traceback and no Java stack trace, publish nothing and leave the input's bytes as they were.
Most cases fail before Spark starts; the few that need a Spark run are grouped at the end.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

pytestmark = [pytest.mark.e2e]

CLI = str(Path(sys.executable).with_name("corpusclean"))
FAST = ["--set", "near_dedup.enabled=false", "--set", "audit.enabled=false"]


def _text(i: int) -> str:
    return f"document {i}: " + " ".join(f"word{(i * 31 + k) % 997}" for k in range(40))


def _table(rows: int = 50, **extra: list) -> pa.Table:
    ids = [f"d{i:04d}" for i in range(rows)]
    cols: dict = {"doc_id": ids, "text": [_text(i) for i in range(rows)]}
    cols.update(extra)
    return pa.table(cols)


def tree_hash(root: Path) -> str:
    """A hash of every path, mode and byte under `root` (the input must not change)."""
    h = hashlib.sha256()
    if root.is_file():
        return hashlib.sha256(root.read_bytes()).hexdigest()
    for p in sorted(root.rglob("*")):
        h.update(str(p.relative_to(root)).encode())
        if p.is_file():
            h.update(p.read_bytes())
    return h.hexdigest()


def run_cli(
    *args: str, cwd: Path | None = None, prefix: list[str] | None = None
) -> subprocess.CompletedProcess[str]:
    """`corpusclean ARGS...` in a subprocess; `prefix` goes before it (e.g. `modes_enforced`)."""
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable}
    return subprocess.run(
        [*(prefix or []), CLI, *args], capture_output=True, text=True, timeout=600, env=env, cwd=cwd
    )


def run_in_process(
    capsys: pytest.CaptureFixture[str], *args: str
) -> subprocess.CompletedProcess[str]:
    """`corpusclean ARGS...` through its entry function, with its exit code, stdout and stderr."""
    from corpusclean.jobs.cli import main

    capsys.readouterr()
    code = main(list(args))
    out, err = capsys.readouterr()
    return subprocess.CompletedProcess(list(args), code, out, err)


def assert_clean_failure(proc: subprocess.CompletedProcess[str], code: int, *needles: str) -> str:
    """One error line with every needle, the exit code, no traceback of either language."""
    err = proc.stderr
    assert proc.returncode == code, (proc.returncode, err[-3000:])
    assert "Traceback" not in err, err[-3000:]
    assert "at org.apache" not in err and "py4j" not in err.lower(), err[-3000:]
    lines = [ln for ln in err.splitlines() if ln.startswith("corpusclean") and ": error" in ln]
    if code in (1, 3):
        lines = [ln for ln in err.splitlines() if ln.startswith("corpusclean ")]
        lines = [ln for ln in lines if ": error:" in ln or ": rejected:" in ln]
        assert len(lines) == 1, err[-3000:]
        for needle in needles:
            assert needle in lines[0], (needle, lines[0])
        return lines[0]
    return err.strip().splitlines()[-1]


# --------------------------------------------------------------------------- pre-Spark cases


@dataclass
class Case:
    """A bad input: how to make it, which command and what the one line must say."""

    name: str
    make: Callable[[Path], list[str]]  # writes the input under tmp, returns the CLI arguments
    code: int
    needles: tuple[str, ...]


def _parquet(tmp: Path, table: pa.Table, name: str = "raw.parquet") -> Path:
    path = tmp / "in" / name
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(table, path)
    return path


def _clean_args(inp: Path | str, tmp: Path) -> list[str]:
    return ["clean", "--input", str(inp), "--output", str(tmp / "out"), *FAST]


def _missing(tmp: Path) -> list[str]:
    (tmp / "in").mkdir()
    return _clean_args(tmp / "in" / "nope.parquet", tmp)


def _empty_dir(tmp: Path) -> list[str]:
    (tmp / "in").mkdir()
    return _clean_args(tmp / "in", tmp)


def _glob_nothing(tmp: Path) -> list[str]:
    _parquet(tmp, _table())
    return _clean_args(f"{tmp}/in/*.jsonl", tmp)


def _zero_byte(tmp: Path) -> list[str]:
    _parquet(tmp, _table(), "a.parquet")
    (tmp / "in" / "b.parquet").write_bytes(b"")
    return _clean_args(tmp / "in", tmp)


def _truncated(tmp: Path) -> list[str]:
    path = _parquet(tmp, _table(), "a.parquet")
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    return _clean_args(tmp / "in", tmp)


def _corrupt(tmp: Path) -> list[str]:
    (tmp / "in").mkdir()
    (tmp / "in" / "a.parquet").write_bytes(os.urandom(4096))
    return _clean_args(tmp / "in", tmp)


def _stale_crc(tmp: Path) -> list[str]:
    path = _parquet(tmp, _table(), "a.parquet")
    (tmp / "in" / ".a.parquet.crc").write_bytes(b"crc\x00\x00\x00\x02\x00" + b"\x00" * 4)
    return _clean_args(path.parent, tmp)


def _colon_name(tmp: Path) -> list[str]:
    _parquet(tmp, _table(), "part:1.parquet")
    return _clean_args(tmp / "in", tmp)


def _colon_folder(tmp: Path) -> list[str]:
    folder = tmp / "in" / "2024-01-01T00:00"
    folder.mkdir(parents=True)
    pq.write_table(_table(), folder / "a.parquet")
    return _clean_args(folder, tmp)


def _type_conflict(tmp: Path) -> list[str]:
    _parquet(tmp, _table(2, n=[1, 2]), "a.parquet")
    _parquet(tmp, _table(2, n=["x", "y"]), "b.parquet")
    return _clean_args(tmp / "in", tmp)


def _id_not_string(tmp: Path) -> list[str]:
    _parquet(tmp, pa.table({"doc_id": [1, 2], "text": [_text(1), _text(2)]}))
    return _clean_args(tmp / "in", tmp)


def _text_not_string(tmp: Path) -> list[str]:
    _parquet(tmp, pa.table({"doc_id": ["a", "b"], "text": [1, 2]}))
    return _clean_args(tmp / "in", tmp)


def _no_text(tmp: Path) -> list[str]:
    _parquet(tmp, pa.table({"doc_id": ["a"], "body": ["x"]}))
    return _clean_args(tmp / "in", tmp)


def _zero_rows(tmp: Path) -> list[str]:
    _parquet(tmp, _table(0))
    return _clean_args(tmp / "in", tmp)


def _reserved(tmp: Path) -> list[str]:
    _parquet(tmp, _table(3, _rid=["a", "b", "c"]))
    return _clean_args(tmp / "in", tmp)


def _out_is_in(tmp: Path) -> list[str]:
    _parquet(tmp, _table())
    return ["clean", "--input", str(tmp / "in"), "--output", str(tmp / "in"), *FAST]


def _out_inside_in(tmp: Path) -> list[str]:
    _parquet(tmp, _table())
    return ["clean", "--input", str(tmp / "in"), "--output", str(tmp / "in" / "o"), *FAST]


def _out_contains_in(tmp: Path) -> list[str]:
    _parquet(tmp, _table())
    return ["clean", "--input", str(tmp / "in"), "--output", str(tmp), *FAST]


def _config_typo(tmp: Path) -> list[str]:
    _parquet(tmp, _table())
    return [*_clean_args(tmp / "in", tmp), "--set", "rules.min_char=3"]


def _config_range(tmp: Path) -> list[str]:
    _parquet(tmp, _table())
    return [*_clean_args(tmp / "in", tmp), "--set", "gate.min_retention=2"]


def _bad_lines_mode(tmp: Path) -> list[str]:
    _parquet(tmp, _table())
    return [*_clean_args(tmp / "in", tmp), "--set", "input.bad_lines=skip"]


def _usage(tmp: Path) -> list[str]:
    _parquet(tmp, _table())
    return ["clean", "--input", str(tmp / "in")]


def _make_clean_output(tmp: Path, table: pa.Table, name: str = "part-00000.parquet") -> Path:
    src = tmp / "in"
    (src / "data").mkdir(parents=True)
    pq.write_table(table, src / "data" / name)
    (src / "_SUCCESS").write_text("")
    return src


def _pack_missing(tmp: Path) -> list[str]:
    (tmp / "in").mkdir()
    return ["pack", "--input", str(tmp / "in" / "nope"), "--output", str(tmp / "out")]


def _pack_not_clean(tmp: Path) -> list[str]:
    _parquet(tmp, _table())
    return ["pack", "--input", str(tmp / "in"), "--output", str(tmp / "out")]


def _clean_unknown_tokenizer(tmp: Path) -> list[str]:
    return [*_clean_args(_parquet(tmp, _table()), tmp), "--set", "tokens.tokenizer=gpt-5"]


def _clean_tokens_column(tmp: Path) -> list[str]:
    path = _parquet(tmp, _table(n_tokens=[1] * 50))
    return [*_clean_args(path, tmp), "--set", "tokens.tokenizer=qwen2.5"]


def _pack_unknown_tokenizer(tmp: Path) -> list[str]:
    src = _make_clean_output(tmp, _table())
    return ["pack", "--input", str(src), "--output", str(tmp / "out"), "--tokenizer", "gpt-5"]


def _pack_not_a_tokenizer(tmp: Path) -> list[str]:
    src = _make_clean_output(tmp, _table())
    junk = tmp / "tokenizer.json"
    junk.write_text("[1, 2, 3]")
    return ["pack", "--input", str(src), "--output", str(tmp / "out"), "--tokenizer", str(junk)]


def _pack_dtype_too_small(tmp: Path) -> list[str]:
    src = _make_clean_output(tmp, _table())
    args = ["pack", "--input", str(src), "--output", str(tmp / "out"), "--tokenizer", "qwen2.5"]
    return [*args, "--set", "tokens.dtype=uint16"]


def _pack_zero_byte(tmp: Path) -> list[str]:
    src = _make_clean_output(tmp, _table())
    (src / "data" / "part-00001.parquet").write_bytes(b"")
    return ["pack", "--input", str(src), "--output", str(tmp / "out")]


def _pack_truncated(tmp: Path) -> list[str]:
    src = _make_clean_output(tmp, _table())
    part = src / "data" / "part-00000.parquet"
    part.write_bytes(part.read_bytes()[:100])
    return ["pack", "--input", str(src), "--output", str(tmp / "out")]


def _pack_mixed(tmp: Path) -> list[str]:
    src = _make_clean_output(tmp, _table())
    pq.write_table(_table(3, url=["a", "b", "c"]), src / "data" / "part-00001.parquet")
    return ["pack", "--input", str(src), "--output", str(tmp / "out")]


def _pack_reserved(tmp: Path) -> list[str]:
    # `_h` and pack's other own names come back unchanged; Spark's `_metadata` cannot be shared.
    src = _make_clean_output(tmp, _table(2, _metadata=["mine", "too"]))
    return ["pack", "--input", str(src), "--output", str(tmp / "out")]


def _pack_id_type(tmp: Path) -> list[str]:
    src = _make_clean_output(tmp, pa.table({"doc_id": [1], "text": ["x"]}))
    return ["pack", "--input", str(src), "--output", str(tmp / "out")]


def _pack_out_is_in(tmp: Path) -> list[str]:
    src = _make_clean_output(tmp, _table())
    return ["pack", "--input", str(src), "--output", str(src)]


def _pack_out_inside(tmp: Path) -> list[str]:
    src = _make_clean_output(tmp, _table())
    return ["pack", "--input", str(src), "--output", str(src / "shards")]


def _check_missing(tmp: Path) -> list[str]:
    (tmp / "in").mkdir()
    return ["check", "--input", str(tmp / "in" / "nope")]


def _check_zero_byte(tmp: Path) -> list[str]:
    (tmp / "in").mkdir()
    (tmp / "in" / "a.parquet").write_bytes(b"")
    return ["check", "--input", str(tmp / "in"), "--report", str(tmp / "out" / "r.json")]


def _sample_too_few(tmp: Path) -> list[str]:
    (tmp / "in").mkdir()
    return ["sample", "--output", str(tmp / "out"), "--docs", "5"]


def _sample_not_empty(tmp: Path) -> list[str]:
    (tmp / "in").mkdir()
    (tmp / "in" / "keep.txt").write_text("mine")
    return ["sample", "--output", str(tmp / "in"), "--docs", "200"]


CASES = [
    Case("clean-missing-path", _missing, 1, ("nope.parquet", "does not exist")),
    Case("clean-empty-folder", _empty_dir, 1, ("holds no data files",)),
    Case("clean-glob-matches-nothing", _glob_nothing, 1, ("matches no files",)),
    Case("clean-zero-byte-parquet", _zero_byte, 1, ("b.parquet", "empty (0 bytes)")),
    Case("clean-truncated-parquet", _truncated, 1, ("a.parquet", "not a readable Parquet")),
    Case("clean-corrupt-parquet", _corrupt, 1, ("a.parquet", "not a readable Parquet")),
    Case("clean-stale-crc", _stale_crc, 1, ("a.parquet", ".a.parquet.crc")),
    Case("clean-colon-in-file-name", _colon_name, 1, ("part:1.parquet", "rename")),
    Case("clean-colon-in-folder-name", _colon_folder, 1, ("'2024-01-01T00:00'", "rename")),
    Case("clean-mixed-types", _type_conflict, 1, ("b.parquet", "'n'")),
    Case("clean-id-not-string", _id_not_string, 1, ("'doc_id'", "must be a string")),
    Case("clean-text-not-string", _text_not_string, 1, ("'text'", "must be a string")),
    Case("clean-no-text-column", _no_text, 1, ("no column 'text'", "columns.text")),
    Case("clean-zero-rows", _zero_rows, 1, ("holds no rows",)),
    Case("clean-reserved-column", _reserved, 1, ("'_rid'", "rename")),
    Case("clean-output-is-input", _out_is_in, 1, ("is the input",)),
    Case("clean-output-inside-input", _out_inside_in, 1, ("inside it",)),
    Case("clean-output-contains-input", _out_contains_in, 1, ("contains the input",)),
    Case("clean-config-typo", _config_typo, 1, ("rules.min_char", "unknown key")),
    Case("clean-config-out-of-range", _config_range, 1, ("gate.min_retention",)),
    Case("clean-bad-lines-value", _bad_lines_mode, 1, ("input.bad_lines",)),
    Case("clean-usage", _usage, 2, ()),
    Case("clean-unknown-tokenizer", _clean_unknown_tokenizer, 1, ("'gpt-5'", "qwen2.5")),
    Case("clean-n-tokens-column", _clean_tokens_column, 1, ("'n_tokens'", "rename")),
    Case("pack-missing-path", _pack_missing, 1, ("does not exist",)),
    Case("pack-not-a-clean-output", _pack_not_clean, 1, ("_SUCCESS",)),
    Case("pack-zero-byte-parquet", _pack_zero_byte, 1, ("part-00001.parquet",)),
    Case("pack-truncated-parquet", _pack_truncated, 1, ("part-00000.parquet",)),
    Case("pack-mixed-schemas", _pack_mixed, 1, ("part-00001.parquet", "url")),
    Case("pack-reserved-column", _pack_reserved, 1, ("'_metadata'", "rename")),
    Case("pack-id-not-string", _pack_id_type, 1, ("'doc_id'", "not string")),
    Case("pack-output-is-input", _pack_out_is_in, 1, ("is the input",)),
    Case("pack-output-inside-input", _pack_out_inside, 1, ("inside it",)),
    Case("pack-unknown-tokenizer", _pack_unknown_tokenizer, 1, ("'gpt-5'", "deepseek-v3")),
    Case("pack-not-a-tokenizer", _pack_not_a_tokenizer, 1, ("not a readable tokenizer.json",)),
    Case("pack-dtype-too-small", _pack_dtype_too_small, 1, ("tokens.dtype=uint16",)),
    Case("check-missing-path", _check_missing, 1, ("does not exist",)),
    Case("check-zero-byte-parquet", _check_zero_byte, 1, ("a.parquet", "empty (0 bytes)")),
    Case("sample-too-few-docs", _sample_too_few, 1, ("at least 100",)),
    Case("sample-output-not-empty", _sample_not_empty, 1, ("not empty",)),
]


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_bad_input_case(case: Case, tmp_path: Path) -> None:
    args = case.make(tmp_path)
    before = tree_hash(tmp_path / "in")
    proc = run_cli(*args)
    line = assert_clean_failure(proc, case.code, *case.needles)
    print(f"{case.name}: exit {proc.returncode}: {line}")
    assert tree_hash(tmp_path / "in") == before, "the input is untouched"
    out = tmp_path / "out"
    assert not (out / "_SUCCESS").exists() and not (out / "index.json").exists()
    assert not list(tmp_path.glob(".out.runs/*")), "no staging left behind"


def test_unreadable_input(tmp_path: Path, modes_enforced: list[str]) -> None:
    # Under root the CLI runs without the capabilities that read past a mode of 0 (CI is root).
    path = _parquet(tmp_path, _table())
    path.parent.chmod(0)
    try:
        proc = run_cli(*_clean_args(path.parent, tmp_path), prefix=modes_enforced)
    finally:
        path.parent.chmod(0o755)
    assert_clean_failure(proc, 1, "not readable")
    assert not (tmp_path / "out" / "_SUCCESS").exists()


# --------------------------------------------------------------------------- Spark runs


@pytest.mark.spark
@pytest.mark.spark
def test_odd_folder_is_read_as_named(
    spark, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """`[` and a space in the folder name, a README inside, a dotted column name: all read; the
    README is ignored with a warning. (In this process, on the shared session: Spark's reading
    of the path does not depend on the CLI.)"""
    folder = tmp_path / "in" / "run[1] b"
    folder.mkdir(parents=True)
    pq.write_table(_table(60, **{"meta.source": ["web"] * 60}), folder / "part-0.parquet")
    (folder / "README.txt").write_text("what this folder is\n")
    before = tree_hash(tmp_path / "in")
    args = ["clean", "--input", str(folder), "--output", str(tmp_path / "out"), *FAST]
    proc = run_in_process(capsys, *args)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "ignoring" in proc.stderr and "README.txt" in proc.stderr
    assert json.loads(proc.stdout.strip().splitlines()[-1])["output_rows"] == 60
    data = pq.read_table(tmp_path / "out" / "data")
    assert "meta.source" in data.column_names
    assert tree_hash(tmp_path / "in") == before


@pytest.mark.spark
@pytest.mark.parametrize(
    ("name", "texts", "code", "needle"),
    [
        ("all-identical", lambda i: _text(0), 3, "retention"),
        ("all-empty", lambda i: "\u200b " if i % 2 else "", 3, "retention"),
    ],
)
def test_degenerate_corpora_are_rejected_by_the_gate(
    spark,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    name: str,
    texts: Callable[[int], str],
    code: int,
    needle: str,
) -> None:
    _parquet(
        tmp_path,
        pa.table({"doc_id": [f"d{i}" for i in range(40)], "text": [texts(i) for i in range(40)]}),
    )
    before = tree_hash(tmp_path / "in")
    # In this process, on the shared session: the gate's answer does not depend on the CLI.
    proc = run_in_process(capsys, *_clean_args(tmp_path / "in", tmp_path))
    line = assert_clean_failure(proc, code, needle)
    print(f"clean-{name}: exit {proc.returncode}: {line}")
    assert not (tmp_path / "out").exists()
    assert tree_hash(tmp_path / "in") == before


@pytest.mark.spark
@pytest.mark.parametrize(
    ("name", "body", "needle"),
    [("empty", b"\n\n", "holds no rows"), ("not-json", b"a,b\n1,2\n", "no line of it parses")],
)
def test_jsonl_without_documents(tmp_path: Path, name: str, body: bytes, needle: str) -> None:
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "a.jsonl").write_bytes(body)
    proc = run_cli(*_clean_args(tmp_path / "in", tmp_path))
    line = assert_clean_failure(proc, 1, "a.jsonl", needle)
    print(f"clean-jsonl-{name}: exit {proc.returncode}: {line}")
    assert not (tmp_path / "out").exists()


@pytest.mark.spark
def test_bad_jsonl_line_names_file_and_line(tmp_path: Path) -> None:
    folder = tmp_path / "in"
    folder.mkdir()
    good = [json.dumps({"doc_id": f"d{i}", "text": _text(i)}) for i in range(30)]
    (folder / "a.jsonl").write_text("\n".join(good) + "\n")
    lines = [*good[:7], good[7] + good[8], *good[9:]]
    (folder / "b.jsonl").write_text("\n".join(lines) + "\n")
    (folder / "c.jsonl.gz").write_bytes(gzip.compress(("\n".join(good) + "\n").encode()))
    before = tree_hash(folder)
    proc = run_cli(*_clean_args(folder, tmp_path))
    line = assert_clean_failure(proc, 1, "b.jsonl line 8", "multiple_objects", "bad_lines=reject")
    print(f"clean-jsonl-two-objects: exit {proc.returncode}: {line}")
    assert not (tmp_path / "out").exists()
    assert tree_hash(folder) == before
