"""Contradictions: what TileLang asked for in a case's facts that the case's own machine code does not hold.

A regression class (tilelang_golden.regressions) compares a snapshot with its predecessor, so a first snapshot passes
it whatever it holds: an fp8 GEMM (e4m3) on sm_80 lowers and compiles, its facts (`.yaml`, from the IR) record
`tirx.ptx_mma m16n8k32 ... e4m3`, and its machine facts (`.machine.yaml`) `mma: {}`, because CuTe's SM89 fp8 MMA
compiles to nothing below sm_89: the kernel computes garbage. These rules read the two files of one snapshot, kernel by
kernel, and name where they disagree. `nox -s static` and `nox -s regen-golden` fail a case with one (the regen writes
nothing for it) until the kernel is fixed or its variant says why it is intended:
`Variant(acknowledged_contradictions={"mma": "why"})`. Standard library only: a family declaration checks the names it
acknowledges, and the reports read it without TileLang.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from tilelang_golden.regressions import (
    MMA_FAMILIES,
    MMA_GENERATIONS,
    REASON_PLACEHOLDER,
    buffer_stages,
    sass_mma_generation,
    unwritten,
)

Document = Mapping[str, Any]  # a parsed facts or machine facts file
Kernel = Mapping[str, Any]  # one entry of its `kernels`


@dataclass(frozen=True)
class Contradiction:
    """One kernel asking in its IR for what its machine code does not hold."""

    name: str  # the rule's: what a declaration names
    kernel: str
    asked: str  # what TileLang asked for, read from the facts
    holds: str  # what the machine code holds instead, read from the machine facts
    means: str  # what that does to the kernel

    def line(self) -> str:
        """`mma: gemm_kernel: TileLang asked for ...; the machine code holds ...: it means ...`."""
        holds = f"the machine code holds {self.holds}"
        return f"{self.name}: {self.kernel}: TileLang asked for {self.asked}; {holds}: {self.means}"


def _opcodes(compiled: Kernel, sass_class: str, prefixes: tuple[str, ...] = ()) -> dict[str, int]:
    """The kernel's opcodes of one SASS class (those starting with one of `prefixes`, where given) and their counts."""
    counts = compiled.get("sass", {}).get(sass_class, {})
    return {op: n for op, n in counts.items() if n and (not prefixes or op.startswith(prefixes))}


def _shown(counts: Mapping[str, int]) -> str:
    return ", ".join(f"{op} {n}" for op, n in sorted(counts.items())) or "{}"


def _filled_by(kernel: Kernel, op_part: str) -> list[str]:
    """The shared buffers an instruction whose name holds `op_part` writes or reads (`shared_addressing`)."""
    addressing = kernel.get("shared_addressing", {})
    return sorted(name for name, by_op in addressing.items() if any(op_part in op for op in by_op))


def _mma(kernel: Kernel, compiled: Kernel) -> Contradiction | None:
    """Each kind of tensor-core MMA the IR issues (mma.sync, wgmma, tcgen05) has machine instructions of its kind."""
    mma = kernel.get("mma", {})
    asked = {MMA_FAMILIES.get(family, "mma.sync") for family in mma.get("families", [])}
    held = _opcodes(compiled, "mma")
    kinds = {sass_mma_generation(op) for op in held}
    missing = [kind for kind in MMA_GENERATIONS if kind in asked and kind not in kinds]
    if not missing:
        return None
    ops = tuple(mma.get("ops", []))
    sites = [key for key in kernel.get("instructions", {}) if key.split(" ")[0] in ops] or mma.get("shapes", [])
    return Contradiction(
        "mma",
        kernel["name"],
        f"{'/'.join(missing)} tensor-core MMA ({', '.join(sites)})",
        f"no {'/'.join(missing)} instruction (sass.mma: {_shown(held)})",
        "it compiled to nothing (an arch guard, as CuTe's SM89 fp8 MMA has below sm_89): the kernel computes garbage",
    )


@dataclass(frozen=True)
class _AsyncCopy:
    """A kind of asynchronous copy: how the facts count it, which buffers it fills, and its machine instructions."""

    name: str
    counted: str  # the facts' `sync` count of it
    op_part: str  # what the name of the instruction that fills a buffer holds
    sass_class: str
    opcodes: tuple[str, ...]
    asked: str  # `cp.async ({n} copies{into})`
    missing: str  # `no LDGSTS`
    means: str

    def __call__(self, kernel: Kernel, compiled: Kernel) -> Contradiction | None:
        """Copies the IR makes this way are these instructions in the machine code."""
        count = kernel.get("sync", {}).get(self.counted, 0)
        buffers = _filled_by(kernel, self.op_part)
        if not (count or buffers) or _opcodes(compiled, self.sass_class, self.opcodes):
            return None
        into = f" into {', '.join(buffers)}" if buffers else ""
        held = _shown(_opcodes(compiled, self.sass_class))
        return Contradiction(
            self.name,
            kernel["name"],
            self.asked.format(n=count, into=into),
            f"{self.missing} (sass.{self.sass_class}: {held})",
            self.means,
        )


