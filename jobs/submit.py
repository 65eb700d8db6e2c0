"""`corpusclean submit`: run a job on a cluster through spark-submit, package attached.

spark-submit's `--py-files` takes `.zip`/`.egg`, not wheels, so the installed package is zipped
(code, suites and configs) and shipped with the job file; executors import `corpusclean` from it.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import importlib.util
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import tomllib
import zipfile
from collections.abc import Sequence
from importlib import resources
from pathlib import Path

import corpusclean
from corpusclean.errors import CorpusCleanError, InputError
from corpusclean.jobs.runtime import log
from corpusclean.jobs.runtime.atomic import replacing
from corpusclean.jobs.runtime.masterstatus import preflight
from corpusclean.jobs.runtime.runner import new_parser, run_job
from corpusclean.jobs.runtime.sparkconf import check_setting, normalise_key, parse_properties

JOB = "submit"
JOBS = {"clean": "clean", "pack": "pack", "check": "check", "bench": "bench"}
_PYCACHE = "__pycache__"
# The folder name executors unpack the environment archive under (`--archives FILE#env`).
ENV_ALIAS = "env"


def _package_dir(name: str) -> Path:
    spec = importlib.util.find_spec(name)
    if spec is None or not spec.submodule_search_locations:
        raise CorpusCleanError(f"cannot locate the installed package {name}")
    return Path(next(iter(spec.submodule_search_locations)))


def _installed_files() -> list[tuple[Path, str]]:
    """(file, name in the archive) from the installed distribution's own file list (RECORD)."""
    try:
        files = importlib.metadata.distribution("corpusclean").files or []
    except importlib.metadata.PackageNotFoundError:
        return []
    root = Path(corpusclean.__file__).resolve().parent
    out: list[tuple[Path, str]] = []
    for item in files:
        if item.parts[0] != "corpusclean" or _PYCACHE in item.parts or item.suffix == ".pyc":
            continue
        path = Path(str(item.locate())).resolve()
        # Only the copy that is imported: a stale RECORD of another environment is no list.
        if root in path.parents:
            out.append((path, item.as_posix()))
    return out


def _source_tree_files() -> list[tuple[Path, str]]:
    """The same list for a source checkout (editable install), read from its pyproject.toml."""
    root = Path(corpusclean.__file__).resolve().parents[2]
    pyproject = root / "pyproject.toml"
    if not pyproject.is_file():
        return []
    setup = tomllib.loads(pyproject.read_text("utf-8"))["tool"]["setuptools"]
    dirs: dict[str, str] = setup.get("package-dir", {})
    data: dict[str, list[str]] = setup.get("package-data", {})
    out: list[tuple[Path, str]] = []
    for package in setup["packages"]:
        base = root / dirs.get(package, package.replace(".", "/"))
        prefix = package.replace(".", "/")
        found = sorted(base.glob("*.py"))
        for pattern in data.get(package, []):
            found += sorted(base.glob(pattern))
        out += [(f, f"{prefix}/{f.relative_to(base).as_posix()}") for f in found if f.is_file()]
    return out


def package_files() -> list[tuple[Path, str]]:
    """Every file of the `corpusclean` package as installed: what a wheel of it holds."""
    files = _installed_files() or _source_tree_files()
    if not any(name == "corpusclean/__init__.py" for _, name in files):
        raise CorpusCleanError(
            "cannot list the files of the installed corpusclean package; reinstall it "
            "(pip install corpusclean)"
        )
    return sorted(set(files), key=lambda item: item[1])


def build_zip(dest: Path) -> Path:
    """Zip the installed `corpusclean` package for `--py-files`; returns the zip's path.

    Entries are sorted and dated 1980-01-01, so the same package gives the same bytes.
    """
    dest.parent.mkdir(parents=True, exist_ok=True)
    with replacing(dest) as tmp, zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED) as zf:
        for path, name in package_files():
            info = zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0))
            info.compress_type = zipfile.ZIP_DEFLATED
            info.external_attr = 0o644 << 16
            zf.writestr(info, path.read_bytes())
    return dest


def properties_path(name: str) -> Path:
    """`cluster`/`local` (the files shipped in the package) or a properties file's path."""
    if "/" not in name and not name.endswith(".properties"):
        shipped = resources.files("corpusclean.conf").joinpath("spark", f"{name}.properties")
        if shipped.is_file():
            return Path(str(shipped))
        names = sorted(
            p.name.removesuffix(".properties")
            for p in resources.files("corpusclean.conf").joinpath("spark").iterdir()
            if p.name.endswith(".properties")
        )
        raise InputError(
            f"--properties-file {name}: no such shipped properties ({', '.join(names)}) "
            "and no such file"
        )
    path = Path(name).expanduser()
    if not path.is_file():
        raise InputError(f"properties file {name} does not exist")
    return path


