"""JIT-compile cases for the GPU at hand, and read what each compiled kernel asks of the device.

Compilation uses TileLang's own parallel compiler (`tilelang.par_compile`) on the same PrimFunc
and pass configs the static snapshots lower (`tilelang_golden.catalog.build`), with the kernel's returned outputs as
`out_idx`, so every kernel is called as its users call it: `kernel(*arguments)` returns those, and an
argument it writes in place (`Written`, `Accumulated`) is one of the arguments passed in.
Each case is compiled for its own target, the device's (`Target.compile_description`: the `a` added from
compute capability 9.0 on, as TileLang's own detection adds it), not for what TileLang would detect.
Dynamic shared memory is the size each device kernel of the module is launched with; registers per thread
and static shared memory come from the CUDA driver, which loads the module's binary (on a CUDA target only).
"""

from __future__ import annotations

import contextlib
import ctypes
import json
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from tilelang_golden.catalog.build import Argument, BuildError, BuiltKernel, build_kernel, signature
from tilelang_golden.catalog.cases import Case
from tilelang_golden.family import OutputKind, Returned, Tolerance
from tilelang_golden.static.snapshots.normalize import normalize_cuda, normalized_source
from tilelang_golden.targets import TARGETS

DYNAMIC_SHARED_LAUNCH_PARAM = "tirx.use_dyn_shared_memory"
DYNAMIC_SHARED_ATTR = "dyn_shared_memory_buf"
# CUfunction_attribute values from cuda.h.
CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES = 1
CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES = 3
CU_FUNC_ATTRIBUTE_NUM_REGS = 4
# What the driver says of each device kernel, by the names the machine facts give the same numbers.
DRIVER_ATTRIBUTES = {
    "registers": CU_FUNC_ATTRIBUTE_NUM_REGS,
    "stack_frame_bytes": CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES,  # local memory per thread: ptxas's stack frame
    "static_shared_memory_bytes": CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES,
}
# TileLang hands every CUDA compilation to this registered hook (TVM's callback convention).
COMPILE_HOOK = "tilelang_callback_cuda_compile"


@dataclass
class ChainKernel:
    """A chain as the GPU check calls it, `kernel(*inputs)`: its function with the variant's params, as its users
    call it; `kernels` are the TileLang kernels its first call compiled, in launch order."""

    function: Any
    params: Mapping[str, Any]
    kernels: list[Any] = field(default_factory=list)

    def __call__(self, *inputs: Any) -> Any:
        return self.function(*inputs, **self.params)


@dataclass
class CompiledCase:
    case: Case
    kernel: Any | None  # tilelang JITKernel: kernel(*inputs) returns the output, or a list of them
    error: str | None = None
    arguments: list[Argument] = field(default_factory=list)
    outputs: Mapping[int, OutputKind] = field(default_factory=dict)  # position -> how it is written, ascending
    tolerances: tuple[Tolerance, ...] = ()  # one per output
    launches: dict[str, int] = field(default_factory=dict)  # device kernel -> dynamic shared memory it launches with
    # The most any device kernel of the module uses (a module of one kernel: that kernel's).
    static_shared_memory_bytes: int | None = None
    registers_per_thread: int | None = None
    # Per device kernel, what the driver reads of its binary (DRIVER_ATTRIBUTES); empty where not read.
    kernel_resources: dict[str, dict[str, int]] = field(default_factory=dict)
    resources_note: str | None = None  # why registers are missing, when they are
    compile_target: str | None = None
    # The cubin nvcc produced for each kernel it jitted, as TileLang's compile hook returned it, in launch order
    # (one for a kernel, one per kernel of a chain).
    binaries: list[bytes] = field(default_factory=list)
    source: str | None = None  # the kernel source as the static snapshot holds it (normalized; a chain's, joined)

    @property
    def chain(self) -> bool:
        return isinstance(self.kernel, ChainKernel)

    @property
    def jitted(self) -> list[Any]:
        """The kernels TileLang jitted for it, in launch order: a chain's each, else the one."""
        if self.kernel is None:
            return []
        return list(self.kernel.kernels) if self.chain else [self.kernel]

    @property
    def dynamic_shared_memory_bytes(self) -> int | None:
        """The most dynamic shared memory any device kernel of the module launches with; None before it compiled."""
        return max(self.launches.values()) if self.launches else None


def compile_cases(cases: Sequence[Case]) -> list[CompiledCase]:
    """Compile every case in parallel; a case that fails carries its error instead of a kernel."""
    import tilelang

    # A check compiles what the installed TileLang emits now, never a kernel cached on disk.
    tilelang.disable_cache()
    # Every binary compiled in this call, by its source, for the driver to read: a chain may call a kernel that
    # another chain's first call compiled (TileLang keeps it in memory).
    with capturing_binaries() as binaries:
        results = _compile(cases, binaries)
    for result in results:
        kernel = result.kernel
        if kernel is None or result.chain:
            continue
        result.source = normalize_cuda(kernel.kernel_source)
        result.binaries = [binaries[kernel.kernel_source]] if kernel.kernel_source in binaries else []
        result.compile_target = compile_target(kernel)
        try:
            result.launches = launch_dynamic_shared_memory(kernel)
        except LookupError as error:
            result.error = str(error)
    return results


