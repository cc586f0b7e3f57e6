"""What schedule annotations change: each variant against the one it declares `compare_with`.

For every family with such pairs, on every target it declares: how many lines of the kernel source
(CUDA, or HIP on a HIP target) and which facts differ. A variant whose source is byte-identical to
its comparison's is an annotation without effect on that target; the session prints it and
`golden/<family>/SUMMARY.md` commits it. The comparisons of source and dataflow it builds on are
`tilelang_golden.analysis`, which families use too.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from tilelang_golden.analysis import dataflow, source_lines_changed
from tilelang_golden.catalog.build import BuiltKernel
from tilelang_golden.catalog.cases import Case
from tilelang_golden.family import Family, Variant
from tilelang_golden.static.snapshots.diff import changed_fields
from tilelang_golden.targets import TARGETS

SUMMARY_NAME = "SUMMARY.md"


def summary_path(family: Family) -> str:
    return f"{family.name}/{SUMMARY_NAME}"


def has_pairs(family: Family) -> bool:
    return any(v.compare_with for v in family.variants)


# -- CUDA -----------------------------------------------------------------------------------------


def changed_cuda_lines(baseline: str, variant: str) -> int:
    """Lines removed plus lines added going from the baseline's CUDA to the variant's."""
    diff = difflib.unified_diff(baseline.splitlines(), variant.splitlines(), lineterm="", n=0)
    return sum(1 for line in diff if line[:1] in "+-" and line[:3] not in ("+++", "---"))


# -- effects of each annotation change ----------------------------------------------------------


def dataflows(built: BuiltKernel) -> list[list[tuple[str, ...]]]:
    """The dataflow of each kernel the variant launches, in order."""
    return [dataflow(launch.prim_func) for launch in built.launches]


@dataclass(frozen=True)
class VariantEffect:
    variant: str
    compared_with: str
    changes: str  # what the declaration changes: source lines, or parameters
    same_dataflow: bool
    cuda_lines_changed: dict[str, int]  # target -> lines added + removed against the comparison
    facts_changed: dict[str, list[str]]  # target -> changed fact fields against the comparison
    # target -> `does not lower on <target>: <reason>`, where either side is declared not to lower: no comparison
    not_lowering: dict[str, str] = field(default_factory=dict)

    @property
    def targets(self) -> list[str]:
        """Every target this effect speaks of, compared or not, in the project's order."""
        return [t for t in TARGETS if t in self.cuda_lines_changed or t in self.not_lowering]


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
    build: Callable[[Family, Variant], BuiltKernel],
    targets: tuple[str, ...] | None = None,
) -> list[VariantEffect]:
    """Every declared pair, compared on each target (default: the family's); `produced(case)` has the case's
    normalized `cuda` and `facts`, `build` the variant's kernel, whose dataflow is compared (a run's
    `LoweringSession.produce` and `.build`, passed in: this module lowers nothing itself).
    A target where either side is declared not to lower is not compared; the effect says why."""
    targets = family.target_names if targets is None else targets
    effects = []
    for variant in family.variants:
        if variant.compare_with is None:
            continue
        base = family.variant(variant.compare_with)
        not_lowering = {}
        for t in targets:
            failing = [c for c in (Case(family, variant, t), Case(family, base, t)) if c.does_not_lower is not None]
            if failing:
                not_lowering[t] = "; ".join(f"{c.variant.name} {c.not_lowering_note}" for c in failing)
        compared = [t for t in targets if t not in not_lowering]
        mine = {t: produced(Case(family, variant, t)) for t in compared}
        theirs = {t: produced(Case(family, base, t)) for t in compared}
        effects.append(
            VariantEffect(
                variant=variant.name,
                compared_with=base.name,
                changes=declared_change(family, base, variant),
                same_dataflow=_dataflow(family, variant, targets, build) == _dataflow(family, base, targets, build),
                cuda_lines_changed={t: changed_cuda_lines(theirs[t].cuda, mine[t].cuda) for t in compared},
                facts_changed={t: changed_fields(theirs[t].facts, mine[t].facts) for t in compared},
                not_lowering=not_lowering,
            )
        )
    return effects


def _dataflow(family: Family, variant: Variant, targets: Sequence[str], build: Callable) -> Any:
    """The variant's dataflow, as its first target builds it (a ByTarget parameter gives each target its value; the
    dataflow compared is one target's)."""
    return dataflows(build(family, variant.on_target(targets[0])))


def no_effect(effects: list[VariantEffect]) -> dict[str, list[str]]:
    """target -> variants whose CUDA is byte-identical to the one they are compared with."""
    targets = effects[0].targets if effects else []
    return {t: [e.variant for e in effects if e.cuda_lines_changed.get(t) == 0] for t in targets}


def render_effects(family: Family, effects: list[VariantEffect]) -> str:
    """The committed summary: a Markdown table per target, generated, never edited by hand."""
    targets = effects[0].targets
    lines = [
        "<!-- Written by `nox -s regen-golden` from the lowered kernels; never edit by hand. -->",
        f"# {family.name}: what each schedule annotation changes",
        "",
        f"Each variant against the one it is declared to differ from in `{family.file}`.",
        "A variant whose kernel source (CUDA, or HIP on a HIP target) is identical to that one's is an annotation "
        "with no effect on that target.",
        "",
        "| variant | compared with | declared change | same dataflow |",
        "| --- | --- | --- | --- |",
    ]
    lines += [
        f"| {e.variant} | {e.compared_with} | {e.changes} | {'yes' if e.same_dataflow else 'NO'} |" for e in effects
    ]
    for target in targets:
        language = TARGETS[target].language  # CUDA or HIP: what the source compared is
        lines += [
            "",
            f"## {target}",
            "",
            f"| variant | {language} vs comparison | facts that differ |",
            "| --- | --- | --- |",
        ]
        for e in effects:
            if target in e.not_lowering:
                lines.append(f"| {e.variant} | not compared: {e.not_lowering[target]} | none |")
                continue
            changed = e.cuda_lines_changed[target]
            verdict = "**identical (no effect)**" if changed == 0 else f"{changed} lines changed"
            fields = ", ".join(f"`{f}`" for f in e.facts_changed[target]) or "none"
            lines.append(f"| {e.variant} | {verdict} | {fields} |")
    return "\n".join(lines) + "\n"
