"""The GPU check's gate, all of it: what fails a variant, what fails a run, and when a slower ratio is a regression.

A variant fails on a compile error, a missing or disagreeing static snapshot, a family callable
that raised, a numeric failure, or a timing regression confirmed by re-measurement. A variant
whose shared memory exceeds what the device allows per block "does not fit": it is neither run
nor counted as a pass, and it does not fail the gate, because the static snapshots cover targets
(sm_90 covers H100 and H200 alike), not one card's limit, and seed 01 sweeps num_stages precisely
to show where a tile shape stops fitting. A run passes when something passed, nothing failed and
the timing baseline, if there is one, could be read.

Timing: each variant's ratio to its reference (harness.gpu.timing) against the committed baseline
of this GPU model (harness.gpu.baseline reads the file). More than WARN_SLOWER more time per unit
of the reference than the baseline warns; more than FAIL_SLOWER fails, but only if a
re-measurement confirms it. No baseline for this GPU, or one recorded under another key: the
timings are reported only. docs/gpu.md ("How sharp the gate is") says how the levels were chosen;
scripts/bench_timing.py measures them again.

Numerics (harness.gpu.numerics measures): an output passes a seed when it has no NaN or Inf, at most its
Tolerance's `mismatches` elements outside `isclose(atol, rtol)`, and, beside its family's precision twin,
no error statistic beyond the bound `Thresholds` sets from the twin's (widened where its Tolerance budgets
more). A seed passes when the kernel ran, returned what its signature says into poisoned memory, every
output passed and every input came back unchanged; a variant's numerics pass when every seed of at least
MIN_SEEDS distinct ones passed.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING

from harness.gpu.baseline import RECORD_COMMAND, Baseline, key_differences
from harness.gpu.timing import slower_by

if TYPE_CHECKING:
    from harness.family import PrecisionBudget
    from harness.gpu.numerics import ErrorStats, NumericsResult, OutputCheck, SeedCheck

# Measured by scripts/bench_timing.py on the H200 (docs/gpu.md, "How sharp the gate is").
# Between machine starts an unchanged kernel's ratio moved by up to 6.7 % (docs/measurements.md): the baseline
# catches drift beyond that, summed over many pull requests; a pull request's own change is the A/B gate's.
WARN_SLOWER = 0.08
FAIL_SLOWER = 0.10

# A variant's status, and (OK, WARN, FAIL, NEW) the level of its timing verdict.
PASS, FAIL, DOES_NOT_FIT = "pass", "fail", "does not fit"
OK, WARN, NEW = "ok", "warn", "new"
# A Comparison's status: what the run's timings were held against.
COMPARED, MISSING, KEY_MISMATCH, RECORDED, CORRUPT = "compared", "missing", "key mismatch", "recorded", "corrupt"

# variant keys -> their re-measured ratios
Remeasure = Callable[[Sequence[str]], Mapping[str, float]]


@dataclass(frozen=True)
class TimingVerdict:
    """The timing gate's word on one variant's ratio."""

    variant: str
    level: str  # OK | WARN | FAIL | NEW
    ratio: float
    baseline_ratio: float | None = None
    remeasured_ratio: float | None = None
    message: str = ""

    @property
    def slower_by(self) -> float | None:
        return None if self.baseline_ratio is None else slower_by(self.ratio, self.baseline_ratio)


@dataclass(frozen=True)
class Comparison:
    status: str  # COMPARED | MISSING | KEY_MISMATCH | RECORDED | CORRUPT
    path: str
    message: str
    verdicts: dict[str, TimingVerdict] = field(default_factory=dict)
    not_checked: list[str] = field(default_factory=list)  # in the baseline, absent from this run

    def of_level(self, level: str) -> list[TimingVerdict]:
        return [v for v in self.verdicts.values() if v.level == level]


def suspected(ratio: float, baseline_ratio: float) -> bool:
    """Slow enough that only a re-measurement can tell a regression from noise."""
    return slower_by(ratio, baseline_ratio) > FAIL_SLOWER


def judge(variant: str, ratio: float, baseline_ratio: float, again: float | None = None) -> TimingVerdict:
    """One ratio against its baseline entry; `again` is the re-measured ratio of a suspect (None: not re-measured)."""
    first = slower_by(ratio, baseline_ratio)
    than = f"slower than the baseline ratio {baseline_ratio:.3f}"
    if first <= WARN_SLOWER:
        return TimingVerdict(variant, OK, ratio, baseline_ratio)
    if not suspected(ratio, baseline_ratio):
        message = f"{first:.1%} {than} (warn above {WARN_SLOWER:.0%})"
        return TimingVerdict(variant, WARN, ratio, baseline_ratio, message=message)
    if again is not None and suspected(again, baseline_ratio):
        message = (
            f"{first:.1%} {than}, confirmed by a re-measurement ({slower_by(again, baseline_ratio):.1%} slower; "
            f"fail above {FAIL_SLOWER:.0%})"
        )
        return TimingVerdict(variant, FAIL, ratio, baseline_ratio, again, message)
    again_text = "no re-measurement" if again is None else f"{slower_by(again, baseline_ratio):.1%} on re-measurement"
    message = f"{first:.1%} {than} at first, {again_text}: not confirmed, so a warning"
    return TimingVerdict(variant, WARN, ratio, baseline_ratio, again, message)


def compare_ratios(
    baseline: Baseline | None,
    path: Path | str,
    key: Mapping[str, str],
    ratios: Mapping[str, float],
    remeasure: Remeasure,
    shapes: Mapping[str, str] | None = None,
) -> Comparison:
    """The timing gate for every measured ratio; `remeasure` is asked only about suspected failures.

    `shapes`: variant -> the problem shape it was measured at; a ratio recorded at another one is not compared."""
    if baseline is None:
        return Comparison(
            MISSING,
            str(path),
            f"no timing baseline for {key['gpu']} ({path}): timings are reported only. "
            f"Record one on this GPU with `{RECORD_COMMAND}` and commit it.",
        )
    differing = key_differences(baseline, key)
    if differing:
        return Comparison(
            KEY_MISMATCH,
            str(path),
            f"{path} was recorded under another key ({'; '.join(differing)}): ratios are not compared, "
            f"timings are reported only. Record a baseline for this setup with `{RECORD_COMMAND}`.",
        )
    new: dict[str, TimingVerdict] = {}
    for variant, ratio in ratios.items():
        recorded, now = baseline.shapes.get(variant), (shapes or {}).get(variant)
        if variant not in baseline.ratios:
            new[variant] = TimingVerdict(variant, NEW, ratio, message="no baseline entry yet")
        elif recorded is not None and now is not None and recorded != now:
            message = f"shape changed ({recorded} -> {now}): not compared; record again"
            new[variant] = TimingVerdict(variant, NEW, ratio, message=message)
    compared = {variant: ratio for variant, ratio in ratios.items() if variant not in new}
    suspects = [variant for variant, ratio in compared.items() if suspected(ratio, baseline.ratios[variant])]
    remeasured = remeasure(suspects) if suspects else {}
    judged = {v: judge(v, ratio, baseline.ratios[v], remeasured.get(v)) for v, ratio in compared.items()}
    verdicts = {variant: judged.get(variant) or new[variant] for variant in ratios}  # in the run's order
    levels = [v.level for v in judged.values()]
    fails, warns = levels.count(FAIL), levels.count(WARN)
    message = (
        f"compared with {path}: {fails} confirmed regressions, {warns} warnings, "
        f"{len(verdicts) - fails - warns} within limits or new"
    )
    return Comparison(COMPARED, str(path), message, verdicts, sorted(set(baseline.ratios) - set(ratios)))


# Numerics: the seeds a verdict needs, and what fails an output, a seed and a variant.
MIN_SEEDS = 3

STATISTICS = ("max_abs", "mean_abs", "bias", "scale")
NAMES = {"max_abs": "max abs error", "mean_abs": "mean abs error", "bias": "bias", "scale": "scale"}


def validate_seeds(seeds: Sequence[int]) -> list[int]:
    seeds = list(seeds)
    if len(set(seeds)) < MIN_SEEDS:
        raise ValueError(f"the numeric gate needs at least {MIN_SEEDS} distinct seeds, got {seeds}")
    return seeds


def ratio(numerator: float, denominator: float) -> float:
    """numerator / denominator, where any error over a zero one is infinitely far over it."""
    if denominator:
        return numerator / denominator
    return 0.0 if numerator <= 0 else math.inf


@dataclass(frozen=True)
class Thresholds:
    """How far an output's error may exceed its precision twin's on the same inputs: the only place these numbers live.

    Measured on the H200 (2026-11-30, `scripts/bench_numerics.py`, 34 variants x 20 input seeds, every
    output; docs/measurements.md): the kernel's max abs error was at most 1.0x the twin's wherever the
    floor did not cover it (2.0x only for LayerNorm's float32 Mean, errors of 6e-8 under a 5e-6 floor);
    its mean abs error at most 1.0x (so every variant sits at 64-66 % of the 1.5x bound); its bias and scale
    at most 0.059 of the twin's (relative) mean abs error beyond the twin's own, a quarter of the 0.25
    bound. No unmodified variant failed; every mutant (output x 0.995, one row x 1.01, the last 64 rows
    x 0.98, an input x 1.005) failed on all 20 seeds. The values below keep those margins.

    Each bound is the twin's value times a factor (or plus a fraction of its mean error) plus a floor relative
    to the output's magnitude, for outputs both sides compute almost exactly (LayerNorm's float32 Mean and
    Rstd), where the ratio of two tiny errors is noise.
    """

    # Both sides round each element once to the output dtype, so the maxima sit at half a step of the largest
    # |output|, ratio near 1. 2 is FlashAttention's own test's factor. Only this statistic sees one wrong row.
    max_factor: float = 2.0
    # Over millions of elements the mean error of one rounding is steady: a ratio near 1. A second rounding
    # (in place, of the same size) makes it about 1.33; 1.5 admits that and fails an error as large again.
    mean_factor: float = 1.5
    # Rounding errors cancel in the mean (their bias is about mean abs error / sqrt(elements)); a systematic
    # offset does not. The kernel's |bias| may exceed the twin's by this fraction of the twin's mean abs error.
    bias_fraction: float = 0.25
    # Likewise the least-squares scale, in units of the twin's relative mean abs error (bf16 about 1.4e-3,
    # fp16 about 2e-4): a 0.5 % scale is 15x (bf16) to 100x (fp16) the bound at 0.25.
    scale_fraction: float = 0.25
    # Relative to the output's magnitude (mean |ref|): ten times float32's summation error over a few thousand
    # terms (about 1e-6), a tenth of the Tolerances of the float32 outputs.
    floor: float = 1e-5

    def bounds(self, twin: ErrorStats) -> dict[str, float]:
        """The most each statistic (`ErrorStats.value`) of the kernel may be, given the twin's."""
        floor = self.floor * twin.magnitude
        return {
            "max_abs": self.max_factor * twin.max_abs + floor,
            "mean_abs": self.mean_factor * twin.mean_abs + floor,
            "bias": abs(twin.bias) + self.bias_fraction * twin.mean_abs + floor,
            "scale": abs(twin.scale) + self.scale_fraction * twin.relative_mean_abs + self.floor,
        }

    def used(self, kernel: ErrorStats, twin: ErrorStats) -> dict[str, float]:
        """The fraction of each bound the kernel's statistic takes: above 1, or NaN, fails."""
        return {name: ratio(kernel.value(name), bound) for name, bound in self.bounds(twin).items()}

    def with_budget(self, budget: PrecisionBudget | None) -> Thresholds:
        """These bounds with an output's precision budget in place of the factors it sets."""
        return self if budget is None else replace(self, **budget.factors())


