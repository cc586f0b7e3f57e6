"""NVIDIA's CUDA compilers as PyPI ships them: where they are installed, which build they are, and what to do when
they are missing.

The locks pin them (requirements-common.in): nvcc with its front end (cicc) and ptxas (PTX to machine code), the
runtime and CCCL headers it compiles against, and nvdisasm (the machine code as text). Their CUDA release is the GPU
runner image's (deploy/arc/image/Dockerfile), so what the static check reads is what the GPU runner's own compile
makes. nvcc preprocesses with the host's C++ compiler, found as TileLang's JIT finds it (`$CXX`, else g++ or clang++
on the PATH).
"""

from __future__ import annotations

import hashlib
import subprocess
from dataclasses import dataclass
from functools import cache
from importlib.metadata import PackageNotFoundError, distribution
from importlib.util import find_spec
from pathlib import Path

# The wheels the machine facts need, each with a file of it that must be installed.
PACKAGES = {
    "nvidia-cuda-nvcc": "bin/nvcc",
    "nvidia-nvvm": "nvvm/bin/cicc",
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
    release: str  # nvcc's version (`13.0.88`): the compiler that decides the machine code
    host_compiler: str  # the C++ compiler nvcc preprocesses with

    @property
    def nvcc(self) -> Path:
        return self.root / "bin" / "nvcc"

    @property
    def nvdisasm(self) -> Path:
        return self.root / "bin" / "nvdisasm"


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
    return Toolchain(roots[-1], _version("nvidia-cuda-nvcc") or "", _host_compiler())


def _host_compiler() -> str:
    from tilelang.contrib.cc import get_cplus_compiler

    found = get_cplus_compiler()
    if not found:
        raise ToolchainMissing(
            "nvcc preprocesses with the host's C++ compiler, and none is on the PATH: install g++ "
            "(`apt-get install g++`) or name one in $CXX"
        )
    return found


def toolchain_build() -> str:
    """Each wheel's version and the hash of its RECORD (every installed file with its own hash), and the host
    compiler's version: the lowering cache's key holds it, so another build of any of them is another key."""
    parts = [_host_compiler_version()]
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


def _host_compiler_version() -> str:
    """The host compiler and the first line of its `--version`: its preprocessor's macros reach the CUDA headers."""
    try:
        host = _host_compiler()
    except ToolchainMissing as missing:
        return str(missing)
    done = subprocess.run([host, "--version"], capture_output=True, text=True, check=False)
    lines = (done.stdout or done.stderr).splitlines()
    return f"{host} {lines[0] if lines else f'exit {done.returncode}'}"
