"""Pipeline, memory and synchronization facts of one lowering, read from the compiler's IR.

Every fact comes from an IRModule captured by `tilelang_golden.static.produce.lowering`: the loop annotations as
`tl.PipelinePlanning` leaves them, the shared buffers right after `tl.InjectSoftwarePipeline`
(with their version dimension), the buffer layouts `tl.LayoutInference` chose (and from its
accumulator's, each GEMM's warp partition), the merged dynamic shared memory after
`tl.MergeSharedMemoryAllocations`, and launch shape, barriers, copies, instructions, loops, vector
stores, shared-memory addressing and size, block rasterization, warp shuffles and casts from the
final device IR, whose statements and calls map one to one onto the CUDA (or HIP) text.

One extraction serves every backend. Which facts a case has follows from its target's hardware
(its `Features`, tilelang_golden.targets.TARGETS), never from a count being zero: a fact the target
can have and the kernel does not use is 0 or empty, a fact the target cannot have is absent.
"""

from __future__ import annotations

import hashlib
import math
import re
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import tilelang  # noqa: F401  (imported first: it makes its bundled TVM importable)
from tvm import DataType, arith, tirx
from tvm.tirx.stmt_functor import pre_order_visit, substitute

from tilelang_golden.family import snapshot_params
from tilelang_golden.static.produce.lowering import Lowering
from tilelang_golden.static.produce.normalize import normalize_warnings
from tilelang_golden.static.snapshots.snapshot import FORMAT_VERSION
from tilelang_golden.targets import TARGETS, Features, Target

PIPELINE_ANNOTATIONS = (
    "software_pipeline_stage",
    "software_pipeline_order",
    "tl_pipelined_num_stages",
    "software_pipeline_async_producers",
    "software_pipeline_async_producer_groups",
    "software_pipeline_async_stages",
)

# Call op -> what it is in the CUDA text (and, where it differs, in the HIP text).
SYNCTHREADS = "tirx.tvm_storage_sync"  # with a shared scope: __syncthreads() (on CDNA an s_barrier)
CP_ASYNC_WAIT = "tirx.ptx_wait_group"  # tl::cp_async_wait<N>() (HIP: s_waitcnt vmcnt(N))
CP_ASYNC_COMMIT = "tirx.ptx_commit_group"  # tl::cp_async_commit() (HIP: an empty function)
CP_ASYNC_COPIES = ("tl.ptx_cp_async", "tirx.ptx_cp_async")  # tl::cp_async_gs<bytes>(...)
TMA_LOAD = "tl.tma_load"
TMEM_ALLOC = "tl.ptx_init_tensor_memory"  # (pointer to the address slot, columns): tl::tmem_allocate
GEMM_TILE_OP = "tl.tileop.gemm"
# (substring of the op name, instruction family) for the ops that issue matrix instructions.
MMA_FAMILIES = (
    ("tcgen05_mma", "tcgen05"),
    ("ptx_wgmma", "wgmma"),
    ("ptx_mma", "mma.sync"),
    ("tvm_mfma", "mfma"),  # __builtin_amdgcn_mfma_<out>_<M>x<N>x<K><in>
)
# The tile GEMM ops that share TileLang's dense argument layout (src/op/gemm.cc, GemmNode::InitFromDenseArgs):
# A, B and C regions, trans_A, trans_B, M, N, K, the warp policy, ...
DENSE_GEMM_OPS = ("tl.tileop.gemm", "tl.tileop.wgmma_gemm", "tl.tileop.tcgen05_gemm")
# GemmWarpPolicyType in src/op/gemm.h, by value.
WARP_POLICIES = ("Square", "FullRow", "FullCol", "Free")
SWIZZLE_PATTERN = "threadblock_swizzle_pattern"  # T.use_swizzle: (device function, panel size)
# Ops that move a value between the lanes of a warp: TileLang's shuffles and warp reductions, and TVM's
# (a tvm_thread_allreduce across a warp lowers to tvm_warp_shuffle_down + tvm_warp_shuffle).
WARP_SHUFFLE_PREFIXES = ("tl.shfl_", "tl.warp_reduce_", "tirx.tvm_warp_shuffle")
BLOCK_ALL_REDUCE = "tl::AllReduce<"  # T.reduce_*'s device function: warp shuffles, then shared memory
# Allocations that take shared memory (LDS): dynamic, static, and the mbarriers (tensor memory is not).
SHARED_MEMORY_SCOPES = ("shared", "shared.dyn", "shared.barrier")
TCGEN05_MMA_WITH_DESCRIPTOR = ("tl.ptx_tcgen05_mma_ss", "tl.ptx_tcgen05_mma_ts")  # arg 7: instruction descriptor
# tcgen05 operand kind -> K of one instruction: 32 bytes of the operand type (PTX ISA, tcgen05.mma shapes).
TCGEN05_K = {"fp16": 16, "bf16": 16, "tf32": 8, "e4m3": 32, "e5m2": 32, "s8": 32, "u8": 32}
ACCESS_PTR = "tirx.tvm_access_ptr"  # (type, buffer var, offset, extent, rw): a pointer into a buffer
# Ops that issue an instruction or a device-library call (the rest are arithmetic and casts).
INSTRUCTION_PREFIXES = ("tl.", "tirx.ptx_")
INSTRUCTION_OPS = ("tirx.tvm_storage_sync", "tirx.call_extern")
MATRIX_MOVES = ("tl.ptx_ldmatrix", "tl.ptx_stmatrix")  # (trans, num, ...): qualified as x<num>[.trans]
# Layouts TileLang builds for shared memory, tried in this order against the inferred one, with
# the swizzle width in bytes (a row of the buffer must hold a multiple of it).
NAMED_LAYOUTS = (
    ("swizzle 128B", "make_full_bank_swizzled_layout", 128),
    ("swizzle 64B", "make_half_bank_swizzled_layout", 64),
    ("swizzle 32B", "make_quarter_bank_swizzled_layout", 32),
    ("linear", "make_linear_layout", None),
)


