"""The layouts `tl.LayoutInference` chose, as the name of the TileLang layout each equals or a fingerprint, and the
canonical text of IR expressions those fingerprints (and the shared-memory addressing facts) are taken of.

TVM is imported inside the functions that read IR, so importing this module needs no TileLang.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from typing import Any

from tilelang_golden.static.produce import ir

# Layouts TileLang builds for shared memory, tried in this order against the inferred one, with
# the swizzle width in bytes (a row of the buffer must hold a multiple of it).
NAMED_LAYOUTS = (
    ("swizzle 128B", "make_full_bank_swizzled_layout", 128),
    ("swizzle 64B", "make_half_bank_swizzled_layout", 64),
    ("swizzle 32B", "make_quarter_bank_swizzled_layout", 32),
    ("linear", "make_linear_layout", None),
)


def buffer_layouts(scope: Any) -> dict[str, str]:
    """The layout `tl.LayoutInference` gave each shared buffer and fragment the kernel allocates (its blocks'
    layout_map, which holds those of every kernel of the function)."""
    from tvm import tirx

    blocks = [node for node in ir.nodes(scope) if isinstance(node, tirx.SBlock)]
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
        return f"fragment {fingerprint([_layout_form(layout, thread)])}"
    from tilelang.layout import swizzle

    for name, make, width in NAMED_LAYOUTS:
        if width is not None and not _swizzle_fits(buffer, width):
            continue  # TileLang would refuse to build it, and its refusal costs half a second
        try:
            if layout.is_equal(getattr(swizzle, make)(buffer)):
                return name
        except Exception:  # any other refusal also means: not this layout
            continue
    return f"custom {fingerprint([_layout_form(layout, [])])}"


def _swizzle_fits(buffer: Any, width: int) -> bool:
    """TileLang's own preconditions for a swizzle of `width` bytes (src/layout/gemm_layouts.cc)."""
    from tvm import DataType

    shape = [ir.plain(d) for d in buffer.shape]
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
    from tvm import tirx

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
            return f"{ir.op_name(e) or form(e.op)}({', '.join(form(a) for a in e.args)})"
        if isinstance(e, tirx.BufferLoad):
            return f"{var(e.buffer.data)}[{', '.join(form(i) for i in e.indices)}]"
        if isinstance(e, tirx.Cast):
            return f"{e.dtype}({form(e.value)})"
        parts = [getattr(e, field) for field in EXPR_FIELDS if hasattr(e, field)]
        return f"{type(e).__name__}({', '.join(form(p) for p in parts)})"

    return "; ".join(form(v) for v in values)


# The operand fields of the remaining expression nodes (binary ops, Select, Ramp, Broadcast, Let, Not).
EXPR_FIELDS = ("a", "b", "condition", "true_value", "false_value", "base", "stride", "var", "value", "body", "lanes")


def fingerprint(forms: list[str]) -> str:
    return hashlib.sha256("\n".join(forms).encode()).hexdigest()[:8]
