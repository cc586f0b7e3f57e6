"""What a GPU check measured, per variant and for the whole run; each record is built once, when its checks are done.

The verdicts on these measurements (what fails a variant or the run) are tilelang_golden.gpu.gate.gate's;
`GpuRun.verdict` and `GpuRun.passed` ask it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from tilelang_golden.catalog.cases import Case
from tilelang_golden.gpu.gate import ab_gate, gate, timing_gate
from tilelang_golden.gpu.gate.numerics_gate import NumericsResult
from tilelang_golden.gpu.gate.repeat_gate import RepeatCheck
from tilelang_golden.gpu.gate.sanitizer_gate import SanitizerResult
from tilelang_golden.gpu.measure.sweep import SweepCurve, SweepPoint
from tilelang_golden.gpu.measure.timing import Pair, PairedTiming, Throughput, Timing, throughput
from tilelang_golden.gpu.run import against
from tilelang_golden.gpu.run.compile import CompiledCase
from tilelang_golden.gpu.run.device import Device
from tilelang_golden.gpu.run.worker import STOPPED


def shape_name(case: Case) -> str:
    """`M=8192 N=8192 K=8192`: the variant's problem dimensions."""
    return " ".join(f"{k}={v}" for k, v in case.family.dimensions(case.variant).items())


def reference_name(case: Case) -> str:
    """`my_gemm: torch.matmul(A, B) [M=8192 N=8192 K=8192]`: the family, its op and the problem.

    One timing per distinct name: the family is part of it, since two families may label different
    ops (or inputs) alike.
    """
    return f"{case.family.name}: {case.family.label(case.params)} [{shape_name(case)}]"


@dataclass(frozen=True)
class VariantFailure:
    """What ended a variant's check before its verdict: the stage (compile, snapshot, reference, numerics, timing),
    how (tilelang_golden.gpu.run.worker's RAISED, DID_NOT_FINISH, CRASHED) and the message, which names the family file
    and the variant."""

    stage: str
    kind: str
    message: str

    @property
    def stopped(self) -> bool:
        """It did not finish or crashed: listed before every other failure."""
        return self.kind in STOPPED

    def as_dict(self) -> dict[str, str]:
        return {"stage": self.stage, "kind": self.kind, "message": self.message}


@dataclass(frozen=True)
class SnapshotCheck:
    """A compiled kernel against its static snapshot for the device's target."""

    path: str  # the facts file, as the report shows it
    shared_memory_bytes: int | None = None  # the most dynamic shared memory any kernel of it has; None: not read
    cuda_matches: bool | None = None  # whether the normalized CUDA equals the snapshot's (None: no .cu)
    failures: tuple[str, ...] = ()  # why it disagrees with the snapshot, or that there is none
    # The driver's registers, local and static shared memory against the machine facts' (None: not compared, as on
    # a HIP target), and each difference in words, naming both compilers: warnings, since the two compile apart.
    machine_matches: bool | None = None
    machine_differences: tuple[str, ...] = ()
    machine_compilers: str = ""  # which compiled the snapshot's machine code, which this GPU's


def dynamic_bytes(compiled: CompiledCase, snapshot: SnapshotCheck) -> int | None:
    """Dynamic shared memory of the compiled kernel, or the snapshot's when it did not compile."""
    if compiled.dynamic_shared_memory_bytes is not None:
        return compiled.dynamic_shared_memory_bytes
    return snapshot.shared_memory_bytes


def needed_bytes(compiled: CompiledCase, snapshot: SnapshotCheck) -> int | None:
    """Shared memory per block the kernel asks for, dynamic and static; None when unknown. For a module of
    several kernels, the most dynamic plus the most static any of them uses: a bound the largest block is under."""
    dynamic = dynamic_bytes(compiled, snapshot)
    return None if dynamic is None else dynamic + (compiled.static_shared_memory_bytes or 0)


