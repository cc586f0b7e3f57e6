"""gqa_attention reading K from the wrong K/V head: `by % groups` where the kernel reads `by // groups`.

Query head `by` must share the K/V head of its group, `by // groups` (heads 0-7 read K/V head 0, ...). The mutant
reads K from head `by % groups` (heads 0, 8, 16, ... read K/V head 0), a valid index for every head since the
64 heads have 8 groups of 8, so nothing faults; V still comes from the right head. Only the 8 heads where the two
agree (0, 9, 18, ..., 63) stay right: in the others the scores, and so O, are those of unrelated keys, off by up to
|O| (~0.2) on most elements against an atol of 2e-4.
"""

from kernels import gqa_attention as real

from . import mutate, with_kernel

wrong_kv_head = mutate(
    real.flashattn.jit_impl,  # the @tilelang.jit function the @autotune wraps: mutate re-makes both decorators
    "K[bz, k * block_N : (k + 1) * block_N, by // groups, :]",
    "K[bz, k * block_N : (k + 1) * block_N, by % groups, :]",
)

FAMILY = with_kernel(real.FAMILY, "noncausal", wrong_kv_head)
