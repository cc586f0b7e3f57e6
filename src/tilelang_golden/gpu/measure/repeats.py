"""Repeated launches: a variant launched several times on one seed's inputs, every output compared bit for bit with
the first launch's (tilelang_golden.gpu.gate.repeat_gate says what fails).

The inputs are made once, as the numeric check makes them (tilelang_golden.gpu.measure.numerics.prepare), and every
launch starts from the same state: each argument the kernel writes in place (`Written`, `Accumulated`) is restored to
its value before the first launch, so an accumulation adds into the same initial value every time. A kernel's
returned outputs are fresh tensors each launch; a chain is called whole, as its users call it.
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping
from typing import Any

from tilelang_golden.catalog.declaration import FamilyCallError, passed_in
from tilelang_golden.family import Family, OutputKind
from tilelang_golden.gpu.gate.repeat_gate import OutputRepeats, RepeatCheck
from tilelang_golden.gpu.measure.numerics import NumericsCase, compared_values, prepare
from tilelang_golden.gpu.run.calls import every_output, returned_outputs


def declared_nondeterminism(family: Family, outputs: Mapping[int, OutputKind]) -> dict[int, str]:
    """Output position -> why the family declares it nondeterministic (one reason may cover every output)."""
    declared = family.nondeterministic
    if declared is None:
        return {}
    if isinstance(declared, str):
        return dict.fromkeys(outputs, declared)
    return {position: why for position, why in declared.items() if position in outputs}


def check_repeats(case: NumericsCase, seed: int, launches: int, device: str = "cuda") -> RepeatCheck:
    """The case launched `launches` times on `seed`'s inputs, each output of every launch after the first compared
    bit for bit with the first's."""
    check = RepeatCheck(seed, launches)
    started = time.perf_counter()
    try:
        prepared = prepare(case, seed, device, checking=False)
    except FamilyCallError as error:
        check.error = str(error)
        return check
    count = len(case.arguments)
    positions = passed_in(count, case.outputs)
    # What each argument written in place holds before the first launch: every launch starts from it.
    initial = [(arg, arg.clone()) for i, arg in zip(positions, prepared.arguments, strict=True) if i in case.outputs]
    first: list[Any] = []
    found: list[list[tuple[int, float]]] = [[] for _ in case.outputs]  # per output, each repeat's difference
    for launch in range(launches):
        for argument, value in initial:
            argument.copy_(value)
        try:
            returned = returned_outputs(run_once(case, prepared.arguments, device), case.returned_arguments)
        except Exception as error:  # a launch failure is this variant's, as in the numeric check
            check.error = f"launch {launch + 1} of {launches} raised {type(error).__name__}: {error}"
            return check
        outputs = every_output(count, case.outputs, prepared.arguments, returned)
        if not first:
            first = [output.clone() for output in outputs]  # in-place outputs are restored before the next launch
            continue
        for index, (before, again) in enumerate(zip(first, outputs, strict=True)):
            found[index].append(bit_difference(before, again))
    declared = declared_nondeterminism(case.family, case.outputs)
    check.outputs = [
        OutputRepeats(
            output.name,
            tensor.numel(),
            differing_repeats=sum(1 for elements, _ in differences if elements),
            most_elements=max((elements for elements, _ in differences), default=0),
            max_abs_difference=max((largest for _, largest in differences), default=0.0),
            declared=declared.get(position),
        )
        for output, position, tensor, differences in zip(
            case.checked_outputs(), case.outputs, first, found, strict=True
        )
    ]
    check.seconds = time.perf_counter() - started
    return check


def run_once(case: NumericsCase, arguments: list[Any], device: str) -> Any:
    """One launch, finished: an asynchronous launch error surfaces here, inside this variant's check."""
    returned = case.run(*arguments)
    if device.startswith("cuda"):
        import torch

        torch.cuda.synchronize()
    return returned


# A tensor's elements as integers of their own width: equal bits, equal integers (NaN's bits included).
_WIDTHS = {1: "int8", 2: "int16", 4: "int32", 8: "int64"}


def bit_difference(first: Any, again: Any) -> tuple[int, float]:
    """How many elements of `again` differ from `first` in any bit, and the largest |difference| among them (in the
    dtype the numeric check compares in; inf where either side is NaN or Inf)."""
    import torch

    def bits(tensor: Any) -> Any:
        return tensor.detach().contiguous().flatten().view(getattr(torch, _WIDTHS[tensor.element_size()]))

    differ = bits(first) != bits(again)
    elements = int(differ.sum().item())
    if not elements:
        return 0, 0.0
    out, ref = compared_values(again, first)
    delta = torch.nan_to_num((out[differ] - ref[differ]).abs(), nan=math.inf)
    return elements, float(delta.max().item())
