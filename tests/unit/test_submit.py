"""`corpusclean submit`: the --py-files zip, shipped properties, the printed line, master checks."""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
import threading
import zipfile
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path

import pytest

from corpusclean.errors import InputError
from corpusclean.jobs import submit
from corpusclean.jobs.runtime.masterstatus import Ask, check_fit, preflight, size_mb

IMPORT_ALL = Path(__file__).parents[1] / "import_all.py"


def _modules_on_disk() -> set[str]:
    """Every module the package's source folders hold, by their names in the package."""
    root = Path(__file__).parents[2]
    names = {f"corpusclean.{p.stem}" for p in (root / "src/corpusclean").glob("*.py")}
    for sub in ("jobs", "pipelines", "schemas", "conf"):
        # Subpackages too (pipelines/filters/): each of their modules must be in the zip.
        for p in (root / sub).rglob("*.py"):
            if "__pycache__" not in p.parts:
                dotted = ".".join(p.relative_to(root / sub).with_suffix("").parts)
                names.add(f"corpusclean.{sub}.{dotted}")
    return {n.removesuffix(".__init__") for n in names}


def test_the_zip_holds_every_module_and_imports_alone(tmp_path: Path) -> None:
    dest = submit.build_zip(tmp_path / "corpusclean.zip")
    names = zipfile.ZipFile(dest).namelist()
    in_zip = {
        n[:-3].replace("/", ".").removesuffix(".__init__") for n in names if n.endswith(".py")
    }
    assert in_zip == _modules_on_disk()
    assert "corpusclean/_zipimport_fix.py" in names
    assert "corpusclean/conf/spark/cluster.properties" in names
    proc = subprocess.run(
        [sys.executable, "-I", str(IMPORT_ALL), str(dest)],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert int(proc.stdout.strip()) == len(in_zip)  # __main__ is counted, not imported


def test_the_zip_is_the_same_bytes_each_time(tmp_path: Path) -> None:
    a = submit.build_zip(tmp_path / "a.zip").read_bytes()
    b = submit.build_zip(tmp_path / "b.zip").read_bytes()
    assert a == b


def test_shipped_properties_are_named_without_a_path(tmp_path: Path) -> None:
    assert submit.properties_path("cluster").name == "cluster.properties"
    assert submit.properties_path("local").is_file()
    own = tmp_path / "mine.properties"
    own.write_text("spark.executor.memory 2g\n")
    assert submit.properties_path(str(own)) == own
    with pytest.raises(InputError, match="no such shipped properties"):
        submit.properties_path("clutser")
    with pytest.raises(InputError, match="does not exist"):
        submit.properties_path(str(tmp_path / "missing.properties"))


def test_submitted_settings_read_the_file_then_each_conf() -> None:
    settings = submit.submitted_settings("cluster", ["spark.executor.memory=1g"])
    assert settings["spark.executor.memory"] == "1g"
    assert settings["spark.sql.shuffle.partitions"] == "200"


def test_print_command_names_files_that_exist_after_it_returns(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    argv = ["--master", "spark://127.0.0.1:7077", "--properties-file", "cluster"]
    rc = submit.main([*argv, "--print-command", "clean", "--input", "in", "--output", "out"])
    assert rc == 0
    cmd = shlex.split(capsys.readouterr().out.strip())
    assert Path(cmd[0]).name == "spark-submit"
    py_zip = Path(cmd[cmd.index("--py-files") + 1])
    assert py_zip.is_file() and py_zip.parent == tmp_path
    assert Path(cmd[cmd.index("--properties-file") + 1]).is_file()
    job_file = Path(cmd[cmd.index("--input") - 1])
    assert job_file.name == "clean.py" and job_file.is_file()
    assert cmd[-4:] == ["--input", "in", "--output", "out"]


def test_a_bad_conf_is_refused_before_anything_is_submitted() -> None:
    with pytest.raises(InputError, match=r"spark\.executor\.memory='lots' is not a size"):
        submit.build_command(
            "spark://h:7077", "clean", [], Path("z.zip"), None, ["spark.executor.memory=lots"]
        )


def _status(*workers: tuple[int, int]) -> dict[str, object]:
    return {
        "workers": [
            {"state": "ALIVE", "coresfree": cores, "memoryfree": mem} for cores, mem in workers
        ]
        + [{"state": "DEAD", "coresfree": 64, "memoryfree": 1 << 20}]
    }


def test_size_strings() -> None:
    assert size_mb("4g") == 4096
    assert size_mb("512m") == 512
    assert size_mb("2048") == 2048
    with pytest.raises(InputError):
        size_mb("four gigs")


def test_an_executor_that_fits_no_worker_is_refused_in_one_line() -> None:
    with pytest.raises(InputError, match=r"executors of 4096 MiB .* \(the most: 3072 MiB"):
        check_fit(_status((2, 3072), (1, 1024)), Ask(4096, None), "spark://h:7077")
    with pytest.raises(InputError, match="no alive workers"):
        check_fit({"workers": []}, Ask(1024, None), "spark://h:7077")
    with pytest.raises(InputError, match="4 core"):
        check_fit(_status((2, 8192)), Ask(1024, 4), "spark://h:7077")
    line = check_fit(_status((2, 3072), (2, 8192)), Ask(4096, None), "spark://h:7077")
    assert "fit on 1" in line


@pytest.fixture
def fake_master() -> Iterator[str]:
    """A loopback HTTP server that answers /json/ like a standalone master with one 3 GB worker."""
    body = json.dumps(_status((2, 3072))).encode()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200 if self.path == "/json/" else 404)
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = HTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def test_submit_refuses_before_spark_submit_when_nothing_fits(
    fake_master: str, capsys: pytest.CaptureFixture[str]
) -> None:
    # The shipped cluster properties ask for 4g executors; the fake master's worker has 3 GB.
    rc = submit.main(
        [
            "--master",
            "spark://127.0.0.1:7077",
            "--master-ui",
            fake_master,
            "--properties-file",
            "cluster",
            "clean",
            "--input",
            "x",
            "--output",
            "y",
        ]
    )
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 1
    assert len(err) == 1 and "no alive worker of spark://127.0.0.1:7077 has that free" in err[0]
    assert "--conf spark.executor.memory=3072m" in err[0]


def test_preflight_says_when_it_cannot_read_the_master() -> None:
    line = preflight("spark://127.0.0.1:1", "http://127.0.0.1:1", {})
    assert "resources not checked" in line
    assert "not checked" in preflight("yarn", None, {})


def test_a_submitted_job_keeps_sparks_own_worker_daemon() -> None:
    """The local properties start workers under corpusclean.sparkdaemon, which executors may
    not import before --py-files reach them: a submitted job asks for Spark's default again,
    unless its own --conf names one."""

    def daemon(properties: str, confs: list[str]) -> list[str]:
        cmd = submit.build_command("local[2]", "clean", [], Path("z.zip"), properties, confs)
        return [cmd[i + 1] for i, a in enumerate(cmd) if a == "--conf" and "daemon" in cmd[i + 1]]

    assert daemon("local", []) == ["spark.python.daemon.module=pyspark.daemon"]
    assert daemon("cluster", []) == []
    mine = "spark.python.daemon.module=corpusclean.sparkdaemon"
    # spark-submit keeps the last --conf of a key.
    assert daemon("local", [mine])[-1] == mine
