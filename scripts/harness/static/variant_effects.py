"""What schedule annotations change: each variant against the one it declares `compare_with`.

For every family with such pairs, per target: how many CUDA lines and which facts differ. A
variant whose CUDA is byte-identical to its comparison's is an annotation without effect on
that target; the session prints it and `golden/<family>/SUMMARY.md` commits it. Also the
generic comparisons family checks build on: source lines changed, and the dataflow of a kernel.
"""

from __future__ import annotations

import difflib
import inspect
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from harness.build import build_kernel
from harness.family import Family, Variant
from harness.static.cases import Case
from harness.static.diff import changed_fields
from kernels import TARGETS

SUMMARY_NAME = "SUMMARY.md"


def summary_path(family: Family) -> str:
    return f"{family.name}/{SUMMARY_NAME}"


def has_pairs(family: Family) -> bool:
    return any(v.compare_with for v in family.variants)


# -- source and dataflow ------------------------------------------------------------------------


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
        names: list[str] = []

        def visit(n: Any) -> bool:
            if isinstance(n, (tirx.BufferLoad, tirx.BufferStore)):
                names.append(str(n.buffer.name))
            return True

        pre_order_visit(node, visit)
        return tuple(names)

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


def changed_cuda_lines(baseline: str, variant: str) -> int:
    """Lines removed plus lines added going from the baseline's CUDA to the variant's."""
    diff = difflib.unified_diff(baseline.splitlines(), variant.splitlines(), lineterm="", n=0)
    return sum(1 for line in diff if line[:1] in "+-" and line[:3] not in ("+++", "---"))


# -- effects of each annotation change ----------------------------------------------------------


@dataclass(frozen=True)
class VariantEffect:
    variant: str
    compared_with: str
    changes: str  # what the declaration changes: source lines, or parameters
    same_dataflow: bool
    cuda_lines_changed: dict[str, int]  # target -> lines added + removed against the comparison
    facts_changed: dict[str, list[str]]  # target -> changed fact fields against the comparison


def declared_change(family: Family, base: Variant, variant: Variant) -> str:
    """In words: the parameters that differ, or how many source lines of the kernel differ."""
    old, new = family.params(base), family.params(variant)
    params = [f"{k}: {old.get(k)} -> {new.get(k)}" for k in dict.fromkeys([*old, *new]) if old.get(k) != new.get(k)]
    if base.kernel is not variant.kernel:
        params.insert(0, f"{source_lines_changed(base.kernel, variant.kernel)} source line(s)")
    return "; ".join(params) or "nothing"


def variant_effects(
    family: Family,
    produced: Callable[[Case], Any],
    targets: tuple[str, ...] = tuple(TARGETS),
) -> list[VariantEffect]:
    """Every declared pair, compared on each target; `produced(case)` has the case's normalized `cuda`
    and `facts` (harness.static.produce.produce, passed in: this module lowers nothing itself)."""
    effects = []
    for variant in family.variants:
        if variant.compare_with is None:
            continue
        base = family.variant(variant.compare_with)
        mine = {t: produced(Case(family, variant, t)) for t in targets}
        theirs = {t: produced(Case(family, base, t)) for t in targets}
        effects.append(
            VariantEffect(
                variant=variant.name,
                compared_with=base.name,
                changes=declared_change(family, base, variant),
                same_dataflow=dataflow(build_kernel(family, variant).prim_func)
                == dataflow(build_kernel(family, base).prim_func),
                cuda_lines_changed={t: changed_cuda_lines(theirs[t].cuda, mine[t].cuda) for t in targets},
                facts_changed={t: changed_fields(theirs[t].facts, mine[t].facts) for t in targets},
            )
        )
    return effects


def no_effect(effects: list[VariantEffect]) -> dict[str, list[str]]:
    """target -> variants whose CUDA is byte-identical to the one they are compared with."""
    targets = list(effects[0].cuda_lines_changed) if effects else []
    return {t: [e.variant for e in effects if e.cuda_lines_changed[t] == 0] for t in targets}


def render_effects(family: Family, effects: list[VariantEffect]) -> str:
    """The committed summary: a Markdown table per target, generated, never edited by hand."""
    targets = list(effects[0].cuda_lines_changed)
    lines = [
        "<!-- Written by `nox -s regen-golden` from the lowered kernels; never edit by hand. -->",
        f"# {family.name}: what each schedule annotation changes",
        "",
        f"Each variant against the one it is declared to differ from in `{family.file}`.",
        "A variant whose CUDA is identical to that one's is an annotation with no effect on that target.",
        "",
        "| variant | compared with | declared change | same dataflow |",
        "| --- | --- | --- | --- |",
    ]
    lines += [
        f"| {e.variant} | {e.compared_with} | {e.changes} | {'yes' if e.same_dataflow else 'NO'} |" for e in effects
    ]
    for target in targets:
        lines += ["", f"## {target}", "", "| variant | CUDA vs comparison | facts that differ |", "| --- | --- | --- |"]
        for e in effects:
            changed = e.cuda_lines_changed[target]
            verdict = "**identical (no effect)**" if changed == 0 else f"{changed} lines changed"
            fields = ", ".join(f"`{f}`" for f in e.facts_changed[target]) or "none"
            lines.append(f"| {e.variant} | {verdict} | {fields} |")
    return "\n".join(lines) + "\n"
