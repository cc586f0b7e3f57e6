"""LayerNorm forward as TileLang's current examples write it: an eager `@tilelang.jit` function.

Y = (X - mean) * rstd * W + B per row, and the row statistics Mean and Rstd that a backward pass
reuses, each returned from a `T.empty` output. fp16 in and out, fp32 statistics. Each block holds
`block_rows` whole rows in registers, so X is read once; the variance is taken about the mean
(two passes over registers, no cancellation). The two statistics are two `T.reduce_sum` calls of
one kind, whose scratch buffers TileLang names in a varying order: the snapshot normalization
makes them stable (docs/nondeterminism.md). The variants differ only in the `threads` annotation.
"""

from typing import Any

import tilelang
import tilelang.language as T

from tilelang_golden.family import Family, Params, Tolerance, Variant, Work

EPS = 1e-5


@tilelang.jit
def layer_norm(X, W, B, block_rows: int = 4, threads: int = 256):
    rows, hidden = T.const("rows, hidden")
    X: T.Tensor((rows, hidden), T.float16)
    W: T.Tensor((hidden,), T.float16)
    B: T.Tensor((hidden,), T.float16)
    Y = T.empty((rows, hidden), T.float16)
    Mean = T.empty((rows,), T.float32)
    Rstd = T.empty((rows,), T.float32)
    with T.Kernel(T.ceildiv(rows, block_rows), threads=threads) as bx:
        x = T.alloc_fragment((block_rows, hidden), T.float32)
        squares = T.alloc_fragment((block_rows, hidden), T.float32)
        mean = T.alloc_fragment((block_rows,), T.float32)
        rstd = T.alloc_fragment((block_rows,), T.float32)
        T.copy(X[bx * block_rows, 0], x)
        T.reduce_sum(x, mean, dim=1)
        for i in T.Parallel(block_rows):
            mean[i] = mean[i] / hidden
        for i, j in T.Parallel(block_rows, hidden):
            squares[i, j] = (x[i, j] - mean[i]) * (x[i, j] - mean[i])
        T.reduce_sum(squares, rstd, dim=1)
        for i in T.Parallel(block_rows):
            rstd[i] = T.rsqrt(rstd[i] / hidden + EPS)
        for i, j in T.Parallel(block_rows, hidden):
            x[i, j] = (x[i, j] - mean[i]) * rstd[i] * T.Cast(T.float32, W[j]) + T.Cast(T.float32, B[j])
        T.copy(x, Y[bx * block_rows, 0])
        for i in T.Parallel(block_rows):
            Mean[bx * block_rows + i] = mean[i]
            Rstd[bx * block_rows + i] = rstd[i]
    return Y, Mean, Rstd


def layer_norm_inputs(p: Params, generator: Any, device: str) -> list[Any]:
    """X with a row offset of 0.5 (so Mean is not near zero), W near 1, B small; never zeros."""
    import torch

    x = 0.5 + torch.randn(p["rows"], p["hidden"], generator=generator, device=device, dtype=torch.float32)
    w = 1 + 0.1 * torch.randn(p["hidden"], generator=generator, device=device, dtype=torch.float32)
    b = 0.1 * torch.randn(p["hidden"], generator=generator, device=device, dtype=torch.float32)
    return [x.half(), w.half(), b.half()]


def float32_layer_norm(p: Params, x: Any, w: Any, b: Any) -> list[Any]:
    """Y, Mean and Rstd from the same fp16 values, computed in float32 (float64 for the statistics)."""
    import torch

    x64 = x.double()
    mean = x64.mean(dim=1)
    rstd = torch.rsqrt(x64.var(dim=1, unbiased=False) + EPS)
    y = (x64 - mean[:, None]) * rstd[:, None] * w.double() + b.double()
    return [y.float(), mean.float(), rstd.float()]


def torch_layer_norm(p: Params, x: Any, w: Any, b: Any) -> Any:
    """PyTorch's LayerNorm forward on the fp16 tensors, statistics included: what the kernel is timed against."""
    import torch

    return torch.native_layer_norm(x, (p["hidden"],), w, b, EPS)


def layer_norm_work(p: Params) -> Work:
    """X read and Y written once (fp16), W and B once, Mean and Rstd written (fp32); about 8 flops
    an element (sum, subtract, square, add, subtract, two multiplies, add)."""
    elements = p["rows"] * p["hidden"]
    return Work(flops=8 * elements, bytes=2 * (2 * elements + 2 * p["hidden"]) + 4 * 2 * p["rows"])


BASELINE = "threads256"

FAMILY = Family(
    name="layer_norm",
    # 32768 x 4096 (a Llama-sized hidden): 512 MiB moved, far past the L2, so it times memory.
    shape={"rows": 32768, "hidden": 4096},
    sanitize_shape={"rows": 64},
    variants=[
        Variant(BASELINE, layer_norm, {"block_rows": 4, "threads": 256}),
        Variant("threads128", layer_norm, {"block_rows": 4, "threads": 128}, compare_with=BASELINE),
    ],
    inputs=layer_norm_inputs,
    reference=float32_layer_norm,
    tolerance=[
        # Y: |Y| up to about 5; the kernel rounds an fp32 result to fp16 once and sums in another order
        # than float64, so it may land one fp16 step away: at most 0.00195 on the H200 (one step at |Y|
        # in [2, 4), 2^-10 relative at worst). atol + rtol |Y| admits 2-3 such steps at every |Y|.
        # A wrong divisor, a dropped W or B, or a missing rsqrt moves Y by 10 % or more.
        Tolerance(atol=2e-3, rtol=2e-3),
        # Mean: ~0.5, an fp32 sum of 4096 values in another order than float64's: about 1e-6 off.
        # atol 1e-4 is 50x that and still 1/16 of one input's fp16 quantum at 0.5 times 1/4096.
        Tolerance(atol=1e-4, rtol=1e-4),
        # Rstd: ~1; fp32 sums and rsqrt against float64: about 1e-6 relative. rtol 1e-4 admits it 100x
        # over and fails a variance off by 2e-4, far finer than the eps (1e-5) or a divisor error (1/4096).
        Tolerance(atol=1e-4, rtol=1e-4),
    ],
    speed_reference=torch_layer_norm,
    speed_reference_label="torch.native_layer_norm(x, (hidden,), w, b, eps)",
    work=layer_norm_work,
)