def build_env_archive(dest: Path) -> Path:
    """A venv-pack archive of the running environment, for executors that have only a JRE.

    pyspark's jars are left out (about 460 MB): executors run the cluster's own Spark JVM and
    need only pyspark's Python side. The archive's `bin/python` links to the base interpreter
    this venv was made from, so every node needs that Python at the same path (Spark's Python
    packaging guide's condition for venv-pack); the README says what to do otherwise.
    """
    if sys.prefix == sys.base_prefix:
        raise CorpusCleanError(
            f"--env-archive packs a virtual environment, and {sys.prefix} is not one; install "
            "corpusclean into a venv (python -m venv ENV && ENV/bin/pip install corpusclean)"
        )
    try:
        import venv_pack
    except ModuleNotFoundError as exc:
        raise CorpusCleanError("--env-archive needs venv-pack: pip install venv-pack") from exc
    dest.parent.mkdir(parents=True, exist_ok=True)
    site = Path("lib", f"python{sys.version_info[0]}.{sys.version_info[1]}", "site-packages")
    # Never imported by a job's tasks, and unpacked by the driver and by every executor of every
    # application: the packages' own test suites (about 110 MB of a dev venv's 940 MB) and pip.
    excluded = [site / "pyspark" / "jars" / "*", site / "*" / "tests" / "*", site / "pip" / "*"]
    # The temporary name keeps the `.tar.gz` ending, by which venv-pack would infer the format.
    with replacing(dest, suffix=".tar.gz") as tmp:
        try:
            venv_pack.pack(
                prefix=sys.prefix,
                output=str(tmp),
                format="tar.gz",
                compress_level=1,  # the archive is rebuilt rarely but shipped often: speed wins
                filters=[("exclude", str(pattern)) for pattern in excluded],
                force=True,
            )
        except Exception as exc:  # venv-pack's own errors (an editable install, a broken prefix)
            raise CorpusCleanError(f"cannot pack the environment {sys.prefix}: {exc}") from exc
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


# The setting that names the Python worker daemon (conf/spark/local.properties sets it).
DAEMON = "spark.python.daemon.module"


def build_command(
    master: str,
    job: str,
    job_args: list[str],
    py_zip: Path,
    properties: str | None,
    confs: Sequence[str] = (),
    env_archive: Path | None = None,
) -> list[str]:
    """The spark-submit command line for `job`; its job file lives in the installed package.

    Executors get Python one of two ways: with `env_archive`, Spark unpacks the archive as
    `./env` in each executor's folder and runs `./env/bin/python`; without it, they run this
    interpreter's path, which must exist with the dependencies on every node.
    """
    if job not in JOBS:
        raise InputError(f"unknown job {job!r}; one of: {', '.join(JOBS)}")
    job_file = _package_dir("corpusclean.jobs") / f"{JOBS[job]}.py"
    cmd = [spark_submit_path(), "--master", master, "--py-files", str(py_zip)]
    if properties:
        cmd += ["--properties-file", str(properties_path(properties))]
        if DAEMON in parse_properties(properties_path(properties).read_text("utf-8")):
            # The local properties start the workers under corpusclean.sparkdaemon, which
            # executors may not be able to import before their first task brings --py-files:
            # a submitted job keeps Spark's own daemon (a --conf below still overrides it).
            cmd += ["--conf", f"{DAEMON}=pyspark.daemon"]
    driver_python = os.environ.get("PYSPARK_PYTHON", sys.executable)
    executor_python = driver_python
    if env_archive is not None:
        cmd += ["--archives", f"{env_archive}#{ENV_ALIAS}"]
        executor_python = f"./{ENV_ALIAS}/bin/python"
    cmd += [
        "--conf",
        f"spark.pyspark.python={executor_python}",
        "--conf",
        f"spark.pyspark.driver.python={driver_python}",
    ]
    for item in confs:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise InputError(f"--conf {item!r}: expected KEY=VALUE")
        why = check_setting(normalise_key(key), value)
        if why is not None:
            raise InputError(f"--conf {why}")
        cmd += ["--conf", item]
    return [*cmd, str(job_file), *job_args]


