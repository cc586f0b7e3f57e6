"""NVIDIA's CUDA compilers as PyPI ships them: where they are installed, which build they are, and what to do when
they are missing.

The locks pin them (requirements-common.in): NVRTC (CUDA C++ to PTX, a library), ptxas (PTX to machine code; the
nvcc wheel ships it without the nvcc driver), the runtime and CCCL headers NVRTC compiles against, and nvdisasm (the
machine code as text). Their CUDA release is the GPU runner image's (deploy/arc/image/Dockerfile), so what the static
check reads is what the GPU runner's own compile would make.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from functools import cache
from importlib.metadata import PackageNotFoundError, distribution
from importlib.util import find_spec
from pathlib import Path

# The wheels the machine facts need, each with a file of it that must be installed.
PACKAGES = {
    "nvidia-cuda-nvrtc": "lib/libnvrtc.so.*",
    "nvidia-cuda-nvcc": "bin/ptxas",
    "nvidia-cuda-runtime": "include/cuda_runtime.h",
    "nvidia-cuda-cccl": "include/cccl/cuda/std/type_traits",
    "nvidia-cuda-nvdisasm": "bin/nvdisasm",
}


class ToolchainMissing(RuntimeError):
    """NVIDIA's compilers are not installed where the harness looks for them; the message says what to do."""


@dataclass(frozen=True)
class Toolchain:
    """The installed compilers: `root` is the wheels' shared CUDA folder (`site-packages/nvidia/cu13`)."""

    root: Path
    release: str  # ptxas's version (`13.0.88`): the compiler that decides the machine code

    @property
    def ptxas(self) -> Path:
        return self.root / "bin" / "ptxas"

    @property
    def nvdisasm(self) -> Path:
        return self.root / "bin" / "nvdisasm"

    def library(self, pattern: str) -> Path:
        """The newest file of `lib/` matching `pattern` (`libnvrtc.so.*`)."""
        found = sorted((self.root / "lib").glob(pattern))
        if not found:
            raise ToolchainMissing(f"{self.root / 'lib'} holds no {pattern}; {INSTALL_ADVICE}")
        return found[-1]


INSTALL_ADVICE = (
    "install NVIDIA's compilers from the locked wheels (`nox -s static` does; by hand: "
    f"`pip install {' '.join(PACKAGES)}` at the versions requirements-common.in pins)"
)


@cache
def find_toolchain() -> Toolchain:
    """The compilers this Python has installed; ToolchainMissing naming what is absent and how to install it."""
    missing = [name for name in PACKAGES if _version(name) is None]
    if missing:
        raise ToolchainMissing(
            f"the machine facts need NVIDIA's CUDA compilers; {', '.join(missing)} not installed: " + INSTALL_ADVICE
        )
    spec = find_spec("nvidia")
    locations = (spec.submodule_search_locations or []) if spec else []
    roots = sorted(
        folder
        for location in locations
        for folder in Path(location).glob("cu[0-9]*")
        if all(any(folder.glob(pattern)) for pattern in PACKAGES.values())
    )
    if not roots:
        raise ToolchainMissing(
            f"{', '.join(PACKAGES)} are installed, but no nvidia/cu*/ folder holds all of "
            f"{', '.join(PACKAGES.values())}; " + INSTALL_ADVICE
        )
    return Toolchain(roots[-1], _version("nvidia-cuda-nvcc") or "")


def toolchain_build() -> str:
    """Each wheel's version and the hash of its RECORD (every installed file with its own hash): the lowering
    cache's key holds it, so another build of any of them is another key."""
    parts = []
    for name in PACKAGES:
        try:
            installed = distribution(name)
        except PackageNotFoundError:
            parts.append(f"{name} not installed")
            continue
        record = installed.read_text("RECORD") or ""
        parts.append(f"{name} {installed.version} {hashlib.sha256(record.encode()).hexdigest()}")
    return "; ".join(parts)


def _version(name: str) -> str | None:
    try:
        return distribution(name).version
    except PackageNotFoundError:
        return None
