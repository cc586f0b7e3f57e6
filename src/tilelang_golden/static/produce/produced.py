"""What the harness makes of a case's files: its source and facts read back, the warnings that fail it, the
`.error` of a case declared not to lower.

The files themselves are rendered by their kinds (`tilelang_golden.static.snapshots.kinds`); what a run lowers and
keeps is its
session's (`tilelang_golden.static.produce.session`)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from tilelang_golden.family import CaseFacts
from tilelang_golden.static.cases import Case
from tilelang_golden.static.produce.lowering import Lowering, LoweringError
from tilelang_golden.static.produce.normalize import normalize_error
from tilelang_golden.static.snapshots.snapshot import load_yaml, render_error, strip_cuda_header


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


def read_produced(case: Case, files: dict[str, str]) -> Produced:
    """The normalized source and facts of a case that lowers, read back from its snapshot files, so a case taken
    from the lowering cache reads as a lowered one."""
    return Produced(strip_cuda_header(files[case.source_file]), load_yaml(files[case.facts_file]))


def case_facts(case: Case, produced: Produced) -> CaseFacts:
    """What a family check sees of a case."""
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


def error_text(case: Case, lower: Callable[[], Lowering]) -> str:
    """The `.error` snapshot of a case declared not to lower; NowLowers when `lower()` succeeds."""
    try:
        lower()
    except LoweringError as error:
        cause = error.__cause__ or error  # TileLang's own error, not the harness's advice around it
        return render_error(
            case.id, case.target, case.does_not_lower, normalize_error(f"{type(cause).__name__}: {cause}")
        )
    raise NowLowers(case)
