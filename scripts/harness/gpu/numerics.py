"""The numeric gate: does a kernel compute its family's reference on fresh random inputs?

Every kernel is called as its users call it, `kernel(*arguments)`, and returns its returned outputs
(one tensor, or a list when it has several), which TileLang allocates through PyTorch's CUDA caching
allocator. The arguments are what the family's inputs() makes, with the harness's own allocations in
their places (`harness.declaration`): an argument the kernel must write entirely (`Written`) filled
with poison, one it accumulates into from zero (`Accumulated(initial=ZEROS)`) zeroed. For every seed
and case: the family makes the inputs and the reference; then the memory the returned outputs will
get is poisoned (NaN, or the dtype's minimum for integers): with the cache emptied, one tensor per
returned output (the signature's shape and dtype, in order) is allocated, filled and freed, so it
stays in the cache and the kernel's own allocations of those sizes, in that order, get it back.
After the call every returned output must lie inside that poisoned memory, or the seed fails: a check
that cannot show an unwritten element is never a pass. Every output, returned or written in place, is
compared with its reference at its own tolerance (`isclose(atol, rtol)`, at most `mismatches`
elements outside it); NaN or Inf in an output fails (an element the kernel never wrote is still
NaN), and every input that is not an output must be bit-identical afterwards. Inputs and references
are made afresh for every case from its own parameters.

A tolerance must admit the output's rounding, so it cannot see a systematic error smaller than
that (a bf16 output 0.5 % too small passes rtol 1 %). So each output's error is also held to the
error of the family's precision twin (`Family.precision_twin`, by default its speed reference: the
PyTorch op at the kernel's own dtypes), run once per seed on the same inputs and measured against
the same reference, by statistics a systematic error moves (`ErrorStats`: max and mean absolute
error, mean signed error, least-squares scale). `Thresholds` says how far the kernel's may exceed
the twin's, unless an output's Tolerance budgets more (`PrecisionBudget`, with its reason); the
Tolerance still applies, and alone judges a family without a twin.
"""

from __future__ import annotations

import math
import secrets
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import TYPE_CHECKING, Any, Protocol

from harness.declaration import (
    FamilyCallError,
    check_inputs,
    expected_outputs,
    from_inputs,
    passed_in,
    torch_dtype,
    twin_outputs,
)
from harness.family import Family, OutputKind, PrecisionBudget, Returned, Tolerance, Written

if TYPE_CHECKING:
    from harness.build import Argument

MIN_SEEDS = 3

# kernel(*arguments) -> its returned output, or a list of them in the signature's order.
KernelRun = Callable[..., Any]


class Memory(Protocol):
    """Where a kernel's outputs are allocated: PyTorch's CUDA caching allocator, or a test's stand-in."""

    def settle(self) -> None:
        """Finish the queued work and hand the cache's free blocks back to the driver."""

    def empty(self, shape: tuple[int, ...], dtype: Any) -> Any:
        """An uninitialized tensor from the cache."""


@dataclass(frozen=True)
class CudaCache:
    """PyTorch's CUDA caching allocator, which TileLang's output allocation goes through."""

    device: str = "cuda"

    def settle(self) -> None:
        import torch

        torch.cuda.synchronize(self.device)  # frees waiting on queued work become reusable
        torch.cuda.empty_cache()

    def empty(self, shape: tuple[int, ...], dtype: Any) -> Any:
        import torch

        return torch.empty(shape, dtype=dtype, device=self.device)


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
        return _ratio(self.mean_abs, self.magnitude)

    def value(self, statistic: str) -> float:
        """What a bound holds: the error's size, sign aside."""
        return abs(getattr(self, statistic))

    def against(self, twin: ErrorStats) -> dict[str, float]:
        """Each statistic in the units its threshold is in (floors aside): what scripts/bench_numerics.py measures.

        max_abs, mean_abs: the kernel's over the twin's (against Thresholds.max_factor, mean_factor); bias: the
        kernel's |bias| beyond the twin's, in the twin's mean abs errors (bias_fraction); scale: likewise in the
        twin's relative mean abs errors (scale_fraction).
        """
        return {
            "max_abs": _ratio(self.max_abs, twin.max_abs),
            "mean_abs": _ratio(self.mean_abs, twin.mean_abs),
            "bias": _ratio(abs(self.bias) - abs(twin.bias), twin.mean_abs),
            "scale": _ratio(abs(self.scale) - abs(twin.scale), twin.relative_mean_abs),
        }

    def as_dict(self) -> dict[str, float]:
        return asdict(self)


