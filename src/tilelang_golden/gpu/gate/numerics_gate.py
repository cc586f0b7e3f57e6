"""The numeric gate: what fails an output, a seed and a variant's numerics (tilelang_golden.gpu.measure.numerics
measures).

An output passes a seed when it has no NaN or Inf, at most its Tolerance's `mismatches` elements outside
`isclose(atol, rtol)`, and, beside its family's precision twin, no error statistic beyond the bound `Thresholds`
sets from the twin's (widened where its Tolerance budgets more). A seed passes when the kernel ran, returned what
its signature says into poisoned memory, every output passed and every input came back unchanged; a variant's
numerics pass when every seed of at least MIN_SEEDS distinct ones passed.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tilelang_golden.family import PrecisionBudget
    from tilelang_golden.gpu.measure.numerics import ErrorStats, NumericsResult, OutputCheck, SeedCheck

# The seeds a verdict needs.
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
