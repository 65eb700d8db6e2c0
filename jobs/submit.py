"""`corpusclean submit`: run a job on a cluster through spark-submit, package attached.

spark-submit's `--py-files` takes `.zip`/`.egg`, not wheels, so the installed package is zipped
(code, suites and configs) and shipped with the job file; executors import `corpusclean` from it.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Sequence
from pathlib import Path

from corpusclean.jobs.errors import CorpusCleanError, InputError
from corpusclean.jobs.runner import new_parser, run_job

JOB = "submit"
JOBS = {"clean": "clean", "pack": "pack", "check": "check", "bench": "bench_loader"}
_SUBPACKAGES = ("jobs", "pipelines", "schemas", "conf")
_SUFFIXES = (".py", ".json", ".yaml", ".properties")


def _package_dir(name: str) -> Path:
    spec = importlib.util.find_spec(name)
    if spec is None or not spec.submodule_search_locations:
        raise CorpusCleanError(f"cannot locate the installed package {name}")
    return Path(next(iter(spec.submodule_search_locations)))


def build_zip(dest: Path) -> Path:
    """Zip the installed `corpusclean` package for `--py-files`; returns the zip's path."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(dest, "w", zipfile.ZIP_DEFLATED) as zf:
        root = _package_dir("corpusclean")
        zf.write(root / "__init__.py", "corpusclean/__init__.py")
        for sub in _SUBPACKAGES:
            base = _package_dir(f"corpusclean.{sub}")
            for path in sorted(base.rglob("*")):
                if path.is_file() and path.suffix in _SUFFIXES and "__pycache__" not in path.parts:
                    zf.write(path, f"corpusclean/{sub}/{path.relative_to(base).as_posix()}")
    return dest


def spark_submit_path() -> str:
    """The spark-submit that ships with the installed pyspark (or the one on PATH)."""
    import pyspark

    bundled = Path(pyspark.__file__).parent / "bin" / "spark-submit"
    if bundled.exists():
        return str(bundled)
    found = shutil.which("spark-submit")
    if found is None:
        raise CorpusCleanError("spark-submit not found: install pyspark or put Spark on PATH")
    return found


def build_command(
    master: str,
    job: str,
    job_args: list[str],
    py_zip: Path,
    properties: str | None,
    confs: Sequence[str] = (),
) -> list[str]:
    """The spark-submit command line for `job`."""
    if job not in JOBS:
        raise InputError(f"unknown job {job!r}; one of: {', '.join(JOBS)}")
    job_file = _package_dir("corpusclean.jobs") / f"{JOBS[job]}.py"
    cmd = [spark_submit_path(), "--master", master, "--py-files", str(py_zip)]
    if properties:
        if not Path(properties).is_file():
            raise InputError(f"properties file {properties} does not exist")
        cmd += ["--properties-file", properties]
    # Executors must use an interpreter with the package's dependencies (pyarrow, numpy).
    python = os.environ.get("PYSPARK_PYTHON", sys.executable)
    cmd += [
        "--conf",
        f"spark.pyspark.python={python}",
        "--conf",
        f"spark.pyspark.driver.python={python}",
    ]
    for item in confs:
        if "=" not in item:
            raise InputError(f"--conf {item!r}: expected KEY=VALUE")
        cmd += ["--conf", item]
    return [*cmd, str(job_file), *job_args]


def main(argv: Sequence[str] | None = None) -> int:
    """`corpusclean submit --master URL [--properties-file F] JOB ARGS...`."""
    parser = new_parser(
        JOB, "spark-submit a corpusclean job to a cluster with the package attached."
    )
    parser.add_argument("--master", help="spark://HOST:PORT, yarn, k8s://..., local[*]")
    parser.add_argument(
        "--properties-file", help="Spark properties (e.g. conf/spark/cluster.properties)"
    )
    parser.add_argument(
        "--conf", action="append", default=[], metavar="KEY=VALUE", help="passed to spark-submit"
    )
    parser.add_argument("--py-zip", help="write the package zip here (alone: build it and exit)")
    parser.add_argument("--dry-run", action="store_true", help="print the command, do not run it")
    parser.add_argument("job", nargs="?", choices=sorted(JOBS), help="the job to run")
    parser.add_argument("args", nargs=argparse.REMAINDER, help="the job's own arguments")

    def body(args: argparse.Namespace) -> int:
        if args.job is None:
            if args.py_zip:
                print(build_zip(Path(args.py_zip)))
                return 0
            parser.error("a JOB is required")
        if not args.master:
            parser.error("--master is required")
        with tempfile.TemporaryDirectory(prefix="corpusclean-submit-") as tmp:
            py_zip = Path(args.py_zip) if args.py_zip else Path(tmp) / "corpusclean.zip"
            build_zip(py_zip)
            cmd = build_command(
                args.master, args.job, list(args.args), py_zip, args.properties_file, args.conf
            )
            if args.dry_run:
                print(" ".join(cmd))
                return 0
            return subprocess.call(cmd)

    return run_job(JOB, parser, body, argv)


if __name__ == "__main__":
    sys.exit(main())
