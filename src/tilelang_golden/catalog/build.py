"""A variant's kernel as TileLang compiles it: the PrimFunc, the pass configs that apply, its outputs.

Shared by the static path (which lowers it) and the GPU path (which compiles it), so both see
the same function under the same configuration, exactly as `tilelang.compile` would: the
`@tilelang.jit` decorator's `pass_configs`, merged with any the PrimFunc carries itself.

The kinds of kernel a variant may name, as TileLang's users write them:
- an eager `@tilelang.jit` function: tensors in, dimensions from `T.const`, outputs made by
  `T.empty` and returned;
- a lazy `@tilelang.jit` factory returning a `@T.prim_func` (outputs: its `out_idx`);
- an `@tilelang.autotune` over either of those, the variant's parameters pinning one of its configs;
- a plain factory returning a `@T.prim_func`, or a ready `@T.prim_func` (outputs: the family's).

Every name a variant passes must be one the kernel takes and uses: a misspelled or ignored
parameter would otherwise be recorded in the snapshot while the kernel ran with its default. The one exception is
a name an autotuner's configurations carry: the variant pins a configuration whole, as the tuner passes it, so a
name the kernel takes and ignores there (upstream's `block_DK`) is accepted and recorded.
"""

import ast
import dataclasses
import difflib
import dis
import inspect
import textwrap
import traceback
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tilelang_golden.catalog.chain import Launch, launch_of, output_indices, trace_chain
from tilelang_golden.dtypes import tvm_dtype
from tilelang_golden.family import RETURNED, Chain, Family, FamilyError, OutputKind, Returned, Tolerance, Variant

KERNEL_KINDS = (
    "an eager @tilelang.jit function (T.const dimensions, T.empty outputs)",
    "a lazy @tilelang.jit factory returning a @T.prim_func",
    "an @tilelang.autotune-decorated jit function",
    "a function returning a @T.prim_func",
    "a ready @T.prim_func",
    "a Chain(function) that calls several @tilelang.jit kernels as its users call them",
)
# Keys of an autotuner configuration that are not kernel parameters (TileLang's reserved key).
AUTOTUNE_RESERVED = ("pass_configs",)


class BuildError(RuntimeError):
    """A variant's kernel could not be built; the message names the file, the variant and the fix."""


@dataclass(frozen=True)
class Argument:
    """One kernel argument as the PrimFunc declares it: what the harness allocates, poisons or checks."""

    shape: tuple[int, ...]
    dtype: str
    name: str = ""  # the buffer's name, e.g. `C`: how reports and refusals name it


@dataclass(frozen=True)
class BuiltKernel:
    """A variant's kernel as TileLang compiles it: one launch for a kernel, a chain's launches in order."""

    launches: tuple[Launch, ...]
    # position -> how the kernel writes that argument, ascending by position: every output, in the order
    # the reference, the precision twin and the tolerances list them
    outputs: Mapping[int, OutputKind] = field(default_factory=dict)
    tolerances: tuple[Tolerance, ...] = ()  # one per output, in order
    # A chain's function (`Chain.function`), called with the inputs and the variant's params; None for a kernel.
    chain: Callable[..., Any] | None = field(default=None, repr=False)
    # A chain's signature: its inputs, then its results, as the meta trace made them (a kernel's is its PrimFunc's).
    chain_arguments: tuple[Argument, ...] = ()

    @property
    def prim_func(self) -> Any:
        """The PrimFunc of a variant that is one kernel; a chain's are in `launches`."""
        (launch,) = self.launches
        return launch.prim_func

    @property
    def pass_configs(self) -> Mapping[str, Any]:
        (launch,) = self.launches
        return launch.pass_configs


@dataclass(frozen=True)
class _Kernel:
    """What the harness needs of any kind of kernel: how to trace it and what it accepts."""

    trace: Callable[..., Any]  # keyword arguments -> PrimFunc
    function: Callable[..., Any] | None  # the user's Python function (its signature and code), if any
    pass_configs: dict[str, Any]
    out_idx: list[int] | None  # outputs the decorator names, if it does
    tensor_names: frozenset[str] = frozenset()  # an eager kernel's tensor arguments
    eager: Any = None  # an eager kernel's JIT function, to read its T.const names after tracing
    tuned: frozenset[str] = frozenset()  # the names an autotuner's configurations carry