def fits_in(compiled: CompiledCase, snapshot: SnapshotCheck, limit_bytes: int) -> bool:
    needed = needed_bytes(compiled, snapshot)
    return needed is None or needed <= limit_bytes


@dataclass(frozen=True)
class VariantResult:
    compiled: CompiledCase
    device: Device
    snapshot: SnapshotCheck
    failure: VariantFailure | None = None  # a stage raised, did not finish or crashed: the later ones did not run
    numerics: NumericsResult | None = None  # None: not run (it failed before, or does not fit)
    paired: PairedTiming | None = None  # its timing's rounds, with the reference's beside them; None: not timed
    repeats: RepeatCheck | None = None  # its repeated launches on one seed's inputs; None: not launched again
    sanitized: SanitizerResult | None = None  # what compute-sanitizer found (`--sanitize`); None: not run

    @property
    def key(self) -> str:
        return self.compiled.case.key

    @property
    def reference(self) -> str:
        """The PyTorch op this variant is timed against, with its problem: one timing per distinct one."""
        return reference_name(self.compiled.case)

    @property
    def failures(self) -> list[str]:
        """What failed besides numerics and timing's verdicts: a stage's failure, compilation, the snapshot."""
        failure = [self.failure.message] if self.failure else []
        if self.compiled.error:
            return failure + [f"{self.compiled.case.id}: {self.compiled.error}"]
        return failure + list(self.snapshot.failures)

    @property
    def stopped(self) -> bool:
        return self.failure is not None and self.failure.stopped

    @property
    def timing(self) -> Timing | None:
        return None if self.paired is None else self.paired.variant

    @property
    def ratio(self) -> float | None:
        """Reference ms / variant ms: higher is faster, 1.0 = as fast as the PyTorch op."""
        return None if self.paired is None else self.paired.ratio

    @property
    def throughput(self) -> Throughput | None:
        if self.paired is None:
            return None
        case = self.compiled.case
        return throughput(case.family.work(case.params), self.paired.variant.median_ms, self.device.peak)

    @property
    def shared_memory_bytes(self) -> int | None:
        return dynamic_bytes(self.compiled, self.snapshot)

    @property
    def needs_bytes(self) -> int | None:
        return needed_bytes(self.compiled, self.snapshot)

    @property
    def fits(self) -> bool:
        return fits_in(self.compiled, self.snapshot, self.device.shared_memory_per_block_bytes)

    def fit_note(self) -> str:
        return (
            f"does not fit on this GPU (needs {self.needs_bytes} bytes of shared memory per block, "
            f"device allows {self.device.shared_memory_per_block_bytes})"
        )