THRESHOLDS = Thresholds()


def within_tolerance(check: OutputCheck) -> bool:
    """What the Tolerance alone says (the whole gate for a family without a precision twin)."""
    return check.nonfinite == 0 and check.mismatches <= check.output.tolerance.mismatches


def fractions_of_bounds(check: OutputCheck) -> dict[str, float]:
    """Each statistic's fraction of its bound; empty without a twin to compare with."""
    if check.errors is None or check.twin is None:
        return {}
    return check.output.thresholds.used(check.errors, check.twin)


def exceeded(check: OutputCheck) -> list[str]:
    """The statistics beyond their bounds (a NaN statistic counts: it cannot show the output is right)."""
    return [name for name, fraction in fractions_of_bounds(check).items() if not fraction <= 1]


def output_passes(check: OutputCheck) -> bool:
    return within_tolerance(check) and not exceeded(check)


def output_failures(check: OutputCheck) -> list[str]:
    """What fails one output on one seed, each in words with the numbers that fail it."""
    tolerance, found = check.output.tolerance, []
    if check.nonfinite:
        found.append(f"{check.nonfinite} NaN/Inf elements (unwritten output stays NaN)")
    if check.mismatches > tolerance.mismatches:
        found.append(
            f"{check.mismatches} elements outside atol={tolerance.atol:g}, rtol={tolerance.rtol:g} "
            f"({tolerance.mismatches} allowed; max abs error {check.max_abs_error:.4g})"
            + (f"; why this bound: {tolerance.why}" if tolerance.why else "")
        )
    beyond = exceeded(check)
    if beyond and check.errors is not None and check.twin is not None:
        bounds = check.output.thresholds.bounds(check.twin)
        found.append(
            "error beyond the precision twin's: "
            + ", ".join(
                f"{NAMES[name]} {getattr(check.errors, name):.3g} (twin {getattr(check.twin, name):.3g}, "
                f"bound {bounds[name]:.3g})"
                for name in beyond
            )
        )
    return found


