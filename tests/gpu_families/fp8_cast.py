"""A per-row cast to fp8 e4m3 (as TileLang's per-token cast example, one scale per row): an fp8 output.

scale[r] = max(|X[r, :]|, 1e-4) / 448, Y = clamp(X / scale, -448, 448) in float8_e4m3fn. The reference
is X / scale unrounded, in float32; the precision twin the same op rounded to fp8 by PyTorch.
"""

from typing import Any

import tilelang
import tilelang.language as T

from harness.family import Family, Params, Tolerance, Variant, Work

FP8_MAX = 448.0


@tilelang.jit
def per_row_fp8(X, block_rows: int = 4, threads: int = 256):
    rows, cols = T.const("rows, cols")
    X: T.Tensor((rows, cols), T.float16)
    Y = T.empty((rows, cols), T.float8_e4m3fn)
    S = T.empty((rows,), T.float32)
    with T.Kernel(T.ceildiv(rows, block_rows), threads=threads) as bx:
        x = T.alloc_fragment((block_rows, cols), T.float32)
        y = T.alloc_fragment((block_rows, cols), T.float8_e4m3fn)
        scale = T.alloc_fragment((block_rows,), T.float32)
        T.copy(X[bx * block_rows, 0], x)
        T.reduce_absmax(x, scale, dim=1)
        for i in T.Parallel(block_rows):
            scale[i] = T.max(scale[i], T.float32(1e-4)) / T.float32(FP8_MAX)
        for i, j in T.Parallel(block_rows, cols):
            y[i, j] = T.clamp(x[i, j] / scale[i], T.float32(-FP8_MAX), T.float32(FP8_MAX))
        T.copy(y, Y[bx * block_rows, 0])
        T.copy(scale, S[bx * block_rows])
    return Y, S


def activations(p: Params, generator: Any, device: str) -> list[Any]:
    """Rows of different magnitudes, as tokens' activations are."""
    import torch

    rows = torch.randn(p["rows"], p["cols"], generator=generator, device=device)
    return [(rows * torch.rand(p["rows"], 1, generator=generator, device=device) * 8).half()]


def row_scale(x: Any) -> Any:
    return x.float().abs().amax(dim=1).clamp(min=1e-4) / FP8_MAX


def float32_cast(p: Params, x: Any) -> Any:
    scale = row_scale(x)
    return (x.float() / scale[:, None]).clamp(-FP8_MAX, FP8_MAX), scale


def torch_cast(p: Params, x: Any) -> Any:
    import torch

    y, scale = float32_cast(p, x)
    return y.to(torch.float8_e4m3fn), scale


FAMILY = Family(
    name="fp8_cast",
    shape={"rows": 16384, "cols": 4096},
    variants=[Variant("rows4", per_row_fp8, {"block_rows": 4, "threads": 256})],
    inputs=activations,
    reference=float32_cast,
    # Y: e4m3 keeps 3 mantissa bits, so rounding to nearest is off by at most 2^-4 of the value (rtol 0.0625,
    # 0.07 for the float32 division before it); below 2^-6 the spacing is the subnormals' 2^-9 (atol 2^-10).
    # S: the same float32 max and division as the reference.
    tolerance=[Tolerance(atol=2**-10, rtol=0.07), Tolerance(atol=0, rtol=1e-6)],
    speed_reference=torch_cast,
    speed_reference_label="x / amax(|x|, rows) * 448 to float8_e4m3fn",
    work=lambda p: Work(flops=3 * p["rows"] * p["cols"], bytes=3 * p["rows"] * p["cols"] + 4 * p["rows"]),
)
