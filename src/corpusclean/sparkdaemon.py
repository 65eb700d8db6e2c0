"""PySpark's Python worker daemon, with pyspark and py4j imported from the installed packages.

Spark starts its Python workers with `pyspark.zip` and py4j's source zip first on their path.
Python cannot cache the byte-code of modules it imports from a zip, so the daemon, and each
worker it forks for the modules the daemon had not imported, compile every pyspark module they
import (pyspark.sql among them) from source, in every run. Where the interpreter has the same
release of pyspark (and py4j) installed, as a local run's own interpreter does, this daemon
moves the zips behind the installed packages, whose byte-code pip compiled; where the installed
copy is missing or another release, the zips stay first, so the workers always run the JVM's
own release. It then imports the modules the jobs' first Python stage needs, and runs
pyspark's own daemon (`python -m pyspark.daemon`) unchanged: the workers it forks inherit those
modules (and this package's `_zipimport_fix`) instead of importing them each. Both are only
savings (of the workers' start-up CPU, measured by bench/worker_start.py): if either fails,
the path is left as Spark set it, and the import to the task that needs it.

Used by the local runs whose session corpusclean starts (conf/spark/local.properties
`spark.python.daemon.module`). spark-submit runs keep Spark's own daemon (jobs/submit.py), as
this package may reach their executors only with the first task (`--py-files`).
"""

from __future__ import annotations

import contextlib
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
    except Exception:  # unreadable, encrypted, truncated: not known to be the same release
        return False


def prefer_installed(path: list[str]) -> list[str]:
    """`path` with each pyspark/py4j zip moved to the end where the same release of its
    package is installed on the rest of the path; unchanged otherwise."""
    out = list(path)
    for package, marker in _PACKAGES:
        zips = [e for e in out if isinstance(e, str) and e.endswith(".zip") and _zipped(e, package)]
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
    # A failure here must not keep the workers from starting: they would fail every task.
    with contextlib.suppress(Exception):
        sys.path[:] = prefer_installed(sys.path)
    # The modules every job's first Python stage unpickles its function from (pyarrow, numpy,
    # pyspark.sql with them), imported once here rather than in each worker after its fork:
    # the saving grows with the workers a machine starts. A failure
    # is left to the task that needs them, where it is reported.
    with contextlib.suppress(Exception):
        import corpusclean.pipelines.content
        import corpusclean.pipelines.near_dedup  # noqa: F401
    # What `python -m pyspark.daemon WORKER_MODULE` runs, with this process's arguments.
    runpy.run_module("pyspark.daemon", run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main()