def seed_passes(seed: SeedCheck, output_passed: Callable[[OutputCheck], bool] = output_passes) -> bool:
    """The kernel ran and returned its outputs into the poisoned memory, every output passed (by `output_passed`:
    the whole gate, or `within_tolerance` alone) and no input changed."""
    checked = bool(seed.outputs) and all(output_passed(o) for o in seed.outputs)
    return seed.error is None and checked and seed.inputs_unchanged


def seed_failure(seed: SeedCheck) -> str | None:
    """What fails one seed, in one line that names it; None when it passes."""
    if seed.error:
        return f"seed {seed.seed}: {seed.error}"
    several = len(seed.outputs) > 1
    parts = [f"output {o.output.name}: {p}" if several else p for o in seed.outputs for p in output_failures(o)]
    if not seed.inputs_unchanged:
        parts.append("the kernel modified its inputs")
    return f"seed {seed.seed}: " + ", ".join(parts) if parts else None


def numerics_pass(result: NumericsResult) -> bool:
    """Every seed passed (and there was one)."""
    return bool(result.seeds) and all(seed_passes(s) for s in result.seeds)


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
) -> VariantVerdict:
    """`failures`: what failed before numerics (compilation, snapshot, the family's own calls); `timing` the
    baseline's verdict, `ab` the A/B gate's."""
    found = [*failures, *(numerics.failures() if numerics is not None else [])]
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