def build_kernel(family: Family, variant: Variant) -> BuiltKernel:
    """Trace `variant`'s kernel into its PrimFunc, with its pass configs, outputs and tolerances; raise BuildError
    naming the family file and variant. Each call traces again (a jit kernel may hand back the PrimFunc it made for
    the same arguments before); a run that reads a variant's kernel several times builds it once, through its
    session (`tilelang_golden.static.session`)."""
    from tvm import tirx

    where = f"{family.file}: variant {variant.name!r}"
    if isinstance(variant.kernel, Chain):
        return _build_chain(family, variant, where)
    kernel = _kernel(variant, where)
    arguments = family.kernel_arguments(variant)
    if kernel.function is not None:
        _refuse_unused(kernel, arguments, where)
    try:
        prim_func = kernel.trace(**arguments)
    except Exception as error:  # the kernel's Python body raised: the family's bug, reported as such
        if kernel.eager is not None:  # a dimension under another name than the kernel's T.const is the usual cause
            _refuse_unknown_constants(kernel, arguments, where)
        raise BuildError(
            f"{where} did not build with {arguments}{_kernel_line(error, kernel.function)} "
            f"({type(error).__name__}: {error}); fix the kernel or its parameters"
        ) from error
    if not isinstance(prim_func, tirx.PrimFunc):
        raise BuildError(
            f"{where}: its kernel returned {type(prim_func).__name__}, expected a TileLang PrimFunc; "
            f"a variant's kernel is one of: {'; '.join(KERNEL_KINDS)}"
        )
    if kernel.eager is not None:
        _refuse_unknown_constants(kernel, arguments, where)
    outputs = _outputs(family, variant, prim_func, kernel.out_idx)
    _refuse_unknown_nondeterministic(family, outputs, where)
    try:
        tolerances = family.tolerances(variant, len(outputs))
    except FamilyError as error:
        raise BuildError(f"{error} (variant {variant.name!r})") from None
    return BuiltKernel((launch_of(prim_func, kernel.pass_configs, variant.name),), outputs, tuple(tolerances))


def _build_chain(family: Family, variant: Variant, where: str) -> BuiltKernel:
    """A chain traced on the meta device with the inputs its family makes: its launches, and its signature (the
    function's tensor arguments, then its results, all returned outputs)."""
    import torch

    function = variant.kernel.function
    _refuse_unused(_Kernel(function, function, {}, None), variant.params, where)
    try:
        inputs = list(family.inputs(family.params(variant), torch.Generator().manual_seed(0), "meta"))
    except Exception as error:
        raise BuildError(
            f"{where}: inputs() raised {type(error).__name__}: {error} on the meta device (shapes and dtypes, no "
            "data); a chain is traced with the inputs its family makes, so keep inputs() to tensor operations"
        ) from error
    try:
        trace = trace_chain(function, inputs, variant.params)
    except Exception as error:  # the chain's own code, or TileLang tracing one of its kernels
        raise BuildError(
            f"{where}: its chain {function.__qualname__} did not trace on the meta device"
            f"{_kernel_line(error, function)} ({type(error).__name__}: {error}); fix the chain or its parameters"
        ) from error
    names = list(inspect.signature(function).parameters)
    arguments = [_argument(tensor, names[i] if i < len(names) else f"input {i}") for i, tensor in enumerate(inputs)]
    arguments += [_argument(t, f"{function.__name__}[{i}]") for i, t in enumerate(trace.results)]
    declared = family.declared_outputs()
    results = range(len(inputs), len(arguments))
    wrong = sorted(i for i, kind in declared.items() if i not in results or not isinstance(kind, Returned))
    if wrong:
        raise BuildError(
            f"{where}: a chain's outputs are the {len(trace.results)} results its function returns, positions "
            f"{list(results)} after its {len(inputs)} inputs; outputs= may only give those Returned(to_logical=...), "
            f"not {wrong}"
        )
    outputs = {i: declared.get(i, RETURNED) for i in results}
    _refuse_unknown_nondeterministic(family, outputs, where)
    try:
        tolerances = family.tolerances(variant, len(outputs))
    except FamilyError as error:
        raise BuildError(f"{error} (variant {variant.name!r})") from None
    return BuiltKernel(trace.launches, outputs, tuple(tolerances), function, tuple(arguments))


def _argument(tensor: Any, name: str) -> Argument:
    """A chain's argument or result as a signature's entry: its shape, its TVM dtype name, a name for reports."""
    if not hasattr(tensor, "shape") or not hasattr(tensor, "dtype"):
        raise BuildError(f"{name} is a {type(tensor).__name__}; a chain's arguments and results are tensors")
    return Argument(tuple(tensor.shape), tvm_dtype(tensor.dtype), name)


