"""The worker daemon's path: pyspark/py4j zips behind an installed copy of the same release."""

from __future__ import annotations

import zipfile
from pathlib import Path

from corpusclean.jobs.session import read_properties
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


def test_nothing_installed_or_unreadable_zip_leaves_the_path(tmp_path: Path) -> None:
    pyspark_zip = _zip(tmp_path / "pyspark.zip", "pyspark", "4.1.4")
    broken = tmp_path / "py4j-0.10.9.9-src.zip"
    broken.write_bytes(b"not a zip")
    site = tmp_path / "site"
    _installed(site, "py4j", "0.10.9.9")
    path = [pyspark_zip, str(broken), str(site)]
    assert prefer_installed(path) == path
