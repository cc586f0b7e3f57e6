"""A family's callables against its kernel's signature: what inputs() must make, what the harness allocates,
and whether the reference and the precision twin return one tensor per output of the output's shape.

Shared by the GPU check (on the real tensors of every seed) and the static session (on the meta device, where
tensors have a shape and a dtype and no data, so a declaration mistake fails on the CPU before any GPU sees it).
Every argument is one of: made by inputs(); returned by the kernel (`Returned`); allocated by the harness
(`Written`, filled with NaN; `Accumulated(initial=ZEROS)`, zeroed). The rule inputs() follows is
`from_inputs`: every argument the kernel neither returns nor has the harness allocate, in order.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from tilelang_golden.catalog.build import Argument, BuiltKernel
from tilelang_golden.dtypes import torch_dtype
from tilelang_golden.family import ZEROS, Accumulated, Family, OutputKind, Returned, Variant, Written


class FamilyCallError(ValueError):
    """A family's inputs or reference raised, or do not fit the kernel; the message names the family file."""


def allocated_by_harness(kind: OutputKind | None) -> bool:
    """Whether the harness makes this argument (poisoned, or zeroed) rather than inputs() or the kernel."""
    return isinstance(kind, Written) or (isinstance(kind, Accumulated) and kind.initial == ZEROS)


def from_inputs(count: int, outputs: Mapping[int, OutputKind]) -> list[int]:
    """Positions of the arguments inputs() makes, in order: all that are neither returned nor harness-allocated."""
    return [
        i for i in range(count) if not isinstance(outputs.get(i), Returned) and not allocated_by_harness(outputs.get(i))
    ]


def passed_in(count: int, outputs: Mapping[int, OutputKind]) -> list[int]:
    """Positions of the arguments the kernel is called with, in order: every one it does not return."""
    return [i for i in range(count) if not isinstance(outputs.get(i), Returned)]


def _made_by(kind: OutputKind) -> str:
    if isinstance(kind, Returned):
        return "returned by the kernel"
    return "allocated by the harness, " + ("poisoned" if isinstance(kind, Written) else "zeroed")


def _describe(value: Any) -> str:
    if hasattr(value, "shape") and hasattr(value, "dtype"):
        return f"{value.dtype} {tuple(value.shape)}"
    return type(value).__name__


def check_inputs(
    family: Family, inputs: Sequence[Any], arguments: Sequence[Argument], outputs: Mapping[int, OutputKind]
) -> None:
    """inputs() made one tensor per argument it owns (`from_inputs`), each of the argument's shape and dtype."""
    import torch

    owned = from_inputs(len(arguments), outputs)
    names = ", ".join(arguments[i].name or str(i) for i in owned)
    if len(inputs) != len(owned):
        others = [f"{arguments[i].name or i} ({_made_by(k)})" for i, k in outputs.items() if i not in owned]
        raise FamilyCallError(
            f"{family.file}: inputs() made {len(inputs)} tensors, but the kernel takes {len(owned)} from it "
            f"({names or 'none'}); {', '.join(others) or 'no argument'} it does not make. Make inputs() return "
            "every argument that is neither returned by the kernel nor allocated by the harness, in order"
        )
    for position, value in zip(owned, inputs, strict=True):
        argument = arguments[position]
        if argument.shape == () and not isinstance(value, torch.Tensor):
            continue  # a scalar argument, given as a Python number
        fits = (
            isinstance(value, torch.Tensor)
            and tuple(value.shape) == tuple(argument.shape)
            and value.dtype == torch_dtype(argument.dtype)
        )
        if not fits:
            shapes_differ = isinstance(value, torch.Tensor) and tuple(value.shape) != tuple(argument.shape)
            raise FamilyCallError(
                f"{family.file}: inputs() made {_describe(value)} for argument {position} "
                f"({argument.name or position}), the kernel takes {torch_dtype(argument.dtype)} {argument.shape}; "
                "make that tensor in the argument's shape and dtype"
                + (
                    ". Both are made at the variant's dimensions: if inputs() is right, the kernel ignores them "
                    "(sizes from module-level constants?) and would be snapshotted for another size; build it "
                    "from the dimensions it is called with"
                    if shapes_differ
                    else ""
                )
            )