def signature(built: BuiltKernel) -> list[Argument]:
    """(shape, dtype, name) of every argument of the built kernel, in order; a scalar argument has shape ().
    BuildError for a symbolic shape: the harness allocates and checks tensors of the signature's shapes."""
    if built.chain is not None:
        return list(built.chain_arguments)
    prim_func = built.prim_func
    arguments = []
    for param in prim_func.params:
        buffer = prim_func.buffer_map.get(param)
        if buffer is None:
            arguments.append(Argument((), str(param.dtype), str(param.name)))
            continue
        try:
            shape = tuple(int(d) for d in buffer.shape)
        except TypeError:
            raise BuildError(
                f"argument {buffer.name} has a symbolic shape {list(buffer.shape)}; the harness makes and checks "
                "tensors of the signature's shapes, so give the kernel the family's concrete dimensions"
            ) from None
        arguments.append(Argument(shape, str(buffer.dtype), str(buffer.name)))
    return arguments


def _kernel(variant: Variant, where: str) -> _Kernel:
    """Recognise the variant's kind of kernel; anything else is refused with the kinds accepted."""
    from tilelang.autotuner.tuner import AutoTuneImpl
    from tilelang.jit import JITImpl
    from tvm import tirx

    kernel = variant.kernel
    if isinstance(kernel, tirx.PrimFunc):
        if variant.params:
            raise BuildError(
                f"{where}: a ready @T.prim_func takes no parameters, but the variant gives {dict(variant.params)}; "
                "make the kernel a factory (or a @tilelang.jit function) that takes them"
            )
        return _Kernel(lambda **_dimensions: kernel, None, {}, None)
    if isinstance(kernel, AutoTuneImpl):
        # TileLang keeps the jit function an autotuner wraps as `jit_impl`; tracing it with the
        # variant's parameters is what the tuner does for each configuration it tries.
        jitted = dataclasses.replace(_jit_kernel(kernel.jit_impl), tuned=frozenset(_tuned_names(kernel)))
        _refuse_untuned(kernel, jitted, variant, where)
        return jitted
    if isinstance(kernel, JITImpl):
        return _jit_kernel(kernel)
    if callable(kernel) and inspect.isfunction(kernel):
        return _Kernel(kernel, kernel, {}, None)
    raise BuildError(
        f"{where}: its kernel is a {type(kernel).__module__}.{type(kernel).__name__}, which the harness cannot "
        f"build; a variant's kernel is one of: {'; '.join(KERNEL_KINDS)}"
    )


def _jit_kernel(impl: Any) -> _Kernel:
    function = impl.func.orig_func if hasattr(impl.func, "orig_func") else impl.func
    tensors = frozenset(getattr(impl.func, "tensor_args", None) or ())
    return _Kernel(
        impl.get_tir,
        function if inspect.isfunction(function) else None,
        dict(impl.pass_configs or {}),
        _indices(impl.out_idx),
        tensors,
        impl.func if tensors else None,
    )


def _refuse_untuned(kernel: Any, jitted: _Kernel, variant: Variant, where: str) -> None:
    """An autotuned variant must pin one of the autotuner's own configurations; a name that is neither tuned nor
    a parameter of the kernel is refused first, with the closest real one."""
    configs = kernel.configs
    if callable(configs):  # computed from the call's arguments: nothing to compare with beforehand
        return
    tuned = sorted(jitted.tuned)
    signature = inspect.signature(jitted.function) if jitted.function is not None else None
    taken = [] if signature is None else [n for n in signature.parameters if n not in jitted.tensor_names]
    accepted = tuned + [n for n in taken if n not in tuned]
    open_ended = signature is not None and any(
        p.kind is inspect.Parameter.VAR_KEYWORD for p in signature.parameters.values()
    )
    unknown = [name for name in variant.params if name not in accepted]
    if unknown and not open_ended:
        raise BuildError(_unknown_message(where, unknown, accepted, "the parameters it tunes, then the others"))
    pinned = [c for c in configs if all(variant.params.get(k) == v for k, v in c.items() if k not in AUTOTUNE_RESERVED)]
    if not pinned:
        raise BuildError(
            f"{where}: an autotuned kernel's variant pins one of its {len(configs)} configurations in `params`, "
            f"but {dict(variant.params)} sets none of them completely; {_nearest_configs(variant.params, configs)}"
        )


