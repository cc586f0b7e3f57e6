"""The machine facts of a case on a CUDA target: per kernel, what ptxas allocated (registers, spills, stack, static
shared memory, barriers), how many blocks of it one SM runs at once and what limits them, and the machine
instructions that decide its speed, counted by class.

Read from `ptxas -v` and `nvdisasm` (`tilelang_golden.static.produce.machine_code`); the threads and the dynamic shared
memory of each launch come from the lowering's own facts, since ptxas sees only static shared memory.
"""

from __future__ import annotations

import math
import re
from typing import Any

from tilelang_golden.static.produce.facts import kernel_launches
from tilelang_golden.static.produce.lowering import Lowering
from tilelang_golden.static.produce.machine_code import MachineCode, entry_reports
from tilelang_golden.static.produce.toolchain import find_toolchain
from tilelang_golden.static.snapshots.snapshot import MACHINE_FORMAT_VERSION
from tilelang_golden.targets import TARGETS, Multiprocessor

# SASS instruction classes: class -> its test on an opcode (the mnemonic before its first `.`), in listing order.
# Tensor-core MMA is every opcode ending in MMA: HMMA (mma.sync), IMMA/QMMA (integer, fp8), HGMMA/IGMMA/QGMMA
# (wgmma), UTC*MMA (tcgen05).
SASS_CLASSES: dict[str, Any] = {
    "async_copies": lambda op: op in ("LDGSTS", "LDGDEPBAR", "DEPBAR"),  # cp.async, its commit and its wait
    "tma": lambda op: op.startswith(("UTMA", "UBLKCP")),  # TMA loads, stores, prefetches and bulk copies
    "mma": lambda op: op.endswith("MMA"),
    "matrix_load_store": lambda op: op in ("LDSM", "STSM"),  # ldmatrix, stmatrix
    "local_memory": lambda op: op in ("LDL", "STL"),
    "barriers": lambda op: op in ("BAR", "SYNCS", "MEMBAR"),  # bar.sync, mbarrier operations, fences
}
_FRAME = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")
# `Used 240 registers, used 1 barriers, 1024 bytes cumulative stack size, 1024 bytes smem`: each clause after the
# registers only where it applies (a kernel with a stack names its cumulative size before its shared memory).
_USED = re.compile(
    r"Used (\d+) registers(?:, used (\d+) barriers)?(?:, \d+ bytes cumulative stack size)?(?:, (\d+) bytes smem)?"
)
_INSTRUCTION = re.compile(r"^\s*/\*[0-9a-f]+\*/\s+(?:@!?U?P[T0-9]+\s+)?([A-Z][A-Z0-9_]*)", re.M)


def machine_facts(lowering: Lowering, compiled: list[MachineCode]) -> dict[str, Any]:
    """The machine facts of a lowered case from its compiled modules: each device kernel in launch order, as the
    facts list them."""
    case = lowering.case
    target = TARGETS[case.target]
    resources: dict[str, dict[str, int]] = {}
    listings: dict[str, str] = {}
    for module in compiled:
        resources |= {name: kernel_resources(name, report) for name, report in module.reports.items()}
        listings |= module.listings
    kernels = []
    for launch in kernel_launches(lowering):
        name = launch["name"]
        if name not in resources or name not in listings:
            raise ValueError(f"{case.id}: ptxas reported no kernel {name!r} (it reported {sorted(resources)})")
        used = resources[name]
        shared = launch["dynamic_shared_memory_bytes"] + used["static_shared_memory_bytes"]
        kernels.append(
            {
                "name": name,
                **used,
                "occupancy": occupancy(used["registers"], launch["threads"], shared, target.multiprocessor),
                "sass": instruction_classes(listings[name]),
            }
        )
    return {
        "format": MACHINE_FORMAT_VERSION,
        "case": {"family": case.family.name, "variant": case.variant.name, "target": case.target},
        "toolchain": toolchain_facts(compiled[0]),
        "kernels": kernels,
    }


def toolchain_facts(compiled: MachineCode) -> dict[str, Any]:
    """What compiled it: the CUDA release of ptxas, the arch and the options that change the code."""
    return {"cuda": find_toolchain().release, "arch": compiled.arch, "options": list(compiled.options)}


def parse_resources(report: str) -> dict[str, dict[str, int]]:
    """`ptxas -v`'s report, per entry function: what kernel_resources reads of it."""
    return {name: kernel_resources(name, block) for name, block in entry_reports(report).items()}


def kernel_resources(name: str, report: str) -> dict[str, int]:
    """`ptxas -v`'s lines on one kernel: registers, spill stores and loads, stack frame, static shared memory (bytes)
    and named barriers."""
    frame, used = _FRAME.search(report), _USED.search(report)
    if frame is None or used is None:
        raise ValueError(f"ptxas's report on {name} has no resource lines:\n{report.strip()}")
    return {
        "registers": int(used[1]),
        "spill_store_bytes": int(frame[2]),
        "spill_load_bytes": int(frame[3]),
        "stack_frame_bytes": int(frame[1]),
        "static_shared_memory_bytes": int(used[3] or 0),
        "barriers": int(used[2] or 0),
    }


def instruction_classes(listing: str) -> dict[str, dict[str, int]]:
    """Per class of SASS_CLASSES, the count of each of its opcodes in the listing (every class present, sorted)."""
    counts: dict[str, dict[str, int]] = {name: {} for name in SASS_CLASSES}
    for opcode in _INSTRUCTION.findall(listing):
        for name, member in SASS_CLASSES.items():
            if member(opcode):
                counts[name][opcode] = counts[name].get(opcode, 0) + 1
    return {name: dict(sorted(found.items())) for name, found in counts.items()}


def occupancy(registers: int, threads: int, shared_memory: int, sm: Multiprocessor | None) -> dict[str, Any]:
    """How many blocks of a launch one SM runs at once (the CUDA occupancy calculator's rules), and which of
    registers, shared memory, threads and block slots limit it; 0 blocks where one block exceeds the SM."""
    facts: dict[str, Any] = {"threads": threads, "shared_memory_bytes": shared_memory}
    if sm is None:
        return facts
    warps = math.ceil(threads / 32)
    per_warp = math.ceil(registers * 32 / sm.register_unit) * sm.register_unit
    warps_by_registers = (sm.registers // sm.partitions // per_warp) * sm.partitions if per_warp else sm.threads // 32
    charged = math.ceil(shared_memory / sm.shared_memory_unit) * sm.shared_memory_unit + sm.reserved_shared_memory
    limits = {
        "registers": warps_by_registers // warps if registers * threads <= sm.registers else 0,
        "shared memory": sm.shared_memory // charged,
        "threads": sm.threads // (warps * 32),
        "block slots": sm.blocks,
    }
    blocks = min(limits.values())
    return {
        **facts,
        "blocks_per_sm": blocks,
        "warps_per_sm": blocks * warps,
        "limited_by": [name for name, value in limits.items() if value == blocks],
    }
