"""Fast Walsh-Hadamard transform of each row, B = A H_n (unnormalized), as TileLang's example writes it.

QuaRot-style rotation of activations before quantization: 16384 tokens of Llama-3-70B's hidden size 8192, in
fp16 and in bf16. One block transforms one row in log2(n) butterfly rounds, all in the input dtype: first
inside each thread's registers, then across the warp with shuffles, then across warps through shared memory.

The kernel is upstream's, copied verbatim with its helpers (`is_pow_of_2`, the `warp_shfl` macro) from
examples/hadamard_transform/example_hadamard.py: an eager `@tilelang.jit` function taking the row length `n` and
the dtype as parameters. Upstream's main() passes the dtype as a TileLang dtype value (`hadamard(x, D,
T.float32)`), and the kernel needs the value itself: it looks it up in a dict keyed by dtypes
(`{T.float32: 4, T.float16: 2, T.bfloat16: 2}[dtype]`). The variants pass `T.float16` and `T.bfloat16`.
"""

import math
from typing import Any

import tilelang
import tilelang.language as T
from tilelang.cuda.intrinsics import make_mma_swizzle_layout

from tilelang_golden.family import Family, Params, Tolerance, Variant, Work

# Upstream: examples/hadamard_transform/example_hadamard.py, from `is_pow_of_2` to `hadamard`, verbatim.


def is_pow_of_2(n):
    return isinstance(n, int) and n > 0 and (n & (n - 1)) == 0


@T.macro
def warp_shfl(local, buf, thread_elem, warp_size, round):
    tx = T.get_thread_binding(0)
    for i in T.serial(round):
        tx_stride = 1 << i
        another_tx = tx ^ tx_stride
        sign = (tx >> i) & 1  # get i-th lowest bit of tx, which determines the operation type for shared[tx, :]
        for j in T.Pipelined(thread_elem, num_stages=1):
            buf[j] = T.tvm_warp_shuffle(
                0xFFFFFFFF,  # mask of all threads
                local[j],
                another_tx % warp_size,
                warp_size,
                warp_size,
            )
            local[j] = T.if_then_else(sign == 0, local[j] + buf[j], buf[j] - local[j])


