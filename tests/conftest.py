"""Shared fixtures: one session-scoped local[2] SparkSession for every Spark test."""

from __future__ import annotations

import atexit
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import venv
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

import pytest

# Workers must run this interpreter, the one that has corpusclean installed.
os.environ["PYSPARK_PYTHON"] = sys.executable
os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
CHECKOUT = Path(__file__).parents[1]
# Spark binds to loopback only: tests never listen on an external interface.
os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
# The quality filters' tables (pipelines/tablecache.py) go to a folder of this session's, not
# the user's cache; set before any JVM or child process starts, so that all of them inherit it.
if "CORPUSCLEAN_TABLE_CACHE" not in os.environ:
    _TABLES = tempfile.mkdtemp(prefix="corpusclean-test-tables-")
    os.environ["CORPUSCLEAN_TABLE_CACHE"] = _TABLES
    atexit.register(shutil.rmtree, _TABLES, True)


@pytest.fixture(scope="session")
def spark() -> Iterator[object]:
    """A small local SparkSession shared by all tests (jobs reuse it as the active session)."""
    from pyspark.sql import SparkSession

    session = (
        SparkSession.builder.master("local[2]")
        .appName("corpusclean-tests")
        .config("spark.sql.shuffle.partitions", "4")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.driver.memory", "2g")
        .config("spark.sql.execution.arrow.pyspark.enabled", "true")
        # As a local run's (conf/spark/local.properties): workers import the installed pyspark.
        .config("spark.python.daemon.module", "corpusclean.sparkdaemon")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


@pytest.fixture(scope="session")
def viewed_run(spark, tmp_path_factory) -> tuple[Path, Path, dict]:
    """(input, output, report.json) of a clean run whose report has every view: near
    duplicates, exact duplicates, rejected rows, `lang` and `source` (audit off)."""
    import json

    from corpusclean.jobs import clean
    from corpusclean.jobs.samples.dedup import generate

    root = tmp_path_factory.mktemp("views")
    raw = root / "raw"
    generate(raw, 2_000, seed=5)
    out = root / "out"
    args = ["--input", str(raw), "--output", str(out), "--set", "audit.enabled=false"]
    assert clean.main(args) == 0
    return raw, out, json.loads((out / "report.json").read_text())


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _wait_for_port(port: int, proc: subprocess.Popen, timeout: float = 90) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"process exited with {proc.returncode} before listening")
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.5)
    raise TimeoutError(f"nothing listens on 127.0.0.1:{port} after {timeout}s")


def _spark_class() -> str:
    import pyspark

    return str(Path(pyspark.__file__).parent / "bin" / "spark-class")


def _start(args: list[str], log: Path) -> subprocess.Popen:
    env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1", "SPARK_NO_DAEMONIZE": "1"}
    # The master and workers only schedule: the JIT's first tier is enough for them.
    env["SPARK_DAEMON_JAVA_OPTS"] = "-XX:TieredStopAtLevel=1"
    # Executors' local dirs (block manager and shuffle files, and the cached copy of each
    # fetched file: the env archive's is ~280 MB) under the test's folder: a SIGKILLed worker
    # never removes them, and in /tmp they would outlive the suite.
    local = log.parent / "local"
    local.mkdir(exist_ok=True)
    env["SPARK_LOCAL_DIRS"] = str(local)
    return subprocess.Popen(
        [_spark_class(), *args],
        stdout=log.open("w"),
        stderr=subprocess.STDOUT,
        env=env,
        start_new_session=True,  # its own process group, so teardown stops all it started
    )


def _stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


class Cluster:
    """A standalone master and workers on 127.0.0.1, each process group stopped by its pid."""

    def __init__(self, logs: Path, workers: int, cores: int, memory: str) -> None:
        self.logs = logs
        self.cores, self.memory = cores, memory
        port, ui = _free_port(), _free_port()
        self.url = f"spark://127.0.0.1:{port}"
        self.ui = f"http://127.0.0.1:{ui}"
        self.master = _start(
            [
                "org.apache.spark.deploy.master.Master",
                "--host",
                "127.0.0.1",
                "--port",
                str(port),
                "--webui-port",
                str(ui),
            ],
            logs / "master.log",
        )
        self.workers: list[subprocess.Popen | None] = [None] * workers
        # Each executor runs in WORK_DIR/APP_ID/EXECUTOR_ID of the worker that started it.
        self.work_dirs: list[Path | None] = [None] * workers
        self._started = 0
        try:
            _wait_for_port(port, self.master)
            for i in range(workers):
                self.start_worker(i)
        except BaseException:
            self.stop()
            raise

    def start_worker(self, i: int) -> None:
        """Start worker `i` (again) and wait until the master has registered it."""
        self._started += 1
        log = self.logs / f"worker-{i}-{self._started}.log"
        self.work_dirs[i] = self.logs / f"work-{i}-{self._started}"
        port = _free_port()
        proc = _start(
            [
                "org.apache.spark.deploy.worker.Worker",
                self.url,
                "--host",
                "127.0.0.1",
                "--port",
                str(port),
                "--webui-port",
                str(_free_port()),
                "--cores",
                str(self.cores),
                "--memory",
                self.memory,
                "--work-dir",
                str(self.work_dirs[i]),
            ],
            log,
        )
        self.workers[i] = proc
        _wait_for_port(port, proc)
        deadline = time.monotonic() + 60
        while "Successfully registered" not in log.read_text():
            if time.monotonic() > deadline:
                raise TimeoutError("a worker never registered with the master")
            time.sleep(0.5)

    def kill_worker(self, i: int) -> None:
        """SIGKILL worker `i` and the executors it started (one process group)."""
        proc = self.workers[i]
        if proc is not None and proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()

    def worker_of(self, app_id: str, executor_id: str) -> int | None:
        """Which worker started an application's executor."""
        for i, work in enumerate(self.work_dirs):
            if work is not None and (work / app_id / executor_id).is_dir():
                return i
        return None

    def alive_workers(self) -> int:
        """How many workers the master lists as ALIVE."""
        import json
        import urllib.request

        with urllib.request.urlopen(f"{self.ui}/json/", timeout=5) as resp:
            state = json.loads(resp.read())
        return sum(1 for w in state["workers"] if w["state"] == "ALIVE")

    def stop(self) -> None:
        """Stop every worker, then the master."""
        for proc in self.workers:
            if proc is not None:
                _stop(proc)
        _stop(self.master)


