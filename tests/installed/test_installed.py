"""corpusclean as a user gets it: a wheel in a fresh venv, run from outside and inside a checkout.

Every other tier imports the editable install of this checkout, which hides packaging bugs: a
module missing from the wheel or the `--py-files` zip, a data file not shipped, a checkout folder
that shadows the installed package. Here the package is built into a wheel, installed with its
dependencies into a new venv, and its CLI is run the way the README says. (The cluster tier
runs its local-mode `clean` with this install from the checkout's root, where a checkout folder
named like the package would shadow the installed one in every Spark task.)
"""

from __future__ import annotations

import json
import re
import subprocess
import zipfile
from pathlib import Path

import pytest

pytestmark = [pytest.mark.installed, pytest.mark.e2e]

CHECKOUT = Path(__file__).parents[2]


def _outside(tmp_path: Path) -> Path:
    work = tmp_path / "work"
    work.mkdir()
    assert CHECKOUT not in work.resolve().parents
    return work


def test_the_wheel_holds_every_module_of_the_checkout(installed) -> None:
    names = set(zipfile.ZipFile(installed.wheel).namelist())
    expected = {f"corpusclean/{p.name}" for p in (CHECKOUT / "src/corpusclean").glob("*.py")}
    for sub in ("jobs", "pipelines", "schemas", "conf"):
        # Subpackages too (pipelines/filters/): a folder missing from pyproject's package list
        # is missing from the wheel, and every step module in it with it.
        expected |= {
            f"corpusclean/{p.relative_to(CHECKOUT).as_posix()}"
            for p in (CHECKOUT / sub).rglob("*.py")
            if "__pycache__" not in p.parts
        }
    expected |= {"corpusclean/conf/default.yaml", "corpusclean/conf/spark/cluster.properties"}
    assert expected <= names, sorted(expected - names)


def test_the_demo_runs_from_outside_the_checkout(installed, tmp_path: Path) -> None:
    work = _outside(tmp_path)
    # The compiled MinHash kernel from the first batch (a run this small would not load it):
    # the installed package compiles it in Spark's Python workers and caches it beside itself.
    kernel = {"CORPUSCLEAN_MINHASH_KERNEL": "compiled"}
    proc = installed.run("demo", "--output", "demo", "--docs", "1000", cwd=work, env=kernel)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert (work / "demo/clean/_SUCCESS").is_file()
    assert (work / "demo/shards/index.json").is_file()
    # The FineWeb preset, found by name in the installed package, ran its filters' kernels.
    web = json.loads((work / "demo/clean-web/report.json").read_text())
    assert web["config"]["stages"][1:6] == [
        "lang",
        "gopher_repetition",
        "gopher_quality",
        "c4_quality",
        "fineweb_quality",
    ]
    assert all(web["removed"][name] > 0 for name in web["config"]["stages"][1:6])
    site = next((installed.bin.parent / "lib").glob("python*/site-packages"))
    assert list((site / "corpusclean/pipelines/__pycache__").glob("minhash_jit.*.nbc"))
    # The demo's own last steps: check's suite passed on the clean output, and bench ran.
    for step in ("check", "bench"):
        assert re.search(rf"^{step}\s+ok\s", proc.stdout, re.M), proc.stdout[-2000:]
    version = subprocess.run(
        [str(installed.bin / "python"), "-m", "corpusclean", "--version"],
        cwd=work,
        capture_output=True,
        text=True,
    )
    assert version.returncode == 0 and version.stdout.strip()


def test_the_installed_registry_knows_every_shipped_stage(installed, tmp_path: Path) -> None:
    work = _outside(tmp_path)
    stages = "stages=[rules, max_line_length, doc_id, exact, near]"
    proc = installed.run("clean", "--print-config", "--set", stages, cwd=work)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "max_line_length:" in proc.stdout and "max_chars: 10000" in proc.stdout


def test_the_submit_zip_imports_every_module_on_its_own(installed, tmp_path: Path) -> None:
    work = _outside(tmp_path)
    proc = installed.run("submit", "--py-zip", "corpusclean.zip", cwd=work)
    assert proc.returncode == 0, proc.stderr[-2000:]
    wheel_modules = {
        n for n in zipfile.ZipFile(installed.wheel).namelist() if n.startswith("corpusclean/")
    }
    zip_names = set(zipfile.ZipFile(work / "corpusclean.zip").namelist())
    assert wheel_modules == zip_names
    import_all = str(CHECKOUT / "tests/import_all.py")
    check = subprocess.run(
        [str(installed.bin / "python"), "-I", import_all, str(work / "corpusclean.zip")],
        cwd=work,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert check.returncode == 0, check.stderr[-2000:]


def test_bad_input_answers_before_spark_starts(installed, tmp_path: Path) -> None:
    work = _outside(tmp_path)
    proc = installed.run("clean", "--input", "missing", "--output", "out", cwd=work, timeout=60)
    assert proc.returncode == 1
    lines = proc.stderr.strip().splitlines()
    assert lines == ["corpusclean clean: error: input missing does not exist"]
