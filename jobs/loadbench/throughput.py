"""How fast a training run consumes data, and whether a measured loader keeps up.

The compute of a dense transformer's training step is about 6 FLOPs per parameter per token
(2 forward, 4 backward), so a run of `gpus` accelerators of peak `P` FLOP/s at utilisation
`mfu` on a model of `N` parameters processes

    tokens/s = gpus * mfu * P / (6 * N)

and reads `tokens/s * bytes_per_token` bytes of text per second. `headroom` is what a loader
delivers divided by that; below 1 the GPUs wait for data. Pure arithmetic, no I/O.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from typing import Any

# Peak dense BF16 tensor throughput per accelerator, TFLOPS, from the vendors' data sheets
# (the sheets' headline figures are often "with sparsity", exactly twice these).
GPU_PEAK_BF16_TFLOPS: dict[str, float] = {
    "A100": 312.0,  # A100 SXM4 and PCIe, 40 and 80 GB (624 with sparsity)
    "A800": 312.0,
    "A10": 125.0,
    "L4": 121.0,  # 242 with sparsity
    "L40": 181.0,  # 362 with sparsity
    "L40S": 362.0,  # 733 with sparsity
    "RTX-4090": 165.0,  # Ada whitepaper: FP16/BF16 with FP32 accumulate, 165.2
    "H100-SXM": 989.0,  # 1,979 with sparsity
    "H100-PCIE": 756.0,  # 1,513 with sparsity
    "H100-NVL": 835.0,  # 1,671 with sparsity
    "H800": 989.0,
    "H20": 148.0,
    "H200": 989.0,  # H200 SXM; 1,979 with sparsity
    "H200-NVL": 835.0,
    "B200": 2250.0,  # HGX B200: 36 PFLOPS sparse for 8 GPUs
    "GB200": 2500.0,  # GB200 NVL72: 360 PFLOPS sparse for 72 GPUs
    "MI250X": 383.0,
    "MI300X": 1307.0,  # 1,307.4; 2,614.9 with sparsity
    "MI325X": 1307.0,
    "TPU-V4": 275.0,
    "TPU-V5E": 197.0,
    "TPU-V5P": 459.0,
}

_GPU_ALIASES = {
    "H100": "H100-SXM",
    "H100-SXM5": "H100-SXM",
    "H200-SXM": "H200",
    "A100-SXM": "A100",
    "A100-SXM4": "A100",
    "A100-PCIE": "A100",
    "A100-40GB": "A100",
    "A100-80GB": "A100",
    "4090": "RTX-4090",
    "GEFORCE-RTX-4090": "RTX-4090",
    "B200-SXM": "B200",
}

FLOPS_PER_PARAM_TOKEN = 6.0

# Bytes of UTF-8 per token of a modern BPE tokenizer (cl100k / Llama-3 class), by script:
# English prose averages about 4 characters (bytes) per token; a CJK character is about one
# token and a bit (3 bytes each, so ~2.5 bytes per token); other scripts (Cyrillic, Greek,
# Arabic: 2 bytes per character) come out near 2.5 characters per token.
ASCII_BYTES_PER_TOKEN = 4.0
CJK_TOKENS_PER_CHAR = 1.2
OTHER_TOKENS_PER_CHAR = 0.4

_CJK = re.compile(
    "[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uac00-\ud7af\U00020000-\U0002ffff]"
)
_NON_ASCII = re.compile("[^\x00-\x7f]")


def normalize_gpu(name: str) -> str:
    """The table key for a GPU name: `h100 sxm` -> `H100-SXM`, `RTX 4090` -> `RTX-4090`."""
    key = re.sub(r"[\s_]+", "-", name.strip().upper())
    for vendor in ("NVIDIA-", "AMD-", "INSTINCT-", "GOOGLE-"):
        if key.startswith(vendor):
            key = key[len(vendor) :]
    return _GPU_ALIASES.get(key, key)


def peak_tflops(gpu: str) -> float:
    """Peak dense BF16 TFLOPS of a GPU named in the table; `ValueError` names the known ones."""
    key = normalize_gpu(gpu)
    if key not in GPU_PEAK_BF16_TFLOPS:
        known = ", ".join(sorted(GPU_PEAK_BF16_TFLOPS))
        raise ValueError(f"unknown GPU {gpu!r}: known are {known}; or give its peak TFLOPS")
    return GPU_PEAK_BF16_TFLOPS[key]


def tokens_per_second(gpus: int, mfu: float, peak_tflops_per_gpu: float, params: float) -> float:
    """Training tokens consumed per second by the whole run: gpus*mfu*peak / (6*params)."""
    if params <= 0:
        raise ValueError("params must be positive")
    return gpus * mfu * peak_tflops_per_gpu * 1e12 / (FLOPS_PER_PARAM_TOKEN * params)


def mfu_from_tokens(tokens_s: float, gpus: int, peak_tflops_per_gpu: float, params: float) -> float:
    """The model FLOPs utilisation a run achieves when it processes `tokens_s` tokens/s."""
    return tokens_s * FLOPS_PER_PARAM_TOKEN * params / (gpus * peak_tflops_per_gpu * 1e12)


def required_bytes_per_second(tokens_s: float, bytes_per_token: float) -> float:
    """Bytes of text per second a run consuming `tokens_s` tokens/s reads."""
    return tokens_s * bytes_per_token


def headroom(loader_bytes_s: float, required_bytes_s: float) -> float:
    """Loader rate over the required rate: >= 1 keeps up, < 1 starves the GPUs."""
    if required_bytes_s <= 0:
        return math.inf
    return loader_bytes_s / required_bytes_s


def estimate_tokens(text: str) -> float:
    """Token count of `text` by the byte-level heuristic above (no tokenizer needed)."""
    non_ascii = len(_NON_ASCII.findall(text))
    cjk = len(_CJK.findall(text))
    ascii_chars = len(text) - non_ascii
    return (
        ascii_chars / ASCII_BYTES_PER_TOKEN
        + cjk * CJK_TOKENS_PER_CHAR
        + (non_ascii - cjk) * OTHER_TOKENS_PER_CHAR
    )


def estimate_bytes_per_token(texts: Iterable[str]) -> float | None:
    """UTF-8 bytes per token over `texts` by the heuristic; None when there is no text."""
    total_bytes = 0
    total_tokens = 0.0
    for text in texts:
        total_bytes += len(text.encode("utf-8"))
        total_tokens += estimate_tokens(text)
    if total_tokens <= 0:
        return None
    return total_bytes / total_tokens


@dataclass(frozen=True)
class Consumption:
    """The data rate a planned training run needs."""

    gpus: int
    gpu: str
    peak_tflops_per_gpu: float
    params: float
    mfu: float
    seq_len: int
    bytes_per_token: float
    gpus_per_node: int
    tokens_s: float
    tokens_s_per_gpu: float
    sequences_s: float
    required_bytes_s: float
    nodes: int
    required_bytes_s_per_node: float

    def to_dict(self) -> dict[str, Any]:
        """The fields as a JSON-ready dict."""
        return asdict(self)


def plan_consumption(
    *,
    gpus: int,
    gpu: str,
    peak_tflops_per_gpu: float,
    params: float,
    mfu: float,
    seq_len: int,
    bytes_per_token: float,
    gpus_per_node: int = 8,
) -> Consumption:
    """Tokens, sequences and bytes per second that the run consumes, in total and per node."""
    tokens_s = tokens_per_second(gpus, mfu, peak_tflops_per_gpu, params)
    required = required_bytes_per_second(tokens_s, bytes_per_token)
    per_node = min(gpus_per_node, gpus)
    nodes = math.ceil(gpus / per_node)
    return Consumption(
        gpus=gpus,
        gpu=gpu,
        peak_tflops_per_gpu=peak_tflops_per_gpu,
        params=params,
        mfu=mfu,
        seq_len=seq_len,
        bytes_per_token=bytes_per_token,
        gpus_per_node=per_node,
        tokens_s=tokens_s,
        tokens_s_per_gpu=tokens_s / gpus,
        sequences_s=tokens_s / seq_len,
        required_bytes_s=required,
        nodes=nodes,
        required_bytes_s_per_node=required * per_node / gpus,
    )


def format_count(value: float) -> str:
    """`70e9` -> `70B`, `1.3e9` -> `1.3B`, `125e6` -> `125M`."""
    for scale, suffix in ((1e12, "T"), (1e9, "B"), (1e6, "M"), (1e3, "K")):
        if abs(value) >= scale:
            return f"{value / scale:.3g}{suffix}"
    return f"{value:.3g}"


def format_rate(bytes_s: float) -> str:
    """A byte rate for people: `3.9 MB/s`, `1.2 GB/s`."""
    for scale, unit in ((1e12, "TB/s"), (1e9, "GB/s"), (1e6, "MB/s"), (1e3, "kB/s")):
        if bytes_s >= scale:
            return f"{bytes_s / scale:.3g} {unit}"
    return f"{bytes_s:.3g} B/s"


def format_headroom(value: float) -> str:
    """`41x`, `1,234x`, `0.42x`."""
    if math.isinf(value):
        return "unbounded"
    if value >= 10:
        return f"{value:,.0f}x"
    return f"{value:.2g}x"


def verdict(plan: Consumption, loader_bytes_s: float, min_headroom: float = 2.0) -> str:
    """One line: OK / TIGHT / STARVED, the headroom, and the run it was judged against.

    The run-wide headroom asks whether one loader like the measured one could feed the whole
    run. When it cannot but one loader per node covers its node's share, the line says so and
    names the aggregate rate the shared storage must then serve.
    """
    run = f"{plan.gpus:,} {plan.gpu} at {plan.mfu:.0%} MFU on a {format_count(plan.params)} model"
    total = headroom(loader_bytes_s, plan.required_bytes_s)
    per_node = headroom(loader_bytes_s, plan.required_bytes_s_per_node)
    if total >= min_headroom:
        return f"OK: {format_headroom(total)} headroom for {run}"
    if plan.nodes > 1 and per_node >= min_headroom:
        return (
            f"OK per node: {format_headroom(per_node)} headroom for the {plan.gpus_per_node} "
            f"GPUs of each of {plan.nodes:,} nodes ({run}); the shared storage must serve "
            f"{format_rate(plan.required_bytes_s)} in all"
        )
    best = per_node if plan.nodes > 1 else total
    need = plan.required_bytes_s_per_node if plan.nodes > 1 else plan.required_bytes_s
    where = " per node" if plan.nodes > 1 else ""
    if best >= 1.0:
        return (
            f"TIGHT: {format_headroom(best)} headroom{where} for {run} "
            f"(under the {min_headroom:g}x margin; the loader delivers "
            f"{format_rate(loader_bytes_s)} of the {format_rate(need)} needed)"
        )
    return (
        f"STARVED: the loader delivers {format_rate(loader_bytes_s)}, "
        f"{format_headroom(best)} of the {format_rate(need)}{where} that {run} consumes"
    )


# Training tokens per parameter of a compute-optimal run (Hoffmann et al. 2022, "Chinchilla").
CHINCHILLA_TOKENS_PER_PARAM = 20.0


def plan_training(
    *,
    tokens: float,
    params: float,
    gpus: int,
    gpu: str,
    peak_tflops_per_gpu: float,
    mfu: float,
    seq_len: int,
) -> dict[str, Any]:
    """The planner's answer for a corpus of `tokens`: the model it is compute-optimal for
    (N = D / 20), and how long one pass of it takes a run of `params` on `gpus` accelerators
    of peak `peak_tflops_per_gpu` at `mfu` (6 N D / (G P m)), and the optimal model's."""
    optimal = tokens / CHINCHILLA_TOKENS_PER_PARAM
    flops = gpus * peak_tflops_per_gpu * 1e12 * mfu
    seconds = FLOPS_PER_PARAM_TOKEN * params * tokens / flops
    return {
        "tokens": tokens,
        "sequences": tokens / seq_len,
        "chinchilla_params": optimal,
        "params": params,
        "gpus": gpus,
        "gpu": gpu,
        "peak_tflops_per_gpu": peak_tflops_per_gpu,
        "mfu": mfu,
        "tokens_per_second": tokens_per_second(gpus, mfu, peak_tflops_per_gpu, params),
        "seconds": seconds,
        "days": seconds / 86400,
        "chinchilla_days": FLOPS_PER_PARAM_TOKEN * optimal * tokens / flops / 86400,
        # Passes over this corpus a compute-optimal run of `params` wants (20 N / D).
        "epochs_for_params": CHINCHILLA_TOKENS_PER_PARAM * params / tokens if tokens else None,
    }
