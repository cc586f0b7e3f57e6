"""What each schedule choice contributes: variants with parameters changed one at a time, timed in one run.

A step is `family/variant` or `family/variant:name=value,name=value` (the variant with those
parameters replaced; a name that is one of the family's problem dimensions changes the problem).
Every step is compiled, checked against its family's reference on the given seeds and timed next
to its reference with the GPU session's own timing, all in one process, so the ratios are
comparable step to step. Steps have no snapshots: this is for tuning, not a gate.
"""

from __future__ import annotations

import ast
import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from tilelang_golden.catalog.cases import Case
from tilelang_golden.family import Family


class BadStep(ValueError):
    """A step that names no registered variant, or a malformed parameter; the message says which."""


@dataclass(frozen=True)
class Step:
    spec: str
    case: Case


def parse_step(spec: str, families: Sequence[Family], target: str) -> Step:
    """`family/variant[:name=value,...]` -> the case to time (values are Python literals)."""
    key, _, overrides = spec.partition(":")
    family_name, _, variant_name = key.partition("/")
    family = next((f for f in families if f.name == family_name), None)
    variant = next((v for v in family.variants if v.name == variant_name), None) if family else None
    if variant is None:
        raise BadStep(f"step {spec!r}: no registered variant {key!r}; name one as family/variant")
    params, shape = dict(variant.params), dict(variant.shape)
    for item in filter(None, overrides.split(",")):
        name, equals, text = item.partition("=")
        if not equals:
            raise BadStep(f"step {spec!r}: {item!r} is not name=value")
        try:
            value = ast.literal_eval(text.strip())
        except (ValueError, SyntaxError):
            raise BadStep(f"step {spec!r}: {text!r} is not a Python literal") from None
        (shape if name.strip() in family.shape else params)[name.strip()] = value
    changed = dataclasses.replace(variant, name=spec.partition("/")[2], params=params, shape=shape)
    return Step(spec, Case(family, changed, target))


def run_steps(specs: Sequence[str], rounds: int, seeds: Sequence[int], log: Callable[[str], None] = print) -> list[str]:
    """Time every step on the current GPU; the table's lines (ratio to the reference, change to the step before)."""
    from tilelang_golden.catalog.loading import load_families
    from tilelang_golden.gpu.measure.numerics import check_numerics
    from tilelang_golden.gpu.measure.timing import make_bench, measure_pairs
    from tilelang_golden.gpu.pairs import numerics_case, timed_pair
    from tilelang_golden.gpu.run.compile import compile_cases
    from tilelang_golden.gpu.run.device import require_cuda

    device = require_cuda()
    steps = [parse_step(spec, load_families().families, device.target) for spec in specs]
    compiled = compile_cases([s.case for s in steps])
    lines = [f"{device.name} ({device.target}), {rounds} rounds, seeds {list(seeds)}", ""]
    lines += [
        "| step | ms | reference ms | ratio to reference | vs the step before | numerics |",
        "|---|---|---|---|---|---|",
    ]
    pairs, numerics = [], {}
    for step, built in zip(steps, compiled, strict=True):
        if built.kernel is None:
            numerics[step.spec] = f"did not compile: {built.error}"
            continue
        checked = check_numerics([numerics_case(built)], seeds)[step.case.key]
        numerics[step.spec] = "pass" if checked.passed else "; ".join(checked.failures())
        if checked.passed:
            pairs.append(timed_pair(built, seeds[0]))  # keyed by the step's spec: its case key
    log(f"timing {len(pairs)} steps next to their references")
    measured = measure_pairs(pairs, rounds, make_bench(), seed=seeds[0])
    previous = None
    for step in steps:
        timing = measured.get(step.spec)
        if timing is None:
            lines.append(f"| {step.spec} | — | — | — | — | {numerics[step.spec]} |")
            continue
        change = "" if previous is None else f"{timing.ratio / previous - 1:+.1%}"
        lines.append(
            f"| {step.spec} | {timing.variant.median_ms:.3f} | {timing.reference.median_ms:.3f} | {timing.ratio:.3f} | "
            f"{change} | {numerics[step.spec]} |"
        )
        previous = timing.ratio
    return lines
