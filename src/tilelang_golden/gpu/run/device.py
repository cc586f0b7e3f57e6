"""The GPU a check runs on: what it is, which snapshot target it maps to, its limits.

Everything here is queried from the device and the installed packages, never assumed. A device maps
to the target in `tilelang_golden.targets.TARGETS` whose `device_architecture` it reports: its compute
capability on a CUDA build of PyTorch, its `gcnArchName` on a ROCm build (which PyTorch also calls
`torch.cuda`). A device with no such target stops the run, naming the target to add.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

from tilelang_golden.static.snapshots.regen import regen_command
from tilelang_golden.targets import SAME_SOURCE_AS, TARGETS


@dataclass(frozen=True)
class Peak:
    """Datasheet peaks: dense fp16/bf16 tensor-core TFLOP/s (no sparsity) and HBM GB/s."""

    tflops: float
    gbps: float


# By the name CUDA reports. The report shows each kernel's fraction of the peak its work is
# bound by; a GPU not listed gets rates without fractions.
PEAKS: dict[str, Peak] = {
    "NVIDIA H200": Peak(tflops=989, gbps=4800),
    "NVIDIA H100 80GB HBM3": Peak(tflops=989, gbps=3350),
    "NVIDIA A100-SXM4-80GB": Peak(tflops=312, gbps=2039),
}


class NoCudaDevice(RuntimeError):
    """No CUDA (or ROCm) device is usable here; the GPU checks cannot run (and must not pass)."""


class NoCudaCompiler(RuntimeError):
    """No nvcc where TileLang looks for it: every kernel compilation would fail."""


def find_nvcc(environ: Mapping[str, str] = os.environ) -> str | None:
    """The nvcc TileLang would use, searched in TileLang's order: $CUDA_HOME or $CUDA_PATH, then
    `nvcc` on PATH, then /usr/local/cuda. PyPI's CUDA torch brings no nvcc."""
    home = environ.get("CUDA_HOME") or environ.get("CUDA_PATH")
    if home:
        candidate = Path(home) / "bin" / "nvcc"
        return str(candidate) if candidate.is_file() else None
    on_path = shutil.which("nvcc", path=environ.get("PATH"))
    if on_path:
        return on_path
    default = Path("/usr/local/cuda/bin/nvcc")
    return str(default) if default.is_file() else None


def require_nvcc(environ: Mapping[str, str] = os.environ) -> str:
    nvcc = find_nvcc(environ)
    if nvcc is None:
        where = environ.get("CUDA_HOME") or environ.get("CUDA_PATH")
        looked = f"$CUDA_HOME/bin/nvcc ({where}/bin/nvcc)" if where else "nvcc on PATH, /usr/local/cuda/bin/nvcc"
        raise NoCudaCompiler(
            f"no CUDA compiler: looked for {looked}. TileLang compiles every kernel with nvcc and PyPI's CUDA "
            "torch does not bring one: install a CUDA toolkit matching the driver and point CUDA_HOME at it "
            "(docs/ci.md, 'Prerequisites of the GPU nodes and the image')"
        )
    return nvcc


class UnknownTarget(RuntimeError):
    """The device's architecture has no snapshot target to compare with."""


@dataclass(frozen=True)
class Device:
    name: str
    capability: tuple[int, int]
    target: str  # the tilelang_golden.targets.TARGETS name whose static snapshots describe this device
    shared_memory_per_block_bytes: int  # the opt-in maximum a kernel may ask for
    multiprocessors: int
    # cuda (or hip), torch, tilelang: the timing baseline's key; driver and nvcc: kept in the performance history
    versions: dict[str, str]
    gcn_arch_name: str | None = None  # what a ROCm device reports, e.g. `gfx942:sramecc+:xnack-`; None on CUDA

    @property
    def peak(self) -> Peak | None:
        return PEAKS.get(self.name)

    @property
    def reports(self) -> str:
        """What the device was mapped to its target from: `compute capability 9.0` or `gcnArchName gfx942:...`."""
        if self.gcn_arch_name is not None:
            return f"gcnArchName {self.gcn_arch_name}"
        return f"compute capability {self.capability[0]}.{self.capability[1]}"

    @property
    def runtime(self) -> str:
        """`CUDA 13.0` or `ROCm (HIP) 6.4...`: the GPU runtime PyTorch was built for."""
        return f"ROCm (HIP) {self.versions['hip']}" if "hip" in self.versions else f"CUDA {self.versions['cuda']}"

    def as_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "capability": f"{self.capability[0]}.{self.capability[1]}",
            "gcn_arch_name": self.gcn_arch_name,
            "target": self.target,
            "shared_memory_per_block_bytes": self.shared_memory_per_block_bytes,
            "multiprocessors": self.multiprocessors,
            "versions": dict(self.versions),
            "peak": None if self.peak is None else {"tflops": self.peak.tflops, "gbps": self.peak.gbps},
        }


def target_for_architecture(architecture: str) -> str | None:
    """The snapshot target a device of this architecture (`sm_90`, `sm_100`, `gfx942`) runs, or None.

    The one mapping, for both vendors: `Target.device_architecture` of every target."""
    found = [name for name, target in TARGETS.items() if target.device_architecture == architecture]
    return found[0] if found else None


def _refuse(reported: str, architecture: str, to_add: str, backend: str, note: str = "") -> UnknownTarget:
    entry = f"{backend}({to_add!r}, <shared memory per block, bytes>)"  # as tilelang_golden.targets builds its records
    return UnknownTarget(
        f"this GPU has {reported} ({architecture}), but tilelang_golden.targets.TARGETS has no target for it "
        f"({list(TARGETS)}): add {to_add!r} to TARGETS in the harness's tilelang_golden/targets.py ({entry}) and run "
        f"`{regen_command()}`, so the GPU checks have snapshots to compare with{note}"
    )


