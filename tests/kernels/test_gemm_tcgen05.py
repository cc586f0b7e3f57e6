"""The Blackwell family's checks can fail: fed the facts of a plain `T.gemm` lowered for sm_100a (mma.sync,
registers, no tensor memory), they say so; fed a ring too deep for one block's shared memory, that claim does."""

from __future__ import annotations

import dataclasses

import pytest
import tilelang
import tilelang.language as T

from kernels.gemm_tcgen05 import BASELINE, CLAIMS, FAMILY, check_tcgen05, gemm_tcgen05
from tilelang_golden.catalog.cases import Case
from tilelang_golden.family import CaseFacts, Variant


@tilelang.jit
def plain_gemm(
    A, B, block_M: int = 128, block_N: int = 256, block_K: int = 64, num_stages: int = 4, threads: int = 256
):
    """The same GEMM as TileLang's portable examples write it: `T.gemm` into a register fragment."""
    M, N, K = T.const("M, N, K")
    A: T.Tensor((M, K), T.float16)
    B: T.Tensor((K, N), T.float16)
    C = T.empty((M, N), T.float16)
    with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=threads) as (bx, by):
        A_s = T.alloc_shared((block_M, block_K), T.float16)
        B_s = T.alloc_shared((block_K, block_N), T.float16)
        C_l = T.alloc_fragment((block_M, block_N), T.float32)
        T.clear(C_l)
        for k in T.Pipelined(T.ceildiv(K, block_K), num_stages=num_stages):
            T.copy(A[by * block_M, k * block_K], A_s)
            T.copy(B[k * block_K, bx * block_N], B_s)
            T.gemm(A_s, B_s, C_l)
        T.copy(C_l, C[by * block_M, bx * block_N])
    return C


def failing(lowerings, kernel, params) -> set[str]:
    """The claims (without their case prefix) that do not hold for `kernel` lowered for sm_100a at `params`."""
    family = dataclasses.replace(FAMILY, name="gemm_tcgen05_probe", variants=[Variant("probe", kernel, params)])
    case = Case(family, family.variants[0], "sm_100a")
    produced = lowerings.produce(case)
    claims = check_tcgen05([CaseFacts(case.variant, case.target, case.params, produced.facts, produced.cuda)])
    assert [c.name.split(": ", 1)[1] for c in claims] == list(CLAIMS)
    return {c.name.split(": ", 1)[1] for c in claims if not c.holds}


def test_every_claim_holds_for_the_family(lowerings):
    assert failing(lowerings, gemm_tcgen05, BASELINE) == set()


@pytest.mark.parametrize(
    ("num_stages", "holds"),
    [
        # No pipeline: a 256-thread loop of plain loads and mma.sync, no mbarrier at all.
        (0, {CLAIMS[4]}),
        # TileLang warp-specializes plain T.gemm on sm_100a as on sm_90 (TMA producer, 2 mbarriers a stage),
        # so the TMA claim holds; the MMA is still mma.sync into registers.
        (4, {CLAIMS[2], CLAIMS[4]}),
    ],
)
def test_a_plain_t_gemm_on_sm100a_fails_the_tcgen05_claims(num_stages, holds, lowerings):
    assert failing(lowerings, plain_gemm, {**BASELINE, "num_stages": num_stages}) == set(CLAIMS) - holds


def test_a_ring_too_deep_for_one_block_fails_the_shared_memory_claim(lowerings):
    # Five 48 KiB stages: 240 KiB, past sm_100a's 227 KiB; TileLang lowers it, a launch would fail.
    assert failing(lowerings, gemm_tcgen05, {**BASELINE, "num_stages": 5}) == {CLAIMS[4]}
