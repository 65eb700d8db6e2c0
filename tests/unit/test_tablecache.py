"""Tables built once per machine and mapped by later processes (pipelines/tablecache.py)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from corpusclean.pipelines import heuristics, langid, tablecache


class Builder:
    """A table builder that counts its calls."""

    def __init__(self, scale: int = 1) -> None:
        self.calls = 0
        self.scale = scale

    def __call__(self) -> dict[str, np.ndarray]:
        self.calls += 1
        return {
            "ints": np.arange(1000, dtype=np.int64) * self.scale,
            "names": np.asarray(["en", "zh", "sr"], dtype=str),
            "grid": np.ones((3, 4), dtype=np.float32),
        }


@pytest.fixture
def root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    where = tmp_path / "tables"
    monkeypatch.setenv(tablecache.ENV, str(where))
    return where


def _equal(got: dict[str, np.ndarray], want: dict[str, np.ndarray]) -> None:
    assert set(got) == set(want)
    for name in want:
        assert got[name].dtype == want[name].dtype, name
        np.testing.assert_array_equal(got[name], want[name])
        assert type(got[name]) is np.ndarray, name  # not a memmap: one numba type
        assert not got[name].flags.writeable, name


def test_built_once_then_mapped(root: Path) -> None:
    build = Builder()
    first = tablecache.load("t", "k1", build)
    second = tablecache.load("t", "k1", build)
    assert build.calls == 1
    _equal(first, Builder()())
    _equal(second, Builder()())
    assert (root / "t-k1" / "meta.json").is_file()
    # Nothing half-written is left beside the folder.
    assert [p.name for p in root.iterdir()] == ["t-k1"]


def test_a_new_key_builds_a_new_table(root: Path) -> None:
    tablecache.load("t", "k1", Builder(1))
    got = tablecache.load("t", "k2", Builder(2))
    assert got["ints"][1] == 2
    assert tablecache.load("t", "k1", Builder(3))["ints"][1] == 1


def test_off_builds_every_time_read_only(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(tablecache.ENV, "off")
    build = Builder()
    _equal(tablecache.load("t", "k", build), Builder()())
    tablecache.load("t", "k", build)
    assert build.calls == 2


def test_no_home_means_no_cache(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(tablecache.ENV, raising=False)
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    monkeypatch.setattr(Path, "home", classmethod(lambda cls: Path("~")))
    assert tablecache.cache_dir() is None
    monkeypatch.setenv("XDG_CACHE_HOME", "/somewhere/cache")
    assert tablecache.cache_dir() == Path("/somewhere/cache/corpusclean/tables")


def test_an_unwritable_folder_builds_in_memory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A file where the folder should be: no folder can be made under it (even as root).
    blocker = tmp_path / "file"
    blocker.write_text("")
    monkeypatch.setenv(tablecache.ENV, str(blocker / "tables"))
    build = Builder()
    _equal(tablecache.load("t", "k", build), Builder()())
    _equal(tablecache.load("t", "k", build), Builder()())
    assert build.calls == 2


KEY = "0123456789abcdef0123"  # a key as `digest` makes them (the sweep knows them by it)


@pytest.mark.parametrize("damage", ["truncate", "meta", "shape", "missing"])
def test_a_damaged_table_is_moved_aside_and_built_again(root: Path, damage: str) -> None:
    tablecache.load("t", KEY, Builder())
    folder = root / ("t-" + KEY)
    if damage == "truncate":  # a short file is never mapped (it would fault on read)
        data = (folder / "ints.npy").read_bytes()
        (folder / "ints.npy").write_bytes(data[: len(data) // 2])
    elif damage == "meta":
        (folder / "meta.json").write_text("{")
    elif damage == "shape":
        np.save(folder / "grid.npy", np.ones((4, 3), dtype=np.float32))
    else:
        (folder / "names.npy").unlink()
    build = Builder()
    _equal(tablecache.load("t", KEY, build), Builder()())
    assert build.calls == 1
    # The damaged folder went aside whole (a process that mapped it keeps its files) ...
    trash = [p for p in root.iterdir() if p.name.startswith(".trash-")]
    assert len(trash) == 1 and (trash[0] / folder.name).is_dir()
    # ... and a whole one was written again: the next load maps it.
    again = Builder()
    _equal(tablecache.load("t", KEY, again), Builder()())
    assert again.calls == 0
    # What was moved aside goes once nothing can be reading it any more.
    old = time.time() - tablecache.STALE_S - 60
    os.utime(trash[0], (old, old))
    tablecache.load("t", KEY, Builder())
    assert not trash[0].exists()


def test_a_folder_this_process_cannot_read_is_left_alone(
    root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    tablecache.load("t", "k", Builder())
    # A file of no table's: a folder written again would not have it.
    (root / "t-k" / "mark").write_text("")
    before = sorted(p.name for p in (root / "t-k").iterdir())

    def refused(*args: object, **kwargs: object) -> None:
        raise PermissionError(13, "Permission denied")

    # No permission, too many open files, a network file system's hiccup: nothing to say
    # about the folder, which other processes may be reading.
    monkeypatch.setattr(tablecache.np, "load", refused)
    build = Builder()
    _equal(tablecache.load("t", "k", build), Builder()())
    assert build.calls == 1
    assert sorted(p.name for p in (root / "t-k").iterdir()) == before
    assert [p.name for p in root.iterdir()] == ["t-k"]


def test_a_folder_written_meanwhile_by_another_process_is_kept(root: Path) -> None:
    tablecache.load("t", "k", Builder())
    # A second writer that lost the race (its rename finds the folder there) neither fails
    # nor leaves its temporary folder.
    tablecache._write(root, root / "t-k", Builder()())
    assert [p.name for p in root.iterdir()] == ["t-k"]
    again = Builder()
    _equal(tablecache.load("t", "k", again), Builder()())
    assert again.calls == 0


def test_a_table_another_worker_wrote_while_this_one_built_is_mapped(root: Path) -> None:
    def build() -> dict[str, np.ndarray]:
        arrays = Builder()()
        tablecache._write(root, root / "t-k", arrays)  # the other worker, finishing first
        return arrays

    got = tablecache.load("t", "k", build)
    _equal(got, Builder()())
    assert isinstance(got["ints"].base, np.memmap)
    assert [p.name for p in root.iterdir()] == ["t-k"]


def test_published_tables_are_readable_by_every_user(root: Path) -> None:
    tablecache.load("t", "k", Builder())
    folder = root / "t-k"
    assert folder.stat().st_mode & 0o777 == 0o755
    assert {p.stat().st_mode & 0o777 for p in folder.iterdir()} == {0o644}


def test_tables_unused_for_two_weeks_are_removed(root: Path) -> None:
    old_key, recent_key, new_key = "0" * 20, "1" * 20, "2" * 20
    tablecache.load("t", old_key, Builder())
    tablecache.load("t", recent_key, Builder())
    tablecache.load("t-other", old_key, Builder())
    long_ago = time.time() - tablecache.UNUSED_S - 3600
    for name in (f"t-{old_key}", f"t-other-{old_key}"):
        os.utime(root / name, (long_ago, long_ago))
    # A writer killed half-way left its temporary folder: gone once STALE_S old.
    crashed = root / f".t-{new_key}-x1y2"
    crashed.mkdir()
    stale = time.time() - tablecache.STALE_S - 60
    os.utime(crashed, (stale, stale))
    tablecache.load("t", new_key, Builder())
    # Only table t's unused folders go (not those of "t-other", whose name starts alike); a
    # folder is marked used whenever it is read.
    assert sorted(p.name for p in root.iterdir()) == sorted(
        [f"t-{new_key}", f"t-other-{old_key}", f"t-{recent_key}"]
    )
    tablecache.load("t-other", old_key, Builder())
    assert (root / f"t-other-{old_key}").stat().st_mtime > long_ago + 3600


def _builder_a() -> dict[str, np.ndarray]:
    return {"x": np.asarray([1 + 1])}


def _builder_b() -> dict[str, np.ndarray]:
    return {"x": np.asarray([1 + 2])}


def test_the_code_key_follows_the_code_not_the_process() -> None:
    assert tablecache.code(_builder_a) != tablecache.code(_builder_b)
    # The same code in another process (other addresses for its code objects, another string
    # hashing seed) has the same key: the generator inside `_build_char_table` is part of it,
    # and so would a set literal be (its frozenset's order follows the hashing seed).
    script = (
        "from corpusclean.pipelines import heuristics, langid, tablecache\n"
        "def f(x):\n"
        "    return x in {'alpha', 'beta', 'gamma', 'delta', 'epsilon'}\n"
        "print(tablecache.digest(tablecache.code(f)))\n"
        "print(tablecache.digest(tablecache.code(heuristics._build_char_table)))\n"
        "print(tablecache.digest(tablecache.code(langid._build_model)))\n"
    )
    outputs = {
        subprocess.run(
            [sys.executable, "-c", script],
            capture_output=True,
            text=True,
            check=True,
            env={**os.environ, "PYTHONHASHSEED": seed},
        ).stdout
        for seed in ("1", "2", "3")
    }
    assert len(outputs) == 1
    here = tablecache.digest(tablecache.code(heuristics._build_char_table))
    assert outputs.pop().split()[1] == here


def test_the_mapped_tables_equal_the_built_ones(
    root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The filters' two tables, first built (and written), then mapped in a fresh load.
    for mapped in (False, True):
        heuristics.char_table.cache_clear()
        monkeypatch.setattr(langid, "_model", None)
        table = heuristics.char_table()
        model = langid.model()
        # The second time from the files (the first, too, reads back what it wrote).
        assert isinstance(table.base, np.memmap) and isinstance(model.ptc.base, np.memmap)
        assert mapped or len(list(root.iterdir())) == 2
        np.testing.assert_array_equal(table, heuristics._build_char_table()["table"])
        built = langid._build_model()
        assert model.classes == tuple(built["classes"].tolist())
        for name in ("nextmove", "rowbase", "output", "ptc", "pc", "alias"):
            np.testing.assert_array_equal(getattr(model, name), built[name])
    assert sorted(p.name.split("-")[0] for p in root.iterdir()) == ["char", "langid"]
    heuristics.char_table.cache_clear()
    monkeypatch.setattr(langid, "_model", None)
