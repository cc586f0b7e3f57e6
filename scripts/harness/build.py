"""A variant's kernel as TileLang compiles it: the PrimFunc and the pass configs that apply.

Shared by the static path (which lowers it) and the GPU path (which compiles it), so both see
the same function under the same configuration, exactly as `tilelang.compile` would: the
`@tilelang.jit` decorator's `pass_configs`, merged with any the PrimFunc carries itself.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from harness.family import Family, Variant


class BuildError(RuntimeError):
    """A variant's kernel could not be built; the message names the file, the variant and the fix."""


@dataclass(frozen=True)
class BuiltKernel:
    prim_func: Any
    pass_configs: dict[str, Any] = field(default_factory=dict)
    out_idx: list[int] | None = None  # the jit decorator's, when it has one


def build_kernel(family: Family, variant: Variant) -> BuiltKernel:
    """Build the PrimFunc of `variant`; raise BuildError naming the family file and variant."""
    from tilelang.jit import JITImpl
    from tvm import tirx

    params = family.params(variant)
    kernel = variant.kernel
    pass_configs: dict[str, Any] = {}
    out_idx = None
    try:
        if isinstance(kernel, tirx.PrimFunc):
            prim_func = kernel
        elif isinstance(kernel, JITImpl):
            prim_func = kernel.get_tir(**params)
            pass_configs = dict(kernel.pass_configs or {})
            out_idx = _indices(kernel.out_idx)
        else:
            prim_func = kernel(**params)
    except Exception as error:  # the kernel's Python body raised: the family's bug, reported as such
        raise BuildError(
            f"{family.file}: variant {variant.name!r} did not build with {params} "
            f"({type(error).__name__}: {error}); fix the kernel or its parameters"
        ) from error
    if not isinstance(prim_func, tirx.PrimFunc):
        raise BuildError(
            f"{family.file}: variant {variant.name!r}: its kernel returned {type(prim_func).__name__}, "
            "expected a TileLang PrimFunc (a @T.prim_func, or a factory or @tilelang.jit factory returning one)"
        )
    attrs = prim_func.attrs
    if attrs is not None and "tilelang_pass_configs" in attrs:  # as tilelang.compile merges them
        pass_configs = {**dict(attrs["tilelang_pass_configs"]), **pass_configs}
    arguments = len(prim_func.params)
    outside = [i for i in family.outputs if not -arguments <= i < arguments]
    if outside:
        raise BuildError(
            f"{family.file}: outputs {list(family.outputs)} name positions {outside} outside the kernel's "
            f"{arguments} arguments (variant {variant.name!r}); list the written arguments' positions"
        )
    declared = sorted(i % arguments for i in family.outputs)
    if out_idx is not None and sorted(i % arguments for i in out_idx) != declared:
        raise BuildError(
            f"{family.file}: variant {variant.name!r}: the @tilelang.jit decorator says out_idx={out_idx}, the "
            f"family says outputs={list(family.outputs)}; make them name the same arguments"
        )
    # PassConfigKey members are str enums whose str() is their repr: key by their value.
    return BuiltKernel(prim_func, {str(getattr(k, "value", k)): v for k, v in pass_configs.items()}, out_idx)


def _indices(out_idx: Any) -> list[int] | None:
    if out_idx is None:
        return None
    return [int(out_idx)] if isinstance(out_idx, int) else [int(i) for i in out_idx]
