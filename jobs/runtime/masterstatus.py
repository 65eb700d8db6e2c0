"""What a standalone master offers, compared with what a job asks for, before submitting.

On a standalone cluster an application whose executors fit on no worker waits forever ("Initial
job has not accepted any resources"). The master's web UI serves its state as JSON (`/json/`:
alive workers with their free cores and memory), so `submit` reads it first and says in one line
when nothing can fit, instead of leaving the user at a silent prompt.
"""

from __future__ import annotations

import json
import re
import urllib.error
import urllib.request
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlparse

from corpusclean.errors import InputError

_SIZE_RE = re.compile(r"^\s*(\d+)\s*([kmgtp]?)b?\s*$", re.IGNORECASE)
_MB = {"": 1.0, "k": 1 / 1024, "m": 1.0, "g": 1024.0, "t": 1024.0**2, "p": 1024.0**3}


def size_mb(value: str) -> int:
    """A Spark memory string (`4g`, `512m`, `2048`: MiB when bare) in MiB."""
    m = _SIZE_RE.match(value)
    if m is None:
        raise InputError(f"{value!r} is not a memory size (512m, 4g)")
    return int(int(m.group(1)) * _MB[m.group(2).lower()])


@dataclass(frozen=True)
class Ask:
    """What each executor of the job needs from a worker."""

    memory_mb: int
    cores: int | None  # None: standalone gives an executor every free core of its worker

    @classmethod
    def from_settings(cls, settings: dict[str, str]) -> Ask:
        """The ask under Spark's defaults (1g executors) and the job's settings."""
        cores = settings.get("spark.executor.cores")
        return cls(
            size_mb(settings.get("spark.executor.memory", "1g")), int(cores) if cores else None
        )


def ui_url(master: str, explicit: str | None) -> str | None:
    """The web UI of a `spark://HOST:PORT` master (port 8080 unless given); None otherwise."""
    if explicit:
        return explicit.rstrip("/")
    if not master.startswith("spark://"):
        return None
    host = urlparse(master.split(",")[0]).hostname
    return f"http://{host}:8080" if host else None


def fetch_status(url: str, timeout: float = 3.0) -> dict[str, Any]:
    """The master's `/json/` state; raises OSError when it cannot be read."""
    with urllib.request.urlopen(f"{url}/json/", timeout=timeout) as resp:
        return json.loads(resp.read().decode("utf-8"))


def check_fit(status: dict[str, Any], ask: Ask, master: str) -> str:
    """One line saying what fits; raises InputError when no alive worker can hold an executor."""
    alive = [w for w in status.get("workers", []) if w.get("state") == "ALIVE"]
    if not alive:
        raise InputError(
            f"master {master} has no alive workers; start a worker "
            f"(spark-class org.apache.spark.deploy.worker.Worker {master}) and submit again"
        )
    need_cores = ask.cores or 1
    fits = [
        w
        for w in alive
        if int(w.get("memoryfree", 0)) >= ask.memory_mb and int(w.get("coresfree", 0)) >= need_cores
    ]
    best_mem = max(int(w.get("memoryfree", 0)) for w in alive)
    best_cores = max(int(w.get("coresfree", 0)) for w in alive)
    if not fits:
        raise InputError(
            f"the job asks for executors of {ask.memory_mb} MiB and {need_cores} core(s), but no "
            f"alive worker of {master} has that free (the most: {best_mem} MiB, {best_cores} "
            f"cores); pass --conf spark.executor.memory={max(best_mem, 1)}m or less, or free "
            "the workers, instead of waiting forever for resources"
        )
    cores = sum(int(w.get("coresfree", 0)) for w in fits)
    return (
        f"master {master}: {len(alive)} alive worker(s); executors of {ask.memory_mb} MiB fit "
        f"on {len(fits)} ({cores} free cores)"
    )


def preflight(master: str, ui: str | None, settings: dict[str, str]) -> str:
    """Compare the ask with the master's offer; a line for the log (or why it was not checked)."""
    url = ui_url(master, ui)
    if url is None:
        return f"master {master}: resources are not checked before submitting (not standalone)"
    try:
        status = fetch_status(url)
    except (OSError, urllib.error.URLError, ValueError) as exc:
        return f"cannot read the master's state at {url}/json/ ({exc}); resources not checked"
    return check_fit(status, Ask.from_settings(settings), master)
