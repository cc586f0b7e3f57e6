"""What the final device IR issues: its matrix instructions and their shapes, its call sites per instruction, the
ops that move values between a warp's lanes, and its floating-point casts.

TVM is imported inside the functions that read IR, so importing this module needs no TileLang.
"""

from __future__ import annotations

import re
from collections import Counter
from typing import Any

from tilelang_golden.static.produce import ir

# (substring of the op name, instruction family) for the ops that issue matrix instructions.
MMA_FAMILIES = (
    ("tcgen05_mma", "tcgen05"),
    ("ptx_wgmma", "wgmma"),
    ("ptx_mma", "mma.sync"),
    ("tvm_mfma", "mfma"),  # __builtin_amdgcn_mfma_<out>_<M>x<N>x<K><in>
)
TCGEN05_MMA_WITH_DESCRIPTOR = ("tl.ptx_tcgen05_mma_ss", "tl.ptx_tcgen05_mma_ts")  # arg 7: instruction descriptor
# tcgen05 operand kind -> K of one instruction: 32 bytes of the operand type (PTX ISA, tcgen05.mma shapes).
TCGEN05_K = {"fp16": 16, "bf16": 16, "tf32": 8, "e4m3": 32, "e5m2": 32, "s8": 32, "u8": 32}
# Ops that issue an instruction or a device-library call (the rest are arithmetic and casts).
INSTRUCTION_PREFIXES = ("tl.", "tirx.ptx_")
INSTRUCTION_OPS = ("tirx.tvm_storage_sync", "tirx.call_extern")
MATRIX_MOVES = ("tl.ptx_ldmatrix", "tl.ptx_stmatrix")  # (trans, num, ...): qualified as x<num>[.trans]
# Ops that move a value between the lanes of a warp: TileLang's shuffles and warp reductions, and TVM's
# (a tvm_thread_allreduce across a warp lowers to tvm_warp_shuffle_down + tvm_warp_shuffle).
WARP_SHUFFLE_PREFIXES = ("tl.shfl_", "tl.warp_reduce_", "tirx.tvm_warp_shuffle")
BLOCK_ALL_REDUCE = "tl::AllReduce<"  # T.reduce_*'s device function: warp shuffles, then shared memory


def mma(nodes: list[Any]) -> dict[str, Any]:
    """The matrix instruction families, their ops, and the instruction shapes (mMnNkK) they issue."""
    from tvm import tirx

    calls = [n for n in nodes if isinstance(n, tirx.Call) and any(m in ir.op_name(n) for m, _ in MMA_FAMILIES)]
    mma_ops = sorted({ir.op_name(call) for call in calls})
    families = sorted({family for op in mma_ops for marker, family in MMA_FAMILIES if marker in op})
    shapes = sorted({shape for call in calls if (shape := _mma_shape(call)) is not None})
    return {"families": families, "ops": mma_ops, "shapes": shapes}


def _mma_shape(call: Any) -> str | None:
    """mma.sync and wgmma name their shape (`m16n8k16`); an MFMA its intrinsic (`f32_16x16x16f16`);
    tcgen05 encodes M and N in its instruction descriptor, and K follows from the operand type."""
    from tvm import tirx

    strings = [str(a.value) for a in call.args if isinstance(a, tirx.StringImm)]
    for text in strings:
        if re.fullmatch(r"m\d+n\d+k\d+", text):
            return text
    if "tvm_mfma" in ir.op_name(call) and strings and (mnk := re.search(r"(\d+)x(\d+)x(\d+)", strings[0])):
        return "m{}n{}k{}".format(*mnk.groups())
    if ir.op_name(call) in TCGEN05_MMA_WITH_DESCRIPTOR and isinstance(call.args[7], tirx.IntImm):
        descriptor = call.args[7].value  # bits 17-22: N >> 3, bits 24-28: M >> 4 (TileLang's GetTCGEN5InstrDesc)
        k = TCGEN05_K.get(strings[0], "?") if strings else "?"
        return f"m{(descriptor >> 24 & 0x1F) << 4}n{(descriptor >> 17 & 0x3F) << 3}k{k}"
    return None


def _is_instruction(name: str) -> bool:
    return name.startswith(INSTRUCTION_PREFIXES) or name in INSTRUCTION_OPS


def instruction(call: Any) -> str:
    """The op with what fixes the instruction's shape: its string arguments (MMA shape and types,
    extern name, sync scope), or x<num>[.trans] for ldmatrix / stmatrix, as the CUDA names them."""
    from tvm import tirx

    name = ir.op_name(call)
    if name in MATRIX_MOVES:
        trans, num = (ir.plain(a) for a in call.args[:2])
        return f"{name} x{num}{'.trans' * bool(trans)}"
    strings = [str(a.value) for a in call.args if isinstance(a, tirx.StringImm)]
    return " ".join([name, *strings])


def instructions(nodes: list[Any]) -> dict[str, int]:
    """Call sites per instruction: a loop the compiler unrolled shows as more sites, a new op as a new key."""
    from tvm import tirx

    sites = Counter(instruction(n) for n in nodes if isinstance(n, tirx.Call) and _is_instruction(ir.op_name(n)))
    return dict(sorted(sites.items()))


def warp_shuffles(func: Any) -> dict[str, int]:
    """Call sites per op moving values between a warp's lanes (`tl.shfl_xor_sync`, `tl.warp_reduce_sum`,
    `tirx.tvm_warp_shuffle_down`), and the block reductions built on them (`tl::AllReduce<...>`)."""
    from tvm import tirx

    sites: Counter[str] = Counter()

    def visit(node: Any) -> None:
        if isinstance(node, tirx.Call):
            name = ir.op_name(node)
            if name.startswith(WARP_SHUFFLE_PREFIXES):
                sites[name] += 1
            elif name == "tirx.call_extern" and str(ir.plain(node.args[0])).startswith(BLOCK_ALL_REDUCE):
                sites[str(ir.plain(node.args[0])).removesuffix("::run")] += 1

    ir.visit(func.body, visit)
    return dict(sorted(sites.items()))


def conversions(func: Any) -> dict[str, int]:
    """Casts per `from -> to` type (with lanes: `float32x4 -> float8_e4m3fnx4`), wherever a floating-point
    type is on either side; casts between integer types are index arithmetic and left out."""
    from tvm import tirx

    casts: Counter[str] = Counter()

    def visit(node: Any) -> None:
        if isinstance(node, tirx.Cast) and not all(_is_integer(t) for t in (node.value.dtype, node.dtype)):
            casts[f"{node.value.dtype} -> {node.dtype}"] += 1

    ir.visit(func.body, visit)
    return dict(sorted(casts.items()))


def _is_integer(dtype: Any) -> bool:
    return str(dtype).startswith(("int", "uint", "bool"))