def _tuned_names(kernel: Any) -> set[str]:
    """The parameter names an autotuner's configurations carry; none when they are computed from the call."""
    configs = kernel.configs
    return set() if callable(configs) else {k for c in configs for k in c if k not in AUTOTUNE_RESERVED}


def _nearest_configs(params: Mapping[str, Any], configs: Sequence[Mapping[str, Any]], shown: int = 3) -> str:
    """The configurations that agree with most of the variant's values: what it most likely meant to pin."""

    def agreement(config: Mapping[str, Any]) -> int:
        return sum(params.get(k) == v for k, v in config.items() if k not in AUTOTUNE_RESERVED)

    nearest = sorted(configs, key=agreement, reverse=True)[:shown]
    missing = sorted({k for c in nearest for k in c if k not in params and k not in AUTOTUNE_RESERVED})
    lines = "\n".join(f"  {dict(c)}" for c in nearest)
    unset = f" (it does not set {missing})" if missing else ""
    return f"the closest{unset}:\n{lines}"


def _refuse_unused(kernel: _Kernel, arguments: Mapping[str, Any], where: str) -> None:
    """Every name given must be a parameter the function takes and reads (or, eager, a T.const)."""
    signature = inspect.signature(kernel.function)
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in signature.parameters.values()):
        return  # **kwargs takes any name; what it reads cannot be told from here
    taken = [name for name in signature.parameters if name not in kernel.tensor_names]
    for name in arguments:
        if name in kernel.tensor_names:
            raise BuildError(
                f"{where}: {name!r} is a tensor argument of the kernel, not a parameter; the family's inputs() makes it"
            )
        if name in signature.parameters and name not in kernel.tuned and name not in _names_read(kernel.function):
            raise BuildError(
                f"{where}: the kernel takes {name!r} but never reads it, so the snapshot would record a value "
                "that changes nothing; use it in the kernel or drop it from the variant"
            )
    if kernel.eager is None:
        unknown = [name for name in arguments if name not in signature.parameters]
        if unknown:
            raise BuildError(_unknown_message(where, unknown, taken, "its parameters"))


def _refuse_unknown_constants(kernel: _Kernel, arguments: Mapping[str, Any], where: str) -> None:
    """An eager kernel accepts any extra keyword as a T.const value: only its real T.const names may be given."""
    signature = inspect.signature(kernel.function)
    constants = _eager_constants(kernel.eager)
    unknown = [name for name in arguments if name not in signature.parameters and name not in constants]
    if unknown:
        taken = [n for n in signature.parameters if n not in kernel.tensor_names] + sorted(constants)
        raise BuildError(
            _unknown_message(where, unknown, taken, "its parameters and T.const dimensions")
            + " (a family dimension named differently from the kernel's T.const: map it with "
            "Variant(dimension_names={family_name: kernel_name}))"
        )


def _eager_constants(jit_function: Any) -> set[str]:
    """The T.const names of an eager kernel that has been traced: TileLang keeps them in the templates
    its JIT function caches (`p1_cache`), each mapping a constant to the tensor dimension it is read from."""
    names: set[str] = set()
    for template in getattr(jit_function, "p1_cache", {}).values():
        names.update(entry[3] for entry in (getattr(template, "matcher", None) or {}).values())
    return names


def _unknown_message(where: str, unknown: Sequence[str], accepted: Sequence[str], what: str) -> str:
    hints = []
    for name in unknown:
        close = difflib.get_close_matches(name, accepted, n=1, cutoff=0.6)
        hints.append(f"{name!r}" + (f" (did you mean {close[0]!r}?)" if close else ""))
    return (
        f"{where}: the kernel does not take {', '.join(hints)}; {what}: {', '.join(accepted) or 'none'}. "
        "Fix the name in the variant (a misspelled parameter would be recorded while the kernel used its default)"
    )


def _names_read(function: Callable[..., Any]) -> set[str]:
    """Names the function reads: what its code loads (its nested functions' captures included) and what its
    local annotations name (`C: T.Tensor((M, N), dtypeC)`), which Python never evaluates but TileLang reads from
    the source. A parameter missing here is taken and ignored."""
    code = function.__code__
    names = set(code.co_cellvars)  # captured by an inner function (a @T.prim_func body): read there
    for instruction in dis.get_instructions(code):
        if instruction.opname.startswith("LOAD_"):
            value = instruction.argval
            names.update(value if isinstance(value, tuple) else (value,))
    return {n for n in names if isinstance(n, str)} | _annotation_names(function)


