"""Seed 03: one dataflow (load A and B tiles -> multiply-accumulate -> ReLU -> store), four schedules.

C = relu(A @ B), fp16 in and out, fp32 accumulation. `v1`, `v2` and `v3` each differ from
`v0_baseline` only in their schedule annotation lines; this family's check counts those lines
from this file's source and compares the dataflow of the four, so keep everything else in the
four bodies identical.
"""

from collections.abc import Sequence

import tilelang
import tilelang.language as T

from tilelang_golden.analysis import dataflow, source_lines_changed
from tilelang_golden.family import CaseFacts, Claim, Family, TimingTwin, Variant
from kernels._gemm import TOLERANCE, float32_matmul, gemm_inputs, gemm_work, torch_matmul_relu


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


def v4_tuned(M, N, K, block_M=128, block_N=128, block_K=32, threads=128, panel_size=10):
    @T.prim_func
    def gemm_relu(A: T.Tensor((M, K), "float16"), B: T.Tensor((K, N), "float16"), C: T.Tensor((M, N), "float16")):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=threads) as (bx, by):
            A_s = T.alloc_shared((block_M, block_K), "float16")
            B_s = T.alloc_shared((block_K, block_N), "float16")
            C_l = T.alloc_fragment((block_M, block_N), "float32")
            C_s = T.alloc_shared((block_M, block_N), "float16")
            T.use_swizzle(panel_size=panel_size, enable=panel_size > 0)
            T.clear(C_l)
            for k in T.Pipelined(T.ceildiv(K, block_K), num_stages=3):
                T.copy(A[by * block_M, k * block_K], A_s)
                T.copy(B[k * block_K, bx * block_N], B_s)
                T.gemm(A_s, B_s, C_l)
            for i, j in T.Parallel(block_M, block_N):
                C_l[i, j] = T.max(C_l[i, j], 0)
            T.copy(C_l, C_s)
            T.copy(C_s, C[by * block_M, bx * block_N])

    return gemm_relu


BASELINE = "v0_baseline"

# variant name -> (kernel, schedule dimension it changes, lines the seed's table says it changes)
SCHEDULES = {
    "v0_baseline": (v0_baseline, None, 0),
    "v1_warp_policy": (v1_warp_policy, "thread binding", 1),
    "v2_swizzled_layout": (v2_swizzled_layout, "layout", 3),
    "v3_manual_pipeline": (v3_manual_pipeline, "pipeline", 1),
}

# Beyond the seed: tuned on the H200 one change at a time (docs/gpu.md, "A GEMM+ReLU schedule
# against cuBLAS + ReLU"); tiles and threads are parameters of the same body.
TUNED = "v4_tuned"
TUNED_PARAMS = {"block_N": 256, "block_K": 64, "threads": 256}
# Seed 03 says a schedule is one to three annotation lines. v4_tuned is the named exception: it
# stacks two schedule changes written in code, block rasterization (1 line) and the ReLU'd tile
# staged through shared memory before its store (3 lines: a buffer, and the store as two copies).
TUNED_LINES = 4


def unstaged(flow: list[tuple[str, ...]]) -> list[tuple[str, ...]]:
    """The dataflow with a copy staged through a buffer (src -> S, S -> dst) folded into src -> dst."""
    folded: list[tuple[str, ...]] = []
    for step in flow:
        last = folded[-1] if folded else None
        if last and step[0] == last[0] == "tl.tileop.copy" and len(step) == len(last) == 3 and step[1] == last[2]:
            folded[-1] = (step[0], last[1], step[2])
        else:
            folded.append(step)
    return folded


def check_schedules(cases: Sequence[CaseFacts]) -> list[Claim]:
    """The seed's table: each variant changes its annotation lines only, and all share one dataflow;
    the tuned variant, the named exception, changes its own count of lines and only stages its store."""
    problem = cases[0].params
    shape = {dim: problem[dim] for dim in FAMILY.shape}
    base_kernel = SCHEDULES[BASELINE][0]
    base_flow = dataflow(base_kernel(**shape))
    claims = []
    for name, (kernel, dimension, seed_lines) in list(SCHEDULES.items())[1:]:
        lines = source_lines_changed(base_kernel, kernel)
        claims.append(
            Claim(
                f"{name} ({dimension}) changes {seed_lines} source line(s) of {BASELINE}",
                lines == seed_lines,
                f"{lines} line(s) differ",
            )
        )
        same = dataflow(kernel(**shape)) == base_flow
        claims.append(Claim(f"{name} has the dataflow of {BASELINE}", same, "same" if same else "different"))
    lines = source_lines_changed(base_kernel, v4_tuned)
    claims.append(
        Claim(
            f"{TUNED} (rasterization, staged epilogue) changes {TUNED_LINES} source lines of {BASELINE}, "
            "the named exception to the seed's one to three",
            lines == TUNED_LINES,
            f"{lines} line(s) differ",
            why="two schedule changes written in code: block rasterization (1 line) and the ReLU'd tile "
            "staged through shared memory before its store (3 lines); tiles and threads are parameters",
        )
    )
    same = unstaged(dataflow(v4_tuned(**shape, **TUNED_PARAMS))) == dataflow(base_kernel(**shape, **TUNED_PARAMS))
    claims.append(
        Claim(
            f"{TUNED} has the dataflow of {BASELINE} at its tile sizes, once its staged store is folded",
            same,
            "same" if same else "different",
        )
    )
    return claims


def relu_reference(p, a, b):
    import torch

    return torch.relu(float32_matmul(a, b))


FAMILY = Family(
    name="gemm_relu_schedules",
    shape={"M": 8192, "N": 8192, "K": 8192},
    sanitize_shape={"M": 256, "N": 512, "K": 512},
    variants=[
        Variant(name, kernel, compare_with=None if name == BASELINE else BASELINE)
        for name, (kernel, _dimension, _seed_lines) in SCHEDULES.items()
    ]
    + [Variant(TUNED, v4_tuned, TUNED_PARAMS, compare_with=BASELINE)],
    inputs=gemm_inputs,
    outputs=[2],
    reference=relu_reference,
    tolerance=TOLERANCE,
    speed_reference=torch_matmul_relu,
    speed_reference_label="torch.relu(torch.matmul(A, B))",
    work=gemm_work,
    checks=check_schedules,
    # Timing twin 8192 -> 9728: +18.75 % work in every tile, rows still 1 KiB-aligned. At 8704 (+6.25 %) it
    # took 8-10 % more time on the H200: v0 has no block rasterization, and the rasterized v4_tuned took
    # 6.0 % more for the same K (docs/gpu.md); the benchmark needs it beyond the baseline gate's 10 %.
    timing_twin=TimingTwin(BASELINE, "K", 9728),
)
