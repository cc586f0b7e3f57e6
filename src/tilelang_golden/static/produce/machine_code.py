"""Compile a lowered kernel to the machine code its GPU runs, on a machine without a GPU, as TileLang's JIT does on
the GPU runner: nvcc (with the host's C++ compiler for its preprocessing) from CUDA C++ to a cubin, `ptxas -v`'s
report of each kernel's resources, and nvdisasm (the cubin as SASS text).

The options are those of TileLang's default JIT (`tilelang/cuda/backend.py`, `tilelang_callback_cuda_compile`, and
`contrib/nvcc.py`): C++20, its template and CUTLASS include folders, `-O3 -lineinfo`, `-gencode` for the target's
arch (the arch-specific `a` target from compute capability 9.0 on), and what the kernel's pass configs ask for (fast
math, ptxas's register usage level, extra device flags). NVRTC, which has precompiled headers, is not used: its
front end computes shared-memory addresses in 64 bits where nvcc's uses 32, and ptxas then allocates other register
counts than the GPU's own compile (docs/machine-facts.md).

nvcc spends most of a kernel's compile on the headers (about 2 s of a GEMM's 3), so a session compiles the modules of
one target that share their headers and options together (`compile_together`): one translation unit holds them
all, each kernel renamed for the compile and named back in the results. Where such a unit does not compile, each
module is compiled alone, as TileLang compiles it, so a failure is its own case's. Modules alike (`Module.key`: the
same arch, options and CUDA) compile once; a run's session keeps what each key compiled to, so the regen's second
lowering, which proves the lowering deterministic, compiles nothing its first did.

nvdisasm spends most of its run starting (0.2-0.3 s, whatever it reads) and reads one file, so the kernels of every
unit compiled together are listed by one nvdisasm per arch: their code sections (`.text.<kernel>` of each cubin) end
to end, in its raw-instruction mode (`--binary`), each instruction given back to its kernel by its address. It lists
the instructions of an ELF's code sections alike (docs/machine-facts.md), and starts faster.
"""

from __future__ import annotations

import bisect
import hashlib
import re
import shlex
import struct
import subprocess
import tempfile
import zlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tilelang_golden.catalog.cases import Case
from tilelang_golden.static.produce.lowering import Lowering, LoweringRefused
from tilelang_golden.static.produce.toolchain import Toolchain, find_toolchain
from tilelang_golden.targets import TARGETS

# TileLang's pass configs that change the compile (PassConfigKey values), as its JIT reads them.
FAST_MATH = "tl.enable_fast_math"
REGISTER_USAGE_LEVEL = "tl.ptxas_register_usage_level"
DEVICE_COMPILE_FLAGS = "tl.device_compile_flags"
# A compiler's output past this many lines is cut in an error message.
LOG_LINES = 30
# How a kernel is renamed inside a unit of several modules: the module's index, then its own name.
_RENAMED = re.compile(r"tlg(\d+)_(.+)")
# A kernel's definition in TileLang's CUDA: `extern "C" __global__ void __launch_bounds__(128, 1) name(`, with any
# attributes (`__launch_bounds__`, `__cluster_dims__`) between `void` and the name.
_KERNEL = re.compile(r'^extern "C" __global__ void (?:__\w+__\([^)]*\)\s*)*(\w+)\s*\(', re.M)
_ENTRY = re.compile(r"Compiling entry function '([^']+)'")
# An instruction line of nvdisasm's listing, by its address: `        /*0a30*/                   HMMA.16816.F32 ...`.
_ADDRESS = re.compile(r"^\s*/\*([0-9a-f]+)\*/", re.M)
# An ELF64 section header (`Elf64_Shdr`): name, type, flags, address, offset, size, link, info, alignment, entry size.
_SECTION_HEADER = struct.Struct("<IIQQQQIIQQ")


class CompileError(LoweringRefused):
    """TileLang lowered the case, but NVIDIA's compiler rejected the CUDA it emitted: a failing case, unless the
    variant declares it (`Variant.does_not_lower`, whose `.error` snapshot then holds the compiler's message). Its
    message is the compiler's, then the advice a case that does not lower gets (`lowering_advice`)."""

    def __init__(self, case: Case, message: str) -> None:
        super().__init__(case, message, message)
        self.compiler_message = message


