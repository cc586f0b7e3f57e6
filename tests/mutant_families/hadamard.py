"""hadamard reading back its own row of the exchange buffer: `shared[src_tx, j]` where the kernel reads
`shared[tgt_tx, j]`.

Step 4.1 writes each thread's values to its row of shared memory and reads another thread's (`tgt_tx`): a transpose
that brings the elements 32 threads apart (one warp apart) into one warp, so that the three block rounds of warp
shuffles combine across warps. The mutant reads its own row back: the block rounds repeat three of the warp rounds
on the same lanes (doubling those values) instead of combining the 8 warps, and step 4.3 then scatters the rows.
Every output element is a wrong sum, off by about |B| (~91) against an atol of 1 (fp16).
"""

from kernels import hadamard as real

from . import mutate, with_kernel

no_transpose = mutate(
    real.hadamard,
    "local[exchange_base + j] = shared[tgt_tx, j]",
    "local[exchange_base + j] = shared[src_tx, j]",
)

FAMILY = with_kernel(real.FAMILY, "fp16", no_transpose)
