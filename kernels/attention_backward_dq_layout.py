"""Flash-attention backward alone, dQ accumulated with atomics in the MMA fragment order its layout gives it.

The backward kernel of TileLang's example examples/flash_attention/example_mha_bwd_bshd.py (tile-ai/tilelang at
a35008a42, the file last changed in e23bce79d: `flashattn_bwd` and the `make_dq_layout` it annotates dQ with), copied verbatim; the harness declarations
below it are this project's. Q, K, V, dO, dK, dV are fp16 [batch, seq_len, heads, dim]; lse and Delta fp32
[batch, heads, seq_len]; dQ fp32. One block per (head, block_M keys, batch) keeps its K and V tiles in shared
memory and streams the queries block_N at a time: it recomputes P = exp2(Q K^T scale - lse), accumulates
dV += P^T dO and dK += dS^T Q in registers (dS = P (dO V^T - Delta) / sqrt(dim)), and adds each query tile's
dQ = dS K into the global dQ with one fp32 atomic per element.

dQ is not stored in its logical order: `T.annotate_layout({dQ: make_dq_layout(dQ)})` makes TileLang address the
global buffer through the layout [b, l // 8, h, d // 8, d % 2, 4 * (l % 8) + (d % 8) // 2] (so that each thread's
atomics land on consecutive addresses in the 8x8 MMA fragment's order). TileLang's LowerTileOp (src/transform/
lower_tile_op.cc, makeBufferWithLayout) keeps the data pointer of a global buffer and gives it the layout's
output shape with no strides, rewriting every access with the layout's forward map: logical element (b, l, h, d)
lives at the row-major flat offset of its forward index in a [batch, seq_len / 8, heads, dim / 8, 2, 32] buffer.
Upstream's chain undoes it with a postprocess kernel; this family undoes it in torch (`dq_from_storage`) and
compares the logical dQ with PyTorch's autograd gradient.

The lse and Delta the kernel reads are made by inputs() from Q, K, V and dO in float32, as upstream's forward and
preprocess kernels would (lse in base 2). Variants: non-causal and causal, upstream's block sizes for dim 64.
"""

import math
from typing import Any

import tilelang
import tilelang.language as T

from tilelang_golden.family import Accumulated, Family, Params, Tolerance, Variant, Work, Written
from kernels._precision import tf32_off

LOG2_E = math.log2(math.e)


