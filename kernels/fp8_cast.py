"""Per-token fp8 quantization as TileLang's current examples write it: an eager `@tilelang.jit` function.

DeepSeek-V3's activation cast: each row of X (bf16) is cut into groups of 128 columns; per group,
scale = max(amax, 1e-4) / 448 (fp32) and X_fp8 = clamp(X / scale, -448, 448) rounded to
`float8_e4m3fn` (448 is its largest finite value). One block handles `blk_m` rows of one group:
an absolute-max reduction, a division, a clamp and one conversion to fp8 on the copy out. The
variants differ only in how many rows a block takes.
"""

from typing import Any

import tilelang
import tilelang.language as T

from tilelang_golden.family import Family, Params, Tolerance, Variant, Work

GROUP_SIZE = 128  # columns sharing one scale, as DeepSeek-V3 quantizes activations
FP8_MAX = 448.0  # largest finite float8_e4m3fn
AMAX_FLOOR = 1e-4  # an all-zero group still gets a finite scale


@tilelang.jit
def per_token_cast_to_fp8(X, blk_m: int = 8):
    M, N = T.const("M, N")
    X: T.Tensor((M, N), T.bfloat16)
    X_fp8 = T.empty((M, N), T.float8_e4m3fn)
    X_scale = T.empty((M, T.ceildiv(N, GROUP_SIZE)), T.float32)

    with T.Kernel(T.ceildiv(M, blk_m), T.ceildiv(N, GROUP_SIZE), threads=128) as (bx, by):
        y_local = T.alloc_fragment((blk_m, GROUP_SIZE), T.float32)
        y_amax_local = T.alloc_fragment((blk_m,), T.float32)
        y_s_local = T.alloc_fragment((blk_m,), T.float32)
        y_q_local = T.alloc_fragment((blk_m, GROUP_SIZE), T.float32)
        y_q_local_fp8 = T.alloc_fragment((blk_m, GROUP_SIZE), T.float8_e4m3fn)

        T.copy(X[bx * blk_m : (bx + 1) * blk_m, by * GROUP_SIZE : (by + 1) * GROUP_SIZE], y_local)
        T.reduce_absmax(y_local, y_amax_local, dim=1)
        for i in T.Parallel(blk_m):
            y_amax_local[i] = T.max(y_amax_local[i], AMAX_FLOOR)
            y_s_local[i] = y_amax_local[i] / FP8_MAX
        for i, j in T.Parallel(blk_m, GROUP_SIZE):
            y_q_local[i, j] = T.clamp(y_local[i, j] / y_s_local[i], -FP8_MAX, FP8_MAX)
        T.copy(y_q_local, y_q_local_fp8)
        for i in T.Parallel(blk_m):
            X_scale[bx * blk_m + i, by] = y_s_local[i]
        T.copy(y_q_local_fp8, X_fp8[bx * blk_m : (bx + 1) * blk_m, by * GROUP_SIZE : (by + 1) * GROUP_SIZE])

    return X_fp8, X_scale


def fp8_cast_inputs(p: Params, generator: Any, device: str) -> list[Any]:
    """Activations with a few outlier channels (x 20), as LLM activations have: some groups' scales are set by one
    large value, so most of their elements land in fp8's small binades and subnormals; never zeros."""
    import torch

    x = torch.randn(p["M"], p["N"], generator=generator, device=device)
    outliers = torch.randint(0, p["N"], (p["N"] // 256,), generator=generator, device=device)
    x[:, outliers] *= 20
    return [x.bfloat16()]


def ideal_cast(p: Params, x: Any) -> list[Any]:
    """The scaled values before rounding to fp8 (float64) and the scales: the kernel's fp8 output may be at most
    half an fp8 step away from the first, which is what rounding correctly means."""

    groups = x.double().view(p["M"], -1, GROUP_SIZE)
    scale = groups.abs().amax(dim=2).clamp(min=AMAX_FLOOR) / FP8_MAX
    scaled = (groups / scale[:, :, None]).clamp(-FP8_MAX, FP8_MAX)
    return [scaled.view(p["M"], p["N"]).float(), scale.float()]


def torch_cast(p: Params, x: Any) -> list[Any]:
    """What PyTorch users write (upstream's `ref_program`): group amax in fp32, scale, `.to(torch.float8_e4m3fn)`."""
    import torch

    groups = x.view(p["M"], -1, GROUP_SIZE)
    amax = groups.abs().float().amax(dim=2).clamp(min=AMAX_FLOOR)
    x_fp8 = (groups * (FP8_MAX / amax[:, :, None])).to(torch.float8_e4m3fn)
    return [x_fp8.view(p["M"], p["N"]), amax / FP8_MAX]


def fp8_cast_work(p: Params) -> Work:
    """X read (bf16), X_fp8 written (1 byte), one fp32 scale per group; about 4 flops an element (abs-max,
    divide, two compares of the clamp)."""
    elements = p["M"] * p["N"]
    return Work(flops=4 * elements, bytes=(2 + 1) * elements + 4 * elements // GROUP_SIZE)


BASELINE = "blk_m8"

FAMILY = Family(
    name="fp8_cast",
    # 16384 tokens of DeepSeek-V3's hidden size 7168 (56 groups a row): 350 MB moved, far past the L2.
    shape={"M": 16384, "N": 7168},
    sanitize_shape={"M": 64, "N": 1024},
    variants=[
        Variant(BASELINE, per_token_cast_to_fp8, {"blk_m": 8}),
        Variant("blk_m32", per_token_cast_to_fp8, {"blk_m": 32}),
    ],
    inputs=fp8_cast_inputs,
    reference=ideal_cast,
    tolerance=[
        # X_fp8 against the unrounded value: rounding to e4m3 (3 mantissa bits) is off by at most half a step,
        # 2^-4 of the value in a normal binade and 2^-10 among the subnormals (step 2^-9). The fp32 division
        # x / scale adds about 2^-22 relative before rounding, so a value on a rounding tie may land on either
        # side: 2^-20 of slack. e5m2 (2 mantissa bits) rounds up to 2^-3 off and fails; so does a scale off by
        # any factor that is not a power of two.
        Tolerance(atol=2**-10, rtol=2**-4 + 2**-20),
        # scale: an exact bf16 amax divided by 448 in fp32: within 2 fp32 ulps (approximate division), 1.2e-7.
        Tolerance(atol=0, rtol=1e-6),
    ],
    speed_reference=torch_cast,
    speed_reference_label="x.view(M, -1, 128): abs().float().amax(2), (x * 448 / amax).to(float8_e4m3fn)",
    work=fp8_cast_work,
)
