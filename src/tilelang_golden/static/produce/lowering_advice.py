"""What a case that does not lower (or whose CUDA NVIDIA's compiler rejects) is told to do, over every target its
variant fails on, so that one edit settles them all:

- the known cause of its error, where `known_failures` has it, with what to do;
- where the variant fails and where it lowers, among its family's targets;
- one change: the kernel is broken where it fails on every target; the family is written for one kind of target where
  it fails on every target of another kind (every HIP one) and lowers on the rest, `Family(targets=...)`; else fix the
  kernel or declare every failing target in one `Variant(..., does_not_lower=...)`, the known cause as its reason.

Where the variant fails is what the run's session found (`LoweringSession.outcomes`: the variant tried on every target
of its family, each lowered once per run); without it only the case's own target is known, and the advice covers it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence

from tilelang_golden.catalog.cases import Case
from tilelang_golden.family import targets_where
from tilelang_golden.static.produce.known_failures import known_failure
from tilelang_golden.static.snapshots.regen import regen_command
from tilelang_golden.targets import TARGETS

# target -> the error text the variant failed with there (TileLang's, or the compiler's), None where it lowered
Outcomes = Mapping[str, str | None]
# The reason a declaration holds until someone writes it.
PLACEHOLDER = "<why, in words>"
# Conditions on a target's record (tilelang_golden.targets.Target) that name targets as a family file does,
# `targets_where(lambda t: ...)`: a set of targets is written with the first that selects exactly it, else by name.
# Each is evaluated from this very text, so the advice cannot spell a condition that selects other targets.
CONDITIONS = (
    't.backend == "cuda"',
    't.backend == "hip"',
    "t.features.tma",
    "not t.features.tma",
    "t.features.software_pipelining and not t.features.tma",
    "t.features.tensor_memory",
    "(t.compute_capability or (0, 0)) >= (10, 0)",
)


def lowering_advice(case: Case, error: str, outcomes: Outcomes | None = None) -> str:
    """What to do about a case that failed with `error` (TileLang's or the compiler's text): its known cause, and one
    change covering every target of `outcomes` (the variant on the family's other targets) where it fails too."""
    found = {**(outcomes or {}), case.target: error}
    declared = case.variant.does_not_lower
    targets = tuple(t for t in TARGETS if t in case.family.target_names or t == case.target)  # a script's case too
    failing = [t for t in targets if t in declared or found.get(t) is not None]
    lowering = [t for t in targets if t in found and found[t] is None and t not in declared]
    surveyed = len(failing) + len(lowering) == len(targets)  # else only the case's own target is known
    lines = []
    for known in dict.fromkeys(filter(None, (known_failure(found.get(t) or "") for t in failing))):
        lines += [f"Known TileLang failure (seen with {known.seen_with}): {known.cause}; it occurs {known.where}."]
        lines += [f"What to do: {known.workaround}."]
    if surveyed and len(targets) > 1:
        marked = [f"{t} (declared)" if t in declared else t for t in failing]
        lines += [f"It fails on {_listed(marked)}" + (f" and lowers on {_listed(lowering)}." if lowering else ".")]
    file = case.family.file or f"kernels/{case.family.name}.py"
    reasons = {t: _reason(found[t]) for t in failing if t not in declared}
    if surveyed and not lowering:
        lines += [f"It fails on every target of its family: the kernel is broken; fix it in {file}."]
    elif surveyed and _one_kind(targets, failing):
        lines += _narrowing(case, failing, lowering, file)
        if len(case.family.variants) > 1:
            lines += ["or, if only this variant is (the family's other variants lower there), declare its failures:"]
            lines += _declaration(case, reasons)
    else:
        lines += [
            f"Fix the kernel in {file} and rerun; or, if it is right as written (TileLang's own example, a feature the "
            f"target lacks), declare it there and write its .error snapshot{'s' if len(reasons) > 1 else ''}:",
            *_declaration(case, reasons),
        ]
    return "\n".join(lines)


def _narrowing(case: Case, failing: Sequence[str], lowering: Sequence[str], file: str) -> list[str]:
    """The family named for the kind of target its variant lowers on, since it fails on every target of another."""
    dropped = [t for t in failing if t in case.variant.does_not_lower]
    return [
        f"It fails on every {TARGETS[failing[0]].language} target of its family and lowers on the others. Fix the "
        f"kernel in {file}; or, if it is written for {TARGETS[lowering[0]].language} only, say so there"
        + (f" (and drop the variant's does_not_lower entries for {_listed(dropped)})" if dropped else "")
        + ", then regenerate unfiltered (it deletes the snapshots of the targets left out):",
        f"    Family(..., targets={_named(lowering)})",
        f"    {regen_command()}",
    ]


def does_not_lower_line(case: Case, reasons: Mapping[str, str] | None = None) -> str:
    """The declaration that makes the variant's failures expected: its own entries, then `reasons` (target -> why;
    default: the case's own target, its reason to fill in); the targets that share a reason are written once."""
    added = {case.target: PLACEHOLDER} if reasons is None else reasons
    shared: dict[str, list[str]] = {}
    for target, why in {**case.variant.does_not_lower, **added}.items():
        shared.setdefault(why, []).append(target)
    parts = [
        f"{json.dumps(targets[0])}: {json.dumps(why)}"
        if len(targets) == 1
        else f"**{{target: {json.dumps(why)} for target in {_named(targets)}}}"
        for why, targets in shared.items()
    ]
    mapping = parts[0][2:] if len(parts) == 1 and parts[0].startswith("**") else "{" + ", ".join(parts) + "}"
    return f"Variant({json.dumps(case.variant.name)}, ..., does_not_lower={mapping})"


def _declaration(case: Case, reasons: Mapping[str, str]) -> list[str]:
    """The declaration and the regen that writes the `.error` snapshots of the targets it adds."""
    ids = " or ".join(f"{case.family.name}/{case.variant.name}/{target}" for target in reasons)
    return [f"    {does_not_lower_line(case, reasons)}", f"    {regen_command(ids)}"]


def _reason(error: str | None) -> str:
    known = known_failure(error or "")
    return known.reason if known else PLACEHOLDER


def _one_kind(targets: Sequence[str], failing: Sequence[str]) -> bool:
    """Whether `failing` is every one of `targets` of one backend (every HIP target, every CUDA one), and no other."""
    kinds = {TARGETS[t].backend for t in failing}
    return len(kinds) == 1 and set(failing) == {t for t in targets if TARGETS[t].backend in kinds}


def _named(targets: Sequence[str]) -> str:
    """`targets` as a family file names them: `targets_where(lambda t: ...)` where a condition of CONDITIONS selects
    exactly them, else by name (a list)."""
    for condition in CONDITIONS:
        if set(targets_where(eval(f"lambda t: {condition}"))) == set(targets):  # the module's own constants
            return f"targets_where(lambda t: {condition})"
    return json.dumps(list(targets))


def _listed(names: Sequence[str]) -> str:
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} and {names[-1]}"
