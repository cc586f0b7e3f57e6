"""gemm_streamk whose programs stop one K iteration early: the iterations left over after dividing the stream-K
work evenly (`streamk_partial_tiles`, one extra each for the first programs) are never computed.

`last_iter` uses `T.min(pid, ...)` where `start_iter` of the next program uses `T.min(pid + 1, ...)`, so for every
program below `streamk_partial_tiles` (128 of the 132 at the baseline tile) one block_K slice of one split tile is
computed by nobody: 128 tiles of 128 x 128 each lack 32 products per element, 1.5 on average (1.9 rms) against an
atol of 2e-3. Every launch is wrong the same way (no race decides it); the data-parallel tiles stay right.
"""

from kernels import gemm_streamk as real

from . import mutate, with_kernel

partial_iterations_dropped = mutate(
    real.tl_matmul_streamk,
    "T.min(pid + 1, streamk_partial_tiles)",
    "T.min(pid, streamk_partial_tiles)",
)

# As the real variants: bound to the baseline tile's schedule, warp specialization off (without it the real kernel
# is wrong on sm_90 too, and the mutant would fail for that).
FAMILY = with_kernel(
    real.FAMILY, real.BASELINE, real.bound_to(partial_iterations_dropped, real.schedule_of(real.BASELINE))
)
