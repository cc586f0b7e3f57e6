"""A Blackwell GEMM on what sm_100a has: TMA loads, mbarriers, tcgen05.mma and tensor memory.

C = A @ B in fp16 with fp32 accumulation, at the seed GEMM families' 8192^3, written as upstream's
`examples/gemm_tcgen05` write it now: an eager `@tilelang.jit` with one warp per role. Warp 0
loads A and B tiles by TMA into a ring of `num_stages` shared-memory slots; warp 1 issues
`T.tcgen05_gemm` (tcgen05.mma, both operands from shared memory) into a block_M x block_N fp32
accumulator in tensor memory (TMEM), not registers. The two hand slots to each other through
mbarriers: `loaded[s]` (the TMA's bytes arrived), `consumed[s]` (the MMAs reading slot s
completed, signalled by tcgen05.commit); `accumulated` says the last MMA is done. Then every warp
reads the accumulator out of TMEM (tcgen05.ld), and the tile goes out through shared memory by a
TMA store. Snapshotted for sm_100a only: tcgen05 and TMEM exist nowhere else, and TileLang refuses
`T.tcgen05_gemm` on another target rather than falling back.

Its checks assert, from fresh facts and CUDA, that this path was taken: a change that turned the
GEMM back into mma.sync or wgmma (as plain `T.gemm` is on sm_100a), dropped TMEM, or lost the TMA
and mbarrier hand-off would pass a regenerated snapshot but not these checks.
"""

import re
from collections.abc import Sequence

import tilelang
import tilelang.language as T

from tilelang_golden.family import CaseFacts, Claim, Family, Params, Variant, target_record, targets_where
from kernels._gemm import TOLERANCE, float32_matmul, gemm_inputs, gemm_work, torch_matmul


