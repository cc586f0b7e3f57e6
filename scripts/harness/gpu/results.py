"""What a GPU check found, per variant and for the whole run, and the gate it implies.

Gate decisions live here and only here: a variant fails on a compile error, a missing or
disagreeing static snapshot, a numeric failure, or a timing regression confirmed by
re-measurement. A variant whose shared memory exceeds what the device allows per block is
"does not fit": it is neither run nor counted as a pass, it is listed in every output, and it
does not fail the gate, because the static snapshots cover targets (sm_90 covers H100 and
H200 alike), not one card's limit, and seed 01 sweeps num_stages precisely to show where a
tile shape stops fitting.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from harness.gpu.baseline import CORRUPT, Comparison, Remeasure, Verdict
from harness.gpu.compile import CompiledCase
from harness.gpu.device import Device
from harness.gpu.numerics import NumericsResult
from harness.gpu.sweep import SweepCurve
from harness.gpu.timing import Pair, PairedTiming, Throughput, Timing
from harness.static.cases import Case

PASS, FAIL, DOES_NOT_FIT = "pass", "fail", "does not fit"


def problem_name(case: Case) -> str:
    """`M=8192 N=8192 K=8192`: the variant's problem dimensions."""
    return " ".join(f"{k}={v}" for k, v in case.family.problem(case.variant).items())


def reference_name(case: Case) -> str:
    """`my_gemm: torch.matmul(A, B) [M=8192 N=8192 K=8192]`: the family, its op and the problem.

    One timing per distinct name: the family is part of it, since two families may label different
    ops (or inputs) alike.
    """
    return f"{case.family.name}: {case.family.label(case.params)} [{problem_name(case)}]"


@dataclass
class VariantResult:
    compiled: CompiledCase
    device_limit_bytes: int
    snapshot_path: str
    snapshot_shared_memory_bytes: int | None = None
    cuda_matches_snapshot: bool | None = None
    problems: list[str] = field(default_factory=list)
    numerics: NumericsResult | None = None
    timing: Timing | None = None
    ratio: float | None = None  # reference ms / variant ms: higher is faster, 1.0 = as fast as the PyTorch op
    throughput: Throughput | None = None
    paired: PairedTiming | None = None  # the timing's rounds, with the reference's beside them
    verdict: Verdict | None = None

    @property
    def key(self) -> str:
        return self.compiled.case.key

    @property
    def reference(self) -> str:
        """The PyTorch op this variant is timed against, with its problem: one timing per distinct one."""
        return reference_name(self.compiled.case)

    @property
    def shared_memory_bytes(self) -> int | None:
        """Dynamic shared memory of the compiled kernel, or the snapshot's when it did not compile."""
        if self.compiled.dynamic_shared_memory_bytes is not None:
            return self.compiled.dynamic_shared_memory_bytes
        return self.snapshot_shared_memory_bytes

    @property
    def needs_bytes(self) -> int | None:
        if self.shared_memory_bytes is None:
            return None
        return self.shared_memory_bytes + (self.compiled.static_shared_memory_bytes or 0)

    @property
    def fits(self) -> bool:
        return self.needs_bytes is None or self.needs_bytes <= self.device_limit_bytes

    def fit_note(self) -> str:
        return (
            f"does not fit on this GPU (needs {self.needs_bytes} bytes of shared memory per block, "
            f"device allows {self.device_limit_bytes})"
        )

    def hard_problems(self) -> list[str]:
        found = list(self.problems)
        if self.numerics is not None:
            found += self.numerics.problems()
        if self.verdict is not None and self.verdict.level == "fail":
            found.append(f"timing: {self.verdict.message}")
        return found

    @property
    def status(self) -> str:
        if self.hard_problems():
            return FAIL
        if not self.fits:
            return DOES_NOT_FIT
        if self.numerics is None or not self.numerics.passed:
            return FAIL  # a fitting variant that was never checked has not passed
        return PASS

    def as_dict(self) -> dict[str, Any]:
        compiled = self.compiled
        return {
            "variant": self.key,
            "reference": self.reference,
            "status": self.status,
            "problems": self.hard_problems() + ([] if self.fits else [self.fit_note()]),
            "compile_target": compiled.compile_target,
            "dynamic_shared_memory_bytes": compiled.dynamic_shared_memory_bytes,
            "snapshot_dynamic_shared_memory_bytes": self.snapshot_shared_memory_bytes,
            "snapshot": self.snapshot_path,
            "cuda_matches_snapshot": self.cuda_matches_snapshot,
            "static_shared_memory_bytes": compiled.static_shared_memory_bytes,
            "registers_per_thread": compiled.registers_per_thread,
            "resources_note": compiled.resources_note,
            "fits": self.fits,
            "needs_shared_memory_bytes": self.needs_bytes,
            "numerics": None if self.numerics is None else self.numerics.as_dict(),
            "timing": None if self.paired is None else self.paired.as_dict(),
            "ratio_to_reference": self.ratio,
            "throughput": None if self.throughput is None else vars(self.throughput),
            "baseline": None
            if self.verdict is None
            else {
                "level": self.verdict.level,
                "baseline_ratio": self.verdict.baseline_ratio,
                "slower_by": self.verdict.slower_by,
                "remeasured_ratio": self.verdict.remeasured_ratio,
                "message": self.verdict.message,
            },
        }


@dataclass
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
    gpu_state: dict[str, Any] | None = None  # harness.gpu.gpu_state.summarize over the timing
    gpu_state_note: str | None = None
    other_processes: list[int] = field(default_factory=list)
    pairs: dict[str, Pair] = field(default_factory=dict, repr=False)  # what was timed, to time it again
    comparison: Comparison | None = None
    recorded_baseline: str | None = None
    remeasure: Remeasure | None = field(default=None, repr=False)  # for the baseline's confirmation

    @property
    def failures(self) -> list[VariantResult]:
        return [v for v in self.variants if v.status == FAIL]

    @property
    def not_fitting(self) -> list[VariantResult]:
        return [v for v in self.variants if v.status == DOES_NOT_FIT]

    @property
    def passed(self) -> bool:
        """The gate: something was checked, nothing failed, and the baseline (if any) could be read."""
        baseline_readable = self.comparison is None or self.comparison.status != CORRUPT
        return any(v.status == PASS for v in self.variants) and not self.failures and baseline_readable

    def fastest(self) -> VariantResult | None:
        timed = [v for v in self.variants if v.ratio is not None]
        return max(timed, key=lambda v: v.ratio) if timed else None

    def warnings(self) -> list[str]:
        found = (
            [] if self.comparison is None else [f"{v.variant}: {v.message}" for v in self.comparison.of_level("warn")]
        )
        return found + [f"{v.key}: {v.fit_note()}" for v in self.not_fitting]