@tilelang.jit
def hadamard(A, n, dtype):
    b = T.const("b")

    A: T.Tensor((b, n), dtype)
    B = T.empty((b, n), dtype)

    assert is_pow_of_2(n), "n must be a power of 2"
    assert 2 <= n <= 32768, "n must be in [2, 32768]"

    elem_size = {T.float32: 4, T.float16: 2, T.bfloat16: 2}[dtype]

    logN = int(math.log2(n))
    threads = [0, 1, 1, 1, 2, 4, 8, 16, 32, 32, 128, 256, 256, 256, 256, 256][logN]
    thread_elem = n // threads  # Each thread is responsible for a chunk of elements
    thread_round = int(math.log2(thread_elem))

    warps = 1 if threads <= 32 else threads // 32
    warp_round = int(math.log2(threads / warps))
    warp_size = threads // warps

    block_round = int(math.log2(warps))

    exchange_round = n * elem_size // 32768 if n * elem_size > 32768 else 1  # Suppose we use 32KB shared memory at most
    thread_elem_in_smem = thread_elem // exchange_round if exchange_round > 1 else thread_elem

    with T.Kernel(b, threads=threads) as bx:
        local = T.alloc_local((thread_elem,), dtype)
        shared = T.alloc_shared((threads, thread_elem_in_smem), dtype)
        T.annotate_layout({shared: make_mma_swizzle_layout(shared)})
        tx = T.get_thread_binding(0)

        # 1. Load from HBM to register
        for i in T.vectorized(thread_elem):
            local[i] = A[bx, tx * thread_elem + i]

        # 2. Hadamard inside thread, n<=8
        for i in T.serial(thread_round):
            chunksize = 1 << (i + 1)
            chunknum = thread_elem // chunksize
            for j in T.serial(chunknum):
                chunkbase = j * chunksize
                for k in T.serial(chunksize // 2):
                    local[chunkbase + k] = local[chunkbase + k] + local[chunkbase + k + chunksize // 2]
                    local[chunkbase + k + chunksize // 2] = local[chunkbase + k] - 2 * local[chunkbase + k + chunksize // 2]

        # 3. Hadamard inside warp, n<=512
        # In warp level, we rely on warp shuffle to exchange data inside each warp, without using shared memory
        another_val = T.alloc_local((thread_elem,), dtype)

        warp_shfl(local, another_val, thread_elem, warp_size, warp_round)

        # 4. Hadamard inside block, n<=32768
        # Only exchange once for n<=8192, since shared mem can hold all elems
        if block_round > 0:
            warp_id = tx // warp_size
            lane_id = tx % warp_size
            src_tx = warp_id * warp_size + lane_id
            tgt_warp_id = tx % warps
            tgt_lane_id = tx // warps
            tgt_tx = tgt_warp_id * warp_size + tgt_lane_id

            # 4.1 Write to smem, swap, read from smem
            for cur_round in T.serial(exchange_round):
                exchange_base = thread_elem_in_smem * cur_round
                for j in T.vectorized(thread_elem_in_smem):
                    shared[src_tx, j] = local[exchange_base + j]

                for j in T.vectorized(thread_elem_in_smem):
                    local[exchange_base + j] = shared[tgt_tx, j]

            # 4.2 Warp shuffle
            warp_shfl(local, another_val, thread_elem, warp_size, block_round)

            # 4.3 Write to smem, swap, read from smem
            for cur_round in T.serial(exchange_round):
                exchange_base = thread_elem_in_smem * cur_round
                for j in T.vectorized(thread_elem_in_smem):
                    shared[tgt_tx, j] = local[exchange_base + j]

                for j in T.vectorized(thread_elem_in_smem):
                    local[exchange_base + j] = shared[src_tx, j]

        # 5. Write back to HBM
        for i in T.vectorized(thread_elem):
            B[bx, tx * thread_elem + i] = local[i]

    return B


def torch_dtype(p: Params) -> Any:
    """The variant's dtype (a TileLang dtype value, as upstream passes it) as torch's, by its name ("float16")."""
    import torch

    return getattr(torch, str(p["dtype"]))


def hadamard_inputs(p: Params, generator: Any, device: str) -> list[Any]:
    """A, standard normal in the variant's dtype (never zeros); B's entries then have a standard deviation of
    sqrt(n) ~ 91 and reach ~500, far inside fp16's range."""
    import torch

    return [torch.randn(p["b"], p["n"], generator=generator, device=device).to(torch_dtype(p))]


def butterflies(x: Any) -> Any:
    """x H_n along the last dimension by the fast Walsh-Hadamard transform: log2(n) rounds of (u + v, u - v) over
    pairs of columns 1, 2, 4, ... apart, in x's own dtype (each round rounds once to it)."""
    import torch

    rows, n = x.shape
    half = 1
    while half < n:
        pairs = x.view(rows, n // (2 * half), 2, half)
        u, v = pairs[:, :, 0, :], pairs[:, :, 1, :]
        x = torch.stack((u + v, u - v), dim=2).view(rows, n)
        half *= 2
    return x


def float64_hadamard(p: Params, a: Any) -> Any:
    """B in float64, as float32: each output is a signed sum of 8192 inputs, which float64 holds exactly."""
    return butterflies(a.double()).float()


def torch_hadamard(p: Params, a: Any) -> Any:
    """What PyTorch users write without a Hadamard library: the same butterflies in the input's dtype."""
    return butterflies(a)


def hadamard_work(p: Params) -> Work:
    """n log2(n) adds a row (one add or subtract per element per round); A read and B written once."""
    elements = p["b"] * p["n"]
    itemsize = 2  # both variants are 16-bit
    return Work(flops=elements * int(math.log2(p["n"])), bytes=2 * itemsize * elements)


# Each of the 13 rounds rounds every element to the dtype (the kernel's in-thread rounds compute u - v as
# (u + v) - 2v, rounding twice), so the errors add as a random walk over values of |B| ~ 91 up to ~500. A CPU
# emulation of the kernel's exact rounding (256 rows, 3 seeds) was off by at most 0.46 in fp16 and 3.9 in
# bf16, with a mean error 1.08 times the twin's; the full 134M elements add ~15 % to the max. A wrong sign, a skipped
# round or a missed exchange between warps moves B by ~|B| (the mutant: 99 % of the elements outside).
FP16 = Tolerance(atol=1.0, rtol=2**-9)
BF16 = Tolerance(
    atol=8.0,
    rtol=2**-6,
    why="bf16 keeps 8 significant bits to fp16's 11: each of the 13 rounds' rounding is 8 times fp16's",
)

FAMILY = Family(
    name="hadamard",
    shape={"b": 16384, "n": 8192},
    sanitize_shape={"b": 64},
    variants=[
        Variant("fp16", hadamard, {"dtype": T.float16}),
        Variant("bf16", hadamard, {"dtype": T.bfloat16}, tolerance=BF16),
    ],
    inputs=hadamard_inputs,
    reference=float64_hadamard,
    tolerance=FP16,
    speed_reference=torch_hadamard,
    speed_reference_label="log2(n) torch butterflies (u + v, u - v) in {dtype}",
    work=hadamard_work,
)
