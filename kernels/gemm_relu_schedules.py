"""Seed 03: one dataflow (load A and B tiles -> multiply-accumulate -> ReLU -> store), four schedules.

C = relu(A @ B), fp16 in and out, fp32 accumulation. `v1`, `v2` and `v3` each differ from
`v0_baseline` only in their schedule annotation lines; `harness.source_diff` checks that
from this file's source, so keep everything else in the four bodies identical.
"""

from __future__ import annotations

import tilelang
import tilelang.language as T

from kernels import Variant


def v0_baseline(M, N, K, block_M=128, block_N=128, block_K=32, threads=128):
    @T.prim_func
    def gemm_relu(A: T.Tensor((M, K), "float16"), B: T.Tensor((K, N), "float16"), C: T.Tensor((M, N), "float16")):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=threads) as (bx, by):
            A_s = T.alloc_shared((block_M, block_K), "float16")
            B_s = T.alloc_shared((block_K, block_N), "float16")
            C_l = T.alloc_fragment((block_M, block_N), "float32")
            T.clear(C_l)
            for k in T.Pipelined(T.ceildiv(K, block_K), num_stages=3):
                T.copy(A[by * block_M, k * block_K], A_s)
                T.copy(B[k * block_K, bx * block_N], B_s)
                T.gemm(A_s, B_s, C_l)
            for i, j in T.Parallel(block_M, block_N):
                C_l[i, j] = T.max(C_l[i, j], 0)
            T.copy(C_l, C[by * block_M, bx * block_N])

    return gemm_relu


def v1_warp_policy(M, N, K, block_M=128, block_N=128, block_K=32, threads=128):
    @T.prim_func
    def gemm_relu(A: T.Tensor((M, K), "float16"), B: T.Tensor((K, N), "float16"), C: T.Tensor((M, N), "float16")):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=threads) as (bx, by):
            A_s = T.alloc_shared((block_M, block_K), "float16")
            B_s = T.alloc_shared((block_K, block_N), "float16")
            C_l = T.alloc_fragment((block_M, block_N), "float32")
            T.clear(C_l)
            for k in T.Pipelined(T.ceildiv(K, block_K), num_stages=3):
                T.copy(A[by * block_M, k * block_K], A_s)
                T.copy(B[k * block_K, bx * block_N], B_s)
                T.gemm(A_s, B_s, C_l, policy=T.GemmWarpPolicy.FullRow)
            for i, j in T.Parallel(block_M, block_N):
                C_l[i, j] = T.max(C_l[i, j], 0)
            T.copy(C_l, C[by * block_M, bx * block_N])

    return gemm_relu


def v2_swizzled_layout(M, N, K, block_M=128, block_N=128, block_K=32, threads=128):
    @T.prim_func
    def gemm_relu(A: T.Tensor((M, K), "float16"), B: T.Tensor((K, N), "float16"), C: T.Tensor((M, N), "float16")):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=threads) as (bx, by):
            A_s = T.alloc_shared((block_M, block_K), "float16")
            B_s = T.alloc_shared((block_K, block_N), "float16")
            C_l = T.alloc_fragment((block_M, block_N), "float32")
            T.annotate_layout(
                {A_s: tilelang.layout.make_swizzled_layout(A_s), B_s: tilelang.layout.make_swizzled_layout(B_s)}
            )
            T.clear(C_l)
            for k in T.Pipelined(T.ceildiv(K, block_K), num_stages=3):
                T.copy(A[by * block_M, k * block_K], A_s)
                T.copy(B[k * block_K, bx * block_N], B_s)
                T.gemm(A_s, B_s, C_l)
            for i, j in T.Parallel(block_M, block_N):
                C_l[i, j] = T.max(C_l[i, j], 0)
            T.copy(C_l, C[by * block_M, bx * block_N])

    return gemm_relu


def v3_manual_pipeline(M, N, K, block_M=128, block_N=128, block_K=32, threads=128):
    @T.prim_func
    def gemm_relu(A: T.Tensor((M, K), "float16"), B: T.Tensor((K, N), "float16"), C: T.Tensor((M, N), "float16")):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=threads) as (bx, by):
            A_s = T.alloc_shared((block_M, block_K), "float16")
            B_s = T.alloc_shared((block_K, block_N), "float16")
            C_l = T.alloc_fragment((block_M, block_N), "float32")
            T.clear(C_l)
            for k in T.Pipelined(T.ceildiv(K, block_K), stage=[0, 0, 1], order=[0, 1, 2]):
                T.copy(A[by * block_M, k * block_K], A_s)
                T.copy(B[k * block_K, bx * block_N], B_s)
                T.gemm(A_s, B_s, C_l)
            for i, j in T.Parallel(block_M, block_N):
                C_l[i, j] = T.max(C_l[i, j], 0)
            T.copy(C_l, C[by * block_M, bx * block_N])

    return gemm_relu


BASELINE = "v0_baseline"

# variant name -> (builder, schedule dimension it changes, lines the seed's table says it changes)
SCHEDULES = {
    "v0_baseline": (v0_baseline, None, 0),
    "v1_warp_policy": (v1_warp_policy, "thread binding", 1),
    "v2_swizzled_layout": (v2_swizzled_layout, "layout", 3),
    "v3_manual_pipeline": (v3_manual_pipeline, "pipeline", 1),
}

VARIANTS = [
    Variant("gemm_relu_schedules", name, build, params={}, reference="matmul_relu")
    for name, (build, _dimension, _seed_lines) in SCHEDULES.items()
]
