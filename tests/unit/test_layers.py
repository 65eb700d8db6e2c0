"""The layering the package keeps: `pipelines/` never imports `jobs/`."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[2] / "pipelines"
# Every module, pipelines/filters/ and any other subpackage included.
PIPELINES = sorted(ROOT.rglob("*.py"))


def _imported(path: Path) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(path.read_text("utf-8"))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
    return names


def test_the_walk_reaches_the_subpackages() -> None:
    assert ROOT / "filters" / "gopher_quality.py" in PIPELINES


@pytest.mark.parametrize("path", PIPELINES, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_pipelines_do_not_import_jobs(path: Path) -> None:
    jobs = sorted(n for n in _imported(path) if n.startswith(("corpusclean.jobs", "jobs")))
    assert not jobs, f"{path.relative_to(ROOT)} imports {jobs}"