# ---- copied verbatim from TileLang's examples/flash_attention/example_mha_bwd_bshd.py ----
def make_dq_layout(dQ):
    # atomicAdd can not be vectorized, so we need to reorder dq to match the 8x8 gemm fragment
    return T.Layout(dQ.shape, lambda b, l, h, d: [b, l // 8, h, d // 8, (d % 2), 4 * (l % 8) + (d % 8) // 2])


@tilelang.jit(
    out_idx=[1],
    pass_configs={
        tilelang.PassConfigKey.TL_ENABLE_FAST_MATH: True,
    },
)
def flashattn_bwd_postprocess(batch, heads, seq_len, dim):
    dtype = T.float16
    accum_dtype = T.float32
    shape = [batch, seq_len, heads, dim]
    blk = 64

    @T.prim_func
    def flash_bwd_post(
        dQ: T.Tensor(shape, accum_dtype),  # type: ignore
        dQ_out: T.Tensor(shape, dtype),  # type: ignore
    ):
        with T.Kernel(T.ceildiv(seq_len, blk), heads, batch, threads=128) as (bx, by, bz):
            T.annotate_layout({dQ: make_dq_layout(dQ)})
            T.copy(
                dQ[bz, bx * blk : (bx + 1) * blk, by, :],
                dQ_out[bz, bx * blk : (bx + 1) * blk, by, :],
            )

    return flash_bwd_post


@tilelang.jit(
    pass_configs={
        tilelang.PassConfigKey.TL_ENABLE_FAST_MATH: True,
    }
)
def flashattn_bwd(batch, heads, seq_len, dim, is_causal, block_M, block_N):
    sm_scale = (1.0 / dim) ** 0.5
    scale = (1.0 / dim) ** 0.5 * 1.44269504  # log2(e)
    shape = [batch, seq_len, heads, dim]
    dtype = T.float16
    accum_dtype = T.float32

    @T.prim_func
    def flash_bwd(
        Q: T.Tensor(shape, dtype),  # type: ignore
        K: T.Tensor(shape, dtype),  # type: ignore
        V: T.Tensor(shape, dtype),  # type: ignore
        dO: T.Tensor(shape, dtype),  # type: ignore
        lse: T.Tensor([batch, heads, seq_len], accum_dtype),  # type: ignore
        Delta: T.Tensor([batch, heads, seq_len], accum_dtype),  # type: ignore
        dQ: T.Tensor(shape, accum_dtype),  # type: ignore
        dK: T.Tensor(shape, dtype),  # type: ignore
        dV: T.Tensor(shape, dtype),  # type: ignore
    ):
        with T.Kernel(heads, T.ceildiv(seq_len, block_M), batch, threads=128) as (bx, by, bz):
            K_shared = T.alloc_shared([block_M, dim], dtype)
            dsT_shared = T.alloc_shared([block_M, block_N], dtype)
            # should not store K to local if dim is large
            # K_local = T.alloc_fragment([block_M, dim], dtype)
            # K_local_T = T.alloc_fragment([block_M, dim], dtype)
            # V_local = T.alloc_fragment([block_M, dim], dtype)
            q = T.alloc_shared([block_N, dim], dtype)
            V_shared = T.alloc_shared([block_M, dim], dtype)
            qkT = T.alloc_fragment([block_M, block_N], accum_dtype)
            dsT = T.alloc_fragment([block_M, block_N], accum_dtype)
            qkT_cast = T.alloc_fragment([block_M, block_N], dtype)
            dsT_cast = T.alloc_fragment([block_M, block_N], dtype)
            lse_shared = T.alloc_shared([block_N], accum_dtype)
            delta = T.alloc_shared([block_N], accum_dtype)
            do = T.alloc_shared([block_N, dim], dtype)
            dv = T.alloc_fragment([block_M, dim], accum_dtype)
            dk = T.alloc_fragment([block_M, dim], accum_dtype)
            dq = T.alloc_fragment([block_N, dim], accum_dtype)
            dv_shared = T.alloc_shared([block_M, dim], dtype)
            dk_shared = T.alloc_shared([block_M, dim], dtype)

            T.annotate_layout(
                {
                    dQ: make_dq_layout(dQ),
                }
            )
            T.copy(K[bz, by * block_M : (by + 1) * block_M, bx, :], K_shared)
            T.copy(V[bz, by * block_M : (by + 1) * block_M, bx, :], V_shared)
            T.clear(dv)
            T.clear(dk)
            loop_st = T.floordiv(by * block_M, block_N) if is_causal else 0
            loop_ed = T.ceildiv(seq_len, block_N)
            for k in T.Pipelined(loop_st, loop_ed, num_stages=2):
                T.copy(Q[bz, k * block_N : (k + 1) * block_N, bx, :], q)
                T.clear(qkT)
                T.gemm(K_shared, q, qkT, transpose_B=True, policy=T.GemmWarpPolicy.FullRow)
                T.copy(lse[bz, bx, k * block_N : (k + 1) * block_N], lse_shared)
                for i, j in T.Parallel(block_M, block_N):
                    qkT[i, j] = T.exp2(qkT[i, j] * scale - lse_shared[j])
                if is_causal:
                    for i, j in T.Parallel(block_M, block_N):
                        qkT[i, j] = T.if_then_else(by * block_M + i <= k * block_N + j, qkT[i, j], 0)
                # We don't need to handle OOB positions for non-causal cases,
                # since OOB values won't affect other positions here.
                T.copy(dO[bz, k * block_N : (k + 1) * block_N, bx, :], do)
                T.clear(dsT)
                T.gemm(V_shared, do, dsT, transpose_B=True, policy=T.GemmWarpPolicy.FullRow)
                T.copy(qkT, qkT_cast)
                T.gemm(qkT_cast, do, dv, policy=T.GemmWarpPolicy.FullRow)

                T.copy(Delta[bz, bx, k * block_N : (k + 1) * block_N], delta)

                for i, j in T.Parallel(block_M, block_N):
                    dsT_cast[i, j] = qkT[i, j] * (dsT[i, j] - delta[j]) * sm_scale
                T.gemm(dsT_cast, q, dk, policy=T.GemmWarpPolicy.FullRow)

                T.copy(dsT_cast, dsT_shared)
                T.clear(dq)
                T.gemm(dsT_shared, K_shared, dq, transpose_A=True)
                for i, j in T.Parallel(block_N, dim):
                    T.atomic_add(dQ[bz, k * block_N + i, bx, j], dq[i, j])
            T.copy(dv, dv_shared)
            T.copy(dk, dk_shared)
            T.copy(dv_shared, dV[bz, by * block_M : (by + 1) * block_M, bx, :])
            T.copy(dk_shared, dK[bz, by * block_M : (by + 1) * block_M, bx, :])

    return flash_bwd
# ---- end of the verbatim copy ----


def dq_from_storage(p: Params, stored: Any) -> Any:
    """dQ in its logical [batch, seq_len, heads, dim] order from the buffer the kernel wrote.

    The kernel addresses dQ through make_dq_layout: logical (b, l, h, d), with l = 8 l1 + l0 and
    d = 8 d1 + 2 a + c (c = d % 2, a = (d % 8) // 2), lives at [b, l1, h, d1, c, 4 l0 + a] of a row-major
    [batch, seq_len / 8, heads, dim / 8, 2, 32] buffer. Viewing that last axis as (l0, a) and moving l0 next to
    l1 and a before c gives [b, l1, l0, h, d1, a, c], the logical order."""
    batch, seq_len, heads, dim = p["batch"], p["seq_len"], p["heads"], p["dim"]
    storage = stored.reshape(batch, seq_len // 8, heads, dim // 8, 2, 8, 4)  # [b, l1, h, d1, c, l0, a]
    return storage.permute(0, 1, 5, 2, 3, 6, 4).reshape(batch, seq_len, heads, dim)


def dq_to_storage(p: Params, logical: Any) -> Any:
    """The inverse of dq_from_storage: a logical dQ laid out as the kernel stores it (for the CPU checks)."""
    batch, seq_len, heads, dim = p["batch"], p["seq_len"], p["heads"], p["dim"]
    split = logical.reshape(batch, seq_len // 8, 8, heads, dim // 8, 4, 2)  # [b, l1, l0, h, d1, a, c]
    return split.permute(0, 1, 3, 4, 6, 2, 5).reshape(batch, seq_len, heads, dim)


def _bhsd(x: Any) -> Any:
    """[batch, seq_len, heads, dim] -> [batch, heads, seq_len, dim] (a view)."""
    return x.transpose(1, 2)


def backward_inputs(p: Params, generator: Any, device: str) -> list[Any]:
    """Q, K, V and dO, fp16 standard normal in [batch, seq_len, heads, dim], then what upstream's forward and
    preprocess kernels would hand the backward, computed in float32 from them: lse, the base-2 log-sum-exp of
    each query's scaled scores (log2 of sum_j 2^(s_ij log2(e) / sqrt(dim))), and Delta = rowsum(O * dO), O the
    attention output, both [batch, heads, seq_len]. Float32 rather than the fp16 O the forward would write: the
    check then measures the backward kernel's own rounding, and Delta differs from the chain's by 2^-11 of |O dO|."""
    import torch

    shape = (p["batch"], p["seq_len"], p["heads"], p["dim"])
    q, k, v, do = (torch.randn(shape, generator=generator, device=device, dtype=torch.float16) for _ in range(4))
    with tf32_off():
        scores = _bhsd(q).float() @ _bhsd(k).float().transpose(-1, -2) / math.sqrt(p["dim"])
        if p["is_causal"]:
            seq = p["seq_len"]
            future = torch.ones(seq, seq, dtype=torch.bool, device=device).triu(1)
            scores = scores.masked_fill(future, float("-inf"))
        lse = torch.logsumexp(scores, dim=-1) * LOG2_E
        out = torch.softmax(scores, dim=-1) @ _bhsd(v).float()
        delta = (out * _bhsd(do).float()).sum(-1)
    return [q, k, v, do, lse.contiguous(), delta.contiguous()]


def float32_gradients(p: Params, q: Any, k: Any, v: Any, do: Any, lse: Any, delta: Any) -> Any:
    """dQ, dK and dV of softmax(Q K^T / sqrt(dim)) V against dO: torch autograd on float32 copies (SDPA, TF32
    off), in the logical [batch, seq_len, heads, dim]. lse and Delta are not read: the gradients come from the
    tensors they were made from."""
    import torch
    import torch.nn.functional as F

    leaves = [x.float().requires_grad_() for x in (q, k, v)]
    with tf32_off(), torch.enable_grad():
        out = F.scaled_dot_product_attention(*(_bhsd(x) for x in leaves), is_causal=p["is_causal"])
        return torch.autograd.grad(out, leaves, _bhsd(do).float())


# The forward graph the speed reference differentiates: built on its first call for one set of inputs, then each
# call runs only the backward, as upstream's benchmark times `O_ref.backward(dO, retain_graph=True)`.
_GRAPH: dict[str, Any] = {}


def torch_backward(p: Params, q: Any, k: Any, v: Any, do: Any, lse: Any, delta: Any) -> Any:
    """PyTorch's SDPA backward on the fp16 tensors (its flash-attention backward on an H200): dQ, dK, dV in fp16."""
    import torch
    import torch.nn.functional as F

    built = _GRAPH.get("inputs")
    if built is None or len(built) != 3 or any(a is not b for a, b in zip(built, (q, k, v))):
        leaves = [x.detach().requires_grad_() for x in (q, k, v)]
        with torch.enable_grad():
            out = F.scaled_dot_product_attention(*(_bhsd(x) for x in leaves), is_causal=p["is_causal"])
        _GRAPH.update(inputs=(q, k, v), leaves=leaves, out=out)
    return torch.autograd.grad(_GRAPH["out"], _GRAPH["leaves"], _bhsd(do), retain_graph=True)


def torch_backward_twin(p: Params, *inputs: Any) -> Any:
    """The speed reference's gradients in the kernel's output dtypes: its fp16 dQ widened to the kernel's fp32."""
    dq, dk, dv = torch_backward(p, *inputs)
    return dq.float(), dk, dv


def backward_work(p: Params) -> Work:
    """Five GEMMs of 2 seq_len^2 dim per (batch, head) (Q K^T, dO V^T, P^T dO, dS^T Q, dS K), half of it causal;
    Q, K, V, dO read and dK, dV written in fp16, lse and Delta read, dQ read and written once in fp32. The atomics
    add each dQ element seq_len / block_M times, but in L2: they are not counted as memory traffic."""
    elements = p["batch"] * p["seq_len"] * p["heads"] * p["dim"]
    flops = 10 * elements * p["seq_len"]
    rows = p["batch"] * p["heads"] * p["seq_len"]
    return Work(flops=flops // 2 if p["is_causal"] else flops, bytes=6 * 2 * elements + 2 * 4 * rows + 2 * 4 * elements)


# Error sources, sized by a float64 emulation of these kernels' roundings (the exact
# fp16 and fp32 roundings of P, dS, O, lse, Delta and the outputs, 8 heads of 2048 and 256 causal heads of 128):
# P is rounded to fp16 for P V and P^T dO, dS to fp16 for dS^T Q and dS K (2^-11 relative each), O, dQ, dK and dV
# to fp16 on the way out (2^-11 relative); fp32 sums, fast-math exp2 and the order of dQ's atomics add ~1e-7.
# Non-causal, every row averages 2048 keys: |O|, |dQ|, |dK|, |dV| are ~0.03 (at most ~0.7) and an isclose at
# rtol 2^-8 needed atol <= 4.8e-5 (max abs error 2e-4).
NONCAUSAL_WHY = (
    "fp16 roundings of P, dS and the output (2^-11 relative each) on values ~0.03: the emulation needed atol <= 4.8e-5 "
    "at rtol 2^-8; 5x that"
)
# Causal, the first query rows average a few keys and the last keys are seen by a few queries: values up to ~6,
# and an fp16 rounding of a dS near 0.5 moves a gradient whose terms cancel by ~1e-3. Over 256 heads the emulation
# needed atol <= 2.3e-3 at rtol 2^-8.
CAUSAL_WHY = (
    "early query rows average a few keys and late keys see a few queries: one fp16 rounding of a dS near 0.5 moves "
    "a cancelling gradient by ~1e-3; the emulation needed atol <= 2.3e-3 at rtol 2^-8 over 256 heads; 4x that"
)
# dQ is fp32 here (no output rounding): its error is below dK's and dV's, under the same tolerance.
TOLERANCES = [Tolerance(atol=2.5e-4, rtol=2**-8, why=NONCAUSAL_WHY)] * 3  # dQ, dK, dV
TOLERANCES_CAUSAL = [Tolerance(atol=1e-2, rtol=2**-8, why=CAUSAL_WHY)] * 3
# What the checks must catch is far outside both: one 64-query tile skipped leaves 64 rows of dQ at zero and
# moves 94-95 % of dK and dV outside the non-causal tolerance (the mutant in tests/mutant_families).


def variant(is_causal: bool, **declared: Any) -> Variant:
    """Upstream's backward tiles for dim 64 (block_M 64 keys, block_N 64 queries; 128 threads)."""
    name = "causal" if is_causal else "noncausal"
    params = {"is_causal": is_causal, "block_M": 64, "block_N": 64}
    return Variant(name, flashattn_bwd, params, tolerance=TOLERANCES_CAUSAL if is_causal else None, **declared)


FAMILY = Family(
    name="attention_backward_dq_layout",
    # Upstream's main() at twice its sequence: 8 x 32 heads of 64, 2048 tokens. 0.69 TFLOP non-causal; 1024 blocks
    # of 128 threads; dQ takes 32 atomic adds per element.
    shape={"batch": 8, "heads": 32, "seq_len": 2048, "dim": 64},
    sanitize_shape={"batch": 1, "heads": 2, "seq_len": 256},
    variants=[variant(is_causal=False), variant(is_causal=True)],
    inputs=backward_inputs,
    # dQ (6) is accumulated with atomics into a buffer the harness zeroes, in make_dq_layout's order; dK (7) and
    # dV (8) are written whole.
    outputs={6: Accumulated(to_logical=dq_from_storage), 7: Written(), 8: Written()},
    nondeterministic={6: "fp32 atomics add 32 key blocks' dQ into each element in whatever order they land"},
    reference=float32_gradients,
    tolerance=TOLERANCES,  # the causal variant gives its own (variant())
    speed_reference=torch_backward,
    speed_reference_label="SDPA(is_causal={is_causal}) backward: torch.autograd.grad(out, (q, k, v), dO)",
    precision_twin=torch_backward_twin,
    work=backward_work,
)
