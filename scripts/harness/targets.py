"""The GPU targets the project snapshots: a project setting, read by both halves.

name -> TVM target description. Lowering needs no GPU: the architecture is pinned, never
detected. Adding a target is adding one entry here, then `nox -s regen-golden`.
"""

TARGETS: dict[str, dict[str, str]] = {
    "sm_80": {"kind": "cuda", "arch": "sm_80"},  # Ampere: cp.async + mma.sync
    "sm_90": {"kind": "cuda", "arch": "sm_90"},  # Hopper: TMA, mbarrier, wgmma, warp specialization
}
