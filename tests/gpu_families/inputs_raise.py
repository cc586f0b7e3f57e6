"""A family whose inputs() raises: the GPU check fails its variant naming this file, the variant and the line."""

from typing import Any

import tilelang
import tilelang.language as T

from tilelang_golden.family import Family, Params, Tolerance, Variant

from ._rows import SHAPE, copy_work, float32_copy, torch_copy


@tilelang.jit
def copy(X, threads: int = 128):
    rows, cols = T.const("rows, cols")
    X: T.Tensor((rows, cols), T.float16)
    Y = T.empty((rows, cols), T.float16)
    with T.Kernel(rows, threads=threads) as bx:
        tx = T.get_thread_binding()
        for j in T.serial(cols // threads):
            Y[bx, j * threads + tx] = X[bx, j * threads + tx]
    return Y


def broken_inputs(p: Params, generator: Any, device: str) -> list[Any]:
    raise ValueError(f"no inputs for {p['rows']} rows: this family is broken on purpose")


FAMILY = Family(
    name="inputs_raise",
    shape=SHAPE,
    variants=[Variant("copy", copy, {"threads": 128})],
    inputs=broken_inputs,
    reference=float32_copy,
    tolerance=Tolerance(atol=0, rtol=0),
    speed_reference=torch_copy,
    speed_reference_label="x.clone()",
    work=copy_work,
)
