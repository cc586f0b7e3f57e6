"""The numeric gate: the records of a numeric check (an output on a seed, a seed, a variant) and what fails each;
tilelang_golden.gpu.measure.numerics runs the kernels and fills them.

An output passes a seed when it has no NaN or Inf, at most its Tolerance's `mismatches` elements outside
`isclose(atol, rtol)`, and, beside its family's precision twin, no error statistic beyond the bound `Thresholds`
sets from the twin's (widened where its Tolerance budgets more). A seed passes when the kernel ran, returned what
its signature says into poisoned memory, every output passed and every input came back unchanged; a variant's
numerics pass when every seed of at least MIN_SEEDS distinct ones passed.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tilelang_golden.family import PrecisionBudget, Tolerance

# The seeds a verdict needs.
MIN_SEEDS = 3

STATISTICS = ("max_abs", "mean_abs", "bias", "scale")
NAMES = {"max_abs": "max abs error", "mean_abs": "mean abs error", "bias": "bias", "scale": "scale"}


@dataclass(frozen=True)
class Output:
    """One output the kernel returns: its name in the signature and the tolerance it is held to."""

    name: str
    tolerance: Tolerance

    @property
    def thresholds(self) -> Thresholds:
        """The bounds this output's error is held to: the harness's, widened where its Tolerance budgets more."""
        return THRESHOLDS.with_budget(self.tolerance.precision_budget)


@dataclass(frozen=True)
class ErrorStats:
    """One output's error against the high-precision reference, over the output's finite elements."""

    max_abs: float  # the largest |out - ref|, the Tolerance's allowed mismatches left out
    mean_abs: float
    bias: float  # mean of out - ref: rounding averages out, a systematic offset does not
    scale: float  # <out, ref> / <ref, ref> - 1: a zero-mean output scaled by 0.995 has no bias, but this is -0.005
    magnitude: float  # mean |ref|, what the bounds' floor is relative to

    @property
    def relative_mean_abs(self) -> float:
        return ratio(self.mean_abs, self.magnitude)

    def value(self, statistic: str) -> float:
        """What a bound holds: the error's size, sign aside."""
        return abs(getattr(self, statistic))

    def against(self, twin: ErrorStats) -> dict[str, float]:
        """Each statistic in the units its threshold is in (floors aside): what benchmarks/numerics.py measures.

        max_abs, mean_abs: the kernel's over the twin's (against Thresholds.max_factor, mean_factor); bias: the
        kernel's |bias| beyond the twin's, in the twin's mean abs errors (bias_fraction); scale: likewise in the
        twin's relative mean abs errors (scale_fraction).
        """
        return {
            "max_abs": ratio(self.max_abs, twin.max_abs),
            "mean_abs": ratio(self.mean_abs, twin.mean_abs),
            "bias": ratio(abs(self.bias) - abs(twin.bias), twin.mean_abs),
            "scale": ratio(abs(self.scale) - abs(twin.scale), twin.relative_mean_abs),
        }

    def as_dict(self) -> dict[str, float]:
        return asdict(self)


@dataclass
class OutputCheck:
    """One output against its reference on one seed, and beside its precision twin's error."""

    output: Output
    mismatches: int = 0  # elements outside the tolerance (non-finite ones included)
    nonfinite: int = 0  # NaN or Inf, unwritten (still poisoned) elements included
    max_abs_error: float = 0.0  # over finite elements
    errors: ErrorStats | None = None  # the kernel's (None only where a test builds a check by hand)
    twin: ErrorStats | None = None  # the precision twin's on the same inputs; None: the family has none

    # What the gate (tilelang_golden.gpu.gate.gate) says of these measurements.
    @property
    def within_tolerance(self) -> bool:
        return within_tolerance(self)

    @property
    def used(self) -> dict[str, float]:
        return fractions_of_bounds(self)

    @property
    def exceeded(self) -> list[str]:
        return exceeded(self)

    @property
    def passed(self) -> bool:
        return output_passes(self)

    def failures(self) -> list[str]:
        return output_failures(self)

    @property
    def tightest(self) -> tuple[str, float] | None:
        """The statistic closest to its bound and the fraction of it taken (NaN as infinite); None without a twin."""
        used = {name: math.inf if math.isnan(fraction) else fraction for name, fraction in self.used.items()}
        return max(used.items(), key=lambda item: item[1]) if used else None

    def as_dict(self) -> dict[str, Any]:
        return {
            "output": self.output.name,
            "mismatches": self.mismatches,
            "nonfinite": self.nonfinite,
            "max_abs_error": self.max_abs_error,
            "kernel": None if self.errors is None else self.errors.as_dict(),
            "precision_twin": None if self.twin is None else self.twin.as_dict(),
            "fraction_of_bound": self.used,
        }


@dataclass
class SeedCheck:
    seed: int
    outputs: list[OutputCheck] = field(default_factory=list)  # one per output once the kernel has run
    inputs_unchanged: bool = True
    error: str | None = None  # the kernel raised, returned what its signature does not, or could not be poisoned

    @property
    def passed(self) -> bool:
        return seed_passes(self)

    @property
    def within_tolerance(self) -> bool:
        """Whether the Tolerance alone (the gate before precision twins) passes this seed."""
        return seed_passes(self, within_tolerance)

    # Over all outputs: what the report shows per seed.
    @property
    def mismatches(self) -> int:
        return sum(o.mismatches for o in self.outputs)

    @property
    def nonfinite(self) -> int:
        return sum(o.nonfinite for o in self.outputs)

    @property
    def max_abs_error(self) -> float:
        return max((o.max_abs_error for o in self.outputs), default=0.0)

    def failure(self) -> str | None:
        return seed_failure(self)


@dataclass
class NumericsResult:
    reference: str  # what the family compares with, in words
    outputs: list[Output]
    seeds: list[SeedCheck] = field(default_factory=list)
    precision_twin: str | None = None  # the twin's name in words; None: the Tolerance alone judges

    @property
    def passed(self) -> bool:
        return numerics_pass(self)

    def failures(self) -> list[str]:
        return [f for s in self.seeds if (f := s.failure())]

    def as_dict(self) -> dict[str, Any]:
        return {
            "reference": self.reference,
            "precision_twin": self.precision_twin,
            "thresholds": asdict(THRESHOLDS) if self.precision_twin else None,
            "tolerances": [
                {
                    "output": o.name,
                    "atol": o.tolerance.atol,
                    "rtol": o.tolerance.rtol,
                    "allowed_mismatches": o.tolerance.mismatches,
                    "why": o.tolerance.why or None,
                    "precision_budget": None
                    if o.tolerance.precision_budget is None
                    else asdict(o.tolerance.precision_budget),
                }
                for o in self.outputs
            ],
            "passed": self.passed,
            "seeds": [
                {
                    "seed": s.seed,
                    "mismatches": s.mismatches,
                    "nonfinite": s.nonfinite,
                    "max_abs_error": s.max_abs_error,
                    "inputs_unchanged": s.inputs_unchanged,
                    "error": s.error,
                    "outputs": [o.as_dict() for o in s.outputs],
                }
                for s in self.seeds
            ],
        }


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

    Measured on the H200 (2026-11-30, `benchmarks/numerics.py`, 34 variants x 20 input seeds, every
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
