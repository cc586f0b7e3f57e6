"""The GPU targets the project snapshots: a project setting, read by both halves.

name -> TVM target description. Lowering needs no GPU: the architecture is pinned, never
detected. Adding a target is adding one entry here, then `nox -s regen-golden`.

Left out on purpose, measured with TileLang 0.1.15 over every variant: `sm_90a` and `sm_100`
(the source is byte-identical to `sm_90` and `sm_100a`; the `a` features are chosen when the
source is compiled), `sm_86` (identical to `sm_80` for a GEMM), and Metal (no reductions in its
codegen, and no runner to check numerics on).
"""

TARGETS: dict[str, dict[str, str]] = {
    "sm_80": {"kind": "cuda", "arch": "sm_80"},  # Ampere (A100): cp.async + mma.sync
    "sm_89": {"kind": "cuda", "arch": "sm_89"},  # Ada (L4, L40S, RTX 40)
    "sm_90": {"kind": "cuda", "arch": "sm_90"},  # Hopper: TMA, mbarrier, wgmma, warp specialization
    "sm_100a": {"kind": "cuda", "arch": "sm_100a"},  # Blackwell datacenter (B200, GB200): tcgen05, tensor memory
    "sm_120": {"kind": "cuda", "arch": "sm_120"},  # Blackwell consumer (RTX 50)
    "gfx942": {"kind": "hip", "mcpu": "gfx942"},  # AMD CDNA 3 (MI300X, MI325X): MFMA
    "gfx950": {"kind": "hip", "mcpu": "gfx950"},  # AMD CDNA 4 (MI355X)
}

# Device architectures left out above whose source was measured identical to a target's: the GPU session still
# refuses such a device (it never checks a device against another target's snapshots), and says so.
SAME_SOURCE_AS = {"sm_86": "sm_80"}

# The kernel source's file suffix per target kind, as the language's own tools name it.
SOURCE_SUFFIXES = {"cuda": ".cu", "hip": ".hip"}


def device_architecture(target: str) -> str:
    """What a device of this target reports, as the GPU session reads it: `sm_<major><minor>` from its compute
    capability on CUDA (a device of capability 10.0 runs `sm_100a`, the arch-specific target whose features,
    tcgen05 and tensor memory, it has), the name in its gcnArchName before the first `:` on ROCm
    (`gfx942:sramecc+:xnack-` -> `gfx942`). The GPU session maps a device to its target with this alone."""
    description = TARGETS[target]
    if description["kind"] == "hip":
        return description["mcpu"]
    return description["arch"].removesuffix("a")


def source_suffix(target: str) -> str:
    """`.cu` for a CUDA target, `.hip` for a HIP one: the suffix of its kernel source snapshot."""
    return SOURCE_SUFFIXES[TARGETS[target]["kind"]]
