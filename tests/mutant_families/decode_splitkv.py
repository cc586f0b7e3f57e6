"""decode_splitkv whose combine kernel weighs each slice by 2^(lse - max) instead of 2^(lse - lse_total): the
weights no longer sum to one. The split kernel is unchanged, so only a check of the combine kernel fails it."""

from kernels import decode_splitkv as real

from . import mutate, with_kernel

unnormalized_combine = mutate(
    real.flashattn_decode_split,
    "scale_local = T.exp2(lse_local_split - lse_logsum_local)",
    "scale_local = T.exp2(lse_local_split - lse_max_local)",
)

FAMILY = with_kernel(real.FAMILY, "split4", unnormalized_combine)
