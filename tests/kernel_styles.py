"""One small kernel in each style TileLang's users write, as test fixtures: an eager jit function, a
lazy jit factory, an autotuned jit function, a plain PrimFunc factory, a ready @T.prim_func, and
an eager kernel with two reductions of one kind. `family(kernel, ...)` wraps any of them."""

from typing import Any

import tilelang
import tilelang.language as T

from harness.family import Family, Tolerance, Variant, Work

ROWS, COLS = 256, 512


@tilelang.jit
def eager_scale(X, block_rows: int = 8, threads: int = 128):
    rows, cols = T.const("rows, cols")
    X: T.Tensor((rows, cols), T.float16)
    Y = T.empty((rows, cols), T.float16)
    with T.Kernel(T.ceildiv(rows, block_rows), threads=threads) as bx:
        tile = T.alloc_fragment((block_rows, cols), T.float16)
        T.copy(X[bx * block_rows, 0], tile)
        for i, j in T.Parallel(block_rows, cols):
            tile[i, j] = tile[i, j] * T.float16(2)
        T.copy(tile, Y[bx * block_rows, 0])
    return Y


@tilelang.jit
def eager_ignores_threads(X, block_rows: int = 8, threads: int = 128):
    rows, cols = T.const("rows, cols")
    X: T.Tensor((rows, cols), T.float16)
    Y = T.empty((rows, cols), T.float16)
    with T.Kernel(T.ceildiv(rows, block_rows), threads=128) as bx:
        T.copy(X[bx * block_rows, 0], Y[bx * block_rows, 0])
    return Y


@tilelang.jit
def eager_row_stats(X, block_rows: int = 4, threads: int = 128):
    """Two T.reduce_sum calls: TileLang names their scratch buffers in an order that varies."""
    rows, cols = T.const("rows, cols")
    X: T.Tensor((rows, cols), T.float32)
    Sum = T.empty((rows,), T.float32)
    SumSquares = T.empty((rows,), T.float32)
    with T.Kernel(T.ceildiv(rows, block_rows), threads=threads) as bx:
        x = T.alloc_fragment((block_rows, cols), T.float32)
        squares = T.alloc_fragment((block_rows, cols), T.float32)
        total = T.alloc_fragment((block_rows,), T.float32)
        total_squares = T.alloc_fragment((block_rows,), T.float32)
        T.copy(X[bx * block_rows, 0], x)
        for i, j in T.Parallel(block_rows, cols):
            squares[i, j] = x[i, j] * x[i, j]
        T.reduce_sum(x, total, dim=1)
        T.reduce_sum(squares, total_squares, dim=1)
        for i in T.Parallel(block_rows):
            Sum[bx * block_rows + i] = total[i]
            SumSquares[bx * block_rows + i] = total_squares[i]
    return Sum, SumSquares


def scale_factory(rows: int, cols: int, block_rows: int = 8, threads: int = 128) -> Any:
    @T.prim_func
    def scale(X: T.Tensor((rows, cols), "float16"), Y: T.Tensor((rows, cols), "float16")):
        with T.Kernel(T.ceildiv(rows, block_rows), threads=threads) as bx:
            tile = T.alloc_fragment((block_rows, cols), "float16")
            T.copy(X[bx * block_rows, 0], tile)
            for i, j in T.Parallel(block_rows, cols):
                tile[i, j] = tile[i, j] * T.float16(2)
            T.copy(tile, Y[bx * block_rows, 0])

    return scale


def accumulate_factory(rows: int, cols: int, block_rows: int = 8, threads: int = 128) -> Any:
    """Acc += X in place, and Y = 2 X: an argument updated in place beside one the kernel may return."""

    @T.prim_func
    def accumulate(
        X: T.Tensor((rows, cols), "float16"),
        Acc: T.Tensor((rows, cols), "float16"),
        Y: T.Tensor((rows, cols), "float16"),
    ):
        with T.Kernel(T.ceildiv(rows, block_rows), threads=threads) as bx:
            for i, j in T.Parallel(block_rows, cols):
                Acc[bx * block_rows + i, j] = Acc[bx * block_rows + i, j] + X[bx * block_rows + i, j]
                Y[bx * block_rows + i, j] = X[bx * block_rows + i, j] * T.float16(2)

    return accumulate


lazy_scale = tilelang.jit(out_idx=[1])(scale_factory)
lazy_accumulate = tilelang.jit(out_idx=[2])(accumulate_factory)
ready_scale = scale_factory(ROWS, COLS)
AUTOTUNE_CONFIGS = [{"block_rows": b, "threads": t} for b in (4, 8) for t in (64, 128)]
autotuned_scale = tilelang.autotune(configs=AUTOTUNE_CONFIGS)(tilelang.jit(eager_scale.func.orig_func))


def _inputs(p: Any, generator: Any, device: str) -> list[Any]:
    import torch

    return [torch.randn(p["rows"], p["cols"], generator=generator, device=device, dtype=torch.float16)]


def family(kernel: Any, params: dict | None = None, name: str = "styles", **overrides: Any) -> Family:
    """A family of one variant `only` around `kernel`, as kernels/<name>.py would declare it."""
    declaration: dict[str, Any] = dict(
        name=name,
        shape={"rows": ROWS, "cols": COLS},
        variants=[Variant("only", kernel, {"block_rows": 8, "threads": 128} if params is None else params)],
        inputs=_inputs,
        reference=lambda p, x: 2 * x.float(),
        tolerance=Tolerance(atol=0, rtol=0),  # doubling is exact in fp16
        speed_reference=lambda p, x: 2 * x,
        speed_reference_label="2 * x",
        work=lambda p: Work(flops=p["rows"] * p["cols"], bytes=4 * p["rows"] * p["cols"]),
        file=f"kernels/{name}.py",
    )
    return Family(**{**declaration, **overrides})