def run_passes(statuses: Iterable[str], comparison: Comparison | None) -> bool:
    """Something was checked, nothing failed, and the baseline (if any) could be read."""
    statuses = list(statuses)
    readable = comparison is None or comparison.status != CORRUPT
    return PASS in statuses and FAIL not in statuses and readable


# -- the A/B gate: the pull request's kernel against the base's, timed side by side in one run -----------------

# Measured by scripts/bench_timing.py on the H200 (docs/gpu.md, "The A/B gate"): interleaved, one process, one GPU.
AB_WARN_SLOWER = 0.01
AB_FAIL_SLOWER = 0.02
FASTER = "faster"  # an A/B level besides OK, WARN and FAIL: at least AB_WARN_SLOWER less time than the base


@dataclass(frozen=True)
class AbVerdict:
    """The A/B gate's word on one changed variant, from the rounds' time ratios (the PR's ms over the base's)."""

    variant: str
    level: str  # OK | WARN | FAIL | FASTER
    rounds: tuple[float, ...]  # each round's time ratio, PR over base
    again: tuple[float, ...] = ()  # the confirming measurement's, when one was made
    message: str = ""

    @property
    def slower_by(self) -> float:
        """The median round's time ratio minus 1: 0.02 = 2 % slower than the base, negative = faster."""
        return slower_than_base(self.rounds)

    @property
    def spread(self) -> float:
        """(max - min) / median of the rounds' time ratios: the noise the verdict was made under."""
        median = statistics.median(self.rounds)
        return (max(self.rounds) - min(self.rounds)) / median


