"""Seed 03 findings per target: which schedule annotations change the CUDA, computed, not assumed."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from harness.cases import Case
from harness.facts import extract_facts
from harness.invariants import changed_cuda_lines, dataflow, source_lines_changed
from harness.lowering import lower
from harness.normalize import normalize_cuda
from harness.report import field_changes
from kernels import PROBLEM_SHAPE, TARGETS, gemm_relu_schedules

FAMILY = "gemm_relu_schedules"
SUMMARY_PATH = f"{FAMILY}/SUMMARY.md"


@dataclass(frozen=True)
class VariantEffect:
    variant: str
    dimension: str | None
    source_lines: int  # computed from kernels/gemm_relu_schedules.py
    seed_source_lines: int  # what the seed's table says
    same_dataflow: bool
    cuda_lines_changed: dict[str, int]  # target -> lines added + removed against the baseline
    facts_changed: dict[str, list[str]]  # target -> changed fact fields against the baseline


def _variant(name: str) -> Any:
    return next(v for v in gemm_relu_schedules.VARIANTS if v.name == name)


def schedule_effects(targets: tuple[str, ...] = tuple(TARGETS)) -> list[VariantEffect]:
    """Compare every schedule variant with the baseline on source, dataflow, CUDA and facts."""
    baseline = _variant(gemm_relu_schedules.BASELINE)
    base_build = gemm_relu_schedules.SCHEDULES[baseline.name][0]
    base_flow = dataflow(baseline.prim_func(**PROBLEM_SHAPE))
    # Each case lowered, normalized and read once: (normalized CUDA, facts) per variant and target.
    seen = {
        (name, t): _cuda_and_facts(lower(Case(_variant(name), t)))
        for name in gemm_relu_schedules.SCHEDULES
        for t in targets
    }
    effects = []
    for name, (build, dimension, seed_lines) in gemm_relu_schedules.SCHEDULES.items():
        base = {t: seen[baseline.name, t] for t in targets}
        mine = {t: seen[name, t] for t in targets}
        effects.append(
            VariantEffect(
                variant=name,
                dimension=dimension,
                source_lines=source_lines_changed(base_build, build),
                seed_source_lines=seed_lines,
                same_dataflow=dataflow(_variant(name).prim_func(**PROBLEM_SHAPE)) == base_flow,
                cuda_lines_changed={t: changed_cuda_lines(base[t][0], mine[t][0]) for t in targets},
                facts_changed={t: _changed_fields(base[t][1], mine[t][1]) for t in targets},
            )
        )
    return effects


def _cuda_and_facts(lowering: Any) -> tuple[str, dict[str, Any]]:
    return normalize_cuda(lowering.cuda), extract_facts(lowering)


def _changed_fields(baseline: dict[str, Any], variant: dict[str, Any]) -> list[str]:
    """Fact fields that differ, list indices dropped (`sync.cp_async_wait`, not `...wait.0`), sorted."""
    paths = [line.split(":")[0] for line in field_changes(baseline, variant)]
    fields = {".".join(p for p in path.split(".") if not p.isdigit()) for path in paths}
    return sorted(f for f in fields if not f.startswith("case."))


def render_summary(effects: list[VariantEffect]) -> str:
    """The committed summary: a Markdown table per target, generated, never edited by hand."""
    targets = list(effects[0].cuda_lines_changed)
    lines = [
        "<!-- Written by `nox -s regen-golden` from the lowered kernels; never edit by hand. -->",
        f"# {FAMILY}: what each schedule annotation changes",
        "",
        "Source lines are counted against `v0_baseline` in `kernels/gemm_relu_schedules.py`.",
        "A variant whose CUDA is identical to the baseline's is an annotation with no effect on that target.",
        "",
        "| variant | dimension | source lines changed (seed says) | same dataflow |",
        "| --- | --- | --- | --- |",
    ]
    for e in effects:
        dataflow_verdict = "yes" if e.same_dataflow else "NO"
        lines.append(
            f"| {e.variant} | {e.dimension or '-'} | {e.source_lines} ({e.seed_source_lines}) | {dataflow_verdict} |"
        )
    for target in targets:
        lines += ["", f"## {target}", "", "| variant | CUDA vs baseline | facts that differ |", "| --- | --- | --- |"]
        for e in effects[1:]:
            changed = e.cuda_lines_changed[target]
            verdict = "**identical (no effect)**" if changed == 0 else f"{changed} lines changed"
            fields = ", ".join(f"`{f}`" for f in e.facts_changed[target]) or "none"
            lines.append(f"| {e.variant} | {verdict} | {fields} |")
    return "\n".join(lines) + "\n"


def no_effect(effects: list[VariantEffect]) -> dict[str, list[str]]:
    """target -> variants whose CUDA is byte-identical to the baseline's."""
    targets = list(effects[0].cuda_lines_changed)
    return {t: [e.variant for e in effects[1:] if e.cuda_lines_changed[t] == 0] for t in targets}
