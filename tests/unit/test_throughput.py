"""The consumption model (6ND rule), the GPU table, the bytes/token heuristic and the verdict."""

from __future__ import annotations

import math

import pytest

from corpusclean.jobs.loadbench import throughput as tp


def test_seed_example_70b_on_8_a100_at_3000_tokens_is_about_half_mfu():
    # 6 * 70e9 * 3000 = 1.26e15 FLOP/s of 8 * 312e12 = 2.496e15 peak.
    mfu = tp.mfu_from_tokens(3000, gpus=8, peak_tflops_per_gpu=312, params=70e9)
    assert mfu == pytest.approx(1.26e15 / 2.496e15)
    assert mfu == pytest.approx(0.50, abs=0.01)


def test_tokens_per_second_by_hand():
    # 1024 H100 at 40% MFU on 70B: 1024 * 0.4 * 989e12 / (6 * 70e9).
    assert tp.tokens_per_second(1024, 0.4, 989, 70e9) == pytest.approx(964_510.476, rel=1e-9)
    # 8 GPUs of 312 TFLOPS at 50% on 7B: 8 * 0.5 * 312e12 / 42e9.
    assert tp.tokens_per_second(8, 0.5, 312, 7e9) == pytest.approx(29_714.2857, rel=1e-9)


def test_mfu_and_tokens_are_inverse():
    tokens = tp.tokens_per_second(64, 0.37, 989, 13e9)
    assert tp.mfu_from_tokens(tokens, 64, 989, 13e9) == pytest.approx(0.37)


def test_tokens_per_second_rejects_nonpositive_params():
    with pytest.raises(ValueError, match="params"):
        tp.tokens_per_second(8, 0.4, 989, 0)


def test_required_bytes_and_headroom():
    required = tp.required_bytes_per_second(1_000_000, 4.0)
    assert required == 4_000_000
    assert tp.headroom(164_000_000, required) == pytest.approx(41.0)
    assert tp.headroom(1.0, 0.0) == math.inf


@pytest.mark.parametrize(
    ("name", "peak"),
    [
        ("A100", 312),
        ("a100-80gb", 312),
        ("H100", 989),
        ("H100 SXM", 989),
        ("NVIDIA H100-SXM", 989),
        ("h100_pcie", 756),
        ("H200", 989),
        ("B200", 2250),
        ("RTX 4090", 165),
        ("L40S", 362),
        ("MI300X", 1307),
        ("AMD MI300X", 1307),
    ],
)
def test_gpu_table_and_name_normalisation(name, peak):
    assert tp.peak_tflops(name) == peak


def test_unknown_gpu_names_the_known_ones():
    with pytest.raises(ValueError, match=r"unknown GPU 'V100'.*H100-SXM"):
        tp.peak_tflops("V100")


def test_plan_consumption_totals_and_per_node_share():
    plan = tp.plan_consumption(
        gpus=1024,
        gpu="H100",
        peak_tflops_per_gpu=989,
        params=70e9,
        mfu=0.4,
        seq_len=4096,
        bytes_per_token=4.0,
        gpus_per_node=8,
    )
    assert plan.tokens_s == pytest.approx(964_510.48)
    assert plan.required_bytes_s == pytest.approx(4 * 964_510.48)
    assert plan.nodes == 128
    assert plan.required_bytes_s_per_node == pytest.approx(plan.required_bytes_s / 128)
    assert plan.sequences_s == pytest.approx(plan.tokens_s / 4096)
    assert plan.tokens_s_per_gpu == pytest.approx(plan.tokens_s / 1024)
    assert plan.to_dict()["gpu"] == "H100"


def test_a_run_smaller_than_a_node_is_one_node():
    plan = tp.plan_consumption(
        gpus=4,
        gpu="A100",
        peak_tflops_per_gpu=312,
        params=7e9,
        mfu=0.4,
        seq_len=2048,
        bytes_per_token=4.0,
        gpus_per_node=8,
    )
    assert plan.nodes == 1
    assert plan.gpus_per_node == 4
    assert plan.required_bytes_s_per_node == pytest.approx(plan.required_bytes_s)


def _plan(gpus: int, gpus_per_node: int = 8):
    return tp.plan_consumption(
        gpus=gpus,
        gpu="H100",
        peak_tflops_per_gpu=989,
        params=70e9,
        mfu=0.4,
        seq_len=4096,
        bytes_per_token=4.0,
        gpus_per_node=gpus_per_node,
    )


def test_verdict_ok_line_reads_like_the_issue():
    plan = _plan(1024)
    line = tp.verdict(plan, 41 * plan.required_bytes_s)
    assert line == "OK: 41x headroom for 1,024 H100 at 40% MFU on a 70B model"


def test_verdict_starved_and_tight_on_one_node():
    plan = _plan(8)
    starved = tp.verdict(plan, 0.5 * plan.required_bytes_s)
    assert starved.startswith("STARVED: ")
    assert "0.5x" in starved and "8 H100" in starved
    tight = tp.verdict(plan, 1.5 * plan.required_bytes_s, min_headroom=2.0)
    assert tight.startswith("TIGHT: 1.5x headroom")


def test_verdict_ok_per_node_names_the_aggregate_storage_rate():
    plan = _plan(1024)  # 128 nodes
    line = tp.verdict(plan, 0.5 * plan.required_bytes_s)  # 64x one node's share
    assert line.startswith("OK per node: 64x headroom for the 8 GPUs of each of 128 nodes")
    assert tp.format_rate(plan.required_bytes_s) in line


def test_verdict_starved_per_node():
    plan = _plan(1024)
    line = tp.verdict(plan, 0.5 * plan.required_bytes_s_per_node)
    assert line.startswith("STARVED: ") and "per node" in line


def test_bytes_per_token_heuristic_by_script():
    english = "The quick brown fox jumps over the lazy dog. " * 20
    assert tp.estimate_bytes_per_token([english]) == pytest.approx(4.0)
    chinese = "数据清洗与去重是训练大模型之前必不可少的步骤" * 10
    # 3 UTF-8 bytes per character at 1.2 tokens per character.
    assert tp.estimate_bytes_per_token([chinese]) == pytest.approx(2.5)
    mixed = tp.estimate_bytes_per_token([english, chinese])
    assert 2.5 < mixed < 4.0
    assert tp.estimate_bytes_per_token([]) is None
    assert tp.estimate_bytes_per_token([""]) is None


def test_formatters():
    assert tp.format_count(70e9) == "70B"
    assert tp.format_count(1.3e12) == "1.3T"
    assert tp.format_count(125e6) == "125M"
    assert tp.format_rate(3.86e6) == "3.86 MB/s"
    assert tp.format_rate(1.5e9) == "1.5 GB/s"
    assert tp.format_headroom(1234.4) == "1,234x"
    assert tp.format_headroom(0.42) == "0.42x"
    assert tp.format_headroom(math.inf) == "unbounded"
