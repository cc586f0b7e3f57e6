"""Kernel families: one module per family, each defining `FAMILY = Family(...)`, and the targets.

Every module here whose name does not start with `_` is a family and is found by the harness
(`harness.family.load_families`); adding a family is adding one file. A target is one entry in
`TARGETS`. README, "Adding a kernel family", walks through a complete example.
"""

# name -> TVM target description. Lowering needs no GPU: the arch is pinned, never detected.
TARGETS: dict[str, dict[str, str]] = {
    "sm_80": {"kind": "cuda", "arch": "sm_80"},  # Ampere: cp.async + mma.sync
    "sm_90": {"kind": "cuda", "arch": "sm_90"},  # Hopper: TMA, mbarrier, wgmma, warp specialization
}
