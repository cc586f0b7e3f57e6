"""What the GPU check's stages call a compiled kernel with: its numerics case, and its timed pairs (next to its
speed reference, or next to the base commit's kernel of it)."""

from __future__ import annotations

from typing import Any

from tilelang_golden.catalog.declaration import FamilyCallError
from tilelang_golden.gpu.measure.numerics import NumericsCase, prepare
from tilelang_golden.gpu.measure.timing import Pair
from tilelang_golden.gpu.report.results import reference_name
from tilelang_golden.gpu.run.compile import CompiledCase


def numerics_case(compiled: CompiledCase, key: str | None = None) -> NumericsCase:
    """What the numeric gate and the timing need of a compiled case, under its key (`family/variant` by default)."""
    case = compiled.case
    run = compiled.kernel
    return NumericsCase(
        key or case.key,
        case.family,
        case.params,
        run,
        compiled.arguments,
        compiled.outputs,
        compiled.tolerances,
        poisoned=not compiled.chain,
    )


def timed_pair(compiled: CompiledCase, seed: int, device: str = "cuda") -> Pair:
    """The kernel and its PyTorch op on one seed's inputs, ready to be timed; each call returns fresh outputs,
    as it does for the kernel's users."""
    case = compiled.case
    family, params = case.family, case.params
    prepared = prepare(numerics_case(compiled), seed, device, checking=False)

    def reference() -> Any:
        return family.speed_reference(params, *prepared.inputs)

    try:
        reference()  # once before timing: a failing op is this case's failure, not the run's
    except Exception as error:
        raise FamilyCallError(f"{family.file}: speed_reference raised {type(error).__name__}: {error}") from error
    return Pair(case.key, lambda: compiled.kernel(*prepared.arguments), reference_name(case), reference)


def ab_pair(compiled: CompiledCase, base: CompiledCase, seed: int, device: str = "cuda") -> Pair:
    """The variant's kernel and the base's kernel of it, each on its own inputs of one seed, ready to be timed."""
    ours = prepare(numerics_case(compiled), seed, device, checking=False)
    theirs = prepare(numerics_case(base), seed, device, checking=False)
    return Pair(
        compiled.case.key,
        lambda: compiled.kernel(*ours.arguments),
        base.case.family.file,
        lambda: base.kernel(*theirs.arguments),
    )