def _compile(cases: Sequence[Case], binaries: Mapping[str, bytes]) -> list[CompiledCase]:
    """Each case built and compiled (a chain by its first call, the others in parallel, those that share their
    pass configs together, since par_compile takes one set); a case that fails carries its error."""
    import tilelang

    results: list[CompiledCase] = []
    batches: dict[str, list[tuple[CompiledCase, Any]]] = {}
    for case in cases:
        result = CompiledCase(case, None)
        results.append(result)
        try:
            built = build_kernel(case.family, case.variant)
        except BuildError as error:
            result.error = str(error)
            continue
        try:
            result.arguments = signature(built)
        except BuildError as error:
            result.error = f"{case.family.file}: variant {case.variant.name!r}: {error}"
            continue
        result.outputs, result.tolerances = built.outputs, built.tolerances
        if built.chain is not None:
            compile_chain(result, built, binaries)
            continue
        key = json.dumps([built.pass_configs, out_idx(built), case.target], sort_keys=True, default=str)
        batches.setdefault(key, []).append((result, built.prim_func))
    for key, batch in batches.items():
        configs, outputs, target = json.loads(key)
        options = {"target": TARGETS[target].compile_description, "pass_configs": configs or None, "out_idx": outputs}
        kernels = tilelang.par_compile([func for _, func in batch], ignore_error=True, **options)
        for (result, func), kernel in zip(batch, kernels, strict=True):
            if kernel is None:  # par_compile only logs the error: compile this one alone to keep it
                try:
                    kernel = tilelang.compile(func, **options)
                except Exception as error:
                    result.error = f"TileLang could not compile it: {type(error).__name__}: {error}"
                    continue
            result.kernel = kernel
    return results


def compile_chain(result: CompiledCase, built: BuiltKernel, binaries: Mapping[str, bytes]) -> None:
    """Call the chain once, on its family's inputs for seed 0, as its users do: TileLang compiles each kernel on its
    first call (and keeps it for the next). The kernels it called are recorded, in launch order, for their launch
    sizes and source, with their binaries (from `binaries`, which capturing_binaries fills); a chain that launches
    other kernels than its trace did fails here."""
    import torch
    from tilelang.jit.kernel import JITKernel

    case = result.case
    chain = ChainKernel(built.chain, case.variant.params)
    original = JITKernel.__call__

    def recording(kernel: Any, *args: Any, **kwargs: Any) -> Any:
        if not any(kernel is seen for seen in chain.kernels):
            chain.kernels.append(kernel)
        return original(kernel, *args, **kwargs)

    device = "cuda"
    JITKernel.__call__ = recording
    try:
        chain(*case.family.inputs(case.params, torch.Generator(device=device).manual_seed(0), device))
        torch.cuda.synchronize()
    except Exception as error:
        result.error = (
            f"its chain raised on its first call, which compiles its kernels: {type(error).__name__}: {error}"
        )
        return
    finally:
        JITKernel.__call__ = original
    names = [launch.name for launch in built.launches]
    if len(chain.kernels) != len(names):
        result.error = (
            f"its chain called {len(chain.kernels)} kernels on the GPU, but {len(names)} ({', '.join(names)}) when "
            "traced on the CPU: a chain must launch the same kernels whatever its inputs hold"
        )
        return
    result.kernel = chain
    result.binaries = [binaries[k.kernel_source] for k in chain.kernels if k.kernel_source in binaries]
    result.compile_target = compile_target(chain.kernels[0])
    result.source = normalized_source(list(zip(names, (k.kernel_source for k in chain.kernels), strict=True)))
    try:
        result.launches = {name: size for k in chain.kernels for name, size in launch_dynamic_shared_memory(k).items()}
    except LookupError as error:
        result.error = str(error)


def compile_target(kernel: Any) -> str:
    """The arch (CUDA) or mcpu (HIP) a TileLang kernel was compiled for."""
    attrs = kernel.target.attrs
    return str(attrs.get("arch") or attrs.get("mcpu") or kernel.target)


def out_idx(built: BuiltKernel) -> list[int] | None:
    """What `tilelang.compile` is told the returned outputs are (the others are passed in, as arguments). Nothing
    for an eager kernel: its PrimFunc names its `T.empty` results itself (`tilelang_out_idx`), and compile refuses
    to be told twice."""
    attrs = built.prim_func.attrs
    if attrs is not None and "tilelang_out_idx" in attrs:
        return None
    return [i for i, kind in built.outputs.items() if isinstance(kind, Returned)]


