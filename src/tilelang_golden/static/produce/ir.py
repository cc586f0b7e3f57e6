"""Walking TileLang's compiler IR: the functions of a module, each kernel's launch scope before SplitHostDevice,
and the nodes, calls and plain values under a statement, for the fact readers.

TVM is imported inside the functions that read IR (they are only ever handed TVM objects, so TVM is loaded by then),
so importing this module needs no TileLang.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

THREAD_EXTENT = "thread_extent"
WS_SCOPE = "kWarpSpecializationScope"  # the statement attribute around a warp-specialized kernel's partition
# The tile GEMM ops that share TileLang's dense argument layout (src/op/gemm.cc, GemmNode::InitFromDenseArgs):
# A, B and C regions, trans_A, trans_B, M, N, K, the warp policy, clear_accum, ...
DENSE_GEMM_OPS = ("tl.tileop.gemm", "tl.tileop.wgmma_gemm", "tl.tileop.tcgen05_gemm")


def functions(mod: Any) -> list[tuple[str, Any]]:
    from tvm import tirx

    return sorted((gv.name_hint, f) for gv, f in mod.functions.items() if isinstance(f, tirx.PrimFunc))


def global_funcs(mod: Any) -> dict[str, Any]:
    """Device kernel name -> its function, by the name the host launches it with, in the order SplitHostDevice
    numbered them (`main_kernel`, `main_kernel_1`, ..., `main_kernel_10`)."""
    found = {
        str(attr(f, "global_symbol", name)): f for name, f in functions(mod) if attr(f, "tirx.is_global_func", False)
    }
    return dict(sorted(found.items(), key=lambda item: numbered(item[0])))


def numbered(name: str) -> tuple[str, int]:
    stem, _, number = name.rpartition("_")
    return (stem, int(number)) if number.isdigit() else (name, -1)


def only_func(mod: Any) -> Any:
    funcs = functions(mod)
    if len(funcs) != 1:
        raise ValueError(f"expected one function before host/device split, found {len(funcs)}")
    return funcs[0][1]


def launch_scopes(body: Any) -> list[Any]:
    """The outermost thread-extent statements, in program order: one per `T.Kernel`."""
    from tvm import tirx
    from tvm.tirx.stmt_functor import pre_order_visit

    scopes: list[Any] = []

    def enter(node: Any) -> bool:
        if isinstance(node, tirx.AttrStmt) and node.attr_key == THREAD_EXTENT:
            scopes.append(node)
            return False  # the launch's inner thread extents belong to the same kernel
        return True

    pre_order_visit(body, enter)
    return scopes


def scope_grid(scope: Any) -> list[Any]:
    from tvm import tirx

    extents: dict[str, Any] = {}
    visit(
        scope,
        lambda n: (
            extents.setdefault(str(n.node.thread_tag), plain(n.value))
            if isinstance(n, tirx.AttrStmt) and n.attr_key == THREAD_EXTENT
            else None
        ),
    )
    return [extents.get(f"blockIdx.{axis}", 1) for axis in "xyz"]


def warp_specialized(scope: Any) -> bool:
    from tvm import tirx

    found: list[Any] = []
    visit(scope, lambda n: found.append(n) if isinstance(n, tirx.AttrStmt) and n.attr_key == WS_SCOPE else None)
    return bool(found)


def launch_order(host: Any, names: list[str]) -> list[str]:
    """The device kernels in the order the host function calls them (each launch passes the kernel's name)."""
    from tvm import tirx

    order: list[str] = []

    def record(node: Any) -> None:
        if isinstance(node, tirx.Call) and node.args and isinstance(node.args[0], tirx.StringImm):
            name = str(node.args[0].value)
            if name in names and name not in order:
                order.append(name)

    for _, func in functions(host):
        visit(func.body, record)
    return order


def attr(func: Any, key: str, default: Any) -> Any:
    return func.attrs[key] if func.attrs is not None and key in func.attrs else default


# -- IR walking ---------------------------------------------------------------------------


def visit(node: Any, visitor: Callable[[Any], None]) -> None:
    """Pre-order over statements and expressions, in program order."""
    from tvm.tirx.stmt_functor import pre_order_visit

    def each(n: Any) -> bool:
        visitor(n)
        return True

    pre_order_visit(node, each)


def nodes(node: Any) -> list[Any]:
    found: list[Any] = []
    visit(node, found.append)
    return found


def calls(node: Any, op_name: str) -> list[Any]:
    from tvm import tirx

    found: list[Any] = []
    visit(
        node, lambda n: found.append(n) if isinstance(n, tirx.Call) and getattr(n.op, "name", None) == op_name else None
    )
    return found


def plain(value: Any) -> Any:
    """TVM containers and immediates -> Python ints, floats, strings, lists."""
    from tvm import tirx

    if isinstance(value, (tirx.IntImm, tirx.FloatImm, tirx.StringImm)):
        return value.value
    for plain_type in (bool, int, float, str):  # TVM strings subclass str: make them plain
        if isinstance(value, plain_type):
            return plain_type(value)
    if hasattr(value, "__iter__"):
        return [plain(v) for v in value]
    return "".join(str(value))  # an expression (e.g. a loop bound that depends on blockIdx) as text: an exact str


def op_name(call: Any) -> str:
    return str(getattr(call.op, "name", ""))


def storage_scope(var: Any) -> str:
    """The storage scope of a buffer's data variable (`shared.dyn`, `local.fragment`, ...); "" where it has none."""
    return str(getattr(getattr(var, "type_annotation", None), "storage_scope", ""))
