"""Every kernel variant and every target the golden pipeline lowers.

Adding a variant: append a `Variant` to a family module's `VARIANTS` (or add a family module
and list it in `FAMILIES`). Adding a target: one entry in `TARGETS`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

# name -> TVM target description. Lowering needs no GPU: the arch is pinned, never detected.
TARGETS: dict[str, dict[str, str]] = {
    "sm_80": {"kind": "cuda", "arch": "sm_80"},  # Ampere: cp.async + mma.sync
    "sm_90": {"kind": "cuda", "arch": "sm_90"},  # Hopper: TMA, mbarrier, wgmma, warp specialization
}

# One problem shape for snapshots and GPU runs alike, so the CUDA that is timed is the CUDA
# that is snapshotted (the shape is baked into the generated code).
PROBLEM_SHAPE: dict[str, int] = {"M": 8192, "N": 8192, "K": 8192}


@dataclass(frozen=True)
class Variant:
    """One kernel variant: a family, a name unique in it, and how to build its PrimFunc."""

    family: str
    name: str
    build: Callable[..., Any] = field(compare=False, repr=False)
    params: Mapping[str, Any] = field(default_factory=dict, compare=False)
    # What the variant computes, for the GPU checks: "matmul" or "matmul_relu".
    reference: str = field(default="matmul", compare=False)

    @property
    def key(self) -> str:
        return f"{self.family}/{self.name}"

    def prim_func(self, M: int, N: int, K: int) -> Any:
        """The TileLang PrimFunc for an M x N x K problem."""
        return self.build(M=M, N=N, K=K, **self.params)


def all_variants() -> list[Variant]:
    """Every registered variant, in declaration order (family by family)."""
    from kernels import gemm_num_stages, gemm_relu_schedules

    families = (gemm_relu_schedules, gemm_num_stages)
    variants = [v for family in families for v in family.VARIANTS]
    keys = [v.key for v in variants]
    duplicated = sorted({k for k in keys if keys.count(k) > 1})
    if duplicated:
        raise ValueError(f"kernels/: variant names must be unique, these repeat: {duplicated}")
    return variants
