"""Seed 01: one fp16 GEMM (fp32 accumulation), swept over `num_stages` and three tile shapes."""

from __future__ import annotations

import tilelang.language as T

from kernels import Variant

NUM_STAGES = (0, 1, 2, 3, 4, 6)
# (block_M, block_N, block_K): the seed's two shapes and a small one with a quarter of the
# 128x128x32 tile's shared memory per stage.
TILE_SHAPES = ((128, 128, 32), (128, 256, 64), (64, 64, 32))


def gemm_num_stages(M, N, K, block_M, block_N, block_K, num_stages, threads=128):
    @T.prim_func
    def gemm(A: T.Tensor((M, K), "float16"), B: T.Tensor((K, N), "float16"), C: T.Tensor((M, N), "float16")):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=threads) as (bx, by):
            A_s = T.alloc_shared((block_M, block_K), "float16")
            B_s = T.alloc_shared((block_K, block_N), "float16")
            C_l = T.alloc_fragment((block_M, block_N), "float32")
            T.clear(C_l)
            for k in T.Pipelined(T.ceildiv(K, block_K), num_stages=num_stages):
                T.copy(A[by * block_M, k * block_K], A_s)
                T.copy(B[k * block_K, bx * block_N], B_s)
                T.gemm(A_s, B_s, C_l)
            T.copy(C_l, C[by * block_M, bx * block_N])

    return gemm


def variant_name(num_stages: int, block_M: int, block_N: int, block_K: int) -> str:
    return f"ns{num_stages}_{block_M}x{block_N}x{block_K}"


def variant(num_stages: int, block_M: int, block_N: int, block_K: int) -> Variant:
    """The variant for these parameters; also builds ones outside the registered sweep (scripts)."""
    params = {"block_M": block_M, "block_N": block_N, "block_K": block_K, "num_stages": num_stages}
    return Variant("gemm_num_stages", variant_name(num_stages, block_M, block_N, block_K), gemm_num_stages, params)


VARIANTS = [variant(n, bm, bn, bk) for bm, bn, bk in TILE_SHAPES for n in NUM_STAGES]
