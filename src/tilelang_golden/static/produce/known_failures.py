"""TileLang failures this repository has met and explained: the error's text, the TileLang versions it was seen with,
its cause in words and what to do about it.

TileLang's own text rarely says what in the kernel it could not handle (`Downcast from tirx.Sub to ir.IntImm failed`).
A case that fails with a text one entry matches is told that entry's cause and workaround, and the declaration it is
advised to add (`lowering_advice`) gives the cause as its reason. Each entry is the text of a lowering on the CPU with
the TileLang that golden/MANIFEST.yaml names (tests/static/produce/test_lowering_advice.py lowers each again); add one
when a family file explains a new failure, and its version when another TileLang fails alike.
"""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class KnownFailure:
    """One failure of TileLang (or of NVIDIA's compiler on TileLang's CUDA) whose cause is known."""

    pattern: str  # a regular expression searched for in the error's text (TileLang's exception, the compiler's output)
    versions: tuple[str, ...]  # the TileLang versions it was seen with
    cause: str  # why it fails, in words: what the kernel asks for that TileLang cannot do (a declaration's reason)
    where: str  # the targets it occurs on, in words: `on sm_80 and sm_89`, `where TMA is lowered`
    workaround: str  # what to do about it

    def matches(self, error: str) -> bool:
        return re.search(self.pattern, error) is not None

    @property
    def seen_with(self) -> str:
        """`TileLang 0.1.15`, or `TileLang 0.1.14, 0.1.15`."""
        return f"TileLang {', '.join(self.versions)}"

    @property
    def reason(self) -> str:
        """The cause as a `does_not_lower` reason: with the version, since the next TileLang may lower it."""
        return f"{self.seen_with}: {self.cause}"


KNOWN_FAILURES: tuple[KnownFailure, ...] = (
    KnownFailure(
        pattern=r"Downcast from tirx\.Sub to ir\.IntImm failed",
        versions=("0.1.15",),
        cause=(
            "a T.Pipelined loop whose trip count depends on the block index (a causal mask's key loop) gets a pipeline "
            "epilogue that waits for a number of async-copy groups computed from the loop's variable, and codegen "
            "needs a constant there"
        ),
        where=(
            "where the pipeline waits on async-copy groups (cp.async on sm_80 and sm_89, gfx950's async copies), not "
            "where TMA and mbarriers replace them (sm_90 and later) or nothing is pipelined (gfx942)"
        ),
        workaround=(
            "num_stages=1 for that loop, or a trip count that does not depend on the block index; if the schedule is "
            "meant as written, declare the targets it fails on"
        ),
    ),
    KnownFailure(
        pattern=r"ReduceOp: batch=\d+ exceeds per-thread output element count",
        versions=("0.1.15",),
        cause=(
            "a block-wide reduction is batched, one batch element per reduced row, and the batch must fit the output "
            "values each thread holds, which are fewer the more threads the block has"
        ),
        where="on Blackwell (sm_100a, sm_120)",
        workaround=(
            "fewer threads per block, so that each thread holds an output value per row (4 rows of 4096 lower at 256 "
            "threads, not at 512), or one row per block; if the thread count is the point, declare the Blackwell "
            "targets"
        ),
    ),
    KnownFailure(
        pattern=r"ProducerConsumerWS: failed to replace pipeline loop",
        versions=("0.1.15",),
        cause=(
            "warp specialization cannot split a T.Pipelined loop whose trip count is read from a local buffer inside "
            "another loop into producer and consumer warps"
        ),
        where="where TMA is lowered (sm_90 and later), which turns warp specialization on",
        workaround=(
            "jit the kernel with warp specialization off, pass_configs={tilelang.PassConfigKey."
            "TL_DISABLE_WARP_SPECIALIZED: True} (it then lowers everywhere), or num_stages=0 for that loop"
        ),
    ),
    KnownFailure(
        pattern=r"T\.tcgen05_gemm\(\) requires Blackwell TCGEN5MMA lowering",
        versions=("0.1.15",),
        cause="T.tcgen05_gemm issues tcgen05.mma into tensor memory, and TileLang refuses it where there is none",
        where="on every target but datacenter Blackwell (sm_100a)",
        workaround=(
            "snapshot the family on the targets that have it, Family(..., targets=targets_where(lambda t: "
            "t.features.tensor_memory)), or use T.gemm, which TileLang lowers for every target"
        ),
    ),
    KnownFailure(
        pattern=r"T\.alloc_barrier\(\) requires sm_90",
        versions=("0.1.15",),
        cause="T.alloc_barrier allocates hardware mbarriers, which TileLang refuses before sm_90",
        where="on sm_80 and sm_89",
        workaround=(
            "for a kernel written around mbarriers (TMA, warp specialization), snapshot the family where they exist, "
            "Family(..., targets=targets_where(lambda t: t.features.tma)); else synchronize the block with "
            "T.sync_threads()"
        ),
    ),
)


def known_failure(error: str) -> KnownFailure | None:
    """The known failure an error's text matches, or None."""
    return next((known for known in KNOWN_FAILURES if known.matches(error)), None)