@dataclass(frozen=True)
class MachineCode:
    """What the compilers say of one CUDA module, per kernel: ptxas's resource report and the machine code as
    text."""

    arch: str  # what it was compiled for: `sm_90a`
    options: tuple[str, ...]  # the options that change the code (fast math, register usage level), as nvcc spells them
    reports: Mapping[str, str]  # kernel -> `ptxas -v`'s lines on it
    listings: Mapping[str, str]  # kernel -> nvdisasm's listing of its instructions


@dataclass(frozen=True)
class PackedCode:
    """A MachineCode as a run keeps it for modules alike to come: its listings compressed, since a module's listing is
    tens to hundreds of KiB of text and a run may keep thousands (this repository's: 63 KiB a module, 11 packed)."""

    arch: str
    options: tuple[str, ...]
    reports: Mapping[str, str]
    listings: Mapping[str, bytes]

    @classmethod
    def of(cls, code: MachineCode) -> PackedCode:
        packed = {name: zlib.compress(text.encode(), 1) for name, text in code.listings.items()}
        return cls(code.arch, code.options, code.reports, packed)

    def unpacked(self) -> MachineCode:
        listings = {name: zlib.decompress(data).decode() for name, data in self.listings.items()}
        return MachineCode(self.arch, self.options, self.reports, listings)


@dataclass(frozen=True)
class Module:
    """One CUDA module TileLang emitted for a case (a chain has one per kernel) and the pass configs it was jitted
    with."""

    case: Case
    cuda: str
    pass_configs: Mapping[str, Any]

    @property
    def arch(self) -> str:
        return TARGETS[self.case.target].compile_arch

    @property
    def options(self) -> tuple[str, ...]:
        return code_options(self.pass_configs)

    @property
    def key(self) -> str:
        """What decides its machine code, hashed: its arch, the options and the CUDA text (nvcc, its headers and
        TileLang's templates are one per run)."""
        digest = hashlib.sha256()
        for part in (self.arch, *self.options, self.cuda):
            digest.update(part.encode() + b"\0")
        return digest.hexdigest()

    @property
    def headers(self) -> str:
        """What comes before its first kernel: its includes and macros, which modules compiled together share."""
        found = _KERNEL.search(self.cuda)
        return self.cuda[: found.start()] if found else self.cuda


def modules(lowering: Lowering) -> list[Module]:
    """Each CUDA module of a lowered case, in launch order."""
    return [Module(lowering.case, step.cuda, step.pass_configs) for step in lowering.kernels]


def compile_lowering(lowering: Lowering) -> list[MachineCode]:
    """Each CUDA module of a lowered case, compiled alone for its target, as TileLang's JIT compiles it; CompileError
    naming the case with the compiler's message where one does not compile."""
    return [codes[0] for codes in _listed([_compile_unit([module]) for module in modules(lowering)])]


def compile_together(lowerings: Sequence[Lowering]) -> list[list[MachineCode] | None]:
    """The machine code of several lowered cases, per case as compile_lowering gives it, their modules of one arch,
    options and headers compiled in one translation unit; None for a case whose modules do not compile (its own
    compile_lowering says why)."""
    grouped: dict[tuple[str, tuple[str, ...], str], list[tuple[int, int, Module]]] = {}
    first: dict[str, tuple[int, int]] = {}  # a module's key -> the place of the first module alike, compiled for both
    alike: dict[tuple[int, int], tuple[int, int]] = {}
    for index, lowering in enumerate(lowerings):
        for position, module in enumerate(modules(lowering)):
            if first.setdefault(module.key, (index, position)) != (index, position):
                alike[(index, position)] = first[module.key]
                continue
            grouped.setdefault((module.arch, module.options, module.headers), []).append((index, position, module))
    units: list[tuple[list[tuple[int, int]], _Compiled]] = []
    for members in grouped.values():
        try:
            units.append(([(i, p) for i, p, _ in members], _compile_unit([module for _, _, module in members])))
        except CompileError:
            for index, position, module in members:
                try:
                    units.append(([(index, position)], _compile_unit([module])))
                except CompileError:
                    continue  # its case has no machine code
    compiled: dict[tuple[int, int], MachineCode] = {}
    for (places, _), codes in zip(units, _listed([unit for _, unit in units]), strict=True):
        compiled |= dict(zip(places, codes, strict=True))
    compiled |= {place: compiled[other] for place, other in alike.items() if other in compiled}
    found: list[list[MachineCode] | None] = []
    for index, lowering in enumerate(lowerings):
        codes = [compiled.get((index, position)) for position in range(len(lowering.kernels))]
        found.append(None if None in codes else codes)
    return found


