"""The layering the package keeps: `pipelines/` never imports `jobs/`."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PIPELINES = sorted((Path(__file__).parents[2] / "pipelines").glob("*.py"))


def _imported(path: Path) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(path.read_text("utf-8"))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
    return names


@pytest.mark.parametrize("path", PIPELINES, ids=lambda p: p.name)
def test_pipelines_do_not_import_jobs(path: Path) -> None:
    jobs = sorted(n for n in _imported(path) if n.startswith(("corpusclean.jobs", "jobs")))
    assert not jobs, f"{path.name} imports {jobs}"
