"""The GPU check's verdict: what fails a variant, and what fails a run, from its stages and the three gates.

A variant fails on a compile error, a missing or disagreeing static snapshot, a family callable that raised, a numeric
failure (tilelang_golden.gpu.gate.numerics_gate), outputs that differ between launches on the same inputs
(tilelang_golden.gpu.gate.repeat_gate), a hazard compute-sanitizer found (tilelang_golden.gpu.gate.sanitizer_gate), a
timing regression confirmed by re-measurement (tilelang_golden.gpu.gate.timing_gate) or against the base commit
(tilelang_golden.gpu.gate.ab_gate). A variant whose shared memory exceeds what the device allows per block "does not
fit": it is neither run nor counted as a pass, and it does not fail the gate, because the static snapshots cover
targets (sm_90 covers H100 and H200 alike), not one card's limit, and seed 01 sweeps num_stages precisely to show
where a tile shape stops fitting. A run passes when something passed, nothing failed and the timing baseline, if there
is one, could be read and was recorded under this run's key.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from tilelang_golden.gpu.gate.ab_gate import AbVerdict
from tilelang_golden.gpu.gate.timing_gate import CORRUPT, FAIL, KEY_MISMATCH, Comparison, TimingVerdict

if TYPE_CHECKING:
    from tilelang_golden.gpu.gate.numerics_gate import NumericsResult
    from tilelang_golden.gpu.gate.repeat_gate import RepeatCheck
    from tilelang_golden.gpu.gate.sanitizer_gate import SanitizerResult

# A variant's status (FAIL is also a timing level: the same word).
PASS, DOES_NOT_FIT = "pass", "does not fit"


@dataclass(frozen=True)
class VariantVerdict:
    """The gate's word on one variant: its status and what fails it."""

    status: str  # PASS | FAIL | DOES_NOT_FIT
    failures: tuple[str, ...]  # everything that fails it; empty unless the status is FAIL
    timing: TimingVerdict | None  # the timing gate's verdict, when its ratio was compared


def judge_variant(
    failures: Sequence[str],
    fits: bool,
    numerics: NumericsResult | None,
    timing: TimingVerdict | None,
    ab: AbVerdict | None = None,
    repeats: RepeatCheck | None = None,
    sanitized: SanitizerResult | None = None,
) -> VariantVerdict:
    """`failures`: what failed before numerics (compilation, snapshot, the family's own calls); `timing` the
    baseline's verdict, `ab` the A/B gate's; `repeats` the repeated launches', `sanitized` compute-sanitizer's."""
    found = [*failures, *(numerics.failures() if numerics is not None else [])]
    found += [*(repeats.failures() if repeats else []), *(sanitized.failures() if sanitized else [])]
    if timing is not None and timing.level == FAIL:
        found.append(f"timing: {timing.message}")
    if ab is not None and ab.level == FAIL:
        found.append(f"timing against the base: {ab.message}")
    if found:
        status = FAIL
    elif not fits:
        status = DOES_NOT_FIT
    else:  # a fitting variant that was never checked has not passed
        status = PASS if numerics is not None and numerics.passed else FAIL
    return VariantVerdict(status, tuple(found), timing)


# A baseline that exists but cannot judge the run: unreadable, or recorded under another key (another GPU, CUDA,
# torch or TileLang), whose ratios would be compared with nothing while the run looked green.
UNUSABLE_BASELINE = (CORRUPT, KEY_MISMATCH)


def run_passes(statuses: Iterable[str], comparison: Comparison | None) -> bool:
    """Something was checked, nothing failed, and the baseline (if any) could be read and is this setup's."""
    statuses = list(statuses)
    usable = comparison is None or comparison.status not in UNUSABLE_BASELINE
    return PASS in statuses and FAIL not in statuses and usable