def extract_facts(lowering: Lowering) -> dict[str, Any]:
    """The facts of one case as plain data (ints, strings, lists, dicts) in a stable order: the case, what the
    compiler warned about, then each device kernel of the module in launch order."""
    case = lowering.case
    return {
        "format": FORMAT_VERSION,
        "case": {"family": case.family.name, "variant": case.variant.name, "target": case.target},
        "params": snapshot_params(case.params),
        "warnings": normalize_warnings(lowering.output),
        "kernels": [
            kernel_facts(kernel, TARGETS[case.target]) for step in lowering.kernels for kernel in device_kernels(step)
        ],
    }


def kernel_facts(kernel: Kernel, target: Target) -> dict[str, Any]:
    """The facts of one device kernel: its name, then what each stage of the lowering left in it."""
    main_loop_vars = _main_loop_vars(kernel.planned)
    device_nodes = _nodes(kernel.device.body)  # walked once, read by the facts of the final IR
    facts = {
        "name": kernel.name,
        "pipelines": _pipeline_loops(kernel.planned),
        "warp_specialized": kernel.warp_specialized,
        "shared_buffers": _shared_buffers(kernel.injected),
        "dynamic_shared_memory_bytes": _dynamic_shared_bytes(kernel.merged),
        "launch": _launch(kernel.device),
        "sync": _sync(kernel.device, main_loop_vars, target.features),
        "mma": _mma(device_nodes),
        "tensor_memory": _tensor_memory(device_nodes) if target.features.tensor_memory else None,
        "layouts": _layouts(kernel.inferred),
        "instructions": _instructions(device_nodes),
        "loops": _loops(device_nodes),
        "vector_stores": _vector_stores(device_nodes),
        "shared_addressing": _shared_addressing(device_nodes),
        "shared_memory": _shared_memory(kernel.device, target),
        "rasterization": _rasterization(kernel.device),
        "gemms": _gemms(kernel.inferred, target),
        "warp_shuffles": _warp_shuffles(kernel.device),
        "conversions": _conversions(kernel.device),
    }
    return {key: value for key, value in facts.items() if value is not None}


# -- locating each device kernel -------------------------------------------------------------


@dataclass(frozen=True)
class Kernel:
    """One device kernel of a lowering: its launch scope (the statement a `T.Kernel` opens) in the IR before
    SplitHostDevice, where pipelines, shared buffers and layouts are read, and its own device function after."""

    name: str
    planned: Any  # its launch scope after tl.PipelinePlanning
    injected: Any  # ... after tl.InjectSoftwarePipeline
    inferred: Any  # ... after tl.LayoutInference
    merged: Any  # its device function after tl.MergeSharedMemoryAllocations
    device: Any  # its final device function, the one the CUDA (or HIP) text is generated from
    warp_specialized: bool


