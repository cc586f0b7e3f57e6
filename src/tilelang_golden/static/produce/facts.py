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

The IR walking these readers share is in `ir`; layouts and the canonical text of expressions are in `layouts`, the
instruction facts in `instructions` (modules of this package).
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass
from typing import Any

import tilelang  # noqa: F401  (imported first: it makes its bundled TVM importable)
from tvm import DataType, arith, tirx
from tvm.tirx.stmt_functor import substitute

from tilelang_golden.family import snapshot_params
from tilelang_golden.static.produce import ir
from tilelang_golden.static.produce.instructions import conversions, instruction, instructions, mma, warp_shuffles
from tilelang_golden.static.produce.layouts import buffer_layouts, canonical_form, fingerprint
from tilelang_golden.static.produce.lowering import Lowering
from tilelang_golden.static.produce.uninitialized import SOURCE_PASS, uninitialized_shared_reads
from tilelang_golden.static.snapshots.normalize import normalize_warnings
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
# GemmWarpPolicyType in src/op/gemm.h, by value.
WARP_POLICIES = ("Square", "FullRow", "FullCol", "Free")
SWIZZLE_PATTERN = "threadblock_swizzle_pattern"  # T.use_swizzle: (device function, panel size)
# Allocations that take shared memory (LDS): dynamic, static, and the mbarriers (tensor memory is not).
SHARED_MEMORY_SCOPES = ("shared", "shared.dyn", "shared.barrier")
ACCESS_PTR = "tirx.tvm_access_ptr"  # (type, buffer var, offset, extent, rw): a pointer into a buffer


def extract_facts(lowering: Lowering) -> dict[str, Any]:
    """The facts of one case as plain data (ints, strings, lists, dicts) in a stable order: the case, what the
    compiler warned about and the shared memory its kernels may read before writing it, then each device kernel of
    the module in launch order."""
    case = lowering.case
    kernels = [kernel for step in lowering.kernels for kernel in device_kernels(step)]
    uninitialized = [
        warning for kernel in kernels for warning in uninitialized_shared_reads(kernel.source, kernel.name)
    ]
    return {
        "format": FORMAT_VERSION,
        "case": {"family": case.family.name, "variant": case.variant.name, "target": case.target},
        "params": snapshot_params(case.params),
        "warnings": sorted({*normalize_warnings(lowering.output), *uninitialized}),
        "kernels": [kernel_facts(kernel, TARGETS[case.target]) for kernel in kernels],
    }


def kernel_launches(lowering: Lowering) -> list[dict[str, Any]]:
    """Per device kernel in launch order, what ptxas cannot see of its launch: its name, its threads per block and
    its dynamic shared memory in bytes (the machine facts read them; cheaper than every fact)."""
    return [
        {
            "name": kernel.name,
            "threads": math.prod(_launch(kernel.device)["threads"]),
            "dynamic_shared_memory_bytes": _dynamic_shared_bytes(kernel.merged),
        }
        for step in lowering.kernels
        for kernel in device_kernels(step)
    ]


def kernel_facts(kernel: Kernel, target: Target) -> dict[str, Any]:
    """The facts of one device kernel: its name, then what each stage of the lowering left in it."""
    main_loop_vars = _main_loop_vars(kernel.planned)
    device_nodes = ir.nodes(kernel.device.body)  # walked once, read by the facts of the final IR
    facts = {
        "name": kernel.name,
        "pipelines": _pipeline_loops(kernel.planned),
        "warp_specialized": kernel.warp_specialized,
        "shared_buffers": _shared_buffers(kernel.injected),
        "dynamic_shared_memory_bytes": _dynamic_shared_bytes(kernel.merged),
        "launch": _launch(kernel.device),
        "sync": _sync(kernel.device, main_loop_vars, target.features),
        "mma": mma(device_nodes),
        "tensor_memory": _tensor_memory(device_nodes) if target.features.tensor_memory else None,
        "layouts": buffer_layouts(kernel.inferred),
        "instructions": instructions(device_nodes),
        "loops": _loops(device_nodes),
        "vector_stores": _vector_stores(device_nodes),
        "shared_addressing": _shared_addressing(device_nodes),
        "shared_memory": _shared_memory(kernel.device, target),
        "rasterization": _rasterization(kernel.device),
        "gemms": _gemms(kernel.inferred, target),
        "warp_shuffles": warp_shuffles(kernel.device),
        "conversions": conversions(kernel.device),
    }
    return {key: value for key, value in facts.items() if value is not None}


# -- locating each device kernel -------------------------------------------------------------


