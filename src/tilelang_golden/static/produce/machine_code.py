"""Compile a lowered kernel to the machine code its GPU runs, on a machine without a GPU: NVRTC (CUDA C++ to PTX,
in-process), ptxas (PTX to a cubin, printing each kernel's resources), nvdisasm (the cubin as SASS text).

The options are those of TileLang's own NVRTC path (`tilelang/jit/adapter/nvrtc/libgen.py`, `contrib/nvrtc.py`):
its include folders and prelude, `-default-device`, the arch-specific `a` target from compute capability 9.0 on,
plus what its default nvcc path adds (`jit/adapter/libgen.py`): C++20, which TileLang's templates and emitted code
need (C++17 rejects `float2(a, b)`), and what the kernel's pass configs ask for (fast math, ptxas's register usage
level). NVRTC, not nvcc: nvcc has no precompiled headers and takes about 4 s a kernel here; the two front ends
differ on some kernels by a few registers (docs/machine-facts.md). NVRTC's precompiled headers make a compile after
the first of a header set and arch about five times faster, but its default PCH heap (256 MiB) is too small for
CUTLASS's GEMM headers, so it is raised once per process.
"""

from __future__ import annotations

import atexit
import ctypes
import hashlib
import os
import shutil
import subprocess
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from tilelang_golden.catalog.cases import Case
from tilelang_golden.static.produce.lowering import Lowering, LoweringError, does_not_lower_line
from tilelang_golden.static.produce.toolchain import Toolchain, find_toolchain
from tilelang_golden.static.snapshots.regen import regen_command
from tilelang_golden.targets import TARGETS

# TileLang's pass configs that change the compile (PassConfigKey values), as its nvcc path reads them.
FAST_MATH = "tl.enable_fast_math"
REGISTER_USAGE_LEVEL = "tl.ptxas_register_usage_level"
# NVRTC's precompiled-header heap: the default 256 MiB is too small for some of CUTLASS's GEMM header sets (one needs
# 272.8 MB), whose header is then never made.
PCH_HEAP_BYTES = 1 << 29
# Precompiled headers kept per process (one per arch and header set, about 250 MB each), the least recently used
# deleted first: cases are checked grouped by target, so the ones in use are the newest.
PCH_KEPT = 6
# A compiler's output past this many lines is cut in an error message.
LOG_LINES = 30


class CompileError(LoweringError):
    """TileLang lowered the case, but NVIDIA's compiler rejected the CUDA it emitted: a failing case, unless the
    variant declares it (`Variant.does_not_lower`, whose `.error` snapshot then holds the compiler's message)."""

    def __init__(self, case: Case, message: str) -> None:
        super().__init__(
            case.id,
            f"{message}\nFix the kernel in {case.family.file} and rerun; or, if it is right as written, declare it "
            f"there and write its .error snapshot:\n    {does_not_lower_line(case)}\n    {regen_command(case.id)}",
        )
        self.compiler_message = message


@dataclass(frozen=True)
class MachineCode:
    """What the compilers say of one CUDA module: ptxas's resource report and the machine code as text."""

    arch: str  # what it was compiled for: `sm_90a`
    options: tuple[str, ...]  # the options that change the code (fast math, register usage level), as nvcc spells them
    resources: str  # `ptxas -v`'s report
    sass: str  # `nvdisasm -c`'s listing


def compile_lowering(lowering: Lowering) -> list[MachineCode]:
    """Each CUDA module of a lowered case (one per kernel of a chain), compiled for its target."""
    return [compile_module(lowering.case, step.cuda, step.pass_configs) for step in lowering.kernels]


def compile_module(case: Case, cuda: str, pass_configs: Mapping[str, Any]) -> MachineCode:
    """A CUDA module TileLang emitted for the case's target, compiled as TileLang's JIT would; CompileError naming
    the case with the compiler's message where it does not compile."""
    toolchain = find_toolchain()
    nvrtc_options, ptxas_options = code_options(pass_configs)
    arch = TARGETS[case.target].compile_arch
    ptx = _nvrtc(toolchain).ptx(case, cuda, arch.replace("sm_", "compute_"), nvrtc_options)
    with tempfile.TemporaryDirectory(prefix="tilelang-golden-") as folder:
        ptx_path, cubin_path = Path(folder) / "kernel.ptx", Path(folder) / "kernel.cubin"
        ptx_path.write_bytes(ptx)
        ptxas = [str(toolchain.ptxas), f"-arch={arch}", "-v", *ptxas_options, "-o", str(cubin_path), str(ptx_path)]
        resources = _run(case, ptxas, "ptxas")
        sass = _run(case, [str(toolchain.nvdisasm), "-c", str(cubin_path)], "nvdisasm", stdout=True)
    options = (*nvrtc_options, *(f"--ptxas-options={option}" for option in ptxas_options))
    return MachineCode(arch, options, resources, sass)


def code_options(pass_configs: Mapping[str, Any]) -> tuple[list[str], list[str]]:
    """(NVRTC's options, ptxas's options) that the kernel's pass configs ask for, as TileLang's nvcc path adds them."""
    level = pass_configs.get(REGISTER_USAGE_LEVEL)
    return (
        ["--use_fast_math"] if pass_configs.get(FAST_MATH) else [],
        [f"--register-usage-level={int(level)}"] if level is not None else [],
    )


def _run(case: Case, command: list[str], tool: str, stdout: bool = False) -> str:
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise CompileError(case, f"{tool} failed (exit {done.returncode}):\n{_cut(done.stderr or done.stdout)}")
    return done.stdout if stdout else done.stderr + done.stdout