def device_kernels(lowering: Lowering) -> list[Kernel]:
    """Every device kernel of the module, in the order the host function launches them.

    Before SplitHostDevice the module is one function holding each kernel's launch scope, in program order;
    SplitHostDevice makes one device kernel of each, in that order too. The two are paired by position, and
    each pair must launch the same grid: a pairing that does not is an error, never a silent mix-up."""
    planned = _only_func(lowering.ir_after["tl.PipelinePlanning"])
    scopes = {name: _launch_scopes(_only_func(lowering.ir_after[name]).body) for name in SPLIT_PASSES}
    merged = _global_funcs(lowering.ir_after["tl.MergeSharedMemoryAllocations"])
    final = _global_funcs(lowering.device_ir)
    names = list(final)
    launched = _launch_order(lowering.host_ir, names)
    counts = {len(found) for found in scopes.values()} | {len(merged), len(final)}
    if counts != {len(names)} or sorted(launched) != sorted(names) or sorted(merged) != sorted(names):
        raise ValueError(
            f"{lowering.case.id}: cannot pair each device kernel {names} (launched: {launched}) with its launch scope "
            f"before SplitHostDevice ({ {name: len(found) for name, found in scopes.items()} } scopes); has TileLang's "
            "pass pipeline changed?"
        )
    kernels = []
    for position, name in enumerate(names):  # SplitHostDevice names and orders them as the scopes
        planned_scope = scopes["tl.PipelinePlanning"][position]
        grid, expected = _scope_grid(planned_scope), _launch(final[name])["grid"]
        if any(isinstance(a, int) and isinstance(b, int) and a != b for a, b in zip(grid, expected, strict=True)):
            raise ValueError(
                f"{lowering.case.id}: launch scope {position} before SplitHostDevice has grid {grid}, but device "
                f"kernel {name} launches {expected}; has TileLang's pass pipeline changed?"
            )
        kernels.append(
            Kernel(
                name=name,
                planned=planned_scope,
                injected=scopes["tl.InjectSoftwarePipeline"][position],
                inferred=scopes["tl.LayoutInference"][position],
                merged=merged[name],
                device=final[name],
                warp_specialized=bool(_attr(planned, WS_APPLIED, False)) and _warp_specialized(planned_scope),
            )
        )
    order = {name: position for position, name in enumerate(launched)}
    return sorted(kernels, key=lambda kernel: order[kernel.name])


# The passes before SplitHostDevice whose IR holds each kernel as a launch scope of one function.
SPLIT_PASSES = ("tl.PipelinePlanning", "tl.InjectSoftwarePipeline", "tl.LayoutInference")
THREAD_EXTENT = "thread_extent"
WS_APPLIED = "tl_tiled_ws_applied"  # a function attribute: some kernel of the function was warp-specialized
WS_SCOPE = "kWarpSpecializationScope"  # the statement attribute around a warp-specialized kernel's partition


def _functions(mod: Any) -> list[tuple[str, Any]]:
    return sorted((gv.name_hint, f) for gv, f in mod.functions.items() if isinstance(f, tirx.PrimFunc))


def _global_funcs(mod: Any) -> dict[str, Any]:
    """Device kernel name -> its function, by the name the host launches it with, in the order SplitHostDevice
    numbered them (`main_kernel`, `main_kernel_1`, ..., `main_kernel_10`)."""
    found = {
        str(_attr(f, "global_symbol", name)): f for name, f in _functions(mod) if _attr(f, "tirx.is_global_func", False)
    }
    return dict(sorted(found.items(), key=lambda item: _numbered(item[0])))


def _numbered(name: str) -> tuple[str, int]:
    stem, _, number = name.rpartition("_")
    return (stem, int(number)) if number.isdigit() else (name, -1)


def _only_func(mod: Any) -> Any:
    funcs = _functions(mod)
    if len(funcs) != 1:
        raise ValueError(f"expected one function before host/device split, found {len(funcs)}")
    return funcs[0][1]


def _launch_scopes(body: Any) -> list[Any]:
    """The outermost thread-extent statements, in program order: one per `T.Kernel`."""
    scopes: list[Any] = []

    def visit(node: Any) -> bool:
        if isinstance(node, tirx.AttrStmt) and node.attr_key == THREAD_EXTENT:
            scopes.append(node)
            return False  # the launch's inner thread extents belong to the same kernel
        return True

    pre_order_visit(body, visit)
    return scopes


def _scope_grid(scope: Any) -> list[Any]:
    extents: dict[str, Any] = {}
    _visit(
        scope,
        lambda n: (
            extents.setdefault(str(n.node.thread_tag), _plain(n.value))
            if isinstance(n, tirx.AttrStmt) and n.attr_key == THREAD_EXTENT
            else None
        ),
    )
    return [extents.get(f"blockIdx.{axis}", 1) for axis in "xyz"]


