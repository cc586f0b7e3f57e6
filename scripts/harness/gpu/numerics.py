"""The numeric gate: does a kernel compute its family's reference on fresh random inputs?

For every seed and case: the family makes the inputs, every output is allocated from the
kernel's own signature and poisoned (NaN, or the dtype's minimum for integers), the kernel runs,
and each output is compared with the family's reference at the family's tolerance
(`isclose(atol, rtol)`, at most `mismatches` elements outside it). NaN or Inf in an output
fails (an element the kernel never wrote is still NaN), and the inputs must be bit-identical
afterwards. Inputs and references are made afresh for every case from its own parameters.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from harness.family import Family, Tolerance

MIN_SEEDS = 3

# kernel(*arguments): every argument, outputs included, in the PrimFunc's order.
KernelRun = Callable[..., Any]


class FamilyCallError(ValueError):
    """A family's inputs or reference raised, or do not fit the kernel; the message names the family file."""


@dataclass
class SeedCheck:
    seed: int
    mismatches: int = 0  # elements outside the tolerance (non-finite ones included)
    nonfinite: int = 0  # NaN or Inf in the output, unwritten (still poisoned) elements included
    max_abs_error: float = 0.0  # over finite elements
    inputs_unchanged: bool = True
    allowed_mismatches: int = 0
    error: str | None = None  # the kernel raised, or the reference does not fit the outputs

    @property
    def passed(self) -> bool:
        return (
            self.error is None
            and self.mismatches <= self.allowed_mismatches
            and self.nonfinite == 0
            and self.inputs_unchanged
        )

    def problem(self, tolerance: Tolerance) -> str | None:
        if self.error:
            return f"seed {self.seed}: {self.error}"
        parts = []
        if self.nonfinite:
            parts.append(f"{self.nonfinite} NaN/Inf elements (unwritten output stays NaN)")
        if self.mismatches > self.allowed_mismatches:
            parts.append(
                f"{self.mismatches} elements outside atol={tolerance.atol:g}, rtol={tolerance.rtol:g} "
                f"({self.allowed_mismatches} allowed; max abs error {self.max_abs_error:.4g})"
            )
        if not self.inputs_unchanged:
            parts.append("the kernel modified its inputs")
        return f"seed {self.seed}: " + ", ".join(parts) if parts else None


