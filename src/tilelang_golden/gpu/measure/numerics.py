"""The numeric check's runner: every case on every seed, each output's error measured against its reference.

Every kernel is called as its users call it, `kernel(*arguments)` (tilelang_golden.gpu.run.calls: what it is called
with, what it must return, what it must leave unchanged). For every seed and case: the family makes the
inputs and the reference; then the memory the returned outputs will get is poisoned (tilelang_golden.gpu.run.poison),
the kernel runs, and every returned output must lie inside that poisoned memory, or the seed fails: a check
that cannot show an unwritten element is never a pass. Every output, returned or written in place, is
compared with its reference at its own tolerance (`isclose(atol, rtol)`, counting the elements outside it
and the NaN or Inf ones: an element the kernel never wrote is still NaN). Inputs and references are made
afresh for every case from its own parameters.

A tolerance must admit the output's rounding, so it cannot see a systematic error smaller than
that (a bf16 output 0.5 % too small passes rtol 1 %). So each output's error is also measured beside the
error of the family's precision twin (`Family.precision_twin`, by default its speed reference: the
PyTorch op at the kernel's own dtypes), run once per seed on the same inputs and measured against
the same reference, by statistics a systematic error moves (`ErrorStats`: max and mean absolute
error, mean signed error, least-squares scale). What passes, on these measurements, is tilelang_golden.gpu.gate.gate's
to decide (`Thresholds`, and each record's `passed` asks it).
"""

from __future__ import annotations

import math
import secrets
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from tilelang_golden.catalog.declaration import (
    FamilyCallError,
    check_inputs,
    expected_outputs,
    logical_outputs,
    twin_outputs,
)
from tilelang_golden.family import Family, OutputKind, Returned, Tolerance
from tilelang_golden.gpu.gate import numerics_gate
from tilelang_golden.gpu.gate.numerics_gate import ErrorStats, NumericsResult, Output, OutputCheck, SeedCheck
from tilelang_golden.gpu.run.calls import call_arguments, every_output, inputs_unchanged, returned_outputs
from tilelang_golden.gpu.run.poison import CudaCache, Memory, poison, unpoisoned

if TYPE_CHECKING:
    from tilelang_golden.catalog.build import Argument

# kernel(*arguments) -> its returned output, or a list of them in the signature's order.
KernelRun = Callable[..., Any]


@dataclass(frozen=True)
class NumericsCase:
    """What the gate needs of one compiled case."""

    key: str
    family: Family
    params: Mapping[str, Any]
    run: KernelRun
    arguments: Sequence[Argument]  # every kernel argument as the PrimFunc declares it
    outputs: Mapping[int, OutputKind]  # position -> how the kernel writes it, ascending (tilelang_golden.catalog.build)
    tolerances: Sequence[Tolerance]  # one per output
    # A chain allocates its outputs among its own intermediates: no block can be poisoned for them beforehand.
    poisoned: bool = True

    @property
    def output_arguments(self) -> list[Argument]:
        """Each output as the reference computes it (its logical shape where the kernel stores it in another)."""
        return logical_outputs(self.family, self.params, self.arguments, self.outputs)

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


def fresh_seeds(count: int = numerics_gate.MIN_SEEDS) -> list[int]:
    """New seeds for every run (recorded in the report, so a failure can be replayed)."""
    return [secrets.randbits(31) for _ in range(count)]


def make_inputs(family: Family, params: Mapping[str, Any], seed: int, device: str = "cuda") -> list[Any]:
    """The family's inputs for one seed: the same seed gives the same tensors."""
    import torch

    generator = torch.Generator(device=device).manual_seed(seed)
    return list(family.inputs(params, generator, device))


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
        arguments = call_arguments(case.arguments, case.outputs, inputs, device, checking)
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
    for seed in numerics_gate.validate_seeds(seeds):
        for case in cases:
            results[case.key].seeds.append(check_seed(case, seed, device, memory))
    return results


def check_seed(case: NumericsCase, seed: int, device: str, memory: Memory) -> SeedCheck:
    """One case on one seed; its tensors are freed on return, before the next case's are made."""
    import torch

    check = SeedCheck(seed)
    try:
        prepared = prepare(case, seed, device, checking=True)
        # last: nothing else may take the poisoned blocks
        ranges = poison(case.returned_arguments, memory) if case.poisoned else None
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
    lost = [] if ranges is None else unpoisoned(returned, ranges)
    if lost:
        names = [o.name for o, kind in zip(checked, case.outputs.values(), strict=True) if isinstance(kind, Returned)]
        check.error = (
            f"output {', '.join(names[i] for i in lost)} could not be poisoned: the kernel returned it "
            "outside the memory filled before the call, so an element it never writes could pass unseen"
        )
        return check
    count = len(case.arguments)
    outputs = [
        tensor if kind.to_logical is None else kind.to_logical(case.params, tensor)
        for tensor, kind in zip(
            every_output(count, case.outputs, prepared.arguments, returned), case.outputs.values(), strict=True
        )
    ]
    twins = prepared.twin or [None] * len(outputs)
    check.outputs = [check_output(*each) for each in zip(checked, outputs, prepared.expected, twins, strict=True)]
    check.inputs_unchanged = inputs_unchanged(count, case.outputs, prepared.inputs, prepared.originals)
    return check


def check_output(output: Output, tensor: Any, expected: Any, twin: Any | None = None) -> OutputCheck:
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