STATISTICS = ("max_abs", "mean_abs", "bias", "scale")
NAMES = {"max_abs": "max abs error", "mean_abs": "mean abs error", "bias": "bias", "scale": "scale"}


def _ratio(numerator: float, denominator: float) -> float:
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
        return {name: _ratio(kernel.value(name), bound) for name, bound in self.bounds(twin).items()}

    def with_budget(self, budget: PrecisionBudget | None) -> Thresholds:
        """These bounds with an output's precision budget in place of the factors it sets."""
        return self if budget is None else replace(self, **budget.factors())


THRESHOLDS = Thresholds()


@dataclass
class OutputCheck:
    """One output against its reference on one seed, and beside its precision twin's error."""

    output: Output
    mismatches: int = 0  # elements outside the tolerance (non-finite ones included)
    nonfinite: int = 0  # NaN or Inf, unwritten (still poisoned) elements included
    max_abs_error: float = 0.0  # over finite elements
    errors: ErrorStats | None = None  # the kernel's (None only where a test builds a check by hand)
    twin: ErrorStats | None = None  # the precision twin's on the same inputs; None: the family has none

    @property
    def within_tolerance(self) -> bool:
        """What the Tolerance alone says (the whole gate for a family without a precision twin)."""
        return self.nonfinite == 0 and self.mismatches <= self.output.tolerance.mismatches

    @property
    def used(self) -> dict[str, float]:
        """Each statistic's fraction of its bound; empty without a twin to compare with."""
        if self.errors is None or self.twin is None:
            return {}
        return self.output.thresholds.used(self.errors, self.twin)

    @property
    def tightest(self) -> tuple[str, float] | None:
        """The statistic closest to its bound and the fraction of it taken (NaN as infinite); None without a twin."""
        used = {name: math.inf if math.isnan(fraction) else fraction for name, fraction in self.used.items()}
        return max(used.items(), key=lambda item: item[1]) if used else None

    @property
    def exceeded(self) -> list[str]:
        """The statistics beyond their bounds (a NaN statistic counts: it cannot show the output is right)."""
        return [name for name, fraction in self.used.items() if not fraction <= 1]

    @property
    def passed(self) -> bool:
        return self.within_tolerance and not self.exceeded

    def problems(self) -> list[str]:
        tolerance, found = self.output.tolerance, []
        if self.nonfinite:
            found.append(f"{self.nonfinite} NaN/Inf elements (unwritten output stays NaN)")
        if self.mismatches > tolerance.mismatches:
            found.append(
                f"{self.mismatches} elements outside atol={tolerance.atol:g}, rtol={tolerance.rtol:g} "
                f"({tolerance.mismatches} allowed; max abs error {self.max_abs_error:.4g})"
            )
        if self.exceeded and self.errors is not None and self.twin is not None:
            bounds = self.output.thresholds.bounds(self.twin)
            found.append(
                "error beyond the precision twin's: "
                + ", ".join(
                    f"{NAMES[name]} {getattr(self.errors, name):.3g} (twin {getattr(self.twin, name):.3g}, "
                    f"bound {bounds[name]:.3g})"
                    for name in self.exceeded
                )
            )
        return found

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
        return self._passed(lambda o: o.passed)

    @property
    def within_tolerance(self) -> bool:
        """Whether the Tolerance alone (the gate before precision twins) passes this seed."""
        return self._passed(lambda o: o.within_tolerance)

    def _passed(self, output_passed: Callable[[OutputCheck], bool]) -> bool:
        checked = bool(self.outputs) and all(output_passed(o) for o in self.outputs)
        return self.error is None and checked and self.inputs_unchanged

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

    def problem(self) -> str | None:
        if self.error:
            return f"seed {self.seed}: {self.error}"
        several = len(self.outputs) > 1
        parts = [f"output {o.output.name}: {p}" if several else p for o in self.outputs for p in o.problems()]
        if not self.inputs_unchanged:
            parts.append("the kernel modified its inputs")
        return f"seed {self.seed}: " + ", ".join(parts) if parts else None


@dataclass
class NumericsResult:
    reference: str  # what the family compares with, in words
    outputs: list[Output]
    seeds: list[SeedCheck] = field(default_factory=list)
    precision_twin: str | None = None  # the twin's name in words; None: the Tolerance alone judges

    @property
    def passed(self) -> bool:
        return bool(self.seeds) and all(s.passed for s in self.seeds)

    def problems(self) -> list[str]:
        return [p for s in self.seeds if (p := s.problem())]

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