@dataclass(frozen=True)
class AbComparison:
    """Every changed variant's A/B verdict against the base commit, and what was not compared, with why."""

    base: str  # `REF (sha)`, as the report names it
    verdicts: dict[str, AbVerdict] = field(default_factory=dict)
    not_compared: dict[str, str] = field(default_factory=dict)  # variant -> why (new, base not built, failed ...)
    unchanged: list[str] = field(default_factory=list)
    gone: list[str] = field(default_factory=list)

    def of_level(self, level: str) -> list[AbVerdict]:
        return [v for v in self.verdicts.values() if v.level == level]


def slower_than_base(rounds: Sequence[float]) -> float:
    return statistics.median(rounds) - 1.0


def ab_suspected(rounds: Sequence[float]) -> bool:
    """Slow enough to fail if a second, independent measurement agrees."""
    return slower_than_base(rounds) >= AB_FAIL_SLOWER


def judge_ab(variant: str, rounds: Sequence[float], again: Sequence[float] = ()) -> AbVerdict:
    """One changed variant: `rounds` its first measurement, `again` the confirming one (made only for a suspect)."""
    rounds, again = tuple(rounds), tuple(again)
    slower = slower_than_base(rounds)
    if ab_suspected(rounds) and again and ab_suspected(again):
        message = (
            f"{slower:.1%} slower than the base, confirmed by a second measurement ({slower_than_base(again):.1%}; "
            f"fail from {AB_FAIL_SLOWER:.0%})"
        )
        return AbVerdict(variant, FAIL, rounds, again, message)
    if ab_suspected(rounds):
        again_text = f"{slower_than_base(again):.1%} on a second measurement" if again else "not measured again"
        message = f"{slower:.1%} slower than the base at first, {again_text}: not confirmed, so a warning"
        return AbVerdict(variant, WARN, rounds, again, message)
    if slower >= AB_WARN_SLOWER:
        message = f"{slower:.1%} slower than the base (warn from {AB_WARN_SLOWER:.0%}, fail from {AB_FAIL_SLOWER:.0%})"
        return AbVerdict(variant, WARN, rounds, message=message)
    if slower <= -AB_WARN_SLOWER:
        return AbVerdict(variant, FASTER, rounds, message=f"{-slower:.1%} faster than the base")
    return AbVerdict(variant, OK, rounds)


def compare_ab(
    base: str,
    first: Mapping[str, Sequence[float]],
    confirm: Callable[[Sequence[str]], Mapping[str, Sequence[float]]],
    *,
    not_compared: Mapping[str, str] | None = None,
    unchanged: Sequence[str] = (),
    gone: Sequence[str] = (),
) -> AbComparison:
    """The A/B gate on every measured variant (`first`: variant -> its rounds' time ratios); `confirm` measures the
    suspects again, independently, and is asked only about them."""
    suspects = [variant for variant, rounds in first.items() if ab_suspected(rounds)]
    again = confirm(suspects) if suspects else {}
    verdicts = {variant: judge_ab(variant, rounds, again.get(variant, ())) for variant, rounds in first.items()}
    return AbComparison(base, verdicts, dict(not_compared or {}), list(unchanged), list(gone))
