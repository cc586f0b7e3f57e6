"""A shared-memory race planted on purpose: a missing barrier that the numeric check alone could pass by luck.

Each thread stores its element of the row in a shared buffer and loads the element 32 slots on, which the next warp
stored, with no barrier between. Warp w sleeps w x `sleep_ns` before its store, so the load of warp w nearly always
comes before warp w + 1's store and reads what the previous block on that SM left in the slot: another row, which
block ran there before depends on the scheduling, so the output changes between launches on the same inputs.
TileLang inserts the barrier itself unless told not to (`tl.disable_thread_storage_sync`), as a hand-written
pipeline with a wrong wait or a missing `T.sync_threads()` would lack it.

`missing_barrier` must fail the GPU check's repeated launches and compute-sanitizer's racecheck (`--sanitize`);
`barrier`, the same kernel with the barrier, passes both.
"""

from typing import Any

import tilelang
import tilelang.language as T

from tilelang_golden.family import Family, Params, Tolerance, Variant, Work

THREADS = 256  # one row per block, one element per thread
WARP = 32


@tilelang.jit(pass_configs={"tl.disable_thread_storage_sync": True})
def next_warp(X, barrier: bool = False, sleep_ns: int = 2000):
    rows, cols = T.const("rows, cols")
    X: T.Tensor((rows, cols), T.float32)
    Y = T.empty((rows, cols), T.float32)
    with T.Kernel(rows, threads=THREADS) as bx:
        staged = T.alloc_shared((THREADS,), T.float32)
        tx = T.get_thread_binding()
        T.evaluate(T.call_extern("handle", "__nanosleep", T.Cast("uint32", (tx // WARP) * sleep_ns)))
        staged[tx] = X[bx, tx]
        if barrier:
            T.sync_threads()
        Y[bx, tx] = staged[(tx + WARP) % THREADS]
    return Y


def row_inputs(p: Params, generator: Any, device: str) -> list[Any]:
    import torch

    return [torch.randn(p["rows"], p["cols"], generator=generator, device=device)]


def shifted(p: Params, x: Any) -> Any:
    """Each row's element 32 slots on: exact, as the kernel only moves values."""
    import torch

    return torch.roll(x, shifts=-WARP, dims=1)


FAMILY = Family(
    name="planted_race",
    shape={"rows": 4096, "cols": THREADS},
    sanitize_shape={"rows": 8},
    variants=[Variant("missing_barrier", next_warp), Variant("barrier", next_warp, {"barrier": True})],
    inputs=row_inputs,
    reference=shifted,
    tolerance=Tolerance(atol=0, rtol=0),
    speed_reference=shifted,
    speed_reference_label="torch.roll(x, -32, 1)",
    work=lambda p: Work(flops=0, bytes=2 * 4 * p["rows"] * p["cols"]),
)
