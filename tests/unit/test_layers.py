"""The layering the package keeps: `pipelines/` never imports `jobs/`; in `jobs/`, the rooms
(runtime/, inputs/, outputs/, ...) never import a command module, and only the commands that
run others (demo, cli) import another command."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[2] / "pipelines"
JOBS = Path(__file__).parents[2] / "jobs"
COMMANDS = sorted(p.stem for p in JOBS.glob("*.py") if p.stem != "__init__")
ROOMS = sorted(p for p in JOBS.glob("*/*.py"))
# Every module, pipelines/filters/ and any other subpackage included.
PIPELINES = sorted(ROOT.rglob("*.py"))


def _imported(path: Path) -> set[str]:
    """Every module `path` imports (`from a import b` counts as `a` and `a.b`)."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text("utf-8"))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
    return names


def _commands_imported(path: Path) -> list[str]:
    return sorted(
        name.rsplit(".", 1)[1]
        for name in _imported(path)
        if name.startswith("corpusclean.jobs.")
        and name.count(".") == 2
        and name.rsplit(".", 1)[1] in COMMANDS
    )


def test_the_walk_reaches_the_subpackages() -> None:
    assert ROOT / "filters" / "gopher_quality.py" in PIPELINES


@pytest.mark.parametrize("path", PIPELINES, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_pipelines_do_not_import_jobs(path: Path) -> None:
    jobs = sorted(n for n in _imported(path) if n.startswith(("corpusclean.jobs", "jobs")))
    assert not jobs, f"{path.relative_to(ROOT)} imports {jobs}"


@pytest.mark.parametrize("path", ROOMS, ids=lambda p: p.relative_to(JOBS).as_posix())
def test_rooms_never_import_a_command(path: Path) -> None:
    assert not _commands_imported(path), f"{path.relative_to(JOBS)} imports a command module"


@pytest.mark.parametrize("command", COMMANDS)
def test_only_demo_and_cli_import_other_commands(command: str) -> None:
    others = [c for c in _commands_imported(JOBS / f"{command}.py") if c != command]
    assert command in ("demo", "cli") or not others, f"{command} imports {others}"


def test_the_rooms_are_found() -> None:
    assert "clean" in COMMANDS and JOBS / "outputs" / "staged.py" in ROOMS