def submitted_settings(properties: str | None, confs: Sequence[str]) -> dict[str, str]:
    """The Spark settings the submitted job runs with: the properties file, then each --conf."""
    settings: dict[str, str] = {}
    if properties:
        settings.update(parse_properties(properties_path(properties).read_text("utf-8")))
    for item in confs:
        key, _, value = item.partition("=")
        settings[normalise_key(key)] = value.strip()
    return settings


def _command(args: argparse.Namespace, py_zip: Path, archive: Path | None) -> list[str]:
    return build_command(
        args.master, args.job, list(args.args), py_zip, args.properties_file, args.conf, archive
    )


def _ensure_archive(archive: Path | None) -> None:
    if archive is None:
        return
    if archive.is_file():
        log.info(JOB, f"executors' Python: {archive} (as it is; delete it to pack it again)")
        return
    log.info(JOB, f"packing this environment ({sys.prefix}) into {archive} for the executors")
    build_env_archive(archive)
    log.info(JOB, f"packed {archive.stat().st_size / 1e6:,.0f} MB")


def build_parser() -> argparse.ArgumentParser:
    """Arguments of `corpusclean submit`."""
    parser = new_parser(
        JOB, "spark-submit a corpusclean job to a cluster with the package attached."
    )
    parser.add_argument("--master", help="spark://HOST:PORT, yarn, k8s://..., local[*]")
    parser.add_argument(
        "--properties-file",
        metavar="NAME|PATH",
        help="Spark properties: `cluster` or `local` (shipped with corpusclean) or a file",
    )
    parser.add_argument(
        "--conf", action="append", default=[], metavar="KEY=VALUE", help="passed to spark-submit"
    )
    parser.add_argument(
        "--py-zip",
        help="write the package zip here (alone: build it and exit; with --print-command: the "
        "zip the printed line names, default ./corpusclean-VERSION.zip)",
    )
    parser.add_argument(
        "--env-archive",
        metavar="PATH",
        help="ship this environment to the executors: a venv-pack archive at PATH (built from "
        "the running venv when PATH does not exist, reused when it does), passed with "
        "--archives PATH#env and spark.pyspark.python=./env/bin/python",
    )
    parser.add_argument(
        "--print-command",
        "--dry-run",
        dest="print_command",
        action="store_true",
        help="build the zip and print the complete spark-submit line instead of running it",
    )
    parser.add_argument(
        "--master-ui",
        metavar="URL",
        help="a standalone master's web UI (default http://HOST:8080), read to check that the "
        "job's executors fit on a worker before submitting",
    )
    parser.add_argument(
        "--no-resource-check",
        action="store_true",
        help="submit without comparing the job's ask with the master's free resources",
    )
    parser.add_argument("job", nargs="?", choices=sorted(JOBS), help="the job to run")
    parser.add_argument("args", nargs=argparse.REMAINDER, help="the job's own arguments")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """`corpusclean submit --master URL [--properties-file F] JOB ARGS...`."""
    parser = build_parser()

    def body(args: argparse.Namespace) -> int:
        if args.job is None:
            # Alone, --py-zip and --env-archive build what they name, for a spark-submit of
            # the user's own.
            if not (args.py_zip or args.env_archive):
                parser.error("a JOB is required")
            if args.py_zip:
                print(build_zip(Path(args.py_zip)))
            if args.env_archive:
                _ensure_archive(Path(args.env_archive).absolute())
                print(Path(args.env_archive).absolute())
            return 0
        if not args.master:
            parser.error("--master is required")
        archive = Path(args.env_archive).absolute() if args.env_archive else None
        if args.print_command:
            py_zip = Path(args.py_zip or f"corpusclean-{corpusclean.__version__}.zip").absolute()
            cmd = _command(args, py_zip, archive)
            _ensure_archive(archive)
            build_zip(py_zip)
            print(shlex.join(cmd))
            return 0
        with tempfile.TemporaryDirectory(prefix="corpusclean-submit-") as tmp:
            py_zip = Path(args.py_zip) if args.py_zip else Path(tmp) / "corpusclean.zip"
            cmd = _command(args, py_zip, archive)
            if not args.no_resource_check:
                settings = submitted_settings(args.properties_file, args.conf)
                log.info(JOB, preflight(args.master, args.master_ui, settings))
            _ensure_archive(archive)
            build_zip(py_zip)
            log.info(JOB, shlex.join(cmd))
            return subprocess.call(cmd)

    return run_job(JOB, parser, body, argv)


if __name__ == "__main__":
    sys.exit(main())