@dataclass(frozen=True)
class Kernel:
    """One device kernel of a lowering: its launch scope (the statement a `T.Kernel` opens) in the IR before
    SplitHostDevice, where pipelines, shared buffers and layouts are read, and its own device function after."""

    name: str
    source: Any  # its launch scope as written: statements in source order, tile ops (uninitialized.SOURCE_PASS)
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
    planned = ir.only_func(lowering.ir_after["tl.PipelinePlanning"])
    scopes = {name: ir.launch_scopes(ir.only_func(lowering.ir_after[name]).body) for name in SPLIT_PASSES}
    merged = ir.global_funcs(lowering.ir_after["tl.MergeSharedMemoryAllocations"])
    final = ir.global_funcs(lowering.device_ir)
    names = list(final)
    launched = ir.launch_order(lowering.host_ir, names)
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
        grid, expected = ir.scope_grid(planned_scope), _launch(final[name])["grid"]
        if any(isinstance(a, int) and isinstance(b, int) and a != b for a, b in zip(grid, expected, strict=True)):
            raise ValueError(
                f"{lowering.case.id}: launch scope {position} before SplitHostDevice has grid {grid}, but device "
                f"kernel {name} launches {expected}; has TileLang's pass pipeline changed?"
            )
        kernels.append(
            Kernel(
                name=name,
                source=scopes[SOURCE_PASS][position],
                planned=planned_scope,
                injected=scopes["tl.InjectSoftwarePipeline"][position],
                inferred=scopes["tl.LayoutInference"][position],
                merged=merged[name],
                device=final[name],
                warp_specialized=bool(ir.attr(planned, WS_APPLIED, False)) and ir.warp_specialized(planned_scope),
            )
        )
    order = {name: position for position, name in enumerate(launched)}
    return sorted(kernels, key=lambda kernel: order[kernel.name])


# The passes before SplitHostDevice whose IR holds each kernel as a launch scope of one function.
SPLIT_PASSES = (SOURCE_PASS, "tl.PipelinePlanning", "tl.InjectSoftwarePipeline", "tl.LayoutInference")
WS_APPLIED = "tl_tiled_ws_applied"  # a function attribute: some kernel of the function was warp-specialized


# -- facts ---------------------------------------------------------------------------------


def _pipeline_loops(scope: Any) -> list[dict[str, Any]]:
    """Every loop carrying a software-pipeline annotation, with the annotations TileLang set."""
    loops: list[dict[str, Any]] = []

    def visit(node: Any) -> None:
        if isinstance(node, tirx.For) and any(key in node.annotations for key in PIPELINE_ANNOTATIONS):
            entry: dict[str, Any] = {"loop_var": str(node.loop_var.name), "extent": ir.plain(node.extent)}
            for key in PIPELINE_ANNOTATIONS:
                entry[key] = ir.plain(node.annotations[key]) if key in node.annotations else None
            loops.append(entry)

    ir.visit(scope, visit)
    return loops


def _main_loop_vars(scope: Any) -> set[str]:
    """Names of the loops that run the tile GEMM: the K loop, the pipeline's steady state."""
    names: set[str] = set()

    def visit(node: Any) -> None:
        if isinstance(node, tirx.For) and ir.calls(node.body, GEMM_TILE_OP):
            names.add(node.loop_var.name)

    ir.visit(scope, visit)
    return names


def _shared_buffers(scope: Any) -> dict[str, dict[str, Any]]:
    buffers: dict[str, dict[str, Any]] = {}

    def visit(node: Any) -> None:
        if isinstance(node, tirx.SBlock):
            for buffer in node.alloc_buffers:
                if buffer.scope().startswith("shared"):
                    buffers[str(buffer.name)] = {
                        "shape": [ir.plain(d) for d in buffer.shape],
                        "dtype": str(buffer.dtype),
                        "scope": str(buffer.scope()),
                    }

    ir.visit(scope, visit)
    return dict(sorted(buffers.items()))


def _allocations(func: Any, scope: str) -> list[Any]:
    found: list[Any] = []
    ir.visit(
        func.body,
        lambda n: found.append(n.buffer) if isinstance(n, tirx.AllocBuffer) and n.buffer.scope() == scope else None,
    )
    return found


def _bytes(buffer: Any) -> int:
    return math.prod(ir.plain(d) for d in buffer.shape) * DataType(str(buffer.dtype)).bits // 8


def _dynamic_shared_bytes(func: Any) -> int:
    return sum(_bytes(b) for b in _allocations(func, "shared.dyn"))


def _launch(func: Any) -> dict[str, list[int]]:
    extent = {str(k): ir.plain(v) for k, v in ir.attr(func, "thread_extent", {}).items()}
    return {
        "grid": [extent.get(f"blockIdx.{axis}", 1) for axis in "xyz"],
        "threads": [extent.get(f"threadIdx.{axis}", 1) for axis in "xyz"],
    }


def _syncthreads(node: Any) -> int:
    return sum(1 for call in ir.calls(node, SYNCTHREADS) if str(ir.plain(call.args[0])).startswith("shared"))


