"""The local JVM's class-data archive: when a run records one, maps one, or leaves it alone."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from corpusclean.jobs.runtime import classcache
from corpusclean.jobs.runtime.classcache import OPTIONS, java_binary, java_option, usable

OLD = time.time() - 120  # a recording whose JVM is long done writing


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "cache"
    monkeypatch.setenv(classcache.ENV, str(folder))
    return folder


@pytest.fixture(scope="module")
def real_archive(tmp_path_factory: pytest.TempPathFactory) -> bytes:
    """A small dynamic archive the JVM of this machine wrote (`java -version`'s classes)."""
    java = java_binary()
    assert java is not None, "java is found on this machine"
    path = tmp_path_factory.mktemp("jsa") / "tiny.jsa"
    subprocess.run([str(java), f"-XX:ArchiveClassesAtExit={path}", "-version"], check=True)
    return path.read_bytes()


def _key() -> str:
    key = classcache.archive_key({})
    assert key is not None, "java and the Spark jars are found on this machine"
    return key


def _recording(cache: Path, pid: int, data: bytes, mtime: float = OLD) -> Path:
    cache.mkdir(exist_ok=True)
    path = cache / f"spark-classes-{_key()}.{pid}.recording"
    path.write_bytes(data)
    os.utime(path, (mtime, mtime))
    return path


def test_the_first_run_records_into_a_file_of_its_own(cache: Path) -> None:
    recording = cache / f"spark-classes-{_key()}.{os.getpid()}.recording"
    assert java_option({}) == f"-XX:ArchiveClassesAtExit={recording}"


def test_a_checked_recording_becomes_the_archive_and_the_rest_go(
    cache: Path, real_archive: bytes
) -> None:
    _recording(cache, 1, real_archive)
    _recording(cache, 2, real_archive, mtime=OLD - 10)  # an older one of the same key
    archive = cache / f"spark-classes-{_key()}.jsa"
    assert java_option({}) == f"-XX:SharedArchiveFile={archive}"
    assert archive.read_bytes() == real_archive
    assert [p.name for p in cache.iterdir()] == [archive.name]
    assert java_option({}) == f"-XX:SharedArchiveFile={archive}"


def test_a_truncated_corrupt_headerless_or_fresh_recording_is_never_mapped(
    cache: Path, real_archive: bytes
) -> None:
    java = java_binary()
    assert java is not None
    half = len(real_archive) // 2
    flipped = bytearray(real_archive)
    flipped[half] ^= 0xFF
    broken = {
        "truncated": real_archive[:half],  # mapping it would crash the JVM (SIGBUS)
        "corrupt": bytes(flipped),
        "no header yet": b"\0" * 4096 + real_archive[4096:],
    }
    for name, data in broken.items():
        path = _recording(cache, 1, data)
        assert not usable(path, java), name
        assert java_option({}).startswith("-XX:ArchiveClassesAtExit="), name
    # A sound recording its JVM may still be closing waits for a later run.
    for path in cache.iterdir():
        path.unlink()
    _recording(cache, 1, real_archive, mtime=time.time())
    assert java_option({}).startswith("-XX:ArchiveClassesAtExit=")
    assert usable(next(cache.iterdir()), java)


def test_stale_recordings_of_other_installs_are_swept(cache: Path) -> None:
    cache.mkdir()
    old, new = cache / "spark-classes-other.1.recording", cache / "spark-classes-other.2.recording"
    for path in (old, new):
        path.write_bytes(b"x")
    past = time.time() - 2 * classcache.STALE_S
    os.utime(old, (past, past))
    java_option({})
    assert not old.exists() and new.exists()


def test_the_archive_name_follows_what_it_depends_on(
    cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    key = classcache.archive_key({})
    assert key != classcache.archive_key({"spark.driver.extraClassPath": "/opt/extra.jar"})
    # The same Spark in another install (a second venv): other jar paths, another archive.
    jars = classcache._spark_jars()
    assert jars is not None
    copy = tmp_path / "spark" / "jars"
    copy.mkdir(parents=True)
    for jar in jars.glob("*.jar"):
        (copy / jar.name).symlink_to(jar)
    monkeypatch.setenv("SPARK_HOME", str(copy.parent))
    assert classcache.archive_key({}) not in (None, key)


def test_off_and_unwritable_folders_leave_the_jvm_alone(
    cache: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, modes_enforced: list[str]
) -> None:
    for off in ("off", "0", "false"):
        monkeypatch.setenv(classcache.ENV, off)
        assert java_option({}) is None
        assert classcache.with_class_archive({"a": "b"}) == {"a": "b"}
    locked = tmp_path / "locked"
    locked.mkdir(mode=0o500)
    # In a child process held to the folder's mode: root's own would write there anyway.
    probe = "from corpusclean.jobs.runtime.classcache import java_option; print(java_option({}))"
    env = {**os.environ, classcache.ENV: str(locked)}
    done = subprocess.run(
        [*modes_enforced, sys.executable, "-c", probe],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip() == "None", done.stdout
    assert list(locked.iterdir()) == []


def test_a_users_own_java_options_are_kept_and_their_archive_choice_wins(cache: Path) -> None:
    got = classcache.with_class_archive({OPTIONS: "-Dfoo=1"})
    assert got[OPTIONS].startswith("-Dfoo=1 -XX:ArchiveClassesAtExit=")
    for own in ("-Xshare:off", "-XX:SharedArchiveFile=/x.jsa"):
        assert classcache.with_class_archive({OPTIONS: own}) == {OPTIONS: own}


def test_a_spark_installed_again_at_the_same_place_gets_another_archive(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Same jar names and sizes, new files: the JVM would refuse the old archive (it checks
    each jar's modification time), so the key must change."""
    jars = tmp_path / "spark" / "jars"
    jars.mkdir(parents=True)
    for name in ("spark-core.jar", "spark-sql.jar"):
        (jars / name).write_bytes(b"x" * 10)
    monkeypatch.setenv("SPARK_HOME", str(jars.parent))
    before = classcache.archive_key({})
    os.utime(jars / "spark-sql.jar", (OLD, OLD))
    after = classcache.archive_key({})
    assert None not in (before, after) and before != after


def test_archives_no_run_used_for_two_weeks_go_and_the_mapped_one_is_marked_used(
    cache: Path,
) -> None:
    cache.mkdir()
    mine = cache / f"spark-classes-{_key()}.jsa"
    mine.write_bytes(b"archive")
    gone, kept = cache / "spark-classes-gone.jsa", cache / "spark-classes-kept.jsa"
    for path in (gone, kept):
        path.write_bytes(b"other install")
    long_ago = time.time() - classcache.UNUSED_S - 60
    for path in (mine, gone):
        os.utime(path, (long_ago, long_ago))
    assert java_option({}) == f"-XX:SharedArchiveFile={mine}"
    assert not gone.exists() and kept.exists()
    assert time.time() - mine.stat().st_mtime < 60


def test_a_user_without_a_home_records_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    # Path.home() gives "~" back for a uid with no passwd entry (a container's arbitrary
    # user): archives there would land in the working directory.
    monkeypatch.delenv(classcache.ENV, raising=False)
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    monkeypatch.setattr(Path, "home", classmethod(lambda cls: Path("~")))
    assert classcache.cache_dir() is None
    assert java_option({}) is None
    monkeypatch.setenv("XDG_CACHE_HOME", "/somewhere/cache")
    assert classcache.cache_dir() == Path("/somewhere/cache/corpusclean")
