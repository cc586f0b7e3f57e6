"""One small kernel in each style TileLang's users write, as test fixtures: an eager jit function, a
lazy jit factory, an autotuned jit function, a plain PrimFunc factory, a ready @T.prim_func, an
eager kernel with two reductions of one kind, a split kernel with its combine kernel in one PrimFunc,
and a kernel that reads a fragment before writing it. `family(kernel, ...)` wraps any of them.

Then small kernels that each exercise one fact reviewers look for, with the one token a test changes
as a parameter: block rasterization, a GEMM's warp policy, a warp-shuffle reduction, a dtype cast,
shared memory of a given size."""

from typing import Any

import tilelang
import tilelang.language as T

from tilelang_golden.family import Family, Tolerance, Variant, Work

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
def eager_scale_by(X, block_rows: int = 8, threads: int = 128, factor: float | None = None):
    """Upstream's optional parameters (`sm_scale=None`): None means the kernel's own default."""
    rows, cols = T.const("rows, cols")
    X: T.Tensor((rows, cols), T.float16)
    Y = T.empty((rows, cols), T.float16)
    scale = 2.0 if factor is None else factor
    with T.Kernel(T.ceildiv(rows, block_rows), threads=threads) as bx:
        tile = T.alloc_fragment((block_rows, cols), T.float16)
        T.copy(X[bx * block_rows, 0], tile)
        for i, j in T.Parallel(block_rows, cols):
            tile[i, j] = tile[i, j] * T.float16(scale)
        T.copy(tile, Y[bx * block_rows, 0])
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


def split_sum_factory(rows: int, cols: int, splits: int = 4, threads: int = 128) -> Any:
    """Row sums in two kernels, as split-K and split-KV decoding write them: the first sums `splits` slices of
    each row block into a global scratch buffer through a pipelined loop over shared memory, the second (fewer
    threads, one block per row block) adds the partials."""
    part = cols // splits
    steps = part // threads

    @T.prim_func
    def split_sum(X: T.Tensor((rows, cols), "float32"), Y: T.Tensor((rows,), "float32")):
        partial = T.alloc_global((rows, splits), "float32")
        with T.Kernel(splits, rows, threads=threads) as (bx, by):
            tile = T.alloc_shared((threads,), "float32")
            acc = T.alloc_fragment((threads,), "float32")
            total = T.alloc_fragment((1,), "float32")
            T.clear(acc)
            for k in T.Pipelined(steps, num_stages=2):
                T.copy(X[by, bx * part + k * threads], tile)
                for i in T.Parallel(threads):
                    acc[i] += tile[i]
            T.reduce_sum(acc, total, dim=0)
            partial[by, bx] = total[0]
        with T.Kernel(rows, threads=32) as by:
            partials = T.alloc_fragment((splits,), "float32")
            total = T.alloc_fragment((1,), "float32")
            T.copy(partial[by, 0], partials)
            T.reduce_sum(partials, total, dim=0)
            Y[by] = total[0]

    return split_sum


def row_max_uncleared_factory(rows: int, cols: int, block_rows: int = 4, threads: int = 128) -> Any:
    """A row maximum into a fragment nothing wrote before (`clear=False`): TileLang warns that it reads it
    before initialization."""

    @T.prim_func
    def row_max(X: T.Tensor((rows, cols), "float32"), Y: T.Tensor((rows,), "float32")):
        with T.Kernel(rows // block_rows, threads=threads) as bx:
            tile = T.alloc_fragment((block_rows, cols), "float32")
            largest = T.alloc_fragment((block_rows,), "float32")
            T.copy(X[bx * block_rows, 0], tile)
            T.reduce_max(tile, largest, dim=1, clear=False)
            T.copy(largest, Y[bx * block_rows])

    return row_max


lazy_scale = tilelang.jit(out_idx=[1])(scale_factory)
lazy_accumulate = tilelang.jit(out_idx=[2])(accumulate_factory)
ready_scale = scale_factory(ROWS, COLS)


def scale_twice(x: Any, block_rows: int = 8) -> Any:
    """A chain as users write one: an eager kernel, then a lazy one built for the tensor's shape; 4 * x."""
    rows, cols = x.shape
    doubled = eager_scale(x, block_rows=block_rows)
    return lazy_scale(rows, cols, block_rows=block_rows)(doubled)


@tilelang.jit
def eager_annotated_dtype(X, Y, block_rows: int = 8, dtype: Any = T.float16):
    """A dtype parameter read only in the tensor annotations, as upstream's stream-K GEMM declares its C; Y = X."""
    rows, cols = T.const("rows, cols")
    X: T.Tensor((rows, cols), dtype)
    Y: T.Tensor((rows, cols), dtype)
    with T.Kernel(T.ceildiv(rows, block_rows), threads=128) as bx:
        T.copy(X[bx * block_rows, 0], Y[bx * block_rows, 0])


AUTOTUNE_CONFIGS = [{"block_rows": b, "threads": t} for b in (4, 8) for t in (64, 128)]
autotuned_scale = tilelang.autotune(configs=AUTOTUNE_CONFIGS)(tilelang.jit(eager_scale.func.orig_func))
# Upstream's autotune configurations may carry a name the kernel takes and never reads (`block_DK`).
autotuned_ignores_threads = tilelang.autotune(configs=AUTOTUNE_CONFIGS)(
    tilelang.jit(eager_ignores_threads.func.orig_func)
)


def swizzled_gemm(
    M, N, K, block_M=64, block_N=128, block_K=32, threads=128, policy="Square", panel_size=4, order="row"
):
    """A GEMM with T.use_swizzle (`panel_size` 0: the line left out) and a warp policy by name."""

    @T.prim_func
    def gemm(A: T.Tensor((M, K), "float16"), B: T.Tensor((N, K), "float16"), C: T.Tensor((M, N), "float16")):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=threads) as (bx, by):
            A_s = T.alloc_shared((block_M, block_K), "float16")
            B_s = T.alloc_shared((block_N, block_K), "float16")
            C_l = T.alloc_fragment((block_M, block_N), "float32")
            if panel_size:
                T.use_swizzle(panel_size=panel_size, order=order)
            T.clear(C_l)
            for k in T.Pipelined(T.ceildiv(K, block_K), num_stages=2):
                T.copy(A[by * block_M, k * block_K], A_s)
                T.copy(B[bx * block_N, k * block_K], B_s)
                T.gemm(A_s, B_s, C_l, transpose_B=True, policy=T.GemmWarpPolicy[policy])
            T.copy(C_l, C[by * block_M, bx * block_N])

    return gemm