def _warp_specialized(scope: Any) -> bool:
    found: list[Any] = []
    _visit(scope, lambda n: found.append(n) if isinstance(n, tirx.AttrStmt) and n.attr_key == WS_SCOPE else None)
    return bool(found)


def _launch_order(host: Any, names: list[str]) -> list[str]:
    """The device kernels in the order the host function calls them (each launch passes the kernel's name)."""
    order: list[str] = []

    def visit(node: Any) -> None:
        if isinstance(node, tirx.Call) and node.args and isinstance(node.args[0], tirx.StringImm):
            name = str(node.args[0].value)
            if name in names and name not in order:
                order.append(name)

    for _, func in _functions(host):
        _visit(func.body, visit)
    return order


def _attr(func: Any, key: str, default: Any) -> Any:
    return func.attrs[key] if func.attrs is not None and key in func.attrs else default


# -- IR walking ---------------------------------------------------------------------------


def _visit(node: Any, visitor: Callable[[Any], None]) -> None:
    """Pre-order over statements and expressions, in program order."""

    def visit(n: Any) -> bool:
        visitor(n)
        return True

    pre_order_visit(node, visit)


def _nodes(node: Any) -> list[Any]:
    found: list[Any] = []
    _visit(node, found.append)
    return found


def _calls(node: Any, op_name: str) -> list[Any]:
    found: list[Any] = []
    _visit(
        node, lambda n: found.append(n) if isinstance(n, tirx.Call) and getattr(n.op, "name", None) == op_name else None
    )
    return found


def _plain(value: Any) -> Any:
    """TVM containers and immediates -> Python ints, floats, strings, lists."""
    if isinstance(value, (tirx.IntImm, tirx.FloatImm, tirx.StringImm)):
        return value.value
    for plain_type in (bool, int, float, str):  # TVM strings subclass str: make them plain
        if isinstance(value, plain_type):
            return plain_type(value)
    if hasattr(value, "__iter__"):
        return [_plain(v) for v in value]
    return "".join(str(value))  # an expression (e.g. a loop bound that depends on blockIdx) as text: an exact str


# -- facts ---------------------------------------------------------------------------------


def _pipeline_loops(scope: Any) -> list[dict[str, Any]]:
    """Every loop carrying a software-pipeline annotation, with the annotations TileLang set."""
    loops: list[dict[str, Any]] = []

    def visit(node: Any) -> None:
        if isinstance(node, tirx.For) and any(key in node.annotations for key in PIPELINE_ANNOTATIONS):
            entry: dict[str, Any] = {"loop_var": str(node.loop_var.name), "extent": _plain(node.extent)}
            for key in PIPELINE_ANNOTATIONS:
                entry[key] = _plain(node.annotations[key]) if key in node.annotations else None
            loops.append(entry)

    _visit(scope, visit)
    return loops


def _main_loop_vars(scope: Any) -> set[str]:
    """Names of the loops that run the tile GEMM: the K loop, the pipeline's steady state."""
    names: set[str] = set()

    def visit(node: Any) -> None:
        if isinstance(node, tirx.For) and _calls(node.body, GEMM_TILE_OP):
            names.add(node.loop_var.name)

    _visit(scope, visit)
    return names


def _shared_buffers(scope: Any) -> dict[str, dict[str, Any]]:
    buffers: dict[str, dict[str, Any]] = {}

    def visit(node: Any) -> None:
        if isinstance(node, tirx.SBlock):
            for buffer in node.alloc_buffers:
                if buffer.scope().startswith("shared"):
                    buffers[str(buffer.name)] = {
                        "shape": [_plain(d) for d in buffer.shape],
                        "dtype": str(buffer.dtype),
                        "scope": str(buffer.scope()),
                    }

    _visit(scope, visit)
    return dict(sorted(buffers.items()))


def _allocations(func: Any, scope: str) -> list[Any]:
    found: list[Any] = []
    _visit(
        func.body,
        lambda n: found.append(n.buffer) if isinstance(n, tirx.AllocBuffer) and n.buffer.scope() == scope else None,
    )
    return found


def _bytes(buffer: Any) -> int:
    return math.prod(_plain(d) for d in buffer.shape) * DataType(str(buffer.dtype)).bits // 8


def _dynamic_shared_bytes(func: Any) -> int:
    return sum(_bytes(b) for b in _allocations(func, "shared.dyn"))


def _launch(func: Any) -> dict[str, list[int]]:
    extent = {str(k): _plain(v) for k, v in _attr(func, "thread_extent", {}).items()}
    return {
        "grid": [extent.get(f"blockIdx.{axis}", 1) for axis in "xyz"],
        "threads": [extent.get(f"threadIdx.{axis}", 1) for axis in "xyz"],
    }


