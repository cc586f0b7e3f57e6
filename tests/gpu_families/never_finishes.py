"""A kernel that does not finish: 2^40 dependent multiply-adds per thread, hours on any GPU.

The GPU check must stop it after its time limit, report "did not finish", and check the next
variant in a fresh worker. The dependence (each step reads the last, in floating point, which
the compiler may not reassociate) keeps the loop from being folded away.
"""

import tilelang
import tilelang.language as T

from tilelang_golden.family import Family, Tolerance, Variant

from ._rows import SHAPE, copy_work, float32_copy, rows_inputs, torch_copy


@tilelang.jit
def spin(X, threads: int = 128):
    rows, cols = T.const("rows, cols")
    X: T.Tensor((rows, cols), T.float16)
    Y = T.empty((rows, cols), T.float16)
    with T.Kernel(rows, threads=threads) as bx:
        acc = T.alloc_local((1,), T.float32)
        tx = T.get_thread_binding()
        acc[0] = X[bx, tx]
        for _ in T.serial(1 << 20):
            for _ in T.serial(1 << 20):
                acc[0] = acc[0] * T.float32(0.9999999) + T.float32(1e-7)
        for j in T.serial(cols // threads):
            Y[bx, j * threads + tx] = X[bx, j * threads + tx]
        Y[bx, tx] = T.Cast(T.float16, acc[0])  # the loop's result is used: it cannot be left out
    return Y


FAMILY = Family(
    name="never_finishes",
    shape=SHAPE,
    variants=[Variant("spin", spin, {"threads": 128})],
    inputs=rows_inputs,
    reference=float32_copy,
    tolerance=Tolerance(atol=0, rtol=0),
    speed_reference=torch_copy,
    speed_reference_label="x.clone()",
    work=copy_work,
)