def allreduce_gemv(N, K, block_N=4, reduce_threads=32):
    """y = B x with one warp per row reducing through TVM's tvm_thread_allreduce, as upstream's GEMV does."""

    @T.prim_func
    def gemv(A: T.Tensor((K,), "float16"), B: T.Tensor((N, K), "float16"), C: T.Tensor((N,), "float16")):
        with T.Kernel(T.ceildiv(N, block_N), threads=(reduce_threads, block_N)) as bn:
            tk = T.get_thread_binding(0)
            tn = T.get_thread_binding(1)
            partial = T.alloc_local((1,), "float32")
            total = T.alloc_local((1,), "float32")
            T.clear(partial)
            for k in T.serial(T.ceildiv(K, reduce_threads)):
                a = A[k * reduce_threads + tk].astype("float32")
                partial[0] += a * B[bn * block_N + tn, k * reduce_threads + tk].astype("float32")
            with T.attr(
                T.comm_reducer(lambda x, y: x + y, [T.Cast("float32", 0)]),
                "reduce_scope",
                T.reinterpret(T.uint64(0), dtype="handle"),
            ):
                T.evaluate(T.tvm_thread_allreduce(T.uint32(1), partial[0], True, total[0], tk, dtype="handle"))
            C[bn * block_N + tn] = total[0]

    return gemv


def cast_rows(M, N, block_M=32, dtype="float8_e4m3fn", threads=128):
    """Y = X in `dtype`: float32 rows cast on their way out."""

    @T.prim_func
    def cast(X: T.Tensor((M, N), "float32"), Y: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(M, block_M), threads=threads) as bx:
            x = T.alloc_fragment((block_M, N), "float32")
            T.copy(X[bx * block_M, 0], x)
            T.copy(x, Y[bx * block_M, 0])

    return cast


def staged_copy(M, N, block_M=64, threads=128):
    """Y = X through a shared tile of block_M x N float32: its size is the knob."""

    @T.prim_func
    def copy(X: T.Tensor((M, N), "float32"), Y: T.Tensor((M, N), "float32")):
        with T.Kernel(T.ceildiv(M, block_M), threads=threads) as bx:
            tile = T.alloc_shared((block_M, N), "float32")
            T.copy(X[bx * block_M, 0], tile)
            T.copy(tile, Y[bx * block_M, 0])

    return copy


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


def state_written_late(rows: int, cols: int, block_rows: int = 8) -> T.PrimFunc:
    """Upstream's gated delta net without an initial state: each iteration stores the running state, then updates
    it; the first iteration stores a state nothing wrote."""

    @T.prim_func
    def scan(X: T.Tensor((rows, cols), "float16"), Y: T.Tensor((rows, cols), "float16")):
        with T.Kernel(1, threads=128):
            state = T.alloc_shared((block_rows, cols), "float16")
            running = T.alloc_fragment((block_rows, cols), "float32")
            T.clear(running)
            for k in T.Pipelined(rows // block_rows, num_stages=2):
                T.copy(state, Y[k * block_rows, 0])
                T.copy(X[k * block_rows, 0], running)
                T.copy(running, state)

    return scan
