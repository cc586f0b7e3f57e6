"""The CUDA device a GPU check runs on: what it is, which snapshot target it maps to, its limits.

Everything here is queried from the device and the installed packages, never assumed, so the
same code runs on any CUDA GPU whose compute capability has a target in `harness.targets.TARGETS`.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Mapping
from dataclasses import dataclass
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

from harness.targets import TARGETS


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
    """No CUDA device is usable here; the GPU checks cannot run (and must not pass)."""


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
            "(docs/ci.md, 'Registering a runner')"
        )
    return nvcc


class UnknownTarget(RuntimeError):
    """The device's compute capability has no snapshot target to compare with."""


@dataclass(frozen=True)
class Device:
    name: str
    capability: tuple[int, int]
    target: str  # the harness.targets.TARGETS name whose static snapshots describe this device
    shared_memory_per_block_bytes: int  # the opt-in maximum a kernel may ask for
    multiprocessors: int
    versions: dict[str, str]  # cuda, torch, tilelang: part of the timing baseline's key

    @property
    def peak(self) -> Peak | None:
        return PEAKS.get(self.name)

    def as_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "capability": f"{self.capability[0]}.{self.capability[1]}",
            "target": self.target,
            "shared_memory_per_block_bytes": self.shared_memory_per_block_bytes,
            "multiprocessors": self.multiprocessors,
            "versions": dict(self.versions),
            "peak": None if self.peak is None else {"tflops": self.peak.tflops, "gbps": self.peak.gbps},
        }


def target_for_capability(major: int, minor: int) -> str:
    """Compute capability 9.0 -> "sm_90"; refuse one that no static snapshot covers."""
    name = f"sm_{major}{minor}"
    if name not in TARGETS:
        raise UnknownTarget(
            f"this GPU has compute capability {major}.{minor} ({name}), but harness.targets.TARGETS only has "
            f"{sorted(TARGETS)}: add {name!r} to TARGETS in scripts/harness/targets.py and run "
            "`nox -s regen-golden` so the GPU checks have snapshots to compare with"
        )
    return name


def require_cuda() -> Device:
    """The current CUDA device, or NoCudaDevice with what to do about it."""
    import torch

    if torch.version.cuda is None:
        raise NoCudaDevice(
            f"torch {torch.__version__} is a build without CUDA; the GPU checks need a CUDA build of "
            "PyTorch and a CUDA GPU (run `nox -s gpu` on the GPU runner)"
        )
    if not torch.cuda.is_available() or torch.cuda.device_count() == 0:
        raise NoCudaDevice(
            f"no CUDA device is visible (torch {torch.__version__}, CUDA {torch.version.cuda}, "
            f"CUDA_VISIBLE_DEVICES={os.environ.get('CUDA_VISIBLE_DEVICES', '<unset>')!r}); "
            "the GPU checks ran nothing. Run them on a machine with a CUDA GPU."
        )
    index = torch.cuda.current_device()
    properties = torch.cuda.get_device_properties(index)
    major, minor = torch.cuda.get_device_capability(index)
    return Device(
        name=properties.name,
        capability=(major, minor),
        target=target_for_capability(major, minor),
        shared_memory_per_block_bytes=int(properties.shared_memory_per_block_optin),
        multiprocessors=int(properties.multi_processor_count),
        # str(): torch's version is a str subclass that YAML's safe dumper refuses.
        versions={"cuda": str(torch.version.cuda), "torch": str(torch.__version__), "tilelang": _version("tilelang")},
    )


def gpu_unavailable() -> str | None:
    """Why no GPU check can run here (no CUDA device, no nvcc), or None; asked before anything compiles."""
    try:
        require_cuda()
        require_nvcc()
    except (NoCudaDevice, NoCudaCompiler) as error:
        return str(error)
    return None


def _version(package: str) -> str:
    try:
        return version(package)
    except PackageNotFoundError:
        return "not installed"
