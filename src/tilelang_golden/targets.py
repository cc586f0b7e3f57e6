"""The GPU targets the project snapshots: one `Target` record each, a project setting read by both halves.

Everything the harness knows about a target is decoded here, once, from its TVM architecture name: the
backend and source suffix, the compute capability or gfx version, the arch the GPU half compiles for,
the hardware features that decide which facts exist, the warp size and the shared-memory limit. Lowering
needs no GPU: the architecture is pinned, never detected. Adding a target is adding one entry to
`TARGETS`, then `nox -s regen-golden`.

Left out on purpose, measured with TileLang 0.1.15 over every variant: `sm_90a` and `sm_100`
(the source is byte-identical to `sm_90` and `sm_100a`; the `a` features are chosen when the
source is compiled), `sm_86` (identical to `sm_80` for a GEMM), and Metal (no reductions in its
codegen, and no runner to check numerics on).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# The kernel source's file suffix per backend, as the language's own tools name it.
SOURCE_SUFFIXES = {"cuda": ".cu", "hip": ".hip"}


@dataclass(frozen=True)
class Features:
    """What a target has, by the rules TileLang 0.1.15 applies (src/cuda/target_utils.cc,
    src/rocm/target_utils.cc): which facts exist for it, and which family deviations hold there."""

    cp_async: bool  # CUDA sm_80+: cp.async copies, commit groups and waits
    tma: bool  # CUDA sm_90+: TMA loads and mbarriers (TileLang 0.1.15 refuses T.alloc_barrier before sm_90)
    tensor_memory: bool  # CUDA sm_100 to sm_110 (datacenter Blackwell; not sm_120): tcgen05 MMA into tensor memory
    lds_copies: bool  # HIP CDNA3+ (gfx94x, gfx950): TileLang's copies into LDS, waited on with s_waitcnt vmcnt
    mfma: bool  # HIP CDNA (gfx9*): matrix cores, issued as MFMA
    # T.Pipelined is software-pipelined: on every CUDA target, on ROCm only gfx950, where TileLang's async-copy
    # pipeline "has been validated" (src/transform/pipeline_planning.cc); elsewhere num_stages is dropped.
    software_pipelining: bool


@dataclass(frozen=True)
class Multiprocessor:
    """What one CUDA SM holds at once, which bounds how many blocks of a kernel it runs together (its occupancy):
    the CUDA C++ Programming Guide, table "Technical Specifications per Compute Capability"."""

    threads: int  # "Maximum number of resident threads per SM"
    blocks: int  # "Maximum number of resident blocks per SM"
    shared_memory: int  # "Maximum amount of shared memory per SM", in bytes
    registers: int = 64 * 1024  # "Number of 32-bit registers per SM" (also the most one block may use)
    # Registers are given out per warp in units of 256, within each of the SM's 4 partitions; every block is
    # charged 1 KB of shared memory for the system, and its own in units of 128 bytes.
    register_unit: int = 256
    partitions: int = 4
    reserved_shared_memory: int = 1024
    shared_memory_unit: int = 128


@dataclass(frozen=True)
class Target:
    """One snapshot target. `name` is the key everywhere (the snapshot file's stem); the rest is derived from
    its architecture by `cuda` or `hip`, never parsed again elsewhere."""

    name: str
    backend: str  # "cuda" or "hip": TVM's target kind
    arch: str  # TVM's `arch` (CUDA) or `mcpu` (HIP) as lowered: `sm_100a`, `gfx942`
    compute_capability: tuple[int, int] | None  # CUDA: (10, 0) for sm_100a; None on HIP
    gfx_version: str | None  # HIP: "942" for gfx942; None on CUDA
    # What the GPU half compiles for: from compute capability 9.0 on arch-specific (`sm_90` -> `sm_90a`), as
    # TileLang's own detection makes it for that device; the source is the snapshot's, the `a` is for nvcc
    # (wgmma and setmaxnreg assemble only for sm_90a).
    compile_arch: str
    features: Features
    warp_size: int  # threads per warp (wavefront on AMD): the unit TileLang partitions a GEMM's threads into
    # The most shared memory (LDS on AMD) one block may use, static and dynamic together, in bytes (see TARGETS).
    shared_memory_per_block: int
    multiprocessor: Multiprocessor | None = None  # CUDA only: the occupancy limits of one SM

    @property
    def source_suffix(self) -> str:
        """`.cu` for a CUDA target, `.hip` for a HIP one: the suffix of its kernel source snapshot."""
        return SOURCE_SUFFIXES[self.backend]

    @property
    def language(self) -> str:
        """What its kernel source is written in, as reports name it: CUDA or HIP."""
        return self.backend.upper()

    @property
    def description(self) -> dict[str, str]:
        """The TVM target description TileLang lowers for (`{"kind": "cuda", "arch": "sm_90"}`): part of the
        lowering cache's key, so its keys and their order never change."""
        return self._describe(self.arch)

    @property
    def compile_description(self) -> dict[str, str]:
        """The TVM target description the GPU half compiles for: `description` with `compile_arch`."""
        return self._describe(self.compile_arch)

    def _describe(self, arch: str) -> dict[str, str]:
        return {"kind": self.backend, "arch" if self.backend == "cuda" else "mcpu": arch}

    @property
    def device_architecture(self) -> str:
        """What a device of this target reports, as the GPU session reads it: `sm_<major><minor>` from its
        compute capability on CUDA (a device of capability 10.0 runs `sm_100a`, the arch-specific target whose
        features, tcgen05 and tensor memory, it has), the name in its gcnArchName before the first `:` on ROCm
        (`gfx942:sramecc+:xnack-` -> `gfx942`). The GPU session maps a device to its target with this alone."""
        if self.compute_capability is None:
            return self.arch
        major, minor = self.compute_capability
        return f"sm_{major}{minor}"


def cuda(arch: str, shared_memory_per_block: int, multiprocessor: Multiprocessor | None = None) -> Target:
    """A CUDA target from its arch (`sm_90`, `sm_100a`), with the per-block shared-memory limit in bytes and what one
    of its SMs holds."""
    matched = re.fullmatch(r"sm_(\d+)(\d)([af]?)", arch)
    if matched is None:
        raise ValueError(f"a CUDA target's arch is sm_<major><minor>[a|f], got {arch!r}")
    capability = (int(matched[1]), int(matched[2]))
    sm = capability[0] * 10 + capability[1]
    features = Features(
        cp_async=sm >= 80,
        tma=sm >= 90,
        tensor_memory=100 <= sm <= 110,
        lds_copies=False,
        mfma=False,
        software_pipelining=True,
    )
    compile_arch = arch if matched[3] or capability[0] < 9 else f"{arch}a"
    return Target(
        arch, "cuda", arch, capability, None, compile_arch, features, 32, shared_memory_per_block, multiprocessor
    )


def hip(mcpu: str, shared_memory_per_block: int) -> Target:
    """A HIP target from its mcpu (`gfx942`), with the per-block LDS limit in bytes."""
    matched = re.fullmatch(r"gfx([0-9a-f]+)", mcpu)
    if matched is None:
        raise ValueError(f"a HIP target's mcpu is gfx<version>, got {mcpu!r}")
    version = matched[1]
    cdna = version.startswith("9")  # gfx9*: CDNA, wave64 and MFMA
    features = Features(
        cp_async=False,
        tma=False,
        tensor_memory=False,
        lds_copies=cdna and version[:2].isdigit() and int(version[:2]) >= 94,
        mfma=cdna,
        software_pipelining="950" in version,
    )
    warp_size = 64 if cdna else 32  # ROCm "AMD GPU specifications", column "Wavefront Size"
    return Target(mcpu, "hip", mcpu, None, version, mcpu, features, warp_size, shared_memory_per_block)


# Shared memory per block: the opt-in maximum, which TileLang's kernels request through cudaFuncSetAttribute;
# a kernel above it lowers, but fails to launch on that target. CUDA: the CUDA C++ Programming Guide, table
# "Technical Specifications per Compute Capability", row "Maximum amount of shared memory per thread block"
# (the SM's capacity less the 1 KB per block the system reserves). AMD: the ROCm "AMD GPU specifications"
# table, column "LDS (KiB)", which one workgroup may use whole; TileLang's own carver states the same for
# gfx950 (carver/arch/cdna.py, 160 KiB).
TARGETS: dict[str, Target] = {
    target.name: target
    for target in (
        # Ampere (A100): cp.async + mma.sync; 163 KB (164 KB per SM)
        cuda("sm_80", 163 * 1024, Multiprocessor(threads=2048, blocks=32, shared_memory=164 * 1024)),
        # Ada (L4, L40S, RTX 40): 99 KB (100 KB per SM), as 8.6
        cuda("sm_89", 99 * 1024, Multiprocessor(threads=1536, blocks=24, shared_memory=100 * 1024)),
        # Hopper: TMA, mbarrier, wgmma, warp specialization; 227 KB (228 KB per SM)
        cuda("sm_90", 227 * 1024, Multiprocessor(threads=2048, blocks=32, shared_memory=228 * 1024)),
        # Blackwell datacenter (B200, GB200): tcgen05, tensor memory; 227 KB (228 KB per SM)
        cuda("sm_100a", 227 * 1024, Multiprocessor(threads=2048, blocks=32, shared_memory=228 * 1024)),
        # Blackwell consumer (RTX 50): 99 KB (128 KB per SM)
        cuda("sm_120", 99 * 1024, Multiprocessor(threads=1536, blocks=32, shared_memory=128 * 1024)),
        hip("gfx942", 64 * 1024),  # AMD CDNA 3 (MI300X, MI325X): MFMA; 64 KiB of LDS
        hip("gfx950", 160 * 1024),  # AMD CDNA 4 (MI350X, MI355X): 160 KiB of LDS
    )
}

# Device architectures left out above whose source was measured identical to a target's: the GPU session still
# refuses such a device (it never checks a device against another target's snapshots), and says so.
SAME_SOURCE_AS = {"sm_86": "sm_80"}