def _cut(log: str) -> str:
    lines = log.strip().splitlines()
    more = [f"... {len(lines) - LOG_LINES} more lines"] if len(lines) > LOG_LINES else []
    return "\n".join(lines[:LOG_LINES] + more)


class _Nvrtc:
    """libnvrtc from the wheel, through ctypes: its builtins library loaded first (it is found by name only), the
    PCH heap raised, and one folder of precompiled headers for this process."""

    def __init__(self, toolchain: Toolchain) -> None:
        ctypes.CDLL(str(toolchain.library("libnvrtc-builtins.so.*")), mode=ctypes.RTLD_GLOBAL)
        self.lib = ctypes.CDLL(str(toolchain.library("libnvrtc.so.*")))
        self.lib.nvrtcGetErrorString.restype = ctypes.c_char_p
        self._check(self.lib.nvrtcSetPCHHeapSize(ctypes.c_size_t(PCH_HEAP_BYTES)), "nvrtcSetPCHHeapSize")
        major, minor = ctypes.c_int(), ctypes.c_int()
        self._check(self.lib.nvrtcVersion(ctypes.byref(major), ctypes.byref(minor)), "nvrtcVersion")
        self.pch = tempfile.mkdtemp(prefix="tilelang-golden-pch-")
        atexit.register(shutil.rmtree, self.pch, True)
        self.options = [
            "-std=c++20",  # as TileLang's nvcc path compiles (its templates and emitted code use C++20)
            "-default-device",
            "-w",
            "-pch",
            f"-pch-dir={self.pch}",
            *_tilelang_includes(toolchain),
            f"-D__CUDACC_VER_MAJOR__={major.value}",
        ]

    def _check(self, result: int, call: str) -> None:
        if result != 0:
            raise RuntimeError(f"{call}: {self.lib.nvrtcGetErrorString(result).decode()}")

    def ptx(self, case: Case, cuda: str, arch: str, extra: list[str]) -> bytes:
        source = "#include <tl_templates/cuda/nvrtc_std.h>\n" + cuda
        if "cudaGridDependencySynchronize" in cuda or "cudaTriggerProgrammaticLaunchCompletion" in cuda:
            source = '#include "cuda_device_runtime_api.h"\n' + source
        program, name = ctypes.c_void_p(), _pch_name(source, arch)
        self._check(
            self.lib.nvrtcCreateProgram(ctypes.byref(program), source.encode(), name, 0, None, None),
            "nvrtcCreateProgram",
        )
        try:
            options = [o.encode() for o in (*self.options, f"--gpu-architecture={arch}", *extra)]
            result = self.lib.nvrtcCompileProgram(program, len(options), (ctypes.c_char_p * len(options))(*options))
            if result != 0:
                log = _cut(self._log(program))
                raise CompileError(case, f"NVRTC could not compile TileLang's CUDA for {arch}:\n{log}")
            size = ctypes.c_size_t()
            self._check(self.lib.nvrtcGetPTXSize(program, ctypes.byref(size)), "nvrtcGetPTXSize")
            ptx = ctypes.create_string_buffer(size.value)
            self._check(self.lib.nvrtcGetPTX(program, ptx), "nvrtcGetPTX")
            return ptx.value
        finally:
            self.lib.nvrtcDestroyProgram(ctypes.byref(program))
            self._prune(name)

    def _prune(self, used: bytes) -> None:
        """Keep the PCH_KEPT headers used last: the one this program used (named after it) is marked now."""
        for path in Path(self.pch).glob(f"{Path(used.decode()).stem}*"):
            os.utime(path)
        headers = sorted(Path(self.pch).iterdir(), key=lambda path: path.stat().st_mtime)
        for path in headers[:-PCH_KEPT]:
            path.unlink(missing_ok=True)

    def _log(self, program: ctypes.c_void_p) -> str:
        size = ctypes.c_size_t()
        self._check(self.lib.nvrtcGetProgramLogSize(program, ctypes.byref(size)), "nvrtcGetProgramLogSize")
        log = ctypes.create_string_buffer(size.value)
        self._check(self.lib.nvrtcGetProgramLog(program, log), "nvrtcGetProgramLog")
        return log.value.decode(errors="replace")


def _pch_name(source: str, arch: str) -> bytes:
    """The program's name, which names its precompiled header: one per arch and set of leading includes, so that a
    kernel with other headers or for another arch does not replace the one the next kernel would reuse."""
    includes = "".join(line for line in source.splitlines(keepends=True)[:40] if line.startswith("#include"))
    return f"{arch}-{hashlib.sha256(includes.encode()).hexdigest()[:12]}.cu".encode()


@cache
def _nvrtc(toolchain: Toolchain) -> _Nvrtc:
    return _Nvrtc(toolchain)


def _tilelang_includes(toolchain: Toolchain) -> list[str]:
    """TileLang's NVRTC include folders: its templates and CUTLASS (where every TileLang since 0.1.12 names them),
    then the CUDA headers of the locked wheels, which keep CCCL in a folder of their own."""
    import tilelang
    from tilelang.env import CUTLASS_INCLUDE_DIR, TILELANG_TEMPLATE_PATH

    root = Path(tilelang.__file__).parent
    cuda = toolchain.root / "include"
    folders = [
        TILELANG_TEMPLATE_PATH or str(root / "src"),
        CUTLASS_INCLUDE_DIR or str(root / "3rdparty" / "cutlass" / "include"),
        *(str(folder) for folder in (cuda, cuda / "cccl") if folder.is_dir()),
    ]
    return [f"-I{folder}" for folder in folders]