@dataclass(frozen=True)
class NumericsCase:
    """What the gate needs of one compiled case."""

    key: str
    family: Family
    params: Mapping[str, Any]
    run: KernelRun
    arguments: Sequence[Argument]  # every kernel argument as the PrimFunc declares it
    outputs: Mapping[int, OutputKind]  # position -> how the kernel writes it, ascending (harness.build)
    tolerances: Sequence[Tolerance]  # one per output

    @property
    def output_arguments(self) -> list[Argument]:
        return [self.arguments[i] for i in self.outputs]

    @property
    def returned_arguments(self) -> list[Argument]:
        """The outputs the kernel allocates and returns, in order: what is poisoned through the allocator."""
        return [self.arguments[i] for i, kind in self.outputs.items() if isinstance(kind, Returned)]

    def checked_outputs(self) -> list[Output]:
        """Each output with its tolerance, named as the signature names it (else by its position)."""
        return [
            Output(self.arguments[i].name or str(i), tolerance)
            for i, tolerance in zip(self.outputs, self.tolerances, strict=True)
        ]


def fresh_seeds(count: int = MIN_SEEDS) -> list[int]:
    """New seeds for every run (recorded in the report, so a failure can be replayed)."""
    return [secrets.randbits(31) for _ in range(count)]


def validate_seeds(seeds: Sequence[int]) -> list[int]:
    seeds = list(seeds)
    if len(set(seeds)) < MIN_SEEDS:
        raise ValueError(f"the numeric gate needs at least {MIN_SEEDS} distinct seeds, got {seeds}")
    return seeds


def make_inputs(family: Family, params: Mapping[str, Any], seed: int, device: str = "cuda") -> list[Any]:
    """The family's inputs for one seed: the same seed gives the same tensors."""
    import torch

    generator = torch.Generator(device=device).manual_seed(seed)
    return list(family.inputs(params, generator, device))


def poison_value(dtype: Any) -> Any:
    """A value the kernel should not produce: NaN for floats, the minimum for integers (False for bool,
    which has no value to spare)."""
    import torch

    if dtype.is_floating_point:
        return float("nan")
    return False if dtype == torch.bool else torch.iinfo(dtype).min


def poison(outputs: Sequence[Argument], memory: Memory) -> list[tuple[int, int]]:
    """Poison the memory the kernel's outputs will be allocated from; the byte ranges poisoned.

    The caching allocator picks a block by the state of its cache alone. Allocating the outputs' sizes
    in order and freeing them leaves that state as it was (freed blocks merge back), so the kernel's
    allocations of the same sizes in the same order get the same blocks, still filled. Emptying the
    cache first leaves little else to pick from. That makes it likely; `unpoisoned` proves it.
    """
    memory.settle()
    blocks = []
    for argument in outputs:
        dtype = torch_dtype(argument.dtype)
        blocks.append(memory.empty(argument.shape, dtype).fill_(poison_value(dtype)))
    ranges = [byte_range(block) for block in blocks]
    del blocks  # back to the cache, still poisoned (the fill is queued before any later use of the block)
    return ranges


def byte_range(tensor: Any) -> tuple[int, int]:
    """[first, last + 1) of the bytes the tensor's elements occupy, a view's strides included."""
    start = tensor.data_ptr()
    if tensor.numel() == 0:
        return start, start
    extent = 1 + sum((size - 1) * stride for size, stride in zip(tensor.shape, tensor.stride(), strict=True))
    return start, start + extent * tensor.element_size()


def unpoisoned(outputs: Sequence[Any], ranges: Sequence[tuple[int, int]]) -> list[int]:
    """Indices of the outputs not entirely inside one poisoned range (an empty output has nothing to poison)."""
    found = []
    for index, output in enumerate(outputs):
        first, end = byte_range(output)
        if first != end and not any(low <= first and end <= high for low, high in ranges):
            found.append(index)
    return found


@dataclass
class Prepared:
    """One case's tensors for one seed: what inputs() made, what the kernel is called with, and when checking,
    copies of the inputs and the expected outputs."""

    inputs: list[Any]  # as inputs() made them: what the reference and the precision twin receive
    arguments: list[Any] = field(default_factory=list)  # inputs and the harness's allocations, in the call's order
    originals: list[Any] = field(default_factory=list)
    expected: list[Any] = field(default_factory=list)
    twin: list[Any] | None = None  # the precision twin's outputs, one per output; None: the family has none


