"""The local JVM's class-data archive: Spark's classes loaded once, mapped by every later run.

A local run starts its own JVM, which loads and verifies some ten thousand Spark classes before
the first job: on a small machine that is most of the session's start and of the first job
(docs/figures.md, from bench/startup.py). Java's application class-data sharing (JEP 350, dynamic
archives, JDK 13+) records the classes a run loaded into a file at the JVM's exit; a later
JVM maps that file instead of parsing and verifying the classes again.

The first local run records (`-XX:ArchiveClassesAtExit`, into a file of its own, so runs
started at the same time never write one file); its JVM writes the recording as it exits,
after the run has returned. A later run adopts a recording under the archive's name only once
it has checked it: the JVM writes its header last, so a file with it is finished, and a trial
JVM (`java -XX:+VerifySharedSpaces -version`, a quarter of a second) must map every region
with its checksum intact. Mapping a truncated archive (a JVM killed while writing it, a full
disk) would crash every later run with SIGBUS, so nothing unchecked is ever mapped. The
archive's name carries everything it depends on (the java binary, the Spark jars with their
sizes and modification times, the driver class path): a change, a venv made again at the same
path included, gives a new name and a new recording, never a mismatched archive; one
that does not match anyway is ignored by the JVM, which loads the classes the usual way
(`-Xshare:auto`, its default). Runs under spark-submit, whose JVM already exists, are not
touched.

The first run pays for recording (its JVM writes the file, ~150 MB, after the run returns);
every later run starts faster by more than that cost (docs/figures.md, from bench/startup.py).

A run that maps an archive marks it used (its modification time); one that no run has used for
`UNUSED_S` (14 days) belongs to an install that is gone, and the next run removes it.

`CORPUSCLEAN_CLASS_CACHE`: a folder for the archives (default `$XDG_CACHE_HOME/corpusclean`,
else `~/.cache/corpusclean`), or `off`.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

from corpusclean.pipelines.tablecache import user_cache_dir

ENV = "CORPUSCLEAN_CLASS_CACHE"
OPTIONS = "spark.driver.extraJavaOptions"
# The JVM creates the recording only when it starts writing it, and writes it in well under a
# second: one this old, with its header, is finished.
SETTLE_S = 10.0
# A recording this old that never passed the checks is of no use.
STALE_S = 3600.0
# An archive no run has mapped for this long belongs to an install that is gone (~150 MB each).
UNUSED_S = 14 * 86400.0
# The first bytes of a JDK dynamic archive's header (CDS magic 0xf00baba8, little-endian).
MAGIC = b"\xa8\xab\x0b\xf0"


def cache_dir() -> Path | None:
    """The folder archives live in, or None when the cache is off (or there is no home)."""
    return user_cache_dir(ENV, "corpusclean")


def _spark_jars() -> Path | None:
    import pyspark

    jars = Path(pyspark.__file__).parent / "jars"
    home = os.environ.get("SPARK_HOME")
    if home and (Path(home) / "jars").is_dir():
        jars = Path(home) / "jars"
    return jars if jars.is_dir() else None


def java_binary() -> Path | None:
    """The java that spark-submit starts: JAVA_HOME's, else the one on PATH."""
    java_home = os.environ.get("JAVA_HOME")
    if java_home and (Path(java_home) / "bin" / "java").exists():
        return (Path(java_home) / "bin" / "java").resolve()
    found = shutil.which("java")
    return Path(found).resolve() if found else None


def archive_key(settings: dict[str, str], java: Path | None = None) -> str | None:
    """A digest of what the archive depends on (`java`: the binary, else `java_binary()`);
    None when the JVM or Spark is not found."""
    java, jars = java or java_binary(), _spark_jars()
    if java is None or jars is None:
        return None
    # The archive holds the class path it was recorded with: another install's jars (a second
    # venv) need an archive of their own.
    parts = [str(java), str(jars.resolve())]
    # The JVM maps an archive only while every jar has the size and modification time it was
    # recorded with: a venv made again at the same path (same names, same sizes, new files)
    # would otherwise keep the old key, and every run would load the classes the slow way
    # without ever recording them again.
    parts += sorted(
        f"{p.name}:{st.st_size}:{st.st_mtime_ns}" for p in jars.glob("*.jar") if (st := p.stat())
    )
    parts.append(settings.get("spark.driver.extraClassPath", ""))
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:16]