def _sync(func: Any, main_loop_vars: set[str], has: Features) -> dict[str, Any]:
    """Barriers everywhere; the copy and wait machinery only of the hardware the target has."""
    main_loops: list[Any] = []
    ir.visit(
        func.body,
        lambda n: main_loops.append(n) if isinstance(n, tirx.For) and n.loop_var.name in main_loop_vars else None,
    )
    in_main_loop = sum(_syncthreads(loop.body) for loop in main_loops)
    waits = [ir.plain(call.args[0]) for call in ir.calls(func.body, CP_ASYNC_WAIT)]
    copies = [call for op in CP_ASYNC_COPIES for call in ir.calls(func.body, op)]
    sync: dict[str, Any] = {
        "syncthreads_main_loop": in_main_loop,
        "syncthreads_elsewhere": _syncthreads(func.body) - in_main_loop,
    }
    if has.cp_async:
        sync["cp_async_wait"] = waits
        sync["cp_async_commit_groups"] = len(ir.calls(func.body, CP_ASYNC_COMMIT))
        sync["cp_async_copies"] = len(copies)
    if has.lds_copies:
        # The same IR ops, other hardware: TileLang's HIP template turns a 4-byte copy into an
        # asynchronous buffer_load_dword ... lds and an 8- or 16-byte one into a load and an LDS store
        # through registers, so the widths say which is which. Commit groups compile to nothing there.
        sync["lds_copies"] = dict(sorted(Counter(_copy_bytes(call) for call in copies).items()))
        sync["vmcnt_waits"] = waits  # s_waitcnt vmcnt(N): N vector memory instructions, not groups, left in flight
    if has.tma:
        sync["mbarriers"] = sum(_bytes(b) // 8 for b in _allocations(func, "shared.barrier"))
        sync["tma_loads"] = len(ir.calls(func.body, TMA_LOAD))
    return sync


def _copy_bytes(call: Any) -> int:
    """Bytes one cp_async_gs copies: TileLang's op counts elements of the destination's type, TVM's bytes."""
    if ir.op_name(call) == "tirx.ptx_cp_async":
        return ir.plain(call.args[2])
    element = call.args[0].args[0].dtype  # tvm_access_ptr(type_annotation(<element>), ...)
    return ir.plain(call.args[2]) * DataType(str(element)).bits * DataType(str(element)).lanes // 8


def _tensor_memory(nodes: list[Any]) -> dict[str, dict[str, int]]:
    """Per tensor-memory buffer (T.alloc_tmem), the columns it allocates (tl::tmem_allocate; 512 in all)."""
    found: dict[str, dict[str, int]] = {}
    for node in nodes:
        if isinstance(node, tirx.Call) and ir.op_name(node) == TMEM_ALLOC:
            slot = node.args[0]
            name = str(slot.args[1].name) if ir.op_name(slot) == ACCESS_PTR else str(slot)
            found.setdefault(name, {"columns": 0})["columns"] += ir.plain(node.args[1])
    return dict(sorted(found.items()))


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


def _shared_addressing(nodes: list[Any]) -> dict[str, dict[str, str]]:
    """Per shared buffer and per instruction reaching it (or plain `load` / `store`): a fingerprint of
    the address expressions of all its sites. It changes when TileLang writes the index arithmetic
    differently, even for the same layout; renaming the compiler's variables does not change it."""
    sites: dict[str, dict[str, list[str]]] = {}

    def record(var: Any, how: str, *address: Any) -> None:
        if ir.storage_scope(var).startswith("shared"):
            sites.setdefault(str(var.name), {}).setdefault(how, []).append(canonical_form(address))

    for node in nodes:
        if isinstance(node, tirx.Call):
            for arg in node.args:
                if isinstance(arg, tirx.Call) and ir.op_name(arg) == ACCESS_PTR:
                    record(arg.args[1], instruction(node), *arg.args[2:4])
        elif isinstance(node, tirx.BufferStore):
            record(node.buffer.data, "store", *node.indices)
        elif isinstance(node, tirx.BufferLoad):
            record(node.buffer.data, "load", *node.indices)
    return {
        name: {how: fingerprint(forms) for how, forms in sorted(by_how.items())}
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
            device_function, panel_size = (ir.plain(a) for a in node.value.args)
            found.update(order=device_function.removeprefix("rasterization2D").lower(), panel_size=panel_size)

    ir.visit(func.body, visit)
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

    ir.visit(scope, visit)
    gemms: list[dict[str, str]] = []
    for call in (c for op in ir.DENSE_GEMM_OPS for c in ir.calls(scope, op)):
        a, b, c = (_region(arg) for arg in call.args[:3])
        m, n, k, policy = (ir.plain(arg) for arg in call.args[5:9])
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