@tilelang.jit
def gemm_tcgen05(
    A, B, block_M: int = 128, block_N: int = 256, block_K: int = 64, num_stages: int = 4, threads: int = 256
):
    M, N, K = T.const("M, N, K")
    A: T.Tensor((M, K), T.float16)
    B: T.Tensor((K, N), T.float16)
    C = T.empty((M, N), T.float16)
    with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=threads) as (bx, by):
        A_s = T.alloc_shared((num_stages, block_M, block_K), T.float16)
        B_s = T.alloc_shared((num_stages, block_K, block_N), T.float16)
        C_tmem = T.alloc_tmem((block_M, block_N), T.float32)  # block_N columns of 128 lanes
        C_l = T.alloc_fragment((block_M, block_N), T.float32)
        C_s = T.alloc_shared((block_M, block_N), T.float16)  # lives after the K loop: reuses the ring
        loaded = T.alloc_barrier([32] * num_stages)  # the TMA warp's 32 threads arrive, plus the bytes
        consumed = T.alloc_barrier([1] * num_stages)  # one tcgen05.commit per slot
        accumulated = T.alloc_barrier(1)
        tx = T.get_thread_binding()
        k_tiles = T.ceildiv(K, block_K)
        if tx < 32:  # warp 0: TMA producer
            for k in T.serial(k_tiles):
                s = k % num_stages
                # Round r of slot s waits for the MMAs of round r - 1; round 0 passes (parity 1 of a new barrier).
                T.mbarrier_wait_parity(consumed[s], ((k // num_stages) & 1) ^ 1)
                T.tma_copy(
                    A[by * block_M : (by + 1) * block_M, k * block_K : (k + 1) * block_K],
                    A_s[s, :, :],
                    barrier=loaded[s],
                )
                T.tma_copy(
                    B[k * block_K : (k + 1) * block_K, bx * block_N : (bx + 1) * block_N],
                    B_s[s, :, :],
                    barrier=loaded[s],
                )
                T.mbarrier_arrive(loaded[s])
        elif tx < 64:  # warp 1: tcgen05.mma issuer
            for k in T.serial(k_tiles):
                s = k % num_stages
                T.mbarrier_wait_parity(loaded[s], (k // num_stages) & 1)
                T.tcgen05_gemm(A_s[s, :, :], B_s[s, :, :], C_tmem, mbar=consumed[s], clear_accum=k == 0)
            T.tcgen05_mma_arrive(accumulated)  # arrives once every MMA issued above has completed
        T.mbarrier_wait_parity(accumulated, 0)
        # All 8 warps read TMEM: warp w reads lanes 32 (w % 4) onward, warps 4-7 the second half of the
        # columns, so each thread holds 128 fp32 values (with 128 threads, 256: past the 255 registers).
        T.copy(C_tmem, C_l)
        T.copy(C_l, C_s)
        T.copy(C_s, C[by * block_M, bx * block_N])
    return C


def variant_name(p: Params) -> str:
    return f"ns{p['num_stages']}_{p['block_M']}x{p['block_N']}x{p['block_K']}"


# 128 x 256 x 64: the widest one-CTA tcgen05.mma (M 128, N 256), 48 KiB of A and B a stage. Four stages
# fill 192 KiB of sm_100a's 227 KiB per block (the output tile reuses the ring after the K loop); two
# stages halve it, whether the TMA then keeps the tensor cores fed is what the GPU would tell.
TILE = {"block_M": 128, "block_N": 256, "block_K": 64, "threads": 256}
BASELINE = {**TILE, "num_stages": 4}
SHALLOW = {**TILE, "num_stages": 2}

# -- checks: the tcgen05 path was taken ------------------------------------------------------------

TMEM_COLUMNS = 512  # per SM: 128 lanes x 512 columns of 32 bits

CLAIMS = (
    "GEMM issued as tcgen05.mma from shared memory, and no other MMA",
    "fp32 accumulator in tensor memory: allocated (block_N columns), read by tcgen05.ld, then freed",
    "A and B tiles loaded by TMA against an mbarrier transaction count",
    "mbarriers: a loaded and a consumed one per stage plus one for the accumulator, completed by tcgen05.commit",
    "shared memory fits one sm_100a block (227 KiB)",
)


def _columns(cuda: str, call: str) -> list[int]:
    """The column counts of each `tl::tmem_allocate(ptr, columns)` (or deallocate) in the CUDA."""
    return [int(n) for n in re.findall(rf"tl::{call}\([^;]*?,\s*(\d+)\);", cuda)]


def tcgen05_claims(case: CaseFacts) -> list[Claim]:
    """The five claims for one case; each reads fresh facts and the normalized CUDA."""
    facts, cuda, p = case.kernel, case.cuda, case.params
    prefix = f"{case.variant.name}/{case.target}: "
    instructions = facts["instructions"]
    mma, sync = facts["mma"], facts["sync"]
    claims = []

    tcgen05_sites = instructions.get("tl.ptx_tcgen05_mma_ss fp16", 0)
    claims.append(
        Claim(
            prefix + CLAIMS[0],
            mma["families"] == ["tcgen05"] and tcgen05_sites > 0 and "tl::tcgen05mma_ss<tl::DataType::kFloat16" in cuda,
            f"families {mma['families']}, ops {mma['ops']}, tcgen05.mma (ss, fp16) sites {tcgen05_sites}",
        )
    )

    allocated, freed = _columns(cuda, "tmem_allocate"), _columns(cuda, "tmem_deallocate")
    read_at, freed_at = cuda.find("tl::tcgen05_ld"), cuda.rfind("tl::tmem_deallocate(")
    claims.append(
        Claim(
            prefix + CLAIMS[1],
            instructions.get("tl.ptx_init_tensor_memory", 0) == 1
            and instructions.get("tl.ptx_deallocate_tensor_memory", 0) == 1
            and allocated == freed == [p["block_N"]]
            and p["block_N"] <= TMEM_COLUMNS
            and instructions.get("tl.tcgen05_ld", 0) > 0
            and 0 <= read_at < freed_at,
            f"allocated {allocated} columns, freed {freed}, tcgen05.ld sites {instructions.get('tl.tcgen05_ld', 0)}",
        )
    )

    claims.append(
        Claim(
            prefix + CLAIMS[2],
            sync["tma_loads"] >= 2 and instructions.get("tl.mbarrier_expect_tx", 0) >= 1 and "tl::tma_load(" in cuda,
            f"TMA load sites {sync['tma_loads']}, expect_tx sites {instructions.get('tl.mbarrier_expect_tx', 0)}",
        )
    )

    expected_barriers = 2 * p["num_stages"] + 1
    commits = instructions.get("tl.tcgen05_mma_arrive", 0)
    claims.append(
        Claim(
            prefix + CLAIMS[3],
            sync["mbarriers"] == expected_barriers and commits >= 2 and "tl::tcgen05_mma_arrive(" in cuda,
            f"{sync['mbarriers']} mbarriers (expected {expected_barriers}), tcgen05.commit sites {commits}",
        )
    )

    shared, limit = facts["dynamic_shared_memory_bytes"], target_record(case.target).shared_memory_per_block
    claims.append(
        Claim(
            prefix + CLAIMS[4],
            shared <= limit,
            f"{shared} bytes of dynamic shared memory (limit {limit})",
        )
    )
    return claims


def check_tcgen05(cases: Sequence[CaseFacts]) -> list[Claim]:
    return [claim for case in cases for claim in tcgen05_claims(case)]


FAMILY = Family(
    name="gemm_tcgen05",
    shape={"M": 8192, "N": 8192, "K": 8192},
    sanitize_shape={"M": 256, "N": 512, "K": 512},
    variants=[
        Variant(variant_name(BASELINE), gemm_tcgen05, BASELINE),
        Variant(variant_name(SHALLOW), gemm_tcgen05, SHALLOW, compare_with=variant_name(BASELINE)),
    ],
    inputs=gemm_inputs,
    # tcgen05.mma kind::f16 multiplies fp16 exactly and accumulates in fp32 as mma.sync and wgmma do, so
    # the seed GEMMs' tolerance and its reasons hold unchanged (kernels/_gemm.py): the output's one fp16
    # rounding and the summation order stay well inside 1e-2; a wrong tile or a missed K step is off by units.
    reference=lambda p, a, b: float32_matmul(a, b),
    tolerance=TOLERANCE,
    speed_reference=torch_matmul,
    speed_reference_label="torch.matmul(A, B)",
    work=gemm_work,
    checks=check_tcgen05,
    targets=targets_where(lambda t: t.features.tensor_memory),
)