@pytest.fixture(scope="session")
def standalone_cluster(tmp_path_factory) -> Iterator[Cluster]:
    """A standalone master and two workers (1 core, 3 GB each) on 127.0.0.1."""
    cluster = Cluster(tmp_path_factory.mktemp("cluster"), workers=2, cores=1, memory="3g")
    try:
        yield cluster
    finally:
        cluster.stop()


@dataclass(frozen=True)
class Installed:
    """A fresh venv holding only a wheel of this checkout and its dependencies."""

    bin: Path
    wheel: Path

    def run(
        self, *args: str, cwd: Path, timeout: float = 600, env: dict[str, str] | None = None
    ) -> subprocess.CompletedProcess:
        """`corpusclean ARGS...` from `cwd`, with an environment that names no checkout."""
        clean_env = {
            k: v for k, v in os.environ.items() if not k.startswith(("PYSPARK_", "PYTHONPATH"))
        }
        clean_env["SPARK_LOCAL_IP"] = "127.0.0.1"
        clean_env.update(env or {})
        return subprocess.run(
            [str(self.bin / "corpusclean"), *args],
            cwd=cwd,
            env=clean_env,
            capture_output=True,
            text=True,
            timeout=timeout,
        )


def _build_installed(root: Path) -> Installed:
    """`pip install corpusclean-*.whl` of this checkout into a new venv under `root`."""
    # Built from a copy: setuptools reuses a checkout's build/ folder, which can still hold
    # modules the checkout no longer has.
    source = root / "source"
    skip = shutil.ignore_patterns(".*", "build", "dist", "*.egg-info", "out", "__pycache__")
    shutil.copytree(CHECKOUT, source, ignore=skip)
    wheels = root / "wheels"
    build = [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(wheels)]
    code, err = _pip([*build, str(source)], timeout=300)
    assert code == 0, err[-3000:]
    (wheel,) = wheels.glob("corpusclean-*.whl")
    env_dir = root / "venv"
    venv.create(env_dir, with_pip=True)
    code, err = _pip([str(env_dir / "bin" / "python"), "-m", "pip", "install", "-q", str(wheel)])
    assert code == 0, err[-3000:]
    return Installed(env_dir / "bin", wheel)


def _pip(args: list[str], timeout: float = 900) -> tuple[int, str]:
    """Run pip; the process is known to `pytest_sessionfinish`, which stops it if the session
    ends first (a background build outlives no run)."""
    proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    _Background.procs.append(proc)
    try:
        _, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        _, err = proc.communicate()
    return proc.returncode, err


class _Background:
    """The `installed` venv, built in a thread from the moment collection shows a test will
    use it: pip's install is about a minute of one core, and the tiers that run before the
    first such test (browser, client) leave the other core mostly idle."""

    thread: threading.Thread | None = None
    result: Installed | None = None
    error: BaseException | None = None
    procs: ClassVar[list[subprocess.Popen]] = []


# Tests that share a session fixture costing a minute or more are one scheduling unit under
# pytest-xdist (`make test`), so that each fixture is built in one worker only; any other test
# goes with the rest of its file, so that module fixtures are built once too. By path, as the
# scheduler sees only node ids; pytest_collection_modifyitems holds every user of such a fixture
# to its group.
_GROUPS = {
    "tests/cluster/": "installed",
    "tests/installed/": "installed",
    "tests/client/": "client",
    "tests/reference/": "reference",
    "tests/browser/": "viewed-run",
    "tests/jobs/test_report_views.py": "viewed-run",
}
_COSTLY = {
    "installed": "installed",
    "standalone_cluster": "installed",
    "client_python": "client",
    "datatrove_python": "reference",
    "viewed_run": "viewed-run",
}


