"""A residual add written into its argument, X += Y, as an eager `@tilelang.jit` function.

The residual stream of a transformer layer (bf16): the kernel reads X and Y and writes the sum back
into X; it returns nothing, as upstream's split-K GEMM writes its argument C. Each block takes a
`block_M` x `block_N` tile through registers; the variants differ in the tile and the threads.
"""

from typing import Any

import tilelang
import tilelang.language as T

from tilelang_golden.family import FROM_INPUTS, Accumulated, Family, Params, Tolerance, Variant, Work


@tilelang.jit
def residual_add_(X, Y, block_M: int = 32, block_N: int = 256, threads: int = 128):
    M, N = T.const("M, N")
    X: T.Tensor((M, N), T.bfloat16)
    Y: T.Tensor((M, N), T.bfloat16)

    with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=threads) as (bx, by):
        x_local = T.alloc_fragment((block_M, block_N), T.bfloat16)
        y_local = T.alloc_fragment((block_M, block_N), T.bfloat16)

        T.copy(X[by * block_M, bx * block_N], x_local)
        T.copy(Y[by * block_M, bx * block_N], y_local)
        for i, j in T.Parallel(block_M, block_N):
            x_local[i, j] = x_local[i, j] + y_local[i, j]
        T.copy(x_local, X[by * block_M, bx * block_N])


def residual_add_inputs(p: Params, generator: Any, device: str) -> list[Any]:
    """X, the residual stream (its initial value is part of the result), and Y, the layer's output at a tenth
    of its scale, as a block adds to the stream; never zeros."""
    import torch

    x = torch.randn(p["M"], p["N"], generator=generator, device=device)
    y = 0.1 * torch.randn(p["M"], p["N"], generator=generator, device=device)
    return [x.bfloat16(), y.bfloat16()]


def float32_residual_add(p: Params, x: Any, y: Any) -> Any:
    """X's final value: the sum of the two bf16 values in float32 (exact unless |Y| < 2^-16 |X| or the reverse)."""
    return x.float() + y.float()


def torch_residual_add_(p: Params, x: Any, y: Any) -> Any:
    """What PyTorch users write for a residual add in place."""
    return x.add_(y)


def torch_residual_add(p: Params, x: Any, y: Any) -> Any:
    """The same bf16 add, out of place: the precision twin must not change the inputs the reference reads."""
    return x + y


def residual_add_work(p: Params) -> Work:
    """X and Y read, X written (bf16); one add an element."""
    elements = p["M"] * p["N"]
    return Work(flops=elements, bytes=3 * 2 * elements)


BASELINE = "tile32x256"

FAMILY = Family(
    name="inplace_update",
    # 16384 tokens of Llama-3-70B's hidden size 8192: 768 MiB moved, far past the L2, so it times memory.
    shape={"M": 16384, "N": 8192},
    sanitize_shape={"M": 128, "N": 1024},
    variants=[
        Variant(BASELINE, residual_add_, {"block_M": 32, "block_N": 256, "threads": 128}),
        Variant("tile64x512", residual_add_, {"block_M": 64, "block_N": 512, "threads": 256}),
    ],
    inputs=residual_add_inputs,
    # X (argument 0) is updated in place from the value inputs() draws: the output is X + Y.
    outputs={0: Accumulated(initial=FROM_INPUTS)},
    reference=float32_residual_add,
    # One rounding of the exact sum to bf16: at most half a step, 2^-8 of the value (8 significant bits); 2^-20
    # more where the float32 sum rounded too. A tile skipped keeps X's initial value, off by |Y| (a tenth of |X|);
    # Y added twice, or X to itself, is off by more.
    tolerance=Tolerance(atol=0, rtol=2**-8 + 2**-20),
    speed_reference=torch_residual_add_,
    speed_reference_label="x.add_(y)",
    precision_twin=torch_residual_add,
    work=residual_add_work,
)
