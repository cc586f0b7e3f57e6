"""Fact extraction against values measured independently (shared FACTS about TileLang 0.1.15)
and against the CUDA text the same lowering emitted."""

from __future__ import annotations

import re

import pytest

from harness.static.cases import Case
from harness.static.facts import extract_facts
from harness.static.lowering import lower
from kernels.gemm_num_stages import FAMILY, variant


def num_stages_case(n: int, target: str, tile=(128, 128, 32)) -> Case:
    return Case(FAMILY, variant(n, *tile), target)


# Measured by hand for the 128x128x32, 128-thread GEMM on sm_80 (stage, order, buffers, bytes,
# cp_async_wait arguments, __syncthreads() in the whole kernel).
SM80 = {
    1: ([0, 0, 1], [1, 2, 0], [128, 32], 16384, [0, 0], 3),
    2: ([0, 0, 1], [0, 1, 2], [2, 128, 32], 32768, [1, 0], 3),
    3: ([0, 0, 2], [0, 1, 2], [3, 128, 32], 49152, [2, 1, 0], 4),
    4: ([0, 0, 3], [0, 1, 2], [4, 128, 32], 65536, [3, 2, 1, 0], 5),
}


@pytest.mark.parametrize("n", sorted(SM80))
def test_sm80_facts_match_measured_values(n):
    stage, order, a_shape, smem, waits, syncs = SM80[n]
    facts = extract_facts(lower(num_stages_case(n, "sm_80")))
    (loop,) = facts["pipelines"]
    assert loop["software_pipeline_stage"] == stage
    assert loop["software_pipeline_order"] == order
    assert loop["tl_pipelined_num_stages"] == n
    assert facts["shared_buffers"]["A_s"]["shape"] == a_shape
    assert facts["dynamic_shared_memory_bytes"] == smem
    assert facts["sync"]["cp_async_wait"] == waits
    assert facts["sync"]["syncthreads_main_loop"] + facts["sync"]["syncthreads_elsewhere"] == syncs
    assert facts["mma"]["families"] == ["mma.sync"]
    assert facts["launch"] == {"grid": [64, 64, 1], "threads": [128, 1, 1]}


def test_num_stages_zero_has_no_pipeline():
    facts = extract_facts(lower(num_stages_case(0, "sm_80")))
    assert facts["pipelines"] == []
    assert facts["sync"]["cp_async_wait"] == []


@pytest.mark.parametrize("n", [2, 3])
def test_sm90_is_warp_specialized_with_tma_and_mbarriers(n):
    facts = extract_facts(lower(num_stages_case(n, "sm_90")))
    assert facts["warp_specialized"] is True
    assert facts["launch"]["threads"] == [256, 1, 1]
    assert facts["sync"]["tma_loads"] > 0
    assert facts["sync"]["mbarriers"] == 2 * n
    assert facts["sync"]["cp_async_copies"] == 0
    assert facts["sync"]["syncthreads_main_loop"] + facts["sync"]["syncthreads_elsewhere"] == 1
    assert facts["mma"]["families"] == ["wgmma"]


def _cuda_counts(cuda: str) -> dict:
    return {
        "syncthreads": cuda.count("__syncthreads()"),
        "cp_async_wait": [int(x) for x in re.findall(r"cp_async_wait<(\d+)>", cuda)],
        "cp_async_commit_groups": cuda.count("cp_async_commit()"),
        "mbarriers": sum(int(x) for x in re.findall(r"uint64_t mbarrier_mem\[(\d+)\]", cuda)),
    }


@pytest.mark.parametrize("n, target", [(0, "sm_80"), (1, "sm_80"), (4, "sm_80"), (1, "sm_90"), (4, "sm_90")])
def test_ir_facts_agree_with_cuda_text(n, target):
    lowering = lower(num_stages_case(n, target, tile=(64, 64, 32)))
    facts, text = extract_facts(lowering), _cuda_counts(lowering.cuda)
    sync = facts["sync"]
    assert sync["syncthreads_main_loop"] + sync["syncthreads_elsewhere"] == text["syncthreads"]
    assert sync["cp_async_wait"] == text["cp_async_wait"]
    assert sync["cp_async_commit_groups"] == text["cp_async_commit_groups"]
    assert sync["mbarriers"] == text["mbarriers"]


def test_steady_state_loop_is_the_k_loop_in_cuda():
    """The main-loop count equals the __syncthreads() inside the CUDA `for (int k` loop body."""
    cuda = lower(num_stages_case(3, "sm_80")).cuda
    start = cuda.index("for (int k = 0;")
    depth, end = 0, None
    for i in range(cuda.index("{", start), len(cuda)):
        depth += {"{": 1, "}": -1}.get(cuda[i], 0)
        if depth == 0:
            end = i
            break
    facts = extract_facts(lower(num_stages_case(3, "sm_80")))
    assert cuda[start:end].count("__syncthreads()") == facts["sync"]["syncthreads_main_loop"] == 2