def scheduling_unit(nodeid: str) -> str:
    """The scheduling unit of a test: its shared fixture's group, else its file."""
    path = nodeid.split("::")[0]
    return next((g for prefix, g in _GROUPS.items() if path.startswith(prefix)), path)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        group = scheduling_unit(item.nodeid)
        for fixture in sorted(set(getattr(item, "fixturenames", ())) & _COSTLY.keys()):
            if _COSTLY[fixture] != group:
                raise pytest.UsageError(
                    f"{item.nodeid} uses {fixture}: add its file to tests/conftest.py _GROUPS "
                    f"as {_COSTLY[fixture]!r}, so that one worker builds the fixture"
                )


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: object) -> object | None:
    """For plain `-n N` (`--dist load`): units by `scheduling_unit`, handed out in collection
    order (the costly groups' tiers come first) to whichever worker runs low. Any other
    `--dist` mode is xdist's own."""
    if config.getvalue("dist") != "load":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class Grouped(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return scheduling_unit(nodeid)

    config.option.loadscopereorder = False
    return Grouped(config, log)


def pytest_collection_finish(session: pytest.Session) -> None:
    if session.config.option.collectonly:
        return
    if hasattr(session.config, "workerinput"):
        # Every worker collects every test: the fixture builds it, in the one worker whose
        # group uses it, while the other workers run the rest.
        return
    if not any("installed" in getattr(item, "fixturenames", ()) for item in session.items):
        return
    root = session.config._tmp_path_factory.mktemp("installed")

    def build() -> None:
        try:
            _Background.result = _build_installed(root)
        except BaseException as exc:  # re-raised by the fixture, in the test that needs it
            _Background.error = exc

    _Background.thread = threading.Thread(target=build, name="installed-venv", daemon=True)
    _Background.thread.start()


def pytest_sessionfinish(session: pytest.Session) -> None:
    for proc in _Background.procs:
        if proc.poll() is None:
            proc.kill()


@pytest.fixture(scope="session")
def installed(tmp_path_factory) -> Installed:
    """The package as a user gets it: `pip install corpusclean-*.whl` into a new venv."""
    if _Background.thread is None:
        return _build_installed(tmp_path_factory.mktemp("installed"))
    _Background.thread.join()
    if _Background.error is not None:
        raise _Background.error
    assert _Background.result is not None
    return _Background.result


@pytest.fixture
def small_fs(tmp_path: Path) -> Iterator[Path]:
    """A 5 MiB tmpfs mounted at tmp_path/fs, for disk-full tests.

    Mounting needs root or CAP_SYS_ADMIN: elsewhere the tests are skipped, unless
    CORPUSCLEAN_REQUIRE_MOUNT=1 (CI sets it), where a failed mount fails them. There is no
    fallback for other users: a mount in a user namespace (`unshare -rm`) is seen only by the
    processes inside it, not by this one, which writes to the folder in-process.
    """
    path = tmp_path / "fs"
    path.mkdir()
    mount = ["mount", "-t", "tmpfs", "-o", "size=5m", "tmpfs", str(path)]
    mounted = subprocess.run(mount, capture_output=True, text=True, check=False)
    if mounted.returncode != 0:
        why = f"cannot mount a 5 MiB tmpfs here ({mounted.stderr.strip()[:200]})"
        if os.environ.get("CORPUSCLEAN_REQUIRE_MOUNT") == "1":
            pytest.fail(f"CORPUSCLEAN_REQUIRE_MOUNT=1 but {why}")
        pytest.skip(f"{why}: needs root or CAP_SYS_ADMIN")
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], check=False)


@pytest.fixture
def modes_enforced() -> list[str]:
    """A command prefix under which a child process is refused what a file's mode refuses it.

    Root's CAP_DAC_OVERRIDE and CAP_DAC_READ_SEARCH make mode bits moot, so a permission error
    cannot happen in a root run (CI's). Under root the prefix is util-linux's `setpriv` taking
    both out of the child's bounding and inheritable sets (a root exec gets back what is in
    either). The child stays uid 0, the owner of its interpreter, venv, tmp_path and HOME, but
    a root-owned folder with mode 0 is closed to it. An unprivileged uid (nobody) would have to
    reach the interpreter, which a venv made from a pyenv Python under /root (mode 0700) does
    not let it do. Not root: no prefix, the child is held to modes already.
    """
    if os.geteuid() != 0:
        return []
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        pytest.fail("running as root needs setpriv (util-linux) to drop the DAC capabilities")
    caps = "-dac_override,-dac_read_search"
    return [setpriv, f"--inh-caps={caps}", f"--bounding-set={caps}", "--"]


def _fill(folder: Path, leave: int) -> None:
    stat = os.statvfs(folder)
    (folder / "filler").write_bytes(bytes(max(0, stat.f_bavail * stat.f_frsize - leave)))


@pytest.fixture
def fill_disk() -> object:
    """`fill_disk(folder, leave)` writes `folder/filler` so that about `leave` bytes stay free
    on the folder's filesystem."""
    return _fill