@dataclass
class NumericsResult:
    reference: str  # what the family compares with, in words
    tolerance: Tolerance
    seeds: list[SeedCheck] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return bool(self.seeds) and all(s.passed for s in self.seeds)

    def problems(self) -> list[str]:
        return [p for s in self.seeds if (p := s.problem(self.tolerance))]

    def as_dict(self) -> dict[str, Any]:
        return {
            "reference": self.reference,
            "atol": self.tolerance.atol,
            "rtol": self.tolerance.rtol,
            "allowed_mismatches": self.tolerance.mismatches,
            "passed": self.passed,
            "seeds": [
                {
                    "seed": s.seed,
                    "mismatches": s.mismatches,
                    "nonfinite": s.nonfinite,
                    "max_abs_error": s.max_abs_error,
                    "inputs_unchanged": s.inputs_unchanged,
                    "error": s.error,
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
    arguments: Sequence[Any]  # (shape, dtype) per kernel argument: harness.gpu.compile.Argument


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


# TVM dtype names torch spells differently.
TORCH_DTYPES = {"float8_e4m3": "float8_e4m3fn", "float8_e5m2": "float8_e5m2", "bool": "bool"}


def torch_dtype(name: str) -> Any:
    import torch

    dtype = getattr(torch, TORCH_DTYPES.get(name, name), None)
    if not isinstance(dtype, torch.dtype):
        raise FamilyCallError(f"the kernel has an argument of dtype {name}, which torch has no name for")
    return dtype


def poisoned_outputs(family: Family, arguments: Sequence[Any], device: str = "cuda") -> list[Any]:
    """Every output the kernel writes, allocated from its signature, filled with a value it should not produce:
    NaN for floats, the minimum for integers (False for bool, which has no value to spare)."""
    import torch

    outputs = []
    for position in family.outputs:
        argument = arguments[position]
        try:
            dtype = torch_dtype(argument.dtype)
        except FamilyCallError as error:
            raise FamilyCallError(f"{family.file}: output {position}: {error}") from None
        if dtype.is_floating_point:
            poison: Any = float("nan")
        elif dtype == torch.bool:
            poison = False
        else:
            poison = torch.iinfo(dtype).min
        outputs.append(torch.full(argument.shape, poison, device=device, dtype=dtype))
    return outputs


@dataclass
class Prepared:
    """One case's tensors for one seed: inputs, poisoned outputs, all arguments in order, the expected outputs."""

    inputs: list[Any]
    outputs: list[Any]
    arguments: list[Any]
    expected: list[Any] | None


def prepare(
    family: Family, params: Mapping[str, Any], arguments: Sequence[Any], seed: int, device: str, reference: bool
) -> Prepared:
    """Everything a family's callables make for a run; whatever goes wrong in them is a FamilyCallError."""
    try:
        inputs = make_inputs(family, params, seed, device)
        outputs = poisoned_outputs(family, arguments, device)
        ordered = kernel_arguments(family, inputs, outputs, len(arguments))
        expected = expected_outputs(family, params, inputs, outputs) if reference else None
    except FamilyCallError:
        raise
    except Exception as error:  # the family's own code raised: its failure, reported as such
        raise FamilyCallError(
            f"{family.file}: making the inputs or the reference raised {type(error).__name__}: {error}"
        ) from error
    return Prepared(inputs, outputs, ordered, expected)


def kernel_arguments(family: Family, inputs: Sequence[Any], outputs: Sequence[Any], count: int) -> list[Any]:
    """Inputs and outputs interleaved into the kernel's argument order."""
    positions = [p % count for p in family.outputs]
    if len(inputs) + len(outputs) != count:
        raise FamilyCallError(
            f"{family.file}: inputs() made {len(inputs)} tensors and outputs lists {len(outputs)}, but the kernel "
            f"takes {count} arguments; make inputs() return every argument that is not an output, in order"
        )
    given = iter(inputs)
    written = dict(zip(positions, outputs, strict=True))
    return [written[i] if i in written else next(given) for i in range(count)]


def expected_outputs(family: Family, params: Mapping[str, Any], inputs: Sequence[Any], like: Sequence[Any]) -> list:
    """The reference's outputs, checked to match the kernel's outputs in number, shape and kind."""
    expected = family.reference(params, *inputs)
    expected = list(expected) if isinstance(expected, (tuple, list)) else [expected]
    if len(expected) != len(like):
        raise FamilyCallError(
            f"{family.file}: the reference returned {len(expected)} tensor(s) for {len(like)} output(s); return one "
            "tensor per entry of outputs, in order"
        )
    for index, (reference, output) in enumerate(zip(expected, like, strict=True)):
        shape_ok = tuple(getattr(reference, "shape", ())) == tuple(output.shape)
        kind_ok = getattr(reference, "dtype", None) is not None and (
            reference.dtype.is_floating_point == output.dtype.is_floating_point
        )
        if not (shape_ok and kind_ok):
            raise FamilyCallError(
                f"{family.file}: reference output {index} is {getattr(reference, 'dtype', type(reference).__name__)} "
                f"{tuple(getattr(reference, 'shape', ()))}, the kernel writes {output.dtype} {tuple(output.shape)}; "
                "return a tensor of the output's shape (a wider float type is fine)"
            )
    return expected


def check_numerics(
    cases: Sequence[NumericsCase], seeds: Sequence[int], device: str = "cuda"
) -> dict[str, NumericsResult]:
    """key -> result for every case, each seed's inputs made afresh from the case's own parameters."""
    import torch

    results = {c.key: NumericsResult(c.family.label(c.params), c.family.tolerance) for c in cases}
    for seed in validate_seeds(seeds):
        for case in cases:
            family, tolerance = case.family, case.family.tolerance
            check = SeedCheck(seed, allowed_mismatches=tolerance.mismatches)
            results[case.key].seeds.append(check)
            try:
                prepared = prepare(family, case.params, case.arguments, seed, device, reference=True)
            except FamilyCallError as error:
                check.error = str(error)
                continue
            before = [tensor.clone() for tensor in prepared.inputs]
            try:
                case.run(*prepared.arguments)
                if device.startswith("cuda"):
                    torch.cuda.synchronize()  # launch errors surface here, inside this case's check
            except Exception as error:  # a launch failure is this case's failure, not the run's
                check.error = f"the kernel raised {type(error).__name__}: {error}"
                continue
            for output, reference in zip(prepared.outputs, prepared.expected or [], strict=True):
                _compare(check, output, reference, tolerance)
            check.inputs_unchanged = all(torch.equal(a, b) for a, b in zip(prepared.inputs, before, strict=True))
            del prepared, before
    return results


def _compare(check: SeedCheck, output: Any, expected: Any, tolerance: Tolerance) -> None:
    import torch

    output = output.to(expected.dtype)
    finite = torch.isfinite(output) if output.dtype.is_floating_point else torch.ones_like(output, dtype=torch.bool)
    check.nonfinite += int((~finite).sum().item())
    close = torch.isclose(output, expected, rtol=tolerance.rtol, atol=tolerance.atol)
    check.mismatches += int((~close).sum().item())
    errors = (output.double() - expected.double()).abs()
    worst = float(errors[finite].max().item()) if bool(finite.any()) else float("inf")
    check.max_abs_error = max(check.max_abs_error, worst)
