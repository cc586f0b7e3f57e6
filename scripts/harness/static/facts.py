"""Pipeline, memory and synchronization facts of one lowering, read from the compiler's IR.

Every fact comes from an IRModule captured by `harness.static.lowering`: the loop annotations as
`tl.PipelinePlanning` leaves them, the shared buffers right after `tl.InjectSoftwarePipeline`
(with their version dimension), the merged dynamic shared memory after
`tl.MergeSharedMemoryAllocations`, and launch shape, barriers, copies and MMA instructions from
the final device IR, whose calls map one to one onto the CUDA text.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import tilelang  # noqa: F401  (imported first: it puts its bundled TVM on sys.path)
from tvm import DataType, tirx
from tvm.tirx.stmt_functor import pre_order_visit

from harness.static.lowering import Lowering
from harness.static.snapshot import FORMAT_VERSION

PIPELINE_ANNOTATIONS = (
    "software_pipeline_stage",
    "software_pipeline_order",
    "tl_pipelined_num_stages",
    "software_pipeline_async_producers",
    "software_pipeline_async_producer_groups",
    "software_pipeline_async_stages",
)

# Call op -> what it is in the CUDA text.
SYNCTHREADS = "tirx.tvm_storage_sync"  # with a shared scope: __syncthreads()
CP_ASYNC_WAIT = "tirx.ptx_wait_group"  # tl::cp_async_wait<N>()
CP_ASYNC_COMMIT = "tirx.ptx_commit_group"  # tl::cp_async_commit()
CP_ASYNC_COPY = "tl.ptx_cp_async"  # tl::cp_async_gs<bytes>(...)
TMA_LOAD = "tl.tma_load"
GEMM_TILE_OP = "tl.tileop.gemm"
# (substring of the op name, instruction family) for the ops that issue matrix instructions.
MMA_FAMILIES = (("tcgen05_mma", "tcgen05"), ("ptx_wgmma", "wgmma"), ("ptx_mma", "mma.sync"))


def extract_facts(lowering: Lowering) -> dict[str, Any]:
    """The facts of one case as plain data (ints, strings, lists, dicts) in a stable order."""
    case = lowering.case
    planned = _device_or_only_func(lowering.ir_after["tl.PipelinePlanning"])
    injected = _device_or_only_func(lowering.ir_after["tl.InjectSoftwarePipeline"])
    merged = _kernel_func(lowering.ir_after["tl.MergeSharedMemoryAllocations"])
    device = _kernel_func(lowering.device_ir)
    main_loop_vars = _main_loop_vars(planned)
    return {
        "format": FORMAT_VERSION,
        "case": {"family": case.family.name, "variant": case.variant.name, "target": case.target},
        "params": case.params,
        "pipelines": _pipeline_loops(planned),
        "warp_specialized": bool(_attr(planned, "tl_tiled_ws_applied", False)),
        "shared_buffers": _shared_buffers(injected),
        "dynamic_shared_memory_bytes": _dynamic_shared_bytes(merged),
        "launch": _launch(device),
        "sync": _sync(device, main_loop_vars),
        "mma": _mma(device),
    }


# -- locating functions -------------------------------------------------------------------


def _functions(mod: Any) -> list[tuple[str, Any]]:
    return sorted((gv.name_hint, f) for gv, f in mod.functions.items() if isinstance(f, tirx.PrimFunc))


def _kernel_func(mod: Any) -> Any:
    """The device kernel (after SplitHostDevice there is a host function beside it)."""
    kernels = [f for _, f in _functions(mod) if _attr(f, "tirx.is_global_func", False)]
    if len(kernels) != 1:
        raise ValueError(f"expected one device kernel in the module, found {len(kernels)}")
    return kernels[0]


def _device_or_only_func(mod: Any) -> Any:
    funcs = _functions(mod)
    if len(funcs) != 1:
        raise ValueError(f"expected one function before host/device split, found {len(funcs)}")
    return funcs[0][1]


def _attr(func: Any, key: str, default: Any) -> Any:
    return func.attrs[key] if func.attrs is not None and key in func.attrs else default


# -- IR walking ---------------------------------------------------------------------------


def _visit(node: Any, visitor: Callable[[Any], None]) -> None:
    """Pre-order over statements and expressions, in program order."""

    def visit(n: Any) -> bool:
        visitor(n)
        return True

    pre_order_visit(node, visit)


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


def _pipeline_loops(func: Any) -> list[dict[str, Any]]:
    """Every loop carrying a software-pipeline annotation, with the annotations TileLang set."""
    loops: list[dict[str, Any]] = []

    def visit(node: Any) -> None:
        if isinstance(node, tirx.For) and any(key in node.annotations for key in PIPELINE_ANNOTATIONS):
            entry: dict[str, Any] = {"loop_var": str(node.loop_var.name), "extent": _plain(node.extent)}
            for key in PIPELINE_ANNOTATIONS:
                entry[key] = _plain(node.annotations[key]) if key in node.annotations else None
            loops.append(entry)

    _visit(func.body, visit)
    return loops


def _main_loop_vars(func: Any) -> set[str]:
    """Names of the loops that run the tile GEMM: the K loop, the pipeline's steady state."""
    names: set[str] = set()

    def visit(node: Any) -> None:
        if isinstance(node, tirx.For) and _calls(node.body, GEMM_TILE_OP):
            names.add(node.loop_var.name)

    _visit(func.body, visit)
    return names


def _shared_buffers(func: Any) -> dict[str, dict[str, Any]]:
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

    _visit(func.body, visit)
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


def _sync(func: Any, main_loop_vars: set[str]) -> dict[str, Any]:
    main_loops: list[Any] = []
    _visit(
        func.body,
        lambda n: main_loops.append(n) if isinstance(n, tirx.For) and n.loop_var.name in main_loop_vars else None,
    )
    in_main_loop = sum(_syncthreads(loop.body) for loop in main_loops)
    barriers = _allocations(func, "shared.barrier")
    return {
        "syncthreads_main_loop": in_main_loop,
        "syncthreads_elsewhere": _syncthreads(func.body) - in_main_loop,
        "cp_async_wait": [_plain(call.args[0]) for call in _calls(func.body, CP_ASYNC_WAIT)],
        "cp_async_commit_groups": len(_calls(func.body, CP_ASYNC_COMMIT)),
        "cp_async_copies": len(_calls(func.body, CP_ASYNC_COPY)),
        "mbarriers": sum(_bytes(b) // 8 for b in barriers),
        "tma_loads": len(_calls(func.body, TMA_LOAD)),
    }


def _mma(func: Any) -> dict[str, Any]:
    ops: set[str] = set()
    _visit(func.body, lambda n: ops.add(str(n.op.name)) if isinstance(n, tirx.Call) and hasattr(n.op, "name") else None)
    mma_ops = sorted(op for op in ops if any(marker in op for marker, _ in MMA_FAMILIES))
    families = sorted({family for op in mma_ops for marker, family in MMA_FAMILIES if marker in op})
    return {"families": families, "ops": mma_ops}
