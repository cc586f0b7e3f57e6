"""A kernel that stores through an index 2^50 elements past its output: an illegal address on any GPU.

The store kills the CUDA context of the process that launched it: the GPU check must fail this
variant with the CUDA error and check the next one in a fresh worker.
"""

from typing import Any

import tilelang
import tilelang.language as T

from tilelang_golden.family import Family, Params, Tolerance, Variant, Work

FAR = 1 << 50  # elements: far beyond any mapping of the device's memory


# TileLang guards an indexed store with the buffer's bounds unless told not to.
@tilelang.jit(pass_configs={"tl.disable_safe_memory_legalize": True})
def scatter(Index, threads: int = 128):
    n = T.const("n")
    Index: T.Tensor((n,), T.int64)
    Y = T.empty((n,), T.float32)
    with T.Kernel(T.ceildiv(n, threads), threads=threads) as bx:
        tx = T.get_thread_binding()
        Y[Index[bx * threads + tx]] = T.float32(1)
    return Y


def far_indices(p: Params, generator: Any, device: str) -> list[Any]:
    import torch

    return [torch.full((p["n"],), FAR, dtype=torch.int64, device=device)]


def ones(p: Params, index: Any) -> Any:
    import torch

    return torch.ones(p["n"], dtype=torch.float32, device=index.device)


FAMILY = Family(
    name="illegal_address",
    shape={"n": 1 << 20},
    variants=[Variant("far_store", scatter, {"threads": 128})],
    inputs=far_indices,
    reference=ones,
    tolerance=Tolerance(atol=0, rtol=0),
    speed_reference=ones,
    speed_reference_label="torch.ones(n)",
    work=lambda p: Work(flops=0, bytes=12 * p["n"]),
)