def prepare(case: NumericsCase, seed: int, device: str, checking: bool) -> Prepared:
    """Everything a family's callables make for a run, and the arguments the harness allocates: a `Written`
    one filled with poison when checking, an `Accumulated(initial=ZEROS)` one zeroed. Whatever goes wrong in the
    family's callables is a FamilyCallError."""
    family = case.family
    try:
        inputs = make_inputs(family, case.params, seed, device)
        check_inputs(family, inputs, case.arguments, case.outputs)
        made = dict(zip(from_inputs(len(case.arguments), case.outputs), inputs, strict=True))
        arguments = [
            made[i] if i in made else allocate(case.arguments[i], case.outputs[i], device, checking)
            for i in passed_in(len(case.arguments), case.outputs)
        ]
        if not checking:
            return Prepared(inputs, arguments)
        expected = expected_outputs(family, case.params, inputs, case.output_arguments)
        twin = twin_outputs(family, case.params, inputs, case.output_arguments)
        return Prepared(inputs, arguments, [tensor.clone() for tensor in inputs], expected, twin)
    except FamilyCallError:
        raise
    except Exception as error:  # the family's own code raised: its failure, reported as such
        raise FamilyCallError(
            f"{family.file}: making the inputs or the reference raised {type(error).__name__}: {error}"
        ) from error


def allocate(argument: Argument, kind: OutputKind, device: str, checking: bool) -> Any:
    """An argument the harness makes: one the kernel must write entirely starts as poison, so an element it
    skips fails; one it accumulates into starts at zero."""
    import torch

    dtype = torch_dtype(argument.dtype)
    if isinstance(kind, Written) and checking:
        return torch.full(argument.shape, poison_value(dtype), dtype=dtype, device=device)
    return torch.zeros(argument.shape, dtype=dtype, device=device)


def returned_outputs(returned: Any, like: Sequence[Argument]) -> list[Any]:
    """What the kernel returned, as one tensor per returned output; ValueError unless it is what its signature
    says (nothing, an empty list, when it returns no output)."""
    import torch

    several = isinstance(returned, (list, tuple))
    if not like:
        outputs = list(returned) if several else ([] if returned is None else [returned])
    else:
        outputs = list(returned) if several and len(like) > 1 else [returned]
    fits = len(outputs) == len(like) and all(
        isinstance(t, torch.Tensor) and tuple(t.shape) == tuple(a.shape) and t.dtype == torch_dtype(a.dtype)
        for t, a in zip(outputs, like, strict=False)
    )
    if not fits:
        got = ", ".join(
            f"{t.dtype} {tuple(t.shape)}" if isinstance(t, torch.Tensor) else type(t).__name__ for t in outputs
        )
        wanted = ", ".join(f"{torch_dtype(a.dtype)} {tuple(a.shape)}" for a in like)
        raise ValueError(
            f"the kernel returned {got or 'nothing'}; its signature's returned outputs are {wanted or 'none'}"
        )
    return outputs


def check_numerics(
    cases: Sequence[NumericsCase], seeds: Sequence[int], device: str = "cuda", memory: Memory | None = None
) -> dict[str, NumericsResult]:
    """key -> result for every case, each seed's inputs made afresh from the case's own parameters.

    `memory` is where the kernels' outputs come from: the CUDA caching allocator unless a test stands in.
    """
    memory = CudaCache(device) if memory is None else memory
    results = {
        c.key: NumericsResult(
            c.family.label(c.params), c.checked_outputs(), precision_twin=c.family.precision_twin_label(c.params)
        )
        for c in cases
    }
    for seed in validate_seeds(seeds):
        for case in cases:
            results[case.key].seeds.append(check_seed(case, seed, device, memory))
    return results


def check_seed(case: NumericsCase, seed: int, device: str, memory: Memory) -> SeedCheck:
    """One case on one seed; its tensors are freed on return, before the next case's are made."""
    import torch

    check = SeedCheck(seed)
    try:
        prepared = prepare(case, seed, device, checking=True)
        ranges = poison(case.returned_arguments, memory)  # last: nothing else may take the poisoned blocks
    except FamilyCallError as error:
        check.error = str(error)
        return check
    try:
        returned = case.run(*prepared.arguments)
        if device.startswith("cuda"):
            torch.cuda.synchronize()  # launch errors surface here, inside this case's check
    except Exception as error:  # a launch failure is this case's failure, not the run's
        check.error = f"the kernel raised {type(error).__name__}: {error}"
        return check
    try:
        returned = returned_outputs(returned, case.returned_arguments)
    except ValueError as error:
        check.error = str(error)
        return check
    checked = case.checked_outputs()
    lost = unpoisoned(returned, ranges)
    if lost:
        names = [o.name for o, kind in zip(checked, case.outputs.values(), strict=True) if isinstance(kind, Returned)]
        check.error = (
            f"output {', '.join(names[i] for i in lost)} could not be poisoned: the kernel returned it "
            "outside the memory filled before the call, so an element it never writes could pass unseen"
        )
        return check
    passed = dict(zip(passed_in(len(case.arguments), case.outputs), prepared.arguments, strict=True))
    results = iter(returned)
    outputs = [next(results) if isinstance(kind, Returned) else passed[i] for i, kind in case.outputs.items()]
    twins = prepared.twin or [None] * len(outputs)
    check.outputs = [compare(*each) for each in zip(checked, outputs, prepared.expected, twins, strict=True)]
    # An argument inputs() made that is not an output must come back bit-identical.
    check.inputs_unchanged = all(
        torch.equal(a, b)
        for i, a, b in zip(
            from_inputs(len(case.arguments), case.outputs), prepared.inputs, prepared.originals, strict=True
        )
        if i not in case.outputs
    )
    return check