def code_options(pass_configs: Mapping[str, Any]) -> tuple[str, ...]:
    """nvcc's options that the kernel's pass configs ask for, as TileLang's JIT adds them."""
    options = ["--use_fast_math"] if pass_configs.get(FAST_MATH) else []
    level = pass_configs.get(REGISTER_USAGE_LEVEL)
    if level is not None:
        options.append(f"--ptxas-options=--register-usage-level={int(level)}")
    flags = pass_configs.get(DEVICE_COMPILE_FLAGS) or []
    for flag in [flags] if isinstance(flags, str) else flags:
        options += shlex.split(flag) if isinstance(flag, str) else [str(flag)]
    return tuple(options)


@dataclass(frozen=True)
class _Compiled:
    """Modules nvcc compiled in one unit: ptxas's report on their kernels and the cubin that holds them."""

    members: Sequence[Module]
    report: str
    cubin: bytes

    def machine_code(self, listings: Mapping[str, str]) -> list[MachineCode]:
        """Its modules' machine code, given the listing of each kernel of its cubin: per module, its kernels by the
        names the module gives them."""
        reports, first = entry_reports(self.report), self.members[0]
        if len(self.members) == 1:
            return [MachineCode(first.arch, first.options, reports, dict(listings))]
        parts: list[tuple[dict[str, str], dict[str, str]]] = [({}, {}) for _ in self.members]
        for found, slot in ((reports, 0), (listings, 1)):
            for name, text in found.items():
                renamed = _RENAMED.fullmatch(name)
                if renamed is None or int(renamed[1]) >= len(self.members):  # not a kernel this unit renamed
                    raise CompileError(first.case, f"nvcc compiled a kernel {name!r} that no module of the unit names")
                parts[int(renamed[1])][slot][renamed[2]] = text
        return [MachineCode(m.arch, m.options, *part) for m, part in zip(self.members, parts, strict=True)]


def _compile_unit(members: Sequence[Module]) -> _Compiled:
    """Modules of one arch, options and headers compiled by one nvcc: a single module as TileLang's JIT writes it,
    several with their kernels renamed apart (`tlg<index>_<name>`), since two modules may name a kernel alike;
    CompileError naming the first module's case where nvcc fails."""
    first = members[0]
    if len(members) == 1:
        source = first.cuda
    else:
        bodies = []
        for index, module in enumerate(members):
            names = _KERNEL.findall(module.cuda)
            bodies += [f"#define {name} tlg{index}_{name}" for name in names]
            bodies += [module.cuda[len(module.headers) :], *(f"#undef {name}" for name in names)]
        source = first.headers + "\n".join(bodies) + "\n"
    with tempfile.TemporaryDirectory(prefix="tilelang-golden-") as folder:  # its files named relative to it
        (Path(folder) / "kernel.cu").write_text(source)
        command = [*nvcc_command(find_toolchain(), first.arch, first.options), "-o", "kernel.cubin", "kernel.cu"]
        report = _run(first.case, command, "nvcc", folder)
        return _Compiled(members, report, (Path(folder) / "kernel.cubin").read_bytes())


def _listed(units: Sequence[_Compiled]) -> list[list[MachineCode]]:
    """Each compiled unit's machine code, the kernels of all of them listed by one nvdisasm per arch."""
    by_arch: dict[str, list[int]] = {}
    for index, unit in enumerate(units):
        by_arch.setdefault(unit.members[0].arch, []).append(index)
    listings: dict[int, dict[str, str]] = {}
    for arch, indices in by_arch.items():
        found = disassemble(units[indices[0]].members[0].case, arch, [units[i].cubin for i in indices])
        listings |= dict(zip(indices, found, strict=True))
    return [unit.machine_code(listings[index]) for index, unit in enumerate(units)]


