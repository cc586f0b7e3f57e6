"""Split-K GEMM as TileLang's examples write it: an eager `@tilelang.jit` function accumulating with atomics.

C += A @ B, fp16 in, fp32 accumulation and output. The K dimension is cut into `split_k` slices; each
block computes one output tile over one slice and adds it into C with one tile-wide `T.atomic_add`, so C
must hold zeros before the call (the caller clears it, as upstream's example does). The shape is the
one split-K is for: few output tiles (64 of 128 x 128) and a long K, so without the split most SMs idle.
The variants differ only in the number of slices.
"""

from typing import Any

import tilelang
import tilelang.language as T

from tilelang_golden.family import Accumulated, Family, Params, Tolerance, Variant, Work
from kernels._precision import tf32_off


@tilelang.jit
def matmul_splitk(A, B, C, block_M: int, block_N: int, block_K: int, split_k: int, num_stages: int = 3):
    M, N, K = T.const("M, N, K")
    splitK = K // split_k

    A: T.Tensor((M, K), T.float16)
    B: T.Tensor((K, N), T.float16)
    C: T.Tensor((M, N), T.float32)

    with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), split_k, threads=128) as (bx, by, bz):
        A_shared = T.alloc_shared((block_M, block_K), T.float16)
        B_shared = T.alloc_shared((block_K, block_N), T.float16)
        C_local = T.alloc_fragment((block_M, block_N), T.float32)

        T.clear(C_local)
        for ko in T.Pipelined(T.ceildiv(splitK, block_K), num_stages=num_stages):
            T.copy(A[by * block_M, bz * splitK + ko * block_K], A_shared)
            T.copy(B[bz * splitK + ko * block_K, bx * block_N], B_shared)
            T.gemm(A_shared, B_shared, C_local)

        T.atomic_add(C[by * block_M, bx * block_N], C_local)


def splitk_inputs(p: Params, generator: Any, device: str) -> list[Any]:
    """A and B with unit variance; C's entries then have a standard deviation of sqrt(K) = 128."""
    import torch

    a = torch.randn(p["M"], p["K"], generator=generator, device=device, dtype=torch.float16)
    b = torch.randn(p["K"], p["N"], generator=generator, device=device, dtype=torch.float16)
    return [a, b]


def float32_matmul(p: Params, a: Any, b: Any) -> Any:
    """C from zeros: the product of the fp16 values in float32, TF32 off."""
    with tf32_off():
        return a.float() @ b.float()


def torch_matmul(p: Params, a: Any, b: Any) -> Any:
    """cuBLAS on the fp16 tensors with an fp32 result, the output dtype the kernel writes."""
    import torch

    return torch.mm(a, b, out_dtype=torch.float32)


def splitk_work(p: Params) -> Work:
    """2 M N K flops; A and B read once (fp16), and each slice's atomic add reads and writes C (fp32)."""
    m, n, k = p["M"], p["N"], p["K"]
    return Work(flops=2 * m * n * k, bytes=2 * (m * k + k * n) + 2 * 4 * m * n * p["split_k"])


TILE = {"block_M": 128, "block_N": 128, "block_K": 32}

FAMILY = Family(
    name="gemm_splitk",
    # 64 output tiles over K = 16384: one block per tile would occupy 64 of the H200's 132 SMs for 512 k-steps.
    shape={"M": 1024, "N": 1024, "K": 16384},
    # --sanitize: 4 output tiles, each slice still longer than the pipeline (16 and 8 k-steps of 32).
    sanitize_shape={"M": 256, "N": 256, "K": 2048},
    variants=[
        Variant("split4", matmul_splitk, {**TILE, "split_k": 4}),
        Variant("split8", matmul_splitk, {**TILE, "split_k": 8}),
    ],
    inputs=splitk_inputs,
    # C (argument 2) is accumulated with atomics: the harness passes it zeroed, as upstream's caller does.
    outputs={2: Accumulated()},
    # Not held to bitwise equality across launches: each element of C is the sum of 4 or 8 slices added by atomics in
    # whatever order the blocks finish, and fp32 addition of more than two terms depends on the order.
    nondeterministic={2: "fp32 atomics add split_k (4 or 8) slices into each element of C in whatever order they land"},
    reference=float32_matmul,
    # |C| ~ 128 (sqrt(K)). fp16 products are exact in fp32; the kernel sums each slice in its own order on the
    # tensor cores and adds the slices in whatever order the atomics land, so it differs from a float32
    # matmul by the rounding of a few thousand fp32 adds at magnitude ~128: about 1e-3. atol 2e-2 allows 20x
    # that; a slice skipped or added twice moves C by sqrt(K / split_k) ~ 45.
    tolerance=Tolerance(atol=2e-2, rtol=1e-4),
    speed_reference=torch_matmul,
    speed_reference_label="torch.mm(a, b, out_dtype=torch.float32)",
    work=splitk_work,
)
