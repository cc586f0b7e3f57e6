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

# The most shared memory (LDS on AMD) one block may use, static and dynamic together, in bytes: the opt-in
# maximum, which TileLang's kernels request through cudaFuncSetAttribute. A kernel above it lowers, but fails
# to launch on that target. CUDA: the CUDA C++ Programming Guide, table "Technical Specifications per Compute
# Capability", row "Maximum amount of shared memory per thread block" (the SM's capacity less the 1 KB per
# block the system reserves). AMD: the ROCm "AMD GPU specifications" table, column "LDS (KiB)", which one
# workgroup may use whole; TileLang's own carver states the same for gfx950 (carver/arch/cdna.py, 160 KiB).
SHARED_MEMORY_PER_BLOCK: dict[str, int] = {
    "sm_80": 163 * 1024,  # compute capability 8.0: 163 KB (A100: 164 KB per SM)
    "sm_89": 99 * 1024,  # 8.9: 99 KB (100 KB per SM), as 8.6
    "sm_90": 227 * 1024,  # 9.0: 227 KB (228 KB per SM)
    "sm_100a": 227 * 1024,  # 10.0: 227 KB (228 KB per SM)
    "sm_120": 99 * 1024,  # 12.0: 99 KB (128 KB per SM)
    "gfx942": 64 * 1024,  # MI300X, MI325X: 64 KiB of LDS
    "gfx950": 160 * 1024,  # MI350X, MI355X: 160 KiB of LDS
}

# Threads per warp (a wavefront on AMD) by target kind: the unit TileLang partitions a GEMM's threads into.
# CDNA runs wave64 (ROCm "AMD GPU specifications", column "Wavefront Size"; TileLang's HIP GEMM uses 64).
WARP_SIZES = {"cuda": 32, "hip": 64}

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


def shared_memory_per_block(target: str) -> int:
    """The most shared memory, in bytes, one block may use on `target` (SHARED_MEMORY_PER_BLOCK)."""
    return SHARED_MEMORY_PER_BLOCK[target]


def warp_size(target: str) -> int:
    """Threads per warp (wavefront) on `target`."""
    return WARP_SIZES[TARGETS[target]["kind"]]