def disassemble(case: Case, arch: str, cubins: Sequence[bytes]) -> list[dict[str, str]]:
    """Per cubin, each kernel's instructions as nvdisasm lists them: the code sections of all of them end to end, in
    one run of nvdisasm's raw-instruction mode, each line given back to its kernel by its address. CompileError
    naming the case where nvdisasm fails."""
    starts: list[int] = []
    owners: list[tuple[int, str]] = []
    code = bytearray()
    for index, cubin in enumerate(cubins):
        for kernel, text in code_sections(cubin).items():
            starts.append(len(code))
            owners.append((index, kernel))
            code += text
    lines: list[list[str]] = [[] for _ in owners]
    with tempfile.TemporaryDirectory(prefix="tilelang-golden-") as folder:
        (Path(folder) / "code.bin").write_bytes(code)
        command = [str(find_toolchain().nvdisasm), "--binary", "SM" + arch.removeprefix("sm_"), "code.bin"]
        listing = _run(case, command, "nvdisasm", folder, stdout=True)
    for line in listing.splitlines():
        address = _ADDRESS.match(line)
        if address is not None:
            lines[bisect.bisect_right(starts, int(address[1], 16)) - 1].append(line)
    found: list[dict[str, str]] = [{} for _ in cubins]
    for (index, kernel), kept in zip(owners, lines, strict=True):
        found[index][kernel] = "\n".join(kept) + "\n"
    return found


def code_sections(cubin: bytes) -> dict[str, bytes]:
    """A cubin's kernels' machine code: each `.text.<kernel>` section of its ELF, by kernel."""
    if cubin[:5] != b"\x7fELF\x02":  # a 64-bit ELF, as nvcc writes every cubin
        raise ValueError("not a 64-bit ELF file: nvcc wrote no cubin")
    (table,) = struct.unpack_from("<Q", cubin, 0x28)
    entry_size, count, names = struct.unpack_from("<HHH", cubin, 0x3A)
    headers = [_SECTION_HEADER.unpack_from(cubin, table + i * entry_size) for i in range(count)]
    names_at = headers[names][4]
    sections = {}
    for header in headers:
        start = names_at + header[0]
        name = cubin[start : cubin.index(b"\0", start)].decode()
        if name.startswith(".text."):
            sections[name.removeprefix(".text.")] = cubin[header[4] : header[4] + header[5]]
    return sections


def nvcc_command(toolchain: Toolchain, arch: str, options: Sequence[str]) -> list[str]:
    """nvcc as TileLang's JIT runs it for a cubin (`tilelang_callback_cuda_compile`), with ptxas's report."""
    import tilelang
    from tilelang.env import CUTLASS_INCLUDE_DIR, TILELANG_TEMPLATE_PATH

    root = Path(tilelang.__file__).parent
    compute = arch.replace("sm_", "compute_")
    return [
        str(toolchain.nvcc),
        f"-ccbin={toolchain.host_compiler}",
        "--cubin",
        "-O3",
        "-lineinfo",
        "-gencode",
        f"arch={compute},code={arch}",
        "-std=c++20",
        f"-I{TILELANG_TEMPLATE_PATH or root / 'src'}",
        f"-I{CUTLASS_INCLUDE_DIR or root / '3rdparty' / 'cutlass' / 'include'}",
        *options,
        "--ptxas-options=--verbose",  # and -w, as TileLang's JIT asks for ptxas's report
        "-w",
    ]


def entry_reports(report: str) -> dict[str, str]:
    """`ptxas -v`'s report, per entry function: the lines on it."""
    parts = _ENTRY.split(report)
    return dict(zip(parts[1::2], parts[2::2], strict=True))


def _run(case: Case, command: list[str], tool: str, folder: str, stdout: bool = False) -> str:
    done = subprocess.run(command, capture_output=True, text=True, check=False, cwd=folder)
    if done.returncode != 0:
        raise CompileError(case, f"{tool} failed (exit {done.returncode}):\n{_cut(done.stderr or done.stdout)}")
    return done.stdout if stdout else done.stderr + done.stdout


def _cut(log: str) -> str:
    lines = log.strip().splitlines()
    more = [f"... {len(lines) - LOG_LINES} more lines"] if len(lines) > LOG_LINES else []
    return "\n".join(lines[:LOG_LINES] + more)
