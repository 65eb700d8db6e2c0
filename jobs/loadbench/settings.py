"""`corpusclean bench`'s config (`train.*`, `bench.*`: conf/bench.yaml) and its size and count
parsers."""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from pydantic import BeforeValidator, Field, model_validator

from corpusclean.jobs.loadbench import throughput
from corpusclean.jobs.runtime.config import Section

JOB = "bench"

SMALL_FILES_GOAL = 5.0
READER_GOAL = 0.7

_SIZE_RE = re.compile(r"^\s*([0-9]*\.?[0-9]+(?:[eE][+-]?[0-9]+)?)\s*([A-Za-z]*)\s*$")
_BYTE_UNITS = {
    "": 1,
    "B": 1,
    "K": 1024,
    "KB": 1000,
    "KIB": 1024,
    "M": 1024**2,
    "MB": 1000**2,
    "MIB": 1024**2,
    "G": 1024**3,
    "GB": 1000**3,
    "GIB": 1024**3,
    "T": 1024**4,
    "TB": 1000**4,
    "TIB": 1024**4,
}
_COUNT_UNITS = {"": 1, "K": 1e3, "M": 1e6, "B": 1e9, "G": 1e9, "T": 1e12}


def parse_bytes(value: Any) -> int:
    """`4MiB` -> 4194304, `1GB` -> 10**9, `512` -> 512 (binary units for K/M/G/T alone)."""
    if isinstance(value, bool):
        raise ValueError("expected a size such as 512MiB")
    if isinstance(value, (int, float)):
        return int(value)
    match = _SIZE_RE.match(str(value))
    unit = match.group(2).upper() if match else None
    if match is None or unit not in _BYTE_UNITS:
        raise ValueError(f"{value!r} is not a size (use e.g. 4096, 4MiB, 1GB)")
    return int(float(match.group(1)) * _BYTE_UNITS[unit])


def parse_count(value: Any) -> float:
    """`70B` -> 7e10, `1.3T` -> 1.3e12, `125M` -> 1.25e8, `7e9` -> 7e9."""
    if isinstance(value, bool):
        raise ValueError("expected a count such as 70B")
    if isinstance(value, (int, float)):
        return float(value)
    match = _SIZE_RE.match(str(value))
    unit = match.group(2).upper() if match else None
    if match is None or unit not in _COUNT_UNITS:
        raise ValueError(f"{value!r} is not a count (use e.g. 7e9, 70B, 1.3T)")
    return float(match.group(1)) * _COUNT_UNITS[unit]


ByteSize = Annotated[int, BeforeValidator(parse_bytes)]
Count = Annotated[float, BeforeValidator(parse_count)]
Reader = Literal["tario", "tario-parallel", "webdataset"]


class TrainSection(Section):
    """The planned training run (see conf/bench.yaml for each key)."""

    gpus: int = Field(1024, ge=1)
    gpus_per_node: int = Field(8, ge=1)
    gpu: str = "H100"
    peak_tflops: float | None = Field(None, gt=0)
    params: Count = Field(70e9, gt=0)
    mfu: float = Field(0.4, gt=0.0, le=1.0)
    seq_len: int = Field(4096, ge=1)
    bytes_per_token: float | None = Field(None, gt=0)

    @model_validator(mode="after")
    def _gpu_known(self) -> TrainSection:
        if self.peak_tflops is None:
            throughput.peak_tflops(self.gpu)  # ValueError names the known GPUs
        return self


class BenchSection(Section):
    """What to measure and how (see conf/bench.yaml for each key)."""

    runs: int = Field(3, ge=1, le=100)
    max_bytes: ByteSize = Field(512 << 20, ge=1)
    block_size: ByteSize = Field(4 << 20, ge=4096)
    random_reads: int = Field(2000, ge=0)
    threads: int = Field(8, ge=1, le=256)
    readers: list[Reader] = Field(default_factory=lambda: ["tario", "tario-parallel", "webdataset"])
    workers: int = Field(0, ge=0, le=256)
    small_files: int = Field(2000, ge=0)
    scratch_dir: str | None = None
    drop_caches: bool = False
    gds: Literal["auto", "off", "require"] = "auto"
    text_exts: list[str] = Field(default_factory=lambda: ["txt", "jsonl"], min_length=1)
    token_sample_bytes: ByteSize = Field(4 << 20, ge=1)
    min_headroom: float = Field(2.0, ge=1.0)
    fail_on_starved: bool = False
    chart: bool = True
    seed: int = Field(0, ge=0)

    @model_validator(mode="after")
    def _readers_given(self) -> BenchSection:
        if not self.readers:
            raise ValueError("bench.readers must name at least one reader")
        return self


class BenchConfig(Section):
    """The resolved config of `corpusclean bench`."""

    train: TrainSection = Field(default_factory=TrainSection)
    bench: BenchSection = Field(default_factory=BenchSection)
