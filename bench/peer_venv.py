"""A peer's own virtual environment under bench/out/, created from its requirements file.

Each peer of bench/near_dedup.py (datatrove, rensa) runs in a venv of its own, so its pins
never touch the project's environment. The venv is rebuilt when its requirements file changes
(a stamp holds the text it was installed from).
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent


def ensure_venv(name: str, requirements: Path) -> Path:
    """The python of bench/out/venv-`name`, created and installed from `requirements` if missing.

    Runs under the project's interpreter: the peer's packages are only in the venv it returns.
    """
    venv = HERE / "out" / f"venv-{name}"
    python = venv / "bin" / "python"
    stamp = venv / ".installed"
    wanted = requirements.read_text()
    if python.exists() and stamp.exists() and stamp.read_text() == wanted:
        return python
    shutil.rmtree(venv, ignore_errors=True)
    steps = [
        [sys.executable, "-m", "venv", str(venv)],
        [str(python), "-m", "pip", "install", "-q", "-r", str(requirements)],
    ]
    for cmd in steps:
        done = subprocess.run(cmd, capture_output=True, text=True)
        if done.returncode != 0:
            last = (done.stderr.strip().splitlines() or ["no output"])[-1]
            raise RuntimeError(f"{name} venv: {' '.join(cmd[:4])} failed: {last}")
    stamp.write_text(wanted)
    return python
