"""What the harness makes of a case besides its files: the warnings and the contradictions that fail it, the spills a
first snapshot is written with, the `.error` of a case declared not to lower.

The files themselves are rendered by their kinds (`tilelang_golden.static.kinds`); what a run lowers and keeps is its
session's (`tilelang_golden.static.session`)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from tilelang_golden.catalog.cases import Case
from tilelang_golden.contradictions import find_contradictions, refusal, spills, unacknowledged
from tilelang_golden.static.produce.lowering import Lowering, LoweringError
from tilelang_golden.static.produce.machine_code import CompileError, compile_lowering
from tilelang_golden.static.produce.uninitialized import CERTAIN
from tilelang_golden.static.snapshots.case_files import facts_file, machine_file
from tilelang_golden.static.snapshots.normalize import normalize_error
from tilelang_golden.static.snapshots.regen import regen_command
from tilelang_golden.static.snapshots.snapshot import load_yaml, render_error
from tilelang_golden.targets import TARGETS


class NowLowers(RuntimeError):
    """A case declared not to lower (`Variant.does_not_lower`) lowered: the declaration is out of date."""

    def __init__(self, case: Case) -> None:
        self.case = case
        self.remedy = (
            f"now lowers on {case.target}: remove the declaration in {case.family.file} and run "
            f"`{regen_command(case.id)}`"
        )
        super().__init__(f"{case.id}: {self.remedy}")


# Warnings that fail a case's static check unless its variant acknowledges them (Variant.acknowledged_warnings): a read
# before any write is a wrong result unless the kernel means it. TileLang's own check names a buffer nothing writes at
# all; the harness's (uninitialized) a shared buffer read before its first write, failing only where that is certain.
FAILING_WARNINGS = ("read before initialization", CERTAIN)


def unacknowledged_warnings(case: Case, facts: dict[str, Any], consequence: str = "") -> str | None:
    """Why the warnings in a case's facts fail its check, with what to do; None when none does. `consequence`: what
    the run did about it (`, so nothing under golden/ was written for it`)."""
    acknowledged = [part.lower() for part in case.variant.acknowledged_warnings]
    failing = [
        (kind, warning)
        for warning in facts["warnings"]
        for kind in FAILING_WARNINGS
        if kind in warning.lower() and not any(part in warning.lower() for part in acknowledged)
    ]
    if not failing:
        return None
    kinds = ", ".join(f'{kind!r}: "<why>"' for kind in dict.fromkeys(kind for kind, _ in failing))
    return (
        f"{case.id}: what its lowering warned about fails its check{consequence}:\n"
        + "\n".join(warning for _, warning in failing)
        + f"\nFix the kernel in {case.family.file}; if it is right as written, say why on variant "
        f"{case.variant.name!r}: Variant(acknowledged_warnings={{{kinds}}})"
    )


def unacknowledged_contradictions(
    case: Case, files: Mapping[str, str], where: str, consequence: str = "", parse: Callable[[str], Any] = load_yaml
) -> str | None:
    """Why a case's produced `files` fail: its facts ask for what its machine code does not hold
    (tilelang_golden.contradictions) and its variant does not say why that is intended; None where they agree or the
    case has no machine facts. `where`: the folder that holds the produced files (the message names them there);
    `consequence`: what the run did about it (`, so nothing under golden/ was written for it`); `parse`: how a file
    is read (a caller that reads them again passes a memo)."""
    machine = machine_file(case)
    if machine not in files or facts_file(case) not in files:
        return None
    found = find_contradictions(parse(files[facts_file(case)]), parse(files[machine]))
    left = unacknowledged(found, case.variant.acknowledged_contradictions)
    if not left:
        return None
    files_named = f"{where}{case.id}.yaml, .machine.yaml"
    what = f"{case.id}: its facts and its machine facts contradict each other{consequence} ({files_named})"
    return refusal(what, left, case.family.file or f"kernels/{case.family.name}.py", case.variant.name)


def first_snapshot_spills(
    case: Case, files: Mapping[str, str], where: str, parse: Callable[[str], Any] = load_yaml
) -> tuple[str, ...]:
    """One line per kernel that spills registers in a case's produced `files`, for a case that has no machine facts
    snapshot yet: no regression class compares a first snapshot with anything, so its spills are said, not written
    silently. `where`: the folder that holds the file."""
    machine = machine_file(case)
    if machine not in files:
        return ()
    return tuple(
        f"{where}{machine}: first snapshot of a kernel that spills, {kernel} (the spills class guards it from now on)"
        for kernel in spills(parse(files[machine]))
    )


def error_text(case: Case, lower: Callable[[], Lowering]) -> str:
    """The `.error` snapshot of a case declared not to lower: TileLang's error, or on a CUDA target NVIDIA's
    compiler's; NowLowers when `lower()` succeeds and its CUDA compiles."""
    try:
        lowering = lower()
        if TARGETS[case.target].backend == "cuda":
            compile_lowering(lowering)
    except CompileError as error:
        return render_error(case.id, case.target, case.does_not_lower, normalize_error(error.compiler_message))
    except LoweringError as error:
        cause = error.__cause__ or error  # TileLang's own error, not the harness's advice around it
        return render_error(
            case.id, case.target, case.does_not_lower, normalize_error(f"{type(cause).__name__}: {cause}")
        )
    raise NowLowers(case)
