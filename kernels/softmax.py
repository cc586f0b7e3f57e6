"""Row softmax as TileLang's current examples write it: an eager `@tilelang.jit` function.

Y[r, :] = exp(X[r, :] - max(X[r, :])) / sum(exp(X[r, :] - max(X[r, :]))), fp16 in and out with
fp32 arithmetic: attention scores of one head over a 4096-token context. Each block holds
`block_rows` whole rows in registers (X read once, Y written once); a max and a sum reduction,
exp2 with the log2(e) factor folded into one multiply. The variants differ only in `threads`.
"""

import math
from typing import Any

import tilelang
import tilelang.language as T

from tilelang_golden.family import Family, Params, Tolerance, Variant, Work

LOG2_E = math.log2(math.e)


@tilelang.jit
def softmax(X, block_rows: int = 4, threads: int = 256):
    rows, cols = T.const("rows, cols")
    X: T.Tensor((rows, cols), T.float16)
    Y = T.empty((rows, cols), T.float16)
    with T.Kernel(T.ceildiv(rows, block_rows), threads=threads) as bx:
        x = T.alloc_fragment((block_rows, cols), T.float32)
        row_max = T.alloc_fragment((block_rows,), T.float32)
        row_sum = T.alloc_fragment((block_rows,), T.float32)
        T.copy(X[bx * block_rows, 0], x)
        T.reduce_max(x, row_max, dim=1)
        for i, j in T.Parallel(block_rows, cols):
            x[i, j] = T.exp2((x[i, j] - row_max[i]) * LOG2_E)
        T.reduce_sum(x, row_sum, dim=1)
        for i, j in T.Parallel(block_rows, cols):
            x[i, j] = x[i, j] / row_sum[i]
        T.copy(x, Y[bx * block_rows, 0])
    return Y


def softmax_inputs(p: Params, generator: Any, device: str) -> list[Any]:
    """Scores with standard deviation 3, as attention logits spread: some rows are peaked, none uniform."""
    import torch

    return [(3 * torch.randn(p["rows"], p["cols"], generator=generator, device=device)).half()]


def float32_softmax(p: Params, x: Any) -> Any:
    import torch

    return torch.softmax(x.float(), dim=-1)


def torch_softmax(p: Params, x: Any) -> Any:
    import torch

    return torch.softmax(x, dim=-1)


def softmax_work(p: Params) -> Work:
    """X read and Y written once (fp16); about 5 flops an element (max, subtract-multiply, exp2, sum, divide)."""
    elements = p["rows"] * p["cols"]
    return Work(flops=5 * elements, bytes=2 * 2 * elements)


BASELINE = "threads256"

FAMILY = Family(
    name="softmax",
    # 32 heads x 1024 queries of a 4096-token context: 512 MiB moved, so it times memory.
    shape={"rows": 32768, "cols": 4096},
    sanitize_shape={"rows": 64},
    variants=[
        Variant(BASELINE, softmax, {"block_rows": 4, "threads": 256}),
        Variant("threads512", softmax, {"block_rows": 4, "threads": 512}, compare_with=BASELINE),
    ],
    inputs=softmax_inputs,
    reference=float32_softmax,
    # Outputs lie in (0, 1) and most are tiny. The kernel rounds an fp32 result to fp16 once (2^-11
    # relative) after exp2 with a folded log2(e) (a few fp32 ulps): rtol 5e-3 leaves a 10x margin.
    # atol 1e-5 covers fp16 subnormals (below 6e-5 the spacing is 6e-8) and fp32 summation order.
    # A softmax over a wrong row, a missing max subtraction overflowing, or a dropped 1/sum is off by
    # far more; a temperature off by 1 % moves peaked rows' outputs by several percent.
    tolerance=Tolerance(atol=1e-5, rtol=5e-3),
    speed_reference=torch_softmax,
    speed_reference_label="torch.softmax(x, dim=-1)",
    work=softmax_work,
)