def compare(output: Output, tensor: Any, expected: Any, twin: Any | None = None) -> OutputCheck:
    """One returned output against its reference, at its own tolerance and beside its precision twin's error.

    Every dtype a kernel emits is compared in a wider one (`compared_values`): torch has no isfinite or isclose
    for float8, and an integer difference must not wrap. Integers and bool (indices, packed int4 in its int8
    storage, masks) are exact: an element is outside the tolerance when it differs from the reference by more
    than atol + rtol * |ref| (0 and 0: when it differs at all), and they have no NaN to count.
    """
    import torch

    tolerance = output.tolerance
    out, ref = compared_values(tensor, expected)
    if exact(tensor.dtype):
        difference = (out - ref).abs()
        outside = (out != ref) & (difference > tolerance.atol + tolerance.rtol * ref.abs())
        nonfinite = torch.zeros((), dtype=torch.bool)
    else:
        outside = ~torch.isclose(out, ref, rtol=tolerance.rtol, atol=tolerance.atol)
        nonfinite = ~torch.isfinite(out)
    errors = error_stats(tensor, expected, tolerance.mismatches)
    return OutputCheck(
        output,
        mismatches=int(outside.sum().item()),
        nonfinite=int(nonfinite.sum().item()),
        max_abs_error=int(errors.max_abs) if exact(tensor.dtype) and math.isfinite(errors.max_abs) else errors.max_abs,
        errors=errors,
        twin=None if twin is None else error_stats(twin, expected, tolerance.mismatches),
    )


def exact(dtype: Any) -> bool:
    """Integers and bool compare exactly; every float type (float8 to float64) within its tolerance."""
    return not dtype.is_floating_point


def compared_values(tensor: Any, expected: Any) -> tuple[Any, Any]:
    """Output and reference flattened in the dtype they are compared in: float64 for integers and bool (exact up to
    2^53, beyond which an element is wrong anyway) and wherever either side is float64, else float32 (float8,
    bf16 and fp16 convert exactly)."""
    import torch

    wide = torch.float64 if exact(tensor.dtype) or torch.float64 in (tensor.dtype, expected.dtype) else torch.float32
    return tensor.detach().flatten().to(wide), expected.detach().flatten().to(wide)


def error_stats(tensor: Any, expected: Any, allowed: int = 0) -> ErrorStats:
    """`tensor`'s error against `expected` over its finite elements, summed in float64 (outputs hold 1e8 elements).

    The max leaves out the `allowed` largest errors, as the Tolerance allows that many elements outside it.
    """
    import torch

    out, ref = (value.detach().flatten().to(torch.float64) for value in (tensor, expected))
    finite = torch.isfinite(out)
    if not bool(finite.all()):
        out, ref = out[finite], ref[finite]
    if out.numel() <= allowed:
        return ErrorStats(math.inf, math.inf, math.nan, math.nan, float(ref.abs().mean()) if ref.numel() else 0.0)
    error = out - ref
    absolute = error.abs()
    largest = absolute.max() if allowed == 0 else absolute.topk(allowed + 1).values[-1]
    # The scale as <error, ref> / <ref, ref>: the same as <out, ref> / <ref, ref> - 1, without the cancellation.
    values = torch.stack([largest, absolute.mean(), error.mean(), error.dot(ref), ref.dot(ref), ref.abs().mean()])
    max_abs, mean_abs, bias, projection, energy, magnitude = values.tolist()  # one synchronization, not six
    return ErrorStats(max_abs, mean_abs, bias, projection / energy if energy else 0.0, magnitude)
