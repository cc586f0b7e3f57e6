"""An LLM linear layer: Y = X · Wᵀ in bf16 with fp32 accumulation, W stored [N, K] as nn.Linear keeps it.

The problem is Llama-3-8B's MLP up projection (hidden 4096 -> intermediate 14336) over a prefill
batch of 8192 tokens. One tile schedule, 128x256x64 with 3 stages and 256 threads: 48 KiB of X and
W tiles per stage, 144 KiB for three, within an A100's and an H200's shared memory per block (the
bf16 output tile reuses that memory after the K loop). `no_swizzle` differs from `swizzle` only in
the `T.use_swizzle` annotation (thread-block rasterization), so the static summary shows what that
annotation does to the CUDA.
"""

from typing import Any

import tilelang
import tilelang.language as T

from tilelang_golden.family import Family, Params, Tolerance, TimingTwin, Variant, Work
from kernels._gemm import float32_matmul


@tilelang.jit(out_idx=[2])
def linear_bf16(
    M: int,
    N: int,
    K: int,
    block_M: int = 128,
    block_N: int = 256,
    block_K: int = 64,
    num_stages: int = 3,
    threads: int = 256,
    swizzle: bool = True,
    panel_size: int = 10,
) -> Any:
    """Y[M, N] = X[M, K] · W[N, K]ᵀ.

    `swizzle` launches blocks in panels of `panel_size` block rows, walked column by column, so
    the blocks resident at once share W tiles and the panel's X tiles stay in L2.
    """

    @T.prim_func
    def linear(X: T.Tensor((M, K), "bfloat16"), W: T.Tensor((N, K), "bfloat16"), Y: T.Tensor((M, N), "bfloat16")):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=threads) as (bx, by):
            X_s = T.alloc_shared((block_M, block_K), "bfloat16")
            W_s = T.alloc_shared((block_N, block_K), "bfloat16")  # a [N, K] tile: K stays contiguous
            Y_l = T.alloc_fragment((block_M, block_N), "float32")
            T.use_swizzle(panel_size=panel_size, enable=swizzle)
            T.clear(Y_l)
            for k in T.Pipelined(T.ceildiv(K, block_K), num_stages=num_stages):
                T.copy(X[by * block_M, k * block_K], X_s)
                T.copy(W[bx * block_N, k * block_K], W_s)
                T.gemm(X_s, W_s, Y_l, transpose_B=True)
            # Staged through shared memory so the store is wide (16-byte stores, a TMA store on
            # sm_90); Y_s lives after the K loop, so it reuses the X and W tiles' memory.
            Y_s = T.alloc_shared((block_M, block_N), "bfloat16")
            T.copy(Y_l, Y_s)
            T.copy(Y_s, Y[by * block_M, bx * block_N])

    return linear


TILE = {"block_M": 128, "block_N": 256, "block_K": 64, "num_stages": 3, "threads": 256}


def linear_inputs(p: Params, generator: Any, device: str) -> list[Any]:
    """X standard normal, W standard normal / sqrt(K): each output has variance 1 (never zeros)."""
    import torch

    x = torch.randn(p["M"], p["K"], generator=generator, device=device, dtype=torch.float32)
    w = torch.randn(p["N"], p["K"], generator=generator, device=device, dtype=torch.float32)
    return [x.to(torch.bfloat16), (w / p["K"] ** 0.5).to(torch.bfloat16)]


def linear_reference(p: Params, x: Any, w: Any) -> Any:
    """X · Wᵀ in float32 from the same bf16 values, TF32 off so the reference is not itself approximate."""
    return float32_matmul(x, w.t())


def torch_linear(p: Params, x: Any, w: Any) -> Any:
    """cuBLAS's bf16 GEMM through torch, as a model's nn.Linear (no bias) runs it."""
    import torch

    return torch.nn.functional.linear(x, w)


def linear_work(p: Params) -> Work:
    """2MNK operations; X and W read once, Y written once, 2 bytes an element."""
    M, N, K = p["M"], p["N"], p["K"]
    return Work(flops=2 * M * N * K, bytes=2 * (M * K + N * K + M * N))


# bf16 products are exact in fp32 and both sides sum them in fp32 (only the order differs: about
# 1e-6 of a unit-variance output over K = 4096), so the difference is the kernel's one rounding
# of Y to bf16: at most 2^-8 (8-bit significand) of |Y|, which rtol = 1e-2 covers 2.5 times.
# Near zero that rounding vanishes too; atol = 1e-3 covers the summation-order error there.
# A skipped or doubled K tile moves an output by about sqrt(64 / 4096) = 0.125, far outside.
TOLERANCE = Tolerance(atol=1e-3, rtol=1e-2)

FAMILY = Family(
    name="linear_bf16",
    # Llama-3-8B MLP up projection: hidden 4096 -> intermediate 14336, 8192 tokens of prefill.
    shape={"M": 8192, "N": 14336, "K": 4096},
    sanitize_shape={"M": 256, "N": 512, "K": 512},
    variants=[
        Variant("swizzle", linear_bf16, {**TILE, "swizzle": True}),
        Variant("no_swizzle", linear_bf16, {**TILE, "swizzle": False}, compare_with="swizzle"),
    ],
    inputs=linear_inputs,
    outputs=[2],
    reference=linear_reference,
    tolerance=TOLERANCE,
    speed_reference=torch_linear,
    speed_reference_label="torch.nn.functional.linear(X, W)",
    work=linear_work,
    # Timing twin K 4096 -> 4864: +18.75 % work in every tile. Growing N instead (15104, +5.4 %) measured only
    # 3.6 % slower on the H200: whole waves of tiles over 132 SMs (28 -> 29), not the work, set the time.
    timing_twin=TimingTwin("swizzle", "K", 4864),
)
