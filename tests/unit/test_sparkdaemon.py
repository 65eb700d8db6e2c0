"""The worker daemon's path: pyspark/py4j zips behind an installed copy of the same release."""

from __future__ import annotations

import os
import struct
import subprocess
import sys
import zipfile
from pathlib import Path

from corpusclean.jobs.runtime.session import read_properties
from corpusclean.sparkdaemon import prefer_installed


def test_local_runs_start_their_workers_under_this_daemon() -> None:
    """(tests/jobs/test_classcache_jvm.py shows a local run's workers importing the installed
    pyspark through it.)"""
    assert read_properties("local")["spark.python.daemon.module"] == "corpusclean.sparkdaemon"


def _zip(path: Path, package: str, version: str) -> str:
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr(f"{package}/__init__.py", "")
        zf.writestr(f"{package}/version.py", f'__version__ = "{version}"\n')
    return str(path)


def _installed(site: Path, package: str, version: str) -> str:
    folder = site / package
    folder.mkdir(parents=True)
    (folder / "__init__.py").write_text("")
    (folder / "version.py").write_text(f'__version__ = "{version}"\n')
    return str(site)


def test_zips_of_the_installed_release_go_behind_it(tmp_path: Path) -> None:
    pyspark_zip = _zip(tmp_path / "pyspark.zip", "pyspark", "4.1.4")
    py4j_zip = _zip(tmp_path / "py4j-0.10.9.9-src.zip", "py4j", "0.10.9.9")
    site = tmp_path / "site"
    _installed(site, "pyspark", "4.1.4")
    _installed(site, "py4j", "0.10.9.9")
    path = ["", pyspark_zip, py4j_zip, "/usr/lib/python311.zip", str(site)]
    assert prefer_installed(path) == [
        "",
        "/usr/lib/python311.zip",
        str(site),
        pyspark_zip,
        py4j_zip,
    ]


def test_another_release_keeps_the_zip_first(tmp_path: Path) -> None:
    """The JVM's own release (the zip) wins over a different installed pyspark; py4j, the same
    release, still moves."""
    pyspark_zip = _zip(tmp_path / "pyspark.zip", "pyspark", "4.1.3")
    py4j_zip = _zip(tmp_path / "py4j-0.10.9.9-src.zip", "py4j", "0.10.9.9")
    site = tmp_path / "site"
    _installed(site, "pyspark", "4.1.4")
    _installed(site, "py4j", "0.10.9.9")
    path = [pyspark_zip, py4j_zip, str(site)]
    assert prefer_installed(path) == [pyspark_zip, str(site), py4j_zip]


def test_another_release_earlier_on_the_path_keeps_the_zip_first(tmp_path: Path) -> None:
    """The installed copy compared is the one an import would find once the zip moved."""
    pyspark_zip = _zip(tmp_path / "pyspark.zip", "pyspark", "4.1.4")
    older, site = tmp_path / "older", tmp_path / "site"
    _installed(older, "pyspark", "4.1.3")
    _installed(site, "pyspark", "4.1.4")
    path = [pyspark_zip, str(older), str(site)]
    assert prefer_installed(path) == path


def test_the_daemon_starts_and_answers_sparks_protocol() -> None:
    """`python -m corpusclean.sparkdaemon pyspark.worker`, as Spark starts it: it writes its
    port (a 4-byte int) first on stdout, and ends, silently, when stdin closes (with status 1,
    as pyspark's own daemon does: its `finally: shutdown(1)` overrides the 0 of stdin's end)."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "corpusclean.sparkdaemon", "pyspark.worker"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(_spark_zips())},
    )
    try:
        assert proc.stdout is not None and proc.stdin is not None
        port = struct.unpack("!i", proc.stdout.read(4))[0]
        assert 0 < port < 65536
        proc.stdin.close()
        assert proc.wait(timeout=60) == 1
        assert proc.stderr is not None and proc.stderr.read() == b""
    finally:
        if proc.poll() is None:
            proc.kill()


def _spark_zips() -> list[str]:
    """Spark's zips, first on the path as Spark puts them for its workers."""
    import pyspark

    lib = Path(pyspark.__file__).parent / "python" / "lib"
    return [str(lib / "pyspark.zip"), *map(str, sorted(lib.glob("py4j-*-src.zip")))]


def test_nothing_installed_or_unreadable_zip_leaves_the_path(tmp_path: Path) -> None:
    pyspark_zip = _zip(tmp_path / "pyspark.zip", "pyspark", "4.1.4")
    broken = tmp_path / "py4j-0.10.9.9-src.zip"
    broken.write_bytes(b"not a zip")
    site = tmp_path / "site"
    _installed(site, "py4j", "0.10.9.9")
    path = [pyspark_zip, str(broken), str(site)]
    assert prefer_installed(path) == path
    # An entry that is not a string (a .pth or sitecustomize may add one) is skipped.
    assert prefer_installed([*path, None]) == [*path, None]  # type: ignore[list-item]
