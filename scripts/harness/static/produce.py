"""What the harness produces for a case: normalized CUDA and facts, and the snapshot files for them."""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

from harness.family import CaseFacts
from harness.static import lowering_cache
from harness.static.cases import Case
from harness.static.facts import extract_facts
from harness.static.lowering import LoweringError, lower
from harness.static.normalize import normalize_cuda, normalize_error
from harness.static.snapshot import cuda_header, load_yaml, render_error, render_facts, strip_cuda_header


class NowLowers(RuntimeError):
    """A case declared not to lower (`Variant.does_not_lower`) lowered: the declaration is out of date."""

    def __init__(self, case: Case) -> None:
        self.case = case
        self.remedy = (
            f"now lowers on {case.target}: remove the declaration in {case.family.file} and run "
            f'`nox -s regen-golden -- -k "{case.id}"`'
        )
        super().__init__(f"{case.id}: {self.remedy}")


@dataclass(frozen=True)
class Produced:
    cuda: str  # normalized kernel source, without the snapshot header
    facts: dict[str, Any]


def produce(case: Case, *, fresh: bool = False) -> Produced:
    """The normalized source and facts of a case that lowers, read back from its snapshot files (once per
    process, or lowered again when `fresh`), so a case taken from the lowering cache reads as a lowered one."""
    files = case_files(case, fresh=fresh)
    source, facts = case.snapshot_files
    return Produced(strip_cuda_header(files[source]), load_yaml(files[facts]))


def case_facts(case: Case) -> CaseFacts:
    """What a family check sees of a case, from its (cached) lowering."""
    produced = produce(case)
    return CaseFacts(case.variant, case.target, case.params, produced.facts, produced.cuda)


# Compiler warnings that fail a case's static check unless its variant acknowledges them: a read before any
# write is a wrong result unless the kernel means it (Variant.acknowledged_warnings).
FAILING_WARNINGS = ("read before initialization",)


def unacknowledged_warnings(case: Case, facts: dict[str, Any]) -> str | None:
    """Why the warnings in a case's facts fail its check, with what to do; None when none does."""
    acknowledged = [part.lower() for part in case.variant.acknowledged_warnings]
    failing = [
        (kind, warning)
        for warning in facts["warnings"]
        for kind in FAILING_WARNINGS
        if kind in warning.lower() and not any(part in warning.lower() for part in acknowledged)
    ]
    if not failing:
        return None
    return (
        f"{case.id}: TileLang warned while lowering it:\n"
        + "\n".join(warning for _, warning in failing)
        + f"\nFix the kernel in {case.family.file}; if it is right as written, say why on variant "
        f'{case.variant.name!r}: Variant(acknowledged_warnings={{{failing[0][0]!r}: "<why>"}})'
    )


def error_text(case: Case, *, fresh: bool = False) -> str:
    """The `.error` snapshot of a case declared not to lower; NowLowers when it lowers."""
    try:
        lower(case, fresh=fresh)
    except LoweringError as error:
        cause = error.__cause__ or error  # TileLang's own error, not the harness's advice around it
        return render_error(
            case.id, case.target, case.does_not_lower, normalize_error(f"{type(cause).__name__}: {cause}")
        )
    raise NowLowers(case)


def case_files(case: Case, *, fresh: bool = False) -> dict[str, str]:
    """`{"<id>.cu": ..., "<id>.yaml": ...}` for one case, as snapshotted under golden/ (`.hip` for a HIP
    target); `{"<id>.error": ...}` for one declared not to lower. Once per process, from the active lowering
    cache when there is one (`harness.static.lowering_cache`); `fresh` lowers again and bypasses both."""
    if fresh:
        return _lowered_files(case, fresh=True)
    cache = lowering_cache.active()
    if cache is None:
        return _once(case)
    return cache.files(case, lambda: _once(case))


def _once(case: Case) -> dict[str, str]:
    # A case declared not to lower is cheap to redo (its lowering is memoized); the memo below is keyed on
    # the case's id, which the declaration does not change.
    return _lowered_files(case) if case.does_not_lower is not None else _case_files(case)


@functools.cache
def _case_files(case: Case) -> dict[str, str]:
    return _lowered_files(case)


def _lowered_files(case: Case, *, fresh: bool = False) -> dict[str, str]:
    if case.does_not_lower is not None:
        (path,) = case.snapshot_files
        return {path: error_text(case, fresh=fresh)}
    lowering = lower(case, fresh=fresh)
    source, facts = case.snapshot_files
    return {
        source: cuda_header(case.id, case.target) + normalize_cuda(lowering.cuda),
        facts: render_facts(extract_facts(lowering)),
    }
