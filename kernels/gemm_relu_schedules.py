"""Seed 03: one dataflow (load A and B tiles -> multiply-accumulate -> ReLU -> store), four schedules.

C = relu(A @ B), fp16 in and out, fp32 accumulation. `v1`, `v2` and `v3` each differ from
`v0_baseline` only in their schedule annotation lines; this family's check counts those lines
from this file's source and compares the dataflow of the four, so keep everything else in the
four bodies identical.
"""

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import tilelang
import tilelang.language as T
from tvm import DataType, arith, tirx
from tvm.tirx.stmt_functor import pre_order_visit

from harness.family import CaseFacts, Claim, Family, Twin, Variant
from harness.static.variant_effects import dataflow, source_lines_changed
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
    # Twin 8192 -> 8704: +6.25 % work in every tile, rows still 1 KiB-aligned. On the H200 it takes
    # 8-10 % more time: v0 has no block rasterization, and the rasterized v4_tuned takes 6.0 % more
    # for the same K (docs/gpu.md); the gate's benchmark needs only that it is clearly slower.
    twin=Twin(BASELINE, "K", 8704),
)


# The swizzle criterion seed 03 quotes from TileLang's examples (their own `make_swizzle_layout`
# helper, not the library's `make_swizzled_layout`): a tile swizzles only when its last
# dimension holds 64 bytes, otherwise the helper falls back to the identity layout.
SWIZZLE_CRITERION_BITS = 512


@dataclass(frozen=True)
class ExplicitLayout:
    """A shared buffer given a layout by `T.annotate_layout`, and what that layout does to it."""

    buffer: str
    shape: list[int]
    dtype: str
    last_dim_bytes: int
    meets_swizzle_criterion: bool  # shape[-1] * dtype bits == SWIZZLE_CRITERION_BITS
    elements_moved: int  # elements the layout stores away from their row-major offset
    elements: int


def explicit_layouts(prim_func: Any) -> list[ExplicitLayout]:
    """Every buffer a kernel annotates with a layout, the layout evaluated on its whole index space."""
    blocks: list[Any] = []

    def visit(node: Any) -> bool:
        if isinstance(node, tirx.SBlock):
            blocks.append(node)
        return True

    pre_order_visit(prim_func.body, visit)
    buffers = [b for block in blocks for b in block.alloc_buffers]
    analyzer = arith.Analyzer()
    found = []
    for block in blocks:
        for var, layout in (block.annotations.get("layout_map") or {}).items():
            buffer = next(b for b in buffers if b.data.same_as(var))
            shape = [int(d) for d in buffer.shape]
            out_shape = [int(d) for d in layout.get_output_shape()]
            moved = 0
            for index in itertools.product(*(range(d) for d in shape)):
                mapped = layout.map_forward_index([tirx.IntImm("int32", i) for i in index])
                offset = 0
                for value, extent in zip((int(analyzer.simplify(e)) for e in mapped), out_shape, strict=True):
                    offset = offset * extent + value
                moved += offset != _row_major(index, shape)
            bits = DataType(str(buffer.dtype)).bits
            found.append(
                ExplicitLayout(
                    buffer=str(buffer.name),
                    shape=shape,
                    dtype=str(buffer.dtype),
                    last_dim_bytes=shape[-1] * bits // 8,
                    meets_swizzle_criterion=shape[-1] * bits == SWIZZLE_CRITERION_BITS,
                    elements_moved=moved,
                    elements=math.prod(shape),
                )
            )
    return found


def _row_major(index: tuple[int, ...], shape: list[int]) -> int:
    offset = 0
    for i, extent in zip(index, shape, strict=True):
        offset = offset * extent + i
    return offset