def _annotation_names(function: Callable[..., Any]) -> set[str]:
    """Names read in the local variable annotations of the function's body; none when its source is unavailable."""
    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(function)))
    except (OSError, TypeError, SyntaxError):
        return set()
    return {
        node.id
        for annotated in ast.walk(tree)
        if isinstance(annotated, ast.AnnAssign)
        for node in ast.walk(annotated.annotation)
        if isinstance(node, ast.Name)
    }


def _kernel_line(error: BaseException, function: Callable[..., Any] | None) -> str:
    """` at kernels/x.py:42 (`T.copy(a, b)`)`: the innermost line of the kernel's own file that raised."""
    if function is None:
        return ""
    source = inspect.getsourcefile(function)
    frames = [f for f in traceback.extract_tb(error.__traceback__) if source and f.filename == source]
    if not frames:
        return ""
    frame = frames[-1]
    return f" at {_relative(frame.filename)}:{frame.lineno} (`{(frame.line or '').strip()}`)"


def _relative(filename: str) -> str:
    path = Path(filename).resolve()
    try:
        return str(path.relative_to(Path.cwd()))
    except ValueError:
        return path.name


def _outputs(family: Family, variant: Variant, prim_func: Any, out_idx: list[int] | None) -> dict[int, OutputKind]:
    """Every output, position -> kind, ascending: the kernel's own word on what it returns (T.empty, out_idx),
    checked against the family's returned outputs where it gives them, with the family's Written and
    Accumulated arguments beside them."""
    where = f"{family.file}: variant {variant.name!r}"
    count = len(prim_func.params)
    attrs = prim_func.attrs
    if attrs is not None and "tilelang_out_idx" in attrs:
        stated, how = [int(i) for i in attrs["tilelang_out_idx"]], "its T.empty results are"
    elif out_idx is not None:
        stated, how = out_idx, f"the @tilelang.jit decorator says out_idx={out_idx}:"
    else:
        stated, how = None, ""
    declared = family.declared_outputs()
    outside = [i for i in declared if not -count <= i < count]
    if outside:
        raise BuildError(
            f"{family.file}: outputs {family.outputs} name positions {outside} outside the kernel's "
            f"{count} arguments (variant {variant.name!r}); list the written arguments' positions"
        )
    declared = {i % count: kind for i, kind in declared.items()}
    declared_returned = sorted(i for i, kind in declared.items() if isinstance(kind, Returned))
    if stated is None and not declared:
        raise BuildError(
            f"{where}: the kernel does not say which arguments it writes (no T.empty, no out_idx); "
            "give the family outputs=[position, ...] (returned) or outputs={position: Written() or Accumulated()}"
        )
    returned = declared_returned if stated is None else sorted(i % count for i in stated)
    names = [str(_buffer(prim_func, i).name) for i in returned]
    if stated is not None and declared_returned and returned != declared_returned:
        raise BuildError(
            f"{where}: {how} arguments {returned} ({', '.join(names)}), the family says "
            f"outputs={family.outputs}; make them name the same arguments, or drop outputs= (the kernel says it)"
        )
    both = sorted(i for i, kind in declared.items() if i in returned and not isinstance(kind, Returned))
    if both:
        raise BuildError(
            f"{where}: {how} arguments {returned} ({', '.join(names)}), which the kernel allocates and returns, "
            f"but the family declares {both} written or accumulated in place; declare only the arguments the "
            "kernel takes from its caller"
        )
    kinds = {**{i: RETURNED for i in returned}, **declared}
    return {i: kinds[i] for i in sorted(kinds)}


def _refuse_unknown_nondeterministic(family: Family, outputs: Mapping[int, OutputKind], where: str) -> None:
    """`Family.nondeterministic` by position names outputs of the kernel (its own, where the family lists none)."""
    declared = family.nondeterministic
    unknown = [] if declared is None or isinstance(declared, str) else sorted(set(declared) - set(outputs))
    if unknown:
        raise BuildError(
            f"{where}: the family declares positions {unknown} nondeterministic, but the kernel's outputs are "
            f"{list(outputs)}; name those positions, or give one reason for every output"
        )


def _buffer(prim_func: Any, position: int) -> Any:
    """The argument's buffer (named as the kernel names it, `C`), or the parameter itself for a scalar."""
    param = prim_func.params[position]
    return prim_func.buffer_map.get(param, param)


def _indices(out_idx: Any) -> list[int] | None:
    return None if out_idx is None else output_indices(out_idx)