def logical_outputs(
    family: Family, params: Mapping[str, Any], arguments: Sequence[Argument], outputs: Mapping[int, OutputKind]
) -> list[Argument]:
    """Each output as the reference computes it: its argument, or for one kept in a storage layout (`to_logical`),
    the shape and dtype its mapping gives a tensor of the argument's (found on the meta device)."""
    import torch

    logical = []
    for position, kind in outputs.items():
        argument = arguments[position]
        if kind.to_logical is None:
            logical.append(argument)
            continue
        stored = torch.empty(argument.shape, dtype=torch_dtype(argument.dtype), device="meta")
        try:
            mapped = kind.to_logical(params, stored)
        except Exception as error:  # the family's mapping, run on a tensor without data
            raise FamilyCallError(
                f"{family.file}: the to_logical of output {argument.name or position} raised {type(error).__name__}: "
                f"{error} on the meta device; keep it to tensor operations (view, permute, index)"
            ) from error
        if not isinstance(mapped, torch.Tensor) or mapped.numel() != stored.numel():
            raise FamilyCallError(
                f"{family.file}: the to_logical of output {argument.name or position} made {_describe(mapped)} from "
                f"{_describe(stored)}; it must return the same elements in their logical order"
            )
        logical.append(Argument(tuple(mapped.shape), argument.dtype, argument.name))
    return logical


def expected_outputs(
    family: Family, params: Mapping[str, Any], inputs: Sequence[Any], like: Sequence[Argument]
) -> list[Any]:
    """The reference's outputs, checked to match the kernel's outputs in number, shape and kind."""
    expected = family.reference(params, *inputs)
    expected = list(expected) if isinstance(expected, (tuple, list)) else [expected]
    if len(expected) != len(like):
        raise FamilyCallError(
            f"{family.file}: the reference returned {len(expected)} tensor(s) for {len(like)} output(s) "
            f"({', '.join(a.name for a in like)}); return one tensor per output, in the order of the arguments"
        )
    for index, (reference, output) in enumerate(zip(expected, like, strict=True)):
        dtype = torch_dtype(output.dtype)
        shape_ok = tuple(getattr(reference, "shape", ())) == tuple(output.shape)
        kind_ok = getattr(reference, "dtype", None) is not None and (
            reference.dtype.is_floating_point == dtype.is_floating_point
        )
        if not (shape_ok and kind_ok):
            raise FamilyCallError(
                f"{family.file}: reference output {index} is {getattr(reference, 'dtype', type(reference).__name__)} "
                f"{tuple(getattr(reference, 'shape', ()))}, the kernel returns {dtype} {tuple(output.shape)}; "
                "return a tensor of the output's shape (a wider float type is fine)"
            )
    return expected