def usable(path: Path, java: Path) -> bool:
    """Whether a recording is a finished archive a JVM maps whole, checksums verified."""
    try:
        with path.open("rb") as f:
            if f.read(len(MAGIC)) != MAGIC:
                return False
    except OSError:
        return False
    with tempfile.TemporaryDirectory(prefix="corpusclean-cds-") as tmp:
        cmd = [
            str(java),
            f"-XX:SharedArchiveFile={path}",
            "-XX:+VerifySharedSpaces",
            "-Xlog:cds=info",
            # A truncated archive crashes the trial JVM: no crash report or core in the cwd.
            f"-XX:ErrorFile={tmp}/hs_err.log",
            "-XX:-CreateCoredumpOnCrash",
            "-version",
        ]
        try:
            done = subprocess.run(cmd, cwd=tmp, capture_output=True, text=True, timeout=60)
        except (OSError, subprocess.TimeoutExpired):
            return False
    out = done.stdout + done.stderr
    # `-version` has none of Spark's class path, so the JVM then declines the archive for a
    # class-path mismatch: what counts is that it mapped all three regions first.
    mapped = all(f"Mapped dynamic region #{i}" in out for i in range(3))
    return done.returncode == 0 and mapped and "verification failed" not in out


def java_option(settings: dict[str, str], now: float | None = None) -> str | None:
    """Map the archive, or record one; None when the cache is off or unusable here."""
    folder, java = cache_dir(), java_binary()
    key = archive_key(settings, java) if java is not None else None
    if folder is None or java is None or key is None:
        return None
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError:
        return None
    archive = folder / f"spark-classes-{key}.jsa"
    now = time.time() if now is None else now
    if not (archive.is_file() and archive.stat().st_size > 0):
        mine = sorted(folder.glob(f"{archive.stem}.*.recording"), key=_mtime, reverse=True)
        for path in mine:
            if now - _mtime(path) > SETTLE_S and usable(path, java):
                with contextlib.suppress(OSError):
                    os.replace(path, archive)  # atomic: the whole file or none
                break
    done = archive.is_file() and archive.stat().st_size > 0
    for left in folder.glob("spark-classes-*.recording"):
        # ~150 MB each. With the archive there, its key's recordings are of no use (a JVM
        # still writing one writes into the unlinked file); others' go when stale.
        if (done and left.name.startswith(archive.stem + ".")) or now - _mtime(left) > STALE_S:
            with contextlib.suppress(OSError):
                left.unlink()
    for other in folder.glob("spark-classes-*.jsa"):
        if other != archive and now - _mtime(other) > UNUSED_S:
            with contextlib.suppress(OSError):
                other.unlink()
    if done:
        with contextlib.suppress(OSError):
            os.utime(archive, (now, now))  # in use: not swept as another install's
        return f"-XX:SharedArchiveFile={archive}"
    if not os.access(folder, os.W_OK):
        return None
    return f"-XX:ArchiveClassesAtExit={folder / f'{archive.stem}.{os.getpid()}.recording'}"


def _mtime(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except OSError:
        return 0.0


def with_class_archive(settings: dict[str, str]) -> dict[str, str]:
    """`settings` with the archive option appended to the driver's JVM options (a user's
    own options kept, and left alone when they already choose an archive)."""
    current = settings.get(OPTIONS, "")
    if "SharedArchiveFile" in current or "ArchiveClassesAtExit" in current or "Xshare" in current:
        return settings
    option = java_option(settings)
    if option is None:
        return settings
    return {**settings, OPTIONS: f"{current} {option}".strip()}
