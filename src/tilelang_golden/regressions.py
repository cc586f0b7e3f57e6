"""Regression classes: the changes of a case's facts that make its kernel worse, in one declared table.

A class names a slowdown a reviewer knows (async copies lost, tensor-core MMA of an older kind, spills, occupancy
falling, ...) and the measures it reads: one reading per kernel, from the facts (`.yaml`) or the machine code facts
(`.machine.yaml`), and which way is worse. A change whose reading moved the worse way is a regression of that class:
`nox -s static` names it first, and `nox -s regen-golden` writes it only when acknowledged. A family adds its own
classes (Family.regressions), as it adds checks. Standard library only: the reports read it without TileLang.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

# The subjects of the two fact kinds (tilelang_golden.static.kinds): the file a measure reads.
FACTS = "facts"
MACHINE = "machine code"
WORSE = ("lower", "higher")
# What a regen's accept command holds where the person running it must say why the regression is right.
REASON_PLACEHOLDER = "<why it is right>"
# A reason that is still a placeholder: empty, an `<...>` to fill in, or a note to come back to it.
UNWRITTEN_REASON = re.compile(r"^\s*$|<[^<>]*>|^\s*(?:todo|fixme|tbd|xxx)\b", re.IGNORECASE)
CLASS_NAME = re.compile(r"[a-z][a-z0-9-]*")

Document = Mapping[str, Any]  # a parsed facts file
Kernel = Mapping[str, Any]  # one entry of its `kernels`


@dataclass(frozen=True)
class Reading:
    """One kernel's value of a measure: `key` is compared, `text` is what a reviewer reads."""

    key: Any
    text: str


@dataclass(frozen=True)
class Measure:
    """One value per kernel that a class compares before and after."""

    reads: str  # FACTS or MACHINE: the file it is read from
    fields: str  # the fields it reads, for the table in docs/snapshot-format.md
    worse: str  # "lower" or "higher": which way of the key is a regression
    read: Callable[[Document, Kernel], Reading | None]  # None where it does not apply to the kernel

    compare: Callable[[Any, Any], bool] | None = None  # (before, after) -> worse, where the keys are no numbers

    def worsened(self, before: Reading, after: Reading) -> bool:
        if self.compare is not None:
            return self.compare(before.key, after.key)
        return after.key < before.key if self.worse == "lower" else after.key > before.key


@dataclass(frozen=True)
class RegressionClass:
    """A kind of change that makes a kernel slower, with the words a reviewer reads and the measures that find it."""

    name: str  # what an acknowledgement names: `--accept-regression NAME=REASON`, Variant.acknowledged_regressions
    words: str  # what the verdict says
    measures: tuple[Measure, ...]

    def __post_init__(self) -> None:
        if not CLASS_NAME.fullmatch(self.name):
            raise ValueError(f"regression class name {self.name!r}: lower-case letters, digits and `-`, as `spills`")
        if not self.words.strip() or not self.measures:
            raise ValueError(f"regression class {self.name!r} needs its words and at least one Measure")
        for measure in self.measures:
            if measure.reads not in (FACTS, MACHINE) or measure.worse not in WORSE:
                raise ValueError(
                    f"regression class {self.name!r}: a measure reads {FACTS!r} or {MACHINE!r} and is worse "
                    f"{' or '.join(WORSE)}, not {measure.reads!r} / {measure.worse!r}"
                )


@dataclass(frozen=True)
class Regression:
    """One kernel of a case that got worse by one class's measure."""

    name: str  # the class's
    words: str  # the class's
    kernel: str
    change: str  # `LDGSTS 24 -> none`
    reason: str = ""  # why it is right, where acknowledged
    by: str = ""  # who acknowledged it: the variant's declaration or the regen's option

    @property
    def acknowledged(self) -> bool:
        return bool(self.reason)

    def line(self) -> str:
        """`async copies lost or fewer: gemm_kernel: LDGSTS 24 -> none`, then `(acknowledged: <reason>)` where it is."""
        acknowledged = f" (acknowledged: {self.reason})" if self.acknowledged else ""
        return f"{self.words}: {self.kernel}: {self.change}{acknowledged}"

    def to_list(self) -> list[str]:
        return [self.name, self.words, self.kernel, self.change, self.reason, self.by]

    @classmethod
    def from_list(cls, data: Sequence[str]) -> Regression:
        return cls(*data)


# -- the measures of the built-in classes ------------------------------------------------------------------------


def _count(opcodes: Mapping[str, int], prefixes: tuple[str, ...]) -> int:
    return sum(n for opcode, n in opcodes.items() if opcode.startswith(prefixes))


def _ranked(ranks: Sequence[str], kinds: Mapping[str, int], counted: bool) -> Reading:
    """The newest kind present (`ranks` oldest first) and how many of it: an older kind is lower, and so, where
    `counted`, is fewer of the same kind."""
    present = [kind for kind in ranks if kinds.get(kind)]
    if not present:
        return Reading((0, 0), "none")
    best = present[-1]
    rank = ranks.index(best) + 1
    return Reading((rank, kinds[best] if counted else 0), f"{best} {kinds[best]}")


