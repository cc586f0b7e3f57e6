"""A chain of jit kernels as its user calls them: one Python function (attention forward then backward, a MoE
layer) that calls several `@tilelang.jit` kernels and torch ops, traced on the meta device.

The function runs as written, on tensors with shapes and dtypes and no data, while every jit kernel call is
recorded instead of compiled: a lazy factory's call (`flashattn_bwd(batch, heads, ...)`) hands back a stand-in
kernel, and calling it (or an eager kernel) traces the PrimFunc TileLang would compile, checks the tensors
passed against its signature and returns meta tensors of its outputs' shapes. What the trace yields, the kernels
in launch order and the function's own arguments and results, is what the static check snapshots and the GPU
check holds the real call's results to.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from tilelang_golden.dtypes import torch_dtype


class ChainError(RuntimeError):
    """The chain's function, or a kernel it calls, does not trace; the message says which and why."""


@dataclass(frozen=True)
class Launch:
    """One jit kernel a chain calls: its name, the PrimFunc TileLang compiles for the call, its pass configs."""

    name: str
    prim_func: Any = field(repr=False)
    pass_configs: Mapping[str, Any] = field(default_factory=dict)


def launch_of(prim_func: Any, decorator_configs: Mapping[Any, Any] | None, default_name: str) -> Launch:
    """The launch TileLang compiles for a PrimFunc: named by its symbol, with the pass configs it carries merged
    under its decorator's, as tilelang.compile merges them (PassConfigKey members are str enums whose str() is
    their repr: keyed by their value)."""
    attrs = prim_func.attrs
    configs = dict(decorator_configs or {})
    if attrs is not None and "tilelang_pass_configs" in attrs:
        configs = {**dict(attrs["tilelang_pass_configs"]), **configs}
    name = str(attrs["global_symbol"]) if attrs is not None and "global_symbol" in attrs else default_name
    return Launch(name, prim_func, {str(getattr(k, "value", k)): v for k, v in configs.items()})


@dataclass(frozen=True)
class ChainTrace:
    launches: tuple[Launch, ...]
    results: tuple[Any, ...]  # the function's results, meta tensors, in the order it returns them


def trace_chain(function: Callable[..., Any], inputs: Sequence[Any], params: Mapping[str, Any]) -> ChainTrace:
    """Call `function(*inputs, **params)` on meta tensors, every jit kernel it calls recorded in launch order (a
    kernel called again with the same PrimFunc is recorded once); ChainError when it calls none or fails."""
    with _recording() as launches:
        returned = function(*inputs, **params)
    if not launches:
        raise ChainError("it called no @tilelang.jit kernel; a chain's function calls its kernels as its users do")
    results = tuple(returned) if isinstance(returned, (tuple, list)) else (returned,)
    return ChainTrace(tuple(launches), results)


@contextlib.contextmanager
def _recording() -> Iterator[list[Launch]]:
    """While open, a jit kernel call records its PrimFunc (`JITImpl.__call__` is where TileLang compiles)."""
    from tilelang.jit import JITImpl

    launches: list[Launch] = []
    original = JITImpl.__call__

    def record(impl: Any, *args: Any, **kwargs: Any) -> Any:
        if impl.mode == "auto":  # as TileLang's own call decides it: by what the function does
            impl.mode = impl._infer_jit_mode(*args, **kwargs)
            impl.func.set_mode(impl.mode)
        _, tensors = impl.func.parse_args(*args, **kwargs)
        stand_in = _MetaKernel(impl, impl.get_tir(*args, **kwargs), launches)
        return stand_in(*tensors.values()) if impl.mode == "eager" else stand_in

    JITImpl.__call__ = record
    try:
        yield launches
    finally:
        JITImpl.__call__ = original


@dataclass
class _MetaKernel:
    """A compiled kernel's stand-in: checks what it is called with, records its launch, returns meta outputs."""

    impl: Any
    prim_func: Any
    launches: list[Launch]

    def __call__(self, *tensors: Any) -> Any:
        import torch

        params = list(self.prim_func.params)
        attrs = self.prim_func.attrs
        stated = attrs["tilelang_out_idx"] if attrs is not None and "tilelang_out_idx" in attrs else self.impl.out_idx
        returned = sorted(int(i) % len(params) for i in output_indices(stated))
        taken = [i for i in range(len(params)) if i not in returned]
        launch = launch_of(self.prim_func, self.impl.pass_configs, "kernel")
        name = launch.name
        if len(tensors) != len(taken):
            raise ChainError(f"kernel {name} was called with {len(tensors)} arguments; it takes {len(taken)}")
        for position, tensor in zip(taken, tensors, strict=True):
            shape, dtype = _declared(self.prim_func, params[position])
            if shape is not None and (tuple(tensor.shape) != shape or tensor.dtype != torch_dtype(dtype)):
                raise ChainError(
                    f"kernel {name} was called with {tensor.dtype} {tuple(tensor.shape)} for argument {position}, "
                    f"which it declares {torch_dtype(dtype)} {shape}"
                )
        if not any(seen.prim_func.same_as(self.prim_func) for seen in self.launches):
            self.launches.append(launch)
        outputs = []
        for position in returned:
            shape, dtype = _declared(self.prim_func, params[position])
            outputs.append(torch.empty(shape, dtype=torch_dtype(dtype), device="meta"))
        return outputs[0] if len(outputs) == 1 else outputs or None


def _declared(prim_func: Any, param: Any) -> tuple[tuple[int, ...] | None, str]:
    """(shape, dtype) an argument is declared with; shape None for a scalar or a symbolic shape."""
    buffer = prim_func.buffer_map.get(param)
    if buffer is None:
        return None, str(param.dtype)
    try:
        return tuple(int(d) for d in buffer.shape), str(buffer.dtype)
    except TypeError:
        return None, str(buffer.dtype)


def output_indices(out_idx: Any) -> list[int]:
    """A jit `out_idx` (None, an int or a list) as a list of positions."""
    if out_idx is None:
        return []
    return [int(out_idx)] if isinstance(out_idx, int) else [int(i) for i in out_idx]
