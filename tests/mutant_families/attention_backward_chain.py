"""attention_backward_chain whose preprocess kernel sums O * dO over the first 32 of the 64 head dimensions only:
Delta is wrong, so dQ and dK are (dS = P (dP - Delta)), while O and dV, which do not read Delta, stay right. The
mutated kernel is one the chain calls between two others, and only through it: the chain function runs with it in
place of the real flashattn_bwd_preprocess (`with_chain_kernels`)."""

from kernels import attention_backward_chain as real

from . import mutate, with_chain_kernels, with_kernel

half_delta = mutate(
    real.flashattn_bwd_preprocess,
    "for k in range(T.ceildiv(dim, blk)):",
    "for k in range(T.ceildiv(dim, blk) - 1):",
)

FAMILY = with_kernel(
    real.FAMILY,
    "noncausal",
    with_chain_kernels(real.FAMILY.variant("noncausal").kernel, flashattn_bwd_preprocess=half_delta),
)