def _source_async_copies(document: Document, kernel: Kernel) -> Reading:
    """The shared buffers each kind of async copy fills (not its instruction count, which a tile size changes)."""
    ops = [set(by_op) for by_op in kernel.get("shared_addressing", {}).values()]
    filled = {
        "cp.async buffers": sum(any("cp_async" in op for op in buffer) for buffer in ops),
        "TMA buffers": sum(any("tma_load" in op for op in buffer) for buffer in ops),
    }
    return _ranked(("cp.async buffers", "TMA buffers"), filled, counted=True)


def _sass_async_copies(document: Document, kernel: Kernel) -> Reading:
    """Whether the machine code still copies asynchronously, and how (its instruction counts are shown only)."""
    sass = kernel.get("sass", {})
    counts = {"LDGSTS": _count(sass.get("async_copies", {}), ("LDGSTS",))}
    counts["TMA"] = _count(sass.get("tma", {}), ("UTMALDG", "UBLKCP"))
    return _ranked(("LDGSTS", "TMA"), counts, counted=False)


# Oldest first; FMA (no tensor core) is below all of them. AMD's MFMA is the mma.sync of its targets.
MMA_GENERATIONS = ("mma.sync", "wgmma", "tcgen05")
MMA_FAMILIES = {"mma.sync": "mma.sync", "mfma": "mma.sync", "wgmma": "wgmma", "tcgen05": "tcgen05"}


def _mma_reading(generations: Iterable[str]) -> Reading:
    ranks = [MMA_GENERATIONS.index(g) + 1 for g in generations]
    best = max(ranks, default=0)
    return Reading(best, MMA_GENERATIONS[best - 1] if best else "FMA (no tensor-core MMA)")


def _source_mma(document: Document, kernel: Kernel) -> Reading:
    return _mma_reading(MMA_FAMILIES.get(family, "mma.sync") for family in kernel.get("mma", {}).get("families", []))


def sass_mma_generation(opcode: str) -> str:
    """The kind of tensor-core MMA a SASS opcode is: `tcgen05` (UTC*MMA), `wgmma` (*GMMA) or `mma.sync`."""
    if opcode.startswith("UTC"):
        return "tcgen05"
    return "wgmma" if opcode.endswith("GMMA") else "mma.sync"


def _sass_mma(document: Document, kernel: Kernel) -> Reading:
    opcodes = kernel.get("sass", {}).get("mma", {})
    reading = _mma_reading(sass_mma_generation(opcode) for opcode in opcodes)
    shown = "/".join(sorted(opcodes))
    return Reading(reading.key, f"{reading.text} ({shown})" if shown else reading.text)


def _spills(document: Document, kernel: Kernel) -> Reading:
    stores, loads = kernel.get("spill_store_bytes", 0), kernel.get("spill_load_bytes", 0)
    return Reading(stores + loads, f"{stores} B stored, {loads} B loaded")


def _occupancy(document: Document, kernel: Kernel) -> Reading | None:
    """Resident warps per SM, not blocks: a block of twice the threads halves the blocks and keeps the warps."""
    occupancy = kernel.get("occupancy", {})
    warps = occupancy.get("warps_per_sm")
    if warps is None:
        return None
    return Reading(warps, f"{warps} warps/SM ({occupancy.get('blocks_per_sm')} blocks of {occupancy.get('threads')})")


def buffer_stages(kernel: Kernel) -> dict[str, int]:
    """Each shared buffer's copies: the leading dimension TileLang adds to a buffer it multi-buffers (`[3, 128, 32]`
    for 3 stages), 1 for a buffer without one."""
    return {
        name: buffer["shape"][0] if len(buffer.get("shape", ())) >= 3 else 1
        for name, buffer in kernel.get("shared_buffers", {}).items()
        if str(buffer.get("scope", "")).startswith("shared")
    }


def effective_stages(kernel: Kernel) -> int:
    """The most copies any shared buffer keeps (1 where none is multi-buffered)."""
    return max(buffer_stages(kernel).values(), default=1)


def _stages(document: Document, kernel: Kernel) -> Reading | None:
    stages = buffer_stages(kernel)
    return Reading(stages, ", ".join(f"{name} {count}" for name, count in sorted(stages.items())) or "none")


def _fewer_stages(before: Any, after: Any) -> bool:
    """A buffer of both sides that keeps fewer copies now: what a lost stage is, whatever `num_stages` says, and
    whichever other buffer keeps its own."""
    return any(after[name] < count for name, count in before.items() if name in after)


def _fits(document: Document, kernel: Kernel) -> Reading | None:
    memory = kernel.get("shared_memory")
    if not memory or "fits" not in memory:
        return None
    over = "" if memory["fits"] else "over the limit: "
    return Reading(int(bool(memory["fits"])), f"{over}{memory.get('bytes')} B of {memory.get('limit')} B")


