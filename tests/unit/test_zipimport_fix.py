"""The per-task `importlib.invalidate_caches()` cost fix for Spark's Python workers."""

from __future__ import annotations

import sys
import zipfile
import zipimport
from pathlib import Path

import pytest

from corpusclean import _zipimport_fix


def _zip(path: Path, files: dict[str, str], mode: str = "w") -> None:
    with zipfile.ZipFile(path, mode) as z:
        for name, text in files.items():
            z.writestr(name, text)


def test_changed_archives_are_still_seen(tmp_path: Path) -> None:
    _zipimport_fix.install()
    archive = tmp_path / "mods.zip"
    _zip(archive, {"first_mod.py": "X = 1\n"})
    importer = zipimport.zipimporter(str(archive))
    importer.invalidate_caches()
    assert importer.find_spec("first_mod") is not None
    _zip(archive, {"second_mod.py": "Y = 2\n"}, mode="a")
    importer.invalidate_caches()
    assert importer.find_spec("second_mod") is not None


@pytest.mark.skipif(sys.version_info >= (3, 12), reason="3.12 made invalidation lazy itself")
def test_an_unchanged_archive_is_read_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _zipimport_fix.install()
    archive = tmp_path / "mods.zip"
    _zip(archive, {"a_mod.py": "X = 1\n"})
    importer = zipimport.zipimporter(str(archive))
    reads: list[str] = []
    real = zipimport._read_directory  # type: ignore[attr-defined]

    def counting(path: str) -> dict[str, object]:
        reads.append(path)
        return real(path)

    monkeypatch.setattr(zipimport, "_read_directory", counting)
    for _ in range(5):
        importer.invalidate_caches()
    assert len(reads) == 1
    _zip(archive, {"b_mod.py": "Y = 2\n"}, mode="a")
    importer.invalidate_caches()
    assert len(reads) == 2