def _syncthreads(node: Any) -> int:
    return sum(1 for call in _calls(node, SYNCTHREADS) if str(_plain(call.args[0])).startswith("shared"))


def _sync(func: Any, main_loop_vars: set[str], has: Features) -> dict[str, Any]:
    """Barriers everywhere; the copy and wait machinery only of the hardware the target has."""
    main_loops: list[Any] = []
    _visit(
        func.body,
        lambda n: main_loops.append(n) if isinstance(n, tirx.For) and n.loop_var.name in main_loop_vars else None,
    )
    in_main_loop = sum(_syncthreads(loop.body) for loop in main_loops)
    waits = [_plain(call.args[0]) for call in _calls(func.body, CP_ASYNC_WAIT)]
    copies = [call for op in CP_ASYNC_COPIES for call in _calls(func.body, op)]
    sync: dict[str, Any] = {
        "syncthreads_main_loop": in_main_loop,
        "syncthreads_elsewhere": _syncthreads(func.body) - in_main_loop,
    }
    if has.cp_async:
        sync["cp_async_wait"] = waits
        sync["cp_async_commit_groups"] = len(_calls(func.body, CP_ASYNC_COMMIT))
        sync["cp_async_copies"] = len(copies)
    if has.lds_copies:
        # The same IR ops, other hardware: TileLang's HIP template turns a 4-byte copy into an
        # asynchronous buffer_load_dword ... lds and an 8- or 16-byte one into a load and an LDS store
        # through registers, so the widths say which is which. Commit groups compile to nothing there.
        sync["lds_copies"] = dict(sorted(Counter(_copy_bytes(call) for call in copies).items()))
        sync["vmcnt_waits"] = waits  # s_waitcnt vmcnt(N): N vector memory instructions, not groups, left in flight
    if has.tma:
        sync["mbarriers"] = sum(_bytes(b) // 8 for b in _allocations(func, "shared.barrier"))
        sync["tma_loads"] = len(_calls(func.body, TMA_LOAD))
    return sync


def _copy_bytes(call: Any) -> int:
    """Bytes one cp_async_gs copies: TileLang's op counts elements of the destination's type, TVM's bytes."""
    if _op_name(call) == "tirx.ptx_cp_async":
        return _plain(call.args[2])
    element = call.args[0].args[0].dtype  # tvm_access_ptr(type_annotation(<element>), ...)
    return _plain(call.args[2]) * DataType(str(element)).bits * DataType(str(element)).lanes // 8


def _mma(nodes: list[Any]) -> dict[str, Any]:
    """The matrix instruction families, their ops, and the instruction shapes (mMnNkK) they issue."""
    calls = [n for n in nodes if isinstance(n, tirx.Call) and any(m in _op_name(n) for m, _ in MMA_FAMILIES)]
    mma_ops = sorted({_op_name(call) for call in calls})
    families = sorted({family for op in mma_ops for marker, family in MMA_FAMILIES if marker in op})
    shapes = sorted({shape for call in calls if (shape := _mma_shape(call)) is not None})
    return {"families": families, "ops": mma_ops, "shapes": shapes}


def _mma_shape(call: Any) -> str | None:
    """mma.sync and wgmma name their shape (`m16n8k16`); an MFMA its intrinsic (`f32_16x16x16f16`);
    tcgen05 encodes M and N in its instruction descriptor, and K follows from the operand type."""
    strings = [str(a.value) for a in call.args if isinstance(a, tirx.StringImm)]
    for text in strings:
        if re.fullmatch(r"m\d+n\d+k\d+", text):
            return text
    if "tvm_mfma" in _op_name(call) and strings and (mnk := re.search(r"(\d+)x(\d+)x(\d+)", strings[0])):
        return "m{}n{}k{}".format(*mnk.groups())
    if _op_name(call) in TCGEN05_MMA_WITH_DESCRIPTOR and isinstance(call.args[7], tirx.IntImm):
        descriptor = call.args[7].value  # bits 17-22: N >> 3, bits 24-28: M >> 4 (TileLang's GetTCGEN5InstrDesc)
        k = TCGEN05_K.get(strings[0], "?") if strings else "?"
        return f"m{(descriptor >> 24 & 0x1F) << 4}n{(descriptor >> 17 & 0x3F) << 3}k{k}"
    return None


def _tensor_memory(nodes: list[Any]) -> dict[str, dict[str, int]]:
    """Per tensor-memory buffer (T.alloc_tmem), the columns it allocates (tl::tmem_allocate; 512 in all)."""
    found: dict[str, dict[str, int]] = {}
    for node in nodes:
        if isinstance(node, tirx.Call) and _op_name(node) == TMEM_ALLOC:
            slot = node.args[0]
            name = str(slot.args[1].name) if _op_name(slot) == ACCESS_PTR else str(slot)
            found.setdefault(name, {"columns": 0})["columns"] += _plain(node.args[1])
    return dict(sorted(found.items()))


def _op_name(call: Any) -> str:
    return str(getattr(call.op, "name", ""))


def _is_instruction(name: str) -> bool:
    return name.startswith(INSTRUCTION_PREFIXES) or name in INSTRUCTION_OPS


def _instruction(call: Any) -> str:
    """The op with what fixes the instruction's shape: its string arguments (MMA shape and types,
    extern name, sync scope), or x<num>[.trans] for ldmatrix / stmatrix, as the CUDA names them."""
    name = _op_name(call)
    if name in MATRIX_MOVES:
        trans, num = (_plain(a) for a in call.args[:2])
        return f"{name} x{num}{'.trans' * bool(trans)}"
    strings = [str(a.value) for a in call.args if isinstance(a, tirx.StringImm)]
    return " ".join([name, *strings])


def _instructions(nodes: list[Any]) -> dict[str, int]:
    """Call sites per instruction: a loop the compiler unrolled shows as more sites, a new op as a new key."""
    sites = Counter(_instruction(n) for n in nodes if isinstance(n, tirx.Call) and _is_instruction(_op_name(n)))
    return dict(sorted(sites.items()))


def _loops(nodes: list[Any]) -> dict[str, dict[int | str, int]]:
    """Loops of the device kernel per kind (`serial`, `unrolled`: a `#pragma unroll` loop) and trip count."""
    loops: dict[str, Counter[int | str]] = {}
    for node in nodes:
        if isinstance(node, tirx.For):
            trips = node.extent.value if isinstance(node.extent, tirx.IntImm) else "dynamic"
            loops.setdefault(tirx.ForKind(node.kind).name.lower(), Counter())[trips] += 1
    # Trip counts ascending, `dynamic` last.
    return {
        kind: dict(sorted(c.items(), key=lambda t: (t[0] == "dynamic", str(t[0]).zfill(12))))
        for kind, c in sorted(loops.items())
    }


def _vector_stores(nodes: list[Any]) -> dict[str, dict[int, int]]:
    """Per buffer, its vector stores by width (lanes): where the lowering vectorized a loop."""
    stores: dict[str, Counter[int]] = {}
    for node in nodes:
        if isinstance(node, tirx.BufferStore) and node.value.dtype.lanes > 1:
            stores.setdefault(str(node.buffer.data.name), Counter())[node.value.dtype.lanes] += 1
    return {name: dict(sorted(widths.items())) for name, widths in sorted(stores.items())}


def _scope(var: Any) -> str:
    return str(getattr(getattr(var, "type_annotation", None), "storage_scope", ""))


def _shared_addressing(nodes: list[Any]) -> dict[str, dict[str, str]]:
    """Per shared buffer and per instruction reaching it (or plain `load` / `store`): a fingerprint of
    the address expressions of all its sites. It changes when TileLang writes the index arithmetic
    differently, even for the same layout; renaming the compiler's variables does not change it."""
    sites: dict[str, dict[str, list[str]]] = {}

    def record(var: Any, how: str, *address: Any) -> None:
        if _scope(var).startswith("shared"):
            sites.setdefault(str(var.name), {}).setdefault(how, []).append(canonical_form(address))

    for node in nodes:
        if isinstance(node, tirx.Call):
            for arg in node.args:
                if isinstance(arg, tirx.Call) and _op_name(arg) == ACCESS_PTR:
                    record(arg.args[1], _instruction(node), *arg.args[2:4])
        elif isinstance(node, tirx.BufferStore):
            record(node.buffer.data, "store", *node.indices)
        elif isinstance(node, tirx.BufferLoad):
            record(node.buffer.data, "load", *node.indices)
    return {
        name: {how: _fingerprint(forms) for how, forms in sorted(by_how.items())}
        for name, by_how in sorted(sites.items())
    }


def _shared_memory(func: Any, target: Target) -> dict[str, Any]:
    """The block's shared memory (dynamic, static and mbarriers) against the most `target` lets one block use."""
    used = sum(_bytes(b) for scope in SHARED_MEMORY_SCOPES for b in _allocations(func, scope))
    limit = target.shared_memory_per_block
    return {"bytes": used, "limit": limit, "fits": used <= limit}


def _rasterization(func: Any) -> dict[str, Any]:
    """How T.use_swizzle remaps block indices: the order (`row`, `column`, as T.use_swizzle spells it) and
    the panel size; `{}` when the kernel launches blocks in plain order."""
    found: dict[str, Any] = {}

    def visit(node: Any) -> None:
        if isinstance(node, tirx.AttrStmt) and node.attr_key == SWIZZLE_PATTERN:
            device_function, panel_size = (_plain(a) for a in node.value.args)
            found.update(order=device_function.removeprefix("rasterization2D").lower(), panel_size=panel_size)

    _visit(func.body, visit)
    return found


def _gemms(scope: Any, target: Target) -> list[dict[str, str]]:
    """Each tile GEMM (in program order; the copies software pipelining makes count once): its operands,
    its M x N x K, the warp policy it was written with, and the warp partition TileLang chose for it,
    read from the thread layout inferred for its accumulator (absent where that is not a fragment,
    as tensor memory is)."""
    layouts: dict[str, Any] = {}

    def visit(node: Any) -> None:
        if isinstance(node, tirx.SBlock) and "layout_map" in node.annotations:
            for buffer, layout in node.annotations["layout_map"].items():
                layouts.setdefault(str(buffer.name), layout)

    _visit(scope, visit)
    gemms: list[dict[str, str]] = []
    for call in (c for op in DENSE_GEMM_OPS for c in _calls(scope, op)):
        a, b, c = (_region(arg) for arg in call.args[:3])
        m, n, k, policy = (_plain(arg) for arg in call.args[5:9])
        gemm = {
            "operands": f"{a.buffer.name}, {b.buffer.name} -> {c.buffer.name}",
            "tile": f"{m} x {n} x {k}",
            "policy": WARP_POLICIES[policy] if policy < len(WARP_POLICIES) else str(policy),
        }
        layout = layouts.get(str(c.buffer.name))
        if hasattr(layout, "forward_thread"):
            gemm.update(_warp_partition(layout, c.indices, m, n, target.warp_size))
        if gemm not in gemms:
            gemms.append(gemm)
    return gemms


def _region(arg: Any) -> Any:
    """The BufferLoad at the start of a tile op's region argument (`T.region(buf[i, j], mode, extents...)`)."""
    return arg.args[0] if isinstance(arg, tirx.Call) else arg


def _warp_partition(layout: Any, start: Any, m: int, n: int, warp: int) -> dict[str, str]:
    """Warps along M and along N, and the rows x columns one warp holds, from the thread that holds each
    element of the accumulator's first column and first row (a partition TileLang chose is a grid of warps)."""
    variables = list(layout.get_forward_vars())
    analyzer = arith.Analyzer()

    def warp_of(row: int, column: int) -> int | None:
        index = [*start[:-2], start[-2] + row, start[-1] + column]
        thread = analyzer.simplify(substitute(layout.forward_thread, dict(zip(variables, index, strict=True))))
        return thread.value // warp if isinstance(thread, tirx.IntImm) else None

    column = [warp_of(i, 0) for i in range(m)]
    row = [warp_of(0, j) for j in range(n)]
    if None in column or None in row:  # a thread that depends on a loop or a replica: no fixed grid to read
        return {}
    along_m, along_n = len(set(column)), len(set(row))
    return {"warps": f"{along_m} x {along_n}", "warp_tile": f"{column.count(column[0])} x {row.count(row[0])}"}


def _warp_shuffles(func: Any) -> dict[str, int]:
    """Call sites per op moving values between a warp's lanes (`tl.shfl_xor_sync`, `tl.warp_reduce_sum`,
    `tirx.tvm_warp_shuffle_down`), and the block reductions built on them (`tl::AllReduce<...>`)."""
    sites: Counter[str] = Counter()

    def visit(node: Any) -> None:
        if isinstance(node, tirx.Call):
            name = _op_name(node)
            if name.startswith(WARP_SHUFFLE_PREFIXES):
                sites[name] += 1
            elif name == "tirx.call_extern" and str(_plain(node.args[0])).startswith(BLOCK_ALL_REDUCE):
                sites[str(_plain(node.args[0])).removesuffix("::run")] += 1

    _visit(func.body, visit)
    return dict(sorted(sites.items()))


def _conversions(func: Any) -> dict[str, int]:
    """Casts per `from -> to` type (with lanes: `float32x4 -> float8_e4m3fnx4`), wherever a floating-point
    type is on either side; casts between integer types are index arithmetic and left out."""
    casts: Counter[str] = Counter()

    def visit(node: Any) -> None:
        if isinstance(node, tirx.Cast) and not all(_is_integer(t) for t in (node.value.dtype, node.dtype)):
            casts[f"{node.value.dtype} -> {node.dtype}"] += 1

    _visit(func.body, visit)
    return dict(sorted(casts.items()))


def _is_integer(dtype: Any) -> bool:
    return str(dtype).startswith(("int", "uint", "bool"))


def _layouts(scope: Any) -> dict[str, str]:
    """The layout `tl.LayoutInference` gave each shared buffer and fragment the kernel allocates (its blocks'
    layout_map, which holds those of every kernel of the function)."""
    blocks = [node for node in _nodes(scope) if isinstance(node, tirx.SBlock)]
    allocated = [buffer.data for block in blocks for buffer in block.alloc_buffers]
    found: dict[str, tuple[Any, Any]] = {}
    for block in blocks:
        for buffer, layout in block.annotations.get("layout_map", {}).items():
            if any(buffer.data.same_as(data) for data in allocated):
                found.setdefault(str(buffer.name), (buffer, layout))
    return {name: _describe_layout(buffer, layout) for name, (buffer, layout) in sorted(found.items())}


def _describe_layout(buffer: Any, layout: Any) -> str:
    """A fragment: `fragment <fingerprint>`. A shared layout: the name of the TileLang layout it equals
    (`swizzle 128B`, `swizzle 64B`, `swizzle 32B`, `linear`), else `custom <fingerprint>`."""
    if hasattr(layout, "forward_thread"):
        thread = [layout.forward_thread, layout.replicate_size]
        return f"fragment {_fingerprint([_layout_form(layout, thread)])}"
    from tilelang.layout import swizzle

    for name, make, width in NAMED_LAYOUTS:
        if width is not None and not _swizzle_fits(buffer, width):
            continue  # TileLang would refuse to build it, and its refusal costs half a second
        try:
            if layout.is_equal(getattr(swizzle, make)(buffer)):
                return name
        except Exception:  # any other refusal also means: not this layout
            continue
    return f"custom {_fingerprint([_layout_form(layout, [])])}"


def _swizzle_fits(buffer: Any, width: int) -> bool:
    """TileLang's own preconditions for a swizzle of `width` bytes (src/layout/gemm_layouts.cc)."""
    shape = [_plain(d) for d in buffer.shape]
    if len(shape) < 2 or not all(isinstance(d, int) for d in shape[-2:]):
        return False
    rows, row = shape[-2:]
    return (rows == 4 or rows % 8 == 0) and row * DataType(str(buffer.dtype)).bits % (width * 8) == 0


def _layout_form(layout: Any, extra: list[Any]) -> str:
    """Shapes and index functions, the layout's own variables named by position."""
    inputs = list(layout.get_forward_vars())
    values = [*inputs, *layout.get_input_shape(), *layout.get_output_shape(), *layout.get_forward_index(), *extra]
    return canonical_form(values)


def canonical_form(values: Iterable[Any]) -> str:
    """Expressions as canonical text: variables named v0, v1, ... by first appearance, so the text
    depends on the structure alone (not on names, object addresses or the IR printer)."""
    names: list[Any] = []

    def var(v: Any) -> str:
        for index, seen in enumerate(names):
            if seen.same_as(v):
                return f"v{index}"
        names.append(v)
        return f"v{len(names) - 1}"

    def form(e: Any) -> str:
        if isinstance(e, tirx.Var):
            return var(e)
        if isinstance(e, (tirx.IntImm, tirx.FloatImm, tirx.StringImm)):
            return repr(e.value)
        if isinstance(e, (bool, int, float, str)):
            return repr(e)
        if isinstance(e, tirx.Call):
            return f"{_op_name(e) or form(e.op)}({', '.join(form(a) for a in e.args)})"
        if isinstance(e, tirx.BufferLoad):
            return f"{var(e.buffer.data)}[{', '.join(form(i) for i in e.indices)}]"
        if isinstance(e, tirx.Cast):
            return f"{e.dtype}({form(e.value)})"
        parts = [getattr(e, field) for field in EXPR_FIELDS if hasattr(e, field)]
        return f"{type(e).__name__}({', '.join(form(p) for p in parts)})"

    return "; ".join(form(v) for v in values)


# The operand fields of the remaining expression nodes (binary ops, Select, Ramp, Broadcast, Let, Not).
EXPR_FIELDS = ("a", "b", "condition", "true_value", "false_value", "base", "stride", "var", "value", "body", "lanes")


def _fingerprint(forms: list[str]) -> str:
    return hashlib.sha256("\n".join(forms).encode()).hexdigest()[:8]