def _main_loop_barriers(document: Document, kernel: Kernel) -> Reading | None:
    count = kernel.get("sync", {}).get("syncthreads_main_loop")
    return None if count is None else Reading(count, f"{count} __syncthreads in the main loop")


# The one table, in the order the verdict names them: what the GPU runs (machine code) decides first.
REGRESSION_CLASSES: tuple[RegressionClass, ...] = (
    RegressionClass(
        "tensor-core-mma",
        "tensor-core MMA lost or of an older kind (tcgen05 -> wgmma -> mma.sync -> FMA)",
        (
            Measure(MACHINE, "sass.mma: UTC*MMA, *GMMA, other *MMA opcodes", "lower", _sass_mma),
            Measure(FACTS, "mma.families", "lower", _source_mma),
        ),
    ),
    RegressionClass(
        "async-copies",
        "async copies lost or fewer (cp.async, TMA)",
        (
            Measure(MACHINE, "sass: LDGSTS, else UTMALDG/UBLKCP, present (the kind only)", "lower", _sass_async_copies),
            Measure(FACTS, "shared_addressing: buffers filled by cp.async, by TMA", "lower", _source_async_copies),
        ),
    ),
    RegressionClass(
        "spills",
        "register spills appearing or growing",
        (Measure(MACHINE, "spill_store_bytes + spill_load_bytes", "higher", _spills),),
    ),
    RegressionClass(
        "occupancy",
        "occupancy falling (resident warps per SM)",
        (Measure(MACHINE, "occupancy.warps_per_sm", "lower", _occupancy),),
    ),
    RegressionClass(
        "pipeline-stages",
        "pipeline stages lost (a shared buffer keeps fewer copies)",
        (Measure(FACTS, "shared_buffers: each buffer's leading dimension", "lower", _stages, _fewer_stages),),
    ),
    RegressionClass(
        "shared-memory-limit",
        "shared memory over the target's limit",
        (Measure(FACTS, "shared_memory.fits", "lower", _fits),),
    ),
    RegressionClass(
        "main-loop-barrier",
        "a barrier added inside the main loop",
        (Measure(FACTS, "sync.syncthreads_main_loop", "higher", _main_loop_barriers),),
    ),
)


def _paired(old: Document, new: Document) -> list[tuple[Kernel, Kernel]]:
    """The kernels of both sides by name; a module of one kernel each pairs them whatever their names."""
    before, after = old.get("kernels", []), new.get("kernels", [])
    if len(before) == len(after) == 1:
        return [(before[0], after[0])]
    named = {kernel.get("name"): kernel for kernel in before}
    return [(named[kernel.get("name")], kernel) for kernel in after if kernel.get("name") in named]


def find_regressions(
    reads: str, old: Document, new: Document, classes: Sequence[RegressionClass] = REGRESSION_CLASSES
) -> list[Regression]:
    """The regressions from `old` to `new`, two documents of the kind `reads` names (FACTS or MACHINE): one per
    class and kernel, the first of its measures that got worse."""
    found = []
    for regression_class in classes:
        for before_kernel, after_kernel in _paired(old, new):
            for measure in (m for m in regression_class.measures if m.reads == reads):
                before, after = measure.read(old, before_kernel), measure.read(new, after_kernel)
                if before is not None and after is not None and measure.worsened(before, after):
                    change = f"{before.text} -> {after.text}"
                    found.append(
                        Regression(regression_class.name, regression_class.words, after_kernel["name"], change)
                    )
                    break
    return found


def unwritten(reason: str) -> bool:
    """Whether a reason is a placeholder still (`<why it is right>`, `TODO: ...`) rather than words."""
    return bool(UNWRITTEN_REASON.search(reason))


def class_names(classes: Iterable[RegressionClass]) -> list[str]:
    return [regression_class.name for regression_class in classes]


def accept_options(names: Iterable[str]) -> str:
    """` --accept-regression "spills=<why it is right>"` per class: what a regen command adds to write them."""
    return "".join(f' --accept-regression "{name}={REASON_PLACEHOLDER}"' for name in dict.fromkeys(names))


@dataclass(frozen=True)
class RegressionPolicy:
    """What a case's regressions are judged by: its family's classes besides the built-in ones, the classes its
    variant acknowledges (Variant.acknowledged_regressions) and those the regen's option does, each with its reason."""

    classes: tuple[RegressionClass, ...] = REGRESSION_CLASSES
    declared: Mapping[str, str] = field(default_factory=dict)
    given: Mapping[str, str] = field(default_factory=dict)

    def acknowledged(self, regressions: Iterable[Regression]) -> tuple[Regression, ...]:
        """Each regression with its reason where the regen names its class (which wins: the newer word) or the
        variant declares it; unacknowledged ones keep no reason."""
        judged = []
        for regression in regressions:
            if regression.name in self.given:
                regression = replace(regression, reason=self.given[regression.name], by="regen option")
            elif regression.name in self.declared:
                regression = replace(regression, reason=self.declared[regression.name], by="variant declaration")
            judged.append(regression)
        return tuple(judged)
