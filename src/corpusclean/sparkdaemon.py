"""PySpark's Python worker daemon, with pyspark and py4j imported from the installed packages.

Spark starts its Python workers with `pyspark.zip` and py4j's source zip first on their path.
Python cannot cache the byte-code of modules it imports from a zip, so the daemon and every
worker it forks compile each pyspark module they import (pyspark.sql among them) from source:
about a second of CPU per worker process, in every run, before its first task. Where the
interpreter has the same pyspark (and py4j) installed, as a local run's own interpreter does,
this daemon moves the zips behind the installed packages, whose byte-code pip compiled, and
then runs pyspark's own daemon (`python -m pyspark.daemon`) unchanged; the workers it forks
inherit the modules. Where the installed copy is missing or is another version, the zips stay
first: the code the workers run is always the JVM's own release.

Used by local runs (conf/spark/local.properties `spark.python.daemon.module`); a cluster's
executors keep Spark's default daemon, as this package may reach them only with the first task.
"""

from __future__ import annotations

import importlib.machinery
import runpy
import sys
import zipfile
from pathlib import Path

# (package, file whose text names its release): pyspark.zip and py4j-*-src.zip.
_PACKAGES = (("pyspark", "version.py"), ("py4j", "version.py"))


def _zipped(entry: str, package: str) -> bool:
    name = Path(entry).name
    return name == "pyspark.zip" if package == "pyspark" else name.startswith(f"{package}-")


def _same_release(archive: str, package: str, marker: str, installed: Path) -> bool:
    """Whether the zip `archive` holds the release of `package` installed at `installed`."""
    try:
        with zipfile.ZipFile(archive) as zf:
            zipped = zf.read(f"{package}/{marker}")
        return zipped == (installed / marker).read_bytes()
    except (OSError, KeyError, zipfile.BadZipFile):
        return False


def prefer_installed(path: list[str]) -> list[str]:
    """`path` with each pyspark/py4j zip moved to the end where the same release of its
    package is installed on the rest of the path; unchanged otherwise."""
    out = list(path)
    for package, marker in _PACKAGES:
        zips = [e for e in out if e.endswith(".zip") and _zipped(e, package)]
        if not zips:
            continue
        rest = [e for e in out if e not in zips]
        spec = importlib.machinery.PathFinder.find_spec(package, rest)
        if spec is None or not spec.submodule_search_locations:
            continue
        installed = Path(next(iter(spec.submodule_search_locations)))
        if all(_same_release(z, package, marker, installed) for z in zips):
            out = rest + zips
    return out


def main() -> None:
    sys.path[:] = prefer_installed(sys.path)
    # What `python -m pyspark.daemon WORKER_MODULE` runs, with this process's arguments.
    runpy.run_module("pyspark.daemon", run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main()
