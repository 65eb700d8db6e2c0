"""The one atomic-write helper: unique temporary names, nothing left behind, target kept."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from corpusclean.jobs.runtime import atomic
from corpusclean.jobs.runtime.atomic import (
    is_temp_of,
    replacing,
    temp_name,
    write_bytes_atomic,
    write_text_atomic,
)


def test_writes_text_as_utf8_bytes(tmp_path: Path) -> None:
    path = tmp_path / "a.json"
    write_text_atomic(path, "é\r\nx\n")
    assert path.read_bytes() == "é\r\nx\n".encode()
    write_bytes_atomic(path, b"new")
    assert path.read_bytes() == b"new"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.json"]


def test_temp_dir_holds_the_temporary_file(tmp_path: Path) -> None:
    tmp = tmp_path / "_tmp"
    tmp.mkdir()
    seen = []
    with replacing(tmp_path / "b.txt", tmp) as t:
        seen.append(t)
        t.write_text("x")
    assert seen[0].parent == tmp and is_temp_of("b.txt", seen[0].name)
    assert (tmp_path / "b.txt").read_text() == "x" and not list(tmp.iterdir())


def test_temp_names_are_unique_and_recognised() -> None:
    names = {temp_name("index.json") for _ in range(1000)}
    assert len(names) == 1000
    for name in names:
        assert name.startswith(f".index.json.{os.getpid()}.") and name.endswith(".tmp")
        assert is_temp_of("index.json", name)
    assert is_temp_of("x.tar.gz", temp_name("x.tar.gz", ".tar.gz"))
    assert not is_temp_of("index.json", ".index.json.tmp.bak")
    assert not is_temp_of("index.json", ".other.json.1.ab.tmp")
    assert not is_temp_of("index.json", "index.json")


def test_concurrent_writers_never_share_a_temporary_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "shared.txt"
    temps: list[str] = []
    start = threading.Barrier(8)
    real = atomic.temp_name

    def recorded(name: str, suffix: str = "") -> str:
        out = real(name, suffix)
        temps.append(out)
        return out

    monkeypatch.setattr(atomic, "temp_name", recorded)

    def writer(i: int) -> None:
        start.wait()
        for _ in range(20):
            write_text_atomic(path, f"{i}\n" * 1000)

    threads = [threading.Thread(target=writer, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(temps) == len(set(temps)) == 160
    text = path.read_text()
    assert len(set(text.splitlines())) == 1 and len(text.splitlines()) == 1000
    assert sorted(p.name for p in tmp_path.iterdir()) == ["shared.txt"]


def test_failure_removes_the_temporary_file_and_keeps_the_target(tmp_path: Path) -> None:
    path = tmp_path / "keep.json"
    path.write_text("old")
    with pytest.raises(RuntimeError), replacing(path) as tmp:
        tmp.write_text("half")
        raise RuntimeError("writer failed")
    assert path.read_text() == "old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["keep.json"]


def test_failed_rename_removes_the_temporary_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "keep.json"
    path.write_text("old")

    def broken(src: object, dst: object) -> None:
        raise OSError("rename failed")

    monkeypatch.setattr(atomic.os, "replace", broken)
    with pytest.raises(OSError, match="rename failed"):
        write_text_atomic(path, "new")
    assert path.read_text() == "old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["keep.json"]


def test_unencodable_text_leaves_nothing(tmp_path: Path) -> None:
    path = tmp_path / "x.txt"
    with pytest.raises(UnicodeEncodeError):
        write_text_atomic(path, "\udc80")
    assert not list(tmp_path.iterdir())
