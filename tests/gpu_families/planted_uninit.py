"""Reads of memory nothing wrote, planted on purpose, for compute-sanitizer's initcheck (`--sanitize`).

`half_staged`: each thread loads back its own slot of a shared buffer, but only the first `staged` threads stored
theirs, so the others read what the slot held before (shared memory). `unset_output`: Y += X on the output the kernel
allocates (`T.empty`), never cleared, as a forgotten `T.clear` of an accumulator in global memory would read it
(global memory). `all_staged`, every slot stored, is right and passes the check, the repeated launches and the
sanitizer.
"""

import tilelang
import tilelang.language as T

from tilelang_golden.family import Family, Tolerance, Variant, Work

from .planted_race import THREADS, row_inputs


@tilelang.jit
def staged_copy(X, staged: int = THREADS):
    rows, cols = T.const("rows, cols")
    X: T.Tensor((rows, cols), T.float32)
    Y = T.empty((rows, cols), T.float32)
    with T.Kernel(rows, threads=THREADS) as bx:
        slots = T.alloc_shared((THREADS,), T.float32)
        tx = T.get_thread_binding()
        if tx < staged:
            slots[tx] = X[bx, tx]
        Y[bx, tx] = slots[tx]
    return Y


@tilelang.jit
def add_into_output(X):
    rows, cols = T.const("rows, cols")
    X: T.Tensor((rows, cols), T.float32)
    Y = T.empty((rows, cols), T.float32)
    with T.Kernel(rows, threads=THREADS) as bx:
        tx = T.get_thread_binding()
        Y[bx, tx] = Y[bx, tx] + X[bx, tx]
    return Y


def copied(p, x):
    return x.clone()


FAMILY = Family(
    name="planted_uninit",
    shape={"rows": 4096, "cols": THREADS},
    sanitize_shape={"rows": 8},
    variants=[
        Variant("half_staged", staged_copy, {"staged": THREADS // 2}),
        Variant("unset_output", add_into_output),
        Variant("all_staged", staged_copy),
    ],
    inputs=row_inputs,
    reference=copied,
    tolerance=Tolerance(atol=0, rtol=0),
    speed_reference=copied,
    speed_reference_label="x.clone()",
    work=lambda p: Work(flops=0, bytes=2 * 4 * p["rows"] * p["cols"]),
)
