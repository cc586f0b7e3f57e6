"""The kernel's call, as its users make it, held to its signature: what it is called with, what it must return,
and what it must leave as it was.

The arguments are what the family's inputs() made, with the harness's own allocations in their places
(`tilelang_golden.catalog.declaration`): one the kernel must write entirely (`Written`) filled with poison when
checking, one it accumulates into from zero (`Accumulated(initial=ZEROS)`) zeroed. It returns its returned outputs: one
tensor, or a list when it has several, each of its signature's shape and dtype. Every argument inputs() made that is not
an output must come back bit-identical.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from tilelang_golden.catalog.declaration import from_inputs, passed_in
from tilelang_golden.dtypes import torch_dtype
from tilelang_golden.family import OutputKind, Returned, Written
from tilelang_golden.gpu.run.poison import poison_value

if TYPE_CHECKING:
    from tilelang_golden.catalog.build import Argument


def call_arguments(
    arguments: Sequence[Argument], outputs: Mapping[int, OutputKind], inputs: Sequence[Any], device: str, checking: bool
) -> list[Any]:
    """What the kernel is called with, in its signature's order: the inputs, and the arguments the harness makes."""
    made = dict(zip(from_inputs(len(arguments), outputs), inputs, strict=True))
    return [
        made[i] if i in made else allocate(arguments[i], outputs[i], device, checking)
        for i in passed_in(len(arguments), outputs)
    ]


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


def every_output(
    count: int, outputs: Mapping[int, OutputKind], passed: Sequence[Any], returned: Sequence[Any]
) -> list[Any]:
    """Every output of the call in its signature's order: a returned one from what the kernel returned, one it
    writes in place from the arguments it was `passed`."""
    by_position = dict(zip(passed_in(count, outputs), passed, strict=True))
    results = iter(returned)
    return [next(results) if isinstance(kind, Returned) else by_position[i] for i, kind in outputs.items()]


def inputs_unchanged(
    count: int, outputs: Mapping[int, OutputKind], inputs: Sequence[Any], originals: Sequence[Any]
) -> bool:
    """Whether every argument inputs() made that is not an output is bit-identical to its copy from before the
    call."""
    import torch

    return all(
        torch.equal(after, before)
        for i, after, before in zip(from_inputs(count, outputs), inputs, originals, strict=True)
        if i not in outputs
    )