@contextlib.contextmanager
def capturing_binaries() -> Iterator[dict[str, bytes]]:
    """CUDA source -> binary for every compilation inside the block.

    The compiled kernel's CUDA module keeps its cubin private (it cannot be written out), so the
    binary is kept on its way through the hook; the driver reads registers from it.
    """
    import tvm_ffi

    original = tvm_ffi.get_global_func(COMPILE_HOOK, allow_missing=True)
    binaries: dict[str, bytes] = {}
    if original is None:
        yield binaries
        return

    def capture(code: str, target: Any, pass_config: Any = None) -> Any:
        binary = original(code, target, pass_config)
        binaries[str(code)] = bytes(binary)
        return binary

    tvm_ffi.register_global_func(COMPILE_HOOK, capture, override=True)
    try:
        yield binaries
    finally:
        tvm_ffi.register_global_func(COMPILE_HOOK, original, override=True)


def launch_dynamic_shared_memory(kernel: Any) -> dict[str, int]:
    """Bytes of dynamic shared memory each device kernel of the compiled module is launched with, by name.

    TileLang records the merged size on each device kernel (`dyn_shared_memory_buf`) and the host
    code passes that number as the launch's last parameter (tests/gpu/run/test_jit.py checks this
    on the lowered host IR, which the compiled kernel no longer carries).
    """
    artifact = kernel.artifact
    if artifact is None or artifact.device_mod is None:
        raise LookupError("the compiled kernel carries no device module to read its launch from")
    launches = {}
    for name, kernel_func in device_kernels(artifact.device_mod).items():
        params = [str(p) for p in _attr(kernel_func, "tirx.kernel_launch_params") or []]
        size = _attr(kernel_func, DYNAMIC_SHARED_ATTR) if DYNAMIC_SHARED_LAUNCH_PARAM in params else 0
        if size is None:
            raise LookupError(
                f"device kernel {name} uses dynamic shared memory but has no {DYNAMIC_SHARED_ATTR} attribute"
            )
        launches[name] = int(size)
    return launches


def device_kernels(device_mod: Any) -> dict[str, Any]:
    """Every device kernel of the module by its symbol (what the host launches and the driver looks up)."""
    kernels = {
        str(_attr(f, "global_symbol")): f for f in device_mod.functions.values() if _attr(f, "tirx.is_global_func")
    }
    if not kernels:
        raise LookupError("the compiled module holds no device kernel")
    return dict(sorted(kernels.items()))


def read_driver_resources(compiled: CompiledCase) -> None:
    """Fill each device kernel's resources from the CUDA driver (needs a CUDA context), every kernel of a chain
    among them, and registers per thread and static shared memory: the most any of them uses."""
    if TARGETS[compiled.case.target].backend != "cuda":
        compiled.resources_note = "registers not read: the session asks the CUDA driver for them, not yet ROCm's"
        return
    jitted = compiled.jitted
    if not jitted or len(compiled.binaries) != len(jitted):
        compiled.resources_note = "registers not available: a kernel's binary was not seen at compilation"
        return
    resources: dict[str, dict[str, int]] = {}
    try:
        for binary, kernel in zip(compiled.binaries, jitted, strict=True):
            resources |= _driver_attributes(binary, kernel)
    except (OSError, LookupError, RuntimeError) as error:
        compiled.resources_note = f"registers not available: {error}"
        return
    compiled.kernel_resources = resources
    compiled.registers_per_thread = max(found["registers"] for found in resources.values())
    compiled.static_shared_memory_bytes = max(found["static_shared_memory_bytes"] for found in resources.values())


def _driver_attributes(binary: bytes, kernel: Any) -> dict[str, dict[str, int]]:
    """Per device kernel of the module, DRIVER_ATTRIBUTES as the CUDA driver reads them from its binary."""
    symbols = list(device_kernels(kernel.artifact.device_mod))
    driver = ctypes.CDLL("libcuda.so.1")
    image = ctypes.create_string_buffer(binary, len(binary))
    module = ctypes.c_void_p()
    _check(driver.cuModuleLoadData(ctypes.byref(module), image), "cuModuleLoadData")
    found: dict[str, dict[str, int]] = {}
    try:
        for symbol in symbols:
            function = ctypes.c_void_p()
            _check(driver.cuModuleGetFunction(ctypes.byref(function), module, symbol.encode()), "cuModuleGetFunction")
            found[symbol] = {}
            for name, attribute in DRIVER_ATTRIBUTES.items():
                value = ctypes.c_int()
                _check(driver.cuFuncGetAttribute(ctypes.byref(value), attribute, function), "cuFuncGetAttribute")
                found[symbol][name] = value.value
    finally:
        driver.cuModuleUnload(module)
    return found


def _check(status: int, call: str) -> None:
    if status != 0:
        raise RuntimeError(f"{call} returned CUDA error {status}")


def _attr(func: Any, key: str) -> Any:
    return func.attrs[key] if func.attrs is not None and key in func.attrs else None