_cp_async = _AsyncCopy(
    "cp-async",
    "cp_async_copies",
    "cp_async",
    "async_copies",
    ("LDGSTS",),
    "cp.async ({n} copies{into})",
    "no LDGSTS",
    "the copies are plain loads or gone: they overlap nothing, or shared memory is read unfilled",
)
# Tiles loaded by TMA are UTMALDG (a tensor map) or UBLKCP (a bulk copy) in the machine code.
_tma = _AsyncCopy(
    "tma",
    "tma_loads",
    "tma_load",
    "tma",
    ("UTMALDG", "UBLKCP"),
    "TMA loads ({n} call sites{into})",
    "no UTMALDG or UBLKCP",
    "no copy delivers the bytes its mbarriers wait for: it hangs or reads unfilled tiles",
)


def planned_stages(kernel: Kernel) -> tuple[int, str]:
    """The copies of its shared buffers that a kernel which pipelines (a `T.Pipelined` loop, or warp specialization)
    keeps, and where they are: `(3, "num_stages 3; shared buffers X_s 3, Y_s 3")`; (1, "") where it keeps one."""
    pipelines = kernel.get("pipelines", [])
    if not pipelines and not kernel.get("warp_specialized"):
        return 1, ""
    copies = {name: n for name, n in buffer_stages(kernel).items() if n >= 2}
    if not copies:
        return 1, ""
    asked = sorted({n for p in pipelines if isinstance(n := p.get("tl_pipelined_num_stages"), int)})
    said = [f"num_stages {'/'.join(str(n) for n in asked)}"] * bool(asked)
    said += ["warp specialized"] * bool(kernel.get("warp_specialized"))
    said.append("shared buffers " + ", ".join(f"{name} {n}" for name, n in sorted(copies.items())))
    return max(copies.values()), "; ".join(said)


def _stages(kernel: Kernel, compiled: Kernel) -> Contradiction | None:
    """A kernel that keeps pipeline stages in shared memory fills them with some async copy (LDGSTS, UTMALDG, UBLKCP).
    Where its IR asks for cp.async or TMA, their own rules say what the machine code lacks."""
    stages, where = planned_stages(kernel)
    asynchronous = _opcodes(compiled, "async_copies", ("LDGSTS",)) | _opcodes(compiled, "tma", ("UTMALDG", "UBLKCP"))
    sync = kernel.get("sync", {})
    asked = sync.get("cp_async_copies", 0) or sync.get("tma_loads", 0) or _filled_by(kernel, "cp_async")
    if stages < 2 or asynchronous or asked or _filled_by(kernel, "tma_load"):
        return None
    return Contradiction(
        "stages",
        kernel["name"],
        f"{stages} pipeline stages ({where})",
        "no async copy (no LDGSTS, UTMALDG or UBLKCP)",
        "synchronous loads fill the stages: they overlap nothing and only cost shared memory",
    )


# Each contradiction's name (what `Variant.acknowledged_contradictions` names) and how one kernel's facts and machine
# facts show it, in the order a refusal lists them.
RULES: dict[str, Callable[[Kernel, Kernel], Contradiction | None]] = {
    "mma": _mma,
    "cp-async": _cp_async,
    "tma": _tma,
    "stages": _stages,
}
NAMES: tuple[str, ...] = tuple(RULES)


def find_contradictions(facts: Document, machine: Document) -> list[Contradiction]:
    """Every rule's contradiction in every kernel of a case, its facts' kernels paired with its machine facts' by
    name (a kernel the machine facts lack is left out: its file's own check says so)."""
    compiled = {kernel.get("name"): kernel for kernel in machine.get("kernels", [])}
    found = []
    for kernel in facts.get("kernels", []):
        if kernel.get("name") in compiled:
            found += [c for find in RULES.values() if (c := find(kernel, compiled[kernel["name"]])) is not None]
    return found


def unacknowledged(found: Iterable[Contradiction], acknowledged: Mapping[str, str]) -> list[Contradiction]:
    """The contradictions no declaration says why are intended (a placeholder reason says nothing)."""
    return [c for c in found if c.name not in acknowledged or unwritten(str(acknowledged[c.name]))]


def refusal(what: str, found: Sequence[Contradiction], file: str, variant: str) -> str:
    """Why a case fails: `what` (the case and its files), each contradiction in one line, then the fix and the
    declaration that makes it intended."""
    names = ", ".join(f'"{name}": "{REASON_PLACEHOLDER}"' for name in dict.fromkeys(c.name for c in found))
    return "\n".join(
        [
            f"{what}:",
            *(f"  {c.line()}" for c in found),
            f"Fix the kernel in {file}; if it is intended, say why on variant {variant!r}: "
            f"Variant(acknowledged_contradictions={{{names}}})",
        ]
    )


def spills(machine: Document) -> list[str]:
    """`gemm_kernel: 36 B spill stores, 28 B spill loads` for each kernel that spills registers."""
    return [
        f"{k.get('name')}: {k.get('spill_store_bytes', 0)} B spill stores, {k.get('spill_load_bytes', 0)} B spill loads"
        for k in machine.get("kernels", [])
        if k.get("spill_store_bytes", 0) or k.get("spill_load_bytes", 0)
    ]