def twin_outputs(
    family: Family, params: Mapping[str, Any], inputs: Sequence[Any], like: Sequence[Argument]
) -> list[Any] | None:
    """The precision twin's outputs, one per kernel output in its shape; None when the family has no twin.

    An output of the same element count is reshaped (PyTorch's LayerNorm returns its Mean as (rows, 1) where a
    kernel writes (rows,)); a different count, number or dtype is the family's mistake, said in its file's name.
    """
    op = family.precision_twin_op()
    if op is None:
        return None
    fix = (
        "declare Family(precision_twin=...) returning one tensor per output in the output's dtype, "
        "or precision_twin=None where no PyTorch op computes at the kernel's precision"
    )
    try:
        produced = op(params, *inputs)
    except Exception as error:  # by default the speed reference, called here on the gate's inputs for the first time
        raise FamilyCallError(
            f"{family.file}: the precision twin raised {type(error).__name__}: {error}; {fix}"
        ) from error
    produced = list(produced) if isinstance(produced, (tuple, list)) else [produced]
    if len(produced) != len(like):
        raise FamilyCallError(
            f"{family.file}: the precision twin returned {len(produced)} tensor(s) for {len(like)} output(s) "
            f"({', '.join(a.name for a in like)}); {fix}"
        )
    shaped = []
    for index, (twin, output) in enumerate(zip(produced, like, strict=True)):
        dtype = torch_dtype(output.dtype)
        if getattr(twin, "dtype", None) != dtype or twin.numel() != math.prod(output.shape):
            raise FamilyCallError(
                f"{family.file}: precision twin output {index} is {getattr(twin, 'dtype', type(twin).__name__)} "
                f"{tuple(getattr(twin, 'shape', ()))}, the kernel returns {dtype} {tuple(output.shape)}; {fix}"
            )
        shaped.append(twin.reshape(output.shape))
    return shaped


def check_declaration(
    family: Family, params: Mapping[str, Any], arguments: Sequence[Argument], outputs: Mapping[int, OutputKind]
) -> None:
    """inputs(), the reference and the precision twin against the signature, on the meta device: shapes and
    dtypes without data. FamilyCallError names the family file and the mistake."""
    import torch

    try:
        inputs = list(family.inputs(params, torch.Generator().manual_seed(0), "meta"))
        check_inputs(family, inputs, arguments, outputs)
        like = logical_outputs(family, params, arguments, outputs)
        expected_outputs(family, params, inputs, like)
        twin_outputs(family, params, inputs, like)
    except FamilyCallError:
        raise
    except Exception as error:  # the family's own code raised on tensors without data
        raise FamilyCallError(
            f"{family.file}: making the inputs or the reference on the meta device (shapes and dtypes, no data) "
            f"raised {type(error).__name__}: {error}; keep inputs() and reference to tensor operations"
        ) from error


# A family's refusal shows this many lines at most: the first mistakes, then how many more there are.
MAX_LINES = 20


def family_problems(family: Family, build: Callable[[Family, Variant], BuiltKernel] | None = None) -> list[str]:
    """Every variant of the family built (by `build`, a run's `LoweringSession.build`; afresh without one), and its
    declaration checked against that variant's signature (`check_declaration`): what is wrong, one line (or one
    refusal) per mistake, the variants that share a mistake named together, at most MAX_LINES lines."""
    from tilelang_golden.catalog.build import BuildError, build_kernel, signature

    build = build_kernel if build is None else build

    found: dict[str, list[str]] = {}  # the mistake, its variant's name left out -> the variants that make it
    # A variant whose parameters depend on the target is checked as each of its targets builds it.
    built_as = {id(v.on_target(t)): v.on_target(t) for v in family.variants for t in family.target_names}
    for variant in built_as.values():
        named = f"variant {variant.name!r}"
        try:
            built = build(family, variant)
            check_declaration(family, family.params(variant), signature(built), built.outputs)
        except BuildError as error:
            message = str(error)
        except FamilyCallError as error:
            message = f"{family.file}: {named}: {str(error).removeprefix(f'{family.file}: ')}"
        else:
            continue
        names = found.setdefault(message.replace(named, "\0"), [])
        names += [variant.name] if variant.name not in names else []
    lines = [line for message, names in found.items() for line in message.replace("\0", _variants(names)).splitlines()]
    if len(lines) > MAX_LINES:
        lines = [*lines[: MAX_LINES - 1], f"... and {len(lines) - MAX_LINES + 1} more lines; fix the above and rerun"]
    return lines


def _variants(names: Sequence[str]) -> str:
    if len(names) == 1:
        return f"variant {names[0]!r}"
    shown = ", ".join(repr(n) for n in names[:3])
    return f"variants {shown}" + (f" and {len(names) - 3} more" if len(names) > 3 else "")
