"""What a family's checks may compute about its kernels: the public API families use besides
`tilelang_golden.family`. Source comparison (how many lines a schedule change touches), the dataflow of a
kernel (its tile operations in order, schedule annotations left out), and a walk over IR nodes.

TVM is imported inside the functions that read IR, so importing this module needs no TileLang.
"""

import difflib
import inspect
from collections.abc import Callable
from typing import Any


def ir_nodes(node: Any) -> list[Any]:
    """Every IR node under `node` (a PrimFunc's body, a statement, an expression), in pre-order."""
    from tvm.tirx.stmt_functor import pre_order_visit

    found: list[Any] = []
    pre_order_visit(node, lambda n: found.append(n) or True)
    return found


def _source(kernel: Any) -> list[str]:
    """The kernel's Python source without its `def` line (a jit factory's, not the decorator's)."""
    text = getattr(kernel, "func_source", None) or inspect.getsource(kernel)
    lines = text.splitlines()
    while lines and not lines[0].lstrip().startswith("def "):
        lines.pop(0)  # decorators
    return lines[1:]


def _source_changes(baseline: Callable[..., Any], variant: Callable[..., Any]) -> list[tuple[list[str], list[str]]]:
    """(baseline lines, variant lines) of each differing block of source, the `def` line excluded."""
    old, new = _source(baseline), _source(variant)
    opcodes = difflib.SequenceMatcher(a=old, b=new, autojunk=False).get_opcodes()
    return [(old[i1:i2], new[j1:j2]) for tag, i1, i2, j1, j2 in opcodes if tag != "equal"]


def source_lines_changed(baseline: Callable[..., Any], variant: Callable[..., Any]) -> int:
    """Lines of `variant`'s source that differ from `baseline`'s, the `def` line excluded."""
    return sum(max(len(old), len(new)) for old, new in _source_changes(baseline, variant))


def changed_source(baseline: Callable[..., Any], variant: Callable[..., Any]) -> list[str]:
    """The differing lines as `variant` has them (`- line` for a line it only removed), stripped."""
    lines: list[str] = []
    for old, new in _source_changes(baseline, variant):
        lines += [line.strip() for line in new] if new else [f"- {line.strip()}" for line in old]
    return lines


def dataflow(prim_func: Any) -> list[tuple[str, ...]]:
    """The order of tile operations, loops and stores with the buffers they touch.

    Schedule annotations (loop annotations, layout maps, GEMM warp policy, any non-buffer
    argument) are left out, so two kernels with one dataflow give the same list.
    """
    from tvm import tirx
    from tvm.tirx.stmt_functor import pre_order_visit

    steps: list[tuple[str, ...]] = []

    def buffers_in(node: Any) -> tuple[str, ...]:
        return tuple(str(n.buffer.name) for n in ir_nodes(node) if isinstance(n, (tirx.BufferLoad, tirx.BufferStore)))

    def visit(node: Any) -> bool:
        if isinstance(node, tirx.For):
            steps.append(("loop", str(node.extent)))
        elif isinstance(node, tirx.Evaluate) and isinstance(node.value, tirx.Call):
            steps.append((str(getattr(node.value.op, "name", node.value.op)), *buffers_in(node.value)))
            return False
        elif isinstance(node, tirx.BufferStore):
            steps.append(("store", *buffers_in(node)))
            return False
        return True

    pre_order_visit(prim_func.body, visit)
    return steps