@dataclass(frozen=True)
class GpuRun:
    device: Device
    seeds: list[int]
    timer: dict[str, Any]
    variants: list[VariantResult]
    references: dict[str, Timing]  # reference name -> its timing
    reference_throughput: dict[str, Throughput]
    sweeps: list[SweepCurve]
    compile_seconds: float
    wall_seconds: float = 0.0
    gpu_state: dict[str, Any] | None = None  # tilelang_golden.gpu.run.gpu_state.summarize over the timing
    gpu_state_note: str | None = None
    other_processes: list[int] = field(default_factory=list)
    pairs: dict[str, Pair] = field(default_factory=dict, repr=False)  # what was timed, to time it again
    comparison: timing_gate.Comparison | None = None  # the baseline's, once compared or recorded
    remeasure: timing_gate.Remeasure | None = field(default=None, repr=False)  # for the baseline's confirmation
    # family/variant -> why it is not run on this device (tilelang_golden.gpu.selection.not_run_on): never a pass
    not_run: dict[str, str] = field(default_factory=dict)
    ab: ab_gate.AbComparison | None = None  # the changed variants against the base commit (`--against`), when asked
    # family/variant -> its recent runs on main on this GPU model, in words (tilelang_golden.history.changes.recent),
    # for the variants compared with the base: the A/B verdict's context
    history: dict[str, str] = field(default_factory=dict)
    # How the repeated-launch and sanitizer stages ran (tilelang_golden.gpu.race_checks): launches per variant (1: not
    # checked), the seed, seconds; the sanitizer's executable, tools, processes at a time and seconds (None: not run).
    repeats: dict[str, Any] = field(default_factory=lambda: {"launches": 1, "seed": None, "seconds": 0.0})
    sanitizer: dict[str, Any] | None = None

    def verdict(self, result: VariantResult) -> gate.VariantVerdict:
        timing = None if self.comparison is None else self.comparison.verdicts.get(result.key)
        ab = None if self.ab is None else self.ab.verdicts.get(result.key)
        return gate.judge_variant(
            result.failures, result.fits, result.numerics, timing, ab, result.repeats, result.sanitized
        )

    def of_status(self, status: str) -> list[VariantResult]:
        return [v for v in self.variants if self.verdict(v).status == status]

    @property
    def failures(self) -> list[VariantResult]:
        """Failing variants, those that did not finish or crashed first."""
        return sorted(self.of_status(gate.FAIL), key=lambda v: not v.stopped)

    @property
    def not_fitting(self) -> list[VariantResult]:
        return self.of_status(gate.DOES_NOT_FIT)

    @property
    def passed(self) -> bool:
        return gate.run_passes((self.verdict(v).status for v in self.variants), self.comparison)

    def fastest(self) -> VariantResult | None:
        timed = [v for v in self.variants if v.ratio is not None]
        return max(timed, key=lambda v: v.ratio) if timed else None

    def warnings(self) -> list[str]:
        slower = [] if self.comparison is None else self.comparison.of_level(timing_gate.WARN)
        ab = [] if self.ab is None else self.ab.of_level(timing_gate.WARN)
        not_compared = (
            []
            if self.ab is None
            else [
                f"{k}: not timed against the base: {why}"
                for k, why in self.ab.not_compared.items()
                if why != against.NEW
            ]
        )
        return (
            [f"{v.variant}: {v.message}" for v in ab]
            + not_compared
            + [f"{v.variant}: {v.message}" for v in slower]
            + [f"{v.key}: {v.fit_note()}" for v in self.not_fitting]
            + machine_warnings(self.variants)
        )


# A machine-facts warning names at most this many differences; the JSON report holds them all.
MACHINE_DIFFERENCES_SHOWN = 3


def machine_warnings(variants: Sequence[VariantResult]) -> list[str]:
    """One warning for every variant whose kernels the GPU's compile made other than the machine facts say."""
    compared = [v for v in variants if v.snapshot.machine_matches is not None]
    apart = [d for v in compared for d in v.snapshot.machine_differences]
    if not apart:
        return []
    differing = [v for v in compared if not v.snapshot.machine_matches]
    shown = "; ".join(apart[:MACHINE_DIFFERENCES_SHOWN]) + (
        f"; +{len(apart) - MACHINE_DIFFERENCES_SHOWN} more in report.json"
        if len(apart) > MACHINE_DIFFERENCES_SHOWN
        else ""
    )
    return [
        f"machine facts: {len(differing)} of {len(compared)} variants compile here other than their snapshot "
        f"({differing[0].snapshot.machine_compilers}): {shown}"
    ]


def build_sweeps(results: Sequence[VariantResult]) -> list[SweepCurve]:
    """The curves of every family that declares a sweep: one per series, in declaration order."""
    curves: dict[tuple[str, str], SweepCurve] = {}
    for result in results:
        case = result.compiled.case
        sweep = case.family.sweep
        if sweep is None:
            continue
        params = case.params
        series = sweep.series(params)
        timing = result.timing
        curves.setdefault((case.family.name, series), SweepCurve(case.family.name, sweep.axis, series)).points.append(
            SweepPoint(
                value=params[sweep.axis],
                shared_memory_bytes=result.shared_memory_bytes,
                fits=result.fits,
                median_ms=None if timing is None else timing.median_ms,
                spread=0.0 if timing is None else timing.spread,
            )
        )
    return list(curves.values())