def target_for_capability(major: int, minor: int) -> str:
    """Compute capability 9.0 -> "sm_90", 10.0 -> "sm_100a"; refuse one that no static snapshot covers."""
    architecture = f"sm_{major}{minor}"
    target = target_for_architecture(architecture)
    if target is not None:
        return target
    # Where the project snapshots a major's arch-specific target (sm_100a), its siblings need theirs too.
    siblings = [
        name
        for name, target in TARGETS.items()
        if target.compute_capability is not None and target.compute_capability[0] == major and target.arch.endswith("a")
    ]
    to_add = f"{architecture}a" if siblings else architecture
    note = ""
    if architecture in SAME_SOURCE_AS:
        twin = SAME_SOURCE_AS[architecture]
        note = (
            f". TileLang emitted the same source for {architecture} as for {twin} when that was measured "
            "(the harness's tilelang_golden/targets.py), but a device is never checked against another target's "
            "snapshots"
        )
    if siblings:
        note += f". {to_add}, not {architecture}: arch-specific, as the project's {siblings[0]} is"
    raise _refuse(f"compute capability {major}.{minor}", architecture, to_add, "cuda", note)


def target_for_gcn_arch(gcn_arch_name: str) -> str:
    """ROCm's `gfx942:sramecc+:xnack-` -> "gfx942" (the name before the feature flags); refuse one with no target."""
    architecture = gcn_arch_name.split(":", 1)[0].strip()
    target = target_for_architecture(architecture)
    if target is None:
        raise _refuse(f"gcnArchName {gcn_arch_name!r}", architecture, architecture, "hip")
    return target


def require_cuda() -> Device:
    """The current GPU, through PyTorch's `torch.cuda` (a CUDA or a ROCm build), or NoCudaDevice with what to do."""
    import torch

    hip = getattr(torch.version, "hip", None)
    if torch.version.cuda is None and hip is None:
        raise NoCudaDevice(
            f"torch {torch.__version__} is a build with neither CUDA nor ROCm; the GPU checks need a CUDA build of "
            "PyTorch and a CUDA GPU, or (not verified) a ROCm build and an AMD GPU (run `nox -s gpu` on the GPU runner)"
        )
    if not torch.cuda.is_available() or torch.cuda.device_count() == 0:
        if torch.version.cuda is not None:
            raise NoCudaDevice(
                f"no CUDA device is visible (torch {torch.__version__}, CUDA {torch.version.cuda}, "
                f"CUDA_VISIBLE_DEVICES={os.environ.get('CUDA_VISIBLE_DEVICES', '<unset>')!r}); "
                "the GPU checks ran nothing. Run them on a machine with a CUDA GPU."
            )
        visible = ", ".join(
            f"{v}={os.environ.get(v, '<unset>')!r}" for v in ("HIP_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES")
        )
        raise NoCudaDevice(
            f"no ROCm device is visible (torch {torch.__version__}, HIP {hip}, {visible}); "
            "the GPU checks ran nothing. Run them on a machine with an AMD GPU."
        )
    index = torch.cuda.current_device()
    properties = torch.cuda.get_device_properties(index)
    major, minor = torch.cuda.get_device_capability(index)
    # str(): torch's version is a str subclass that YAML's safe dumper refuses.
    common = {"torch": str(torch.__version__), "tilelang": _version("tilelang")}
    if torch.version.cuda is None:  # ROCm: the capability PyTorch reports (9.4 for gfx942) names no CUDA target
        gcn_arch_name = str(properties.gcnArchName)
        target, versions = target_for_gcn_arch(gcn_arch_name), {"hip": str(hip), **common}
    else:
        gcn_arch_name = None
        target, versions = target_for_capability(major, minor), {"cuda": str(torch.version.cuda), **common}
        versions.update(driver=_driver_version(), nvcc=_nvcc_version())
    # Not verified on ROCm: whether its PyTorch reports the opt-in limit; the per-block one is the fallback.
    shared = getattr(properties, "shared_memory_per_block_optin", None) or properties.shared_memory_per_block
    return Device(
        name=properties.name,
        capability=(major, minor),
        target=target,
        shared_memory_per_block_bytes=int(shared),
        multiprocessors=int(properties.multi_processor_count),
        versions=versions,
        gcn_arch_name=gcn_arch_name,
    )


def gpu_unavailable() -> str | None:
    """Why no GPU check can run here (no device, no target for it, no nvcc), or None; asked before anything compiles.

    nvcc is required for a CUDA target only; for a HIP target TileLang finds ROCm itself (not checked here)."""
    try:
        device = require_cuda()
        if TARGETS[device.target].backend == "cuda":
            require_nvcc()
    except (NoCudaDevice, UnknownTarget, NoCudaCompiler) as error:
        return str(error)
    return None


def _driver_version() -> str:
    """The NVIDIA driver's version (`580.95.05`), through NVML; `unknown` without it."""
    try:
        import pynvml

        pynvml.nvmlInit()
        return str(pynvml.nvmlSystemGetDriverVersion())
    except Exception:  # no package, no driver library: the check runs on, the history says unknown
        return "unknown"


def _nvcc_version() -> str:
    """The release of the nvcc TileLang compiles with (`13.0.88`), or `unknown`."""
    nvcc = find_nvcc()
    if nvcc is None:
        return "unknown"
    try:
        said = subprocess.run([nvcc, "--version"], capture_output=True, text=True, timeout=60).stdout
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    found = re.search(r"\bV(\d+(?:\.\d+)+)", said)
    return found[1] if found else "unknown"


def _version(package: str) -> str:
    try:
        return version(package)
    except PackageNotFoundError:
        return "not installed"
