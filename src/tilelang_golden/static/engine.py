"""One call per check that produces snapshot files: produce, keep a pending copy, compare or write, one result.

`check_case` is what the static session's item for a case runs and what the upgrade preview runs for every case;
`check_files` serves any producer of snapshot files (a family's summary). Both return a CheckResult
(tilelang_golden.static.snapshots.results) and raise nothing a case causes: a lowering error, a regen refused, a
declaration out of date, facts that contradict the machine code are results, in the run's own words."""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from tilelang_golden.catalog.build import BuildError
from tilelang_golden.catalog.cases import Case
from tilelang_golden.environment import running_under_ci
from tilelang_golden.regressions import REASON_PLACEHOLDER, RegressionPolicy
from tilelang_golden.static.kinds import compare_case, kind_of
from tilelang_golden.static.produce.lowering import LoweringError
from tilelang_golden.static.produce.produced import (
    NowLowers,
    first_snapshot_spills,
    unacknowledged_contradictions,
    unacknowledged_warnings,
)
from tilelang_golden.static.session import LoweringSession
from tilelang_golden.static.snapshots.acknowledged import read_ledger, record_acknowledged
from tilelang_golden.static.snapshots.case_files import case_files, facts_file, machine_file, source_file
from tilelang_golden.static.snapshots.changes import CaseOutcome, FileChange
from tilelang_golden.static.snapshots.golden import RegenRefused, regen_files
from tilelang_golden.static.snapshots.regen import regen_command
from tilelang_golden.static.snapshots.results import CheckResult, Status
from tilelang_golden.static.snapshots.snapshot import (
    CorruptSnapshot,
    SnapshotStore,
    installed_tilelang_version,
    load_yaml,
)

# Produces a check's files: `fresh=True` lowers again, past every cache (a regen compares the two).
Producer = Callable[[bool], dict[str, str]]
# Reads a check's produced files and says why they may be neither written nor passed (None: they may).
Vet = Callable[[Mapping[str, str]], str | None]


@dataclass(frozen=True)
class Declarations:
    """What the declarations behind a check's files hold it to besides its regression classes: the file that declares
    them (`file`, which a refusal names) and the vetting of what it produced (`vet`: a case's contradictions)."""

    file: str = ""
    vet: Vet | None = None


# Summaries and other files are judged by the built-in regression classes alone (they have none to find).
BUILT_IN = RegressionPolicy()
# A skip's reason shows its cause's first lines: enough to act on whatever `-k` selected, the rest in the check
# that owns the cause.
REASON_LINES = 3


def first_lines(error: Exception) -> str:
    """An error's first REASON_LINES lines, and how many more it has."""
    lines = str(error).splitlines()
    return "\n".join(lines[:REASON_LINES]) + (
        f"\n... ({len(lines) - REASON_LINES} more lines)" if len(lines) > REASON_LINES else ""
    )


def _version_note(golden: SnapshotStore) -> str | None:
    try:
        manifest = golden.read_manifest()
    except CorruptSnapshot:
        return None  # test_manifest reports it
    installed = installed_tilelang_version()
    if manifest is not None and manifest["tilelang"] != installed:
        return f"note: {golden.prefix} was produced with TileLang {manifest['tilelang']}, this run uses {installed}"
    return None


def _failed(result: CheckResult, *lines: str | None, **fields) -> CheckResult:
    return replace(result, status=Status.FAILED, text="\n".join(line for line in lines if line), **fields)


def regression_refusal(result: CheckResult, golden: SnapshotStore, declared_in: str) -> str:
    """Why a regen did not write a case whose change is a regression, and the commands that write it with a reason."""
    unacknowledged = result.unacknowledged
    names = list(dict.fromkeys(r.name for r in unacknowledged))
    classes = ", ".join(f'"{name}": "{REASON_PLACEHOLDER}"' for name in names)
    lines = [
        f"{result.check}: nothing under {golden.prefix} was written: its change is a regression, which a regen "
        "writes only when acknowledged",
        *(f"  {regression.line()}" for regression in unacknowledged),
        "If it is intended, say why, in the regen that writes it:",
        f"  {regen_command(result.accept or result.check, names)}",
        f"or in the variant's declaration ({declared_in}): acknowledged_regressions={{{classes}}}",
    ]
    if running_under_ci():
        options = f"{','.join(names)}={REASON_PLACEHOLDER}"
        lines.append(
            f"or, for CI to make the patch: dispatch the regen workflow again with accept_regression: {options}"
        )
    return "\n".join(lines)


def check_files(
    result: CheckResult,
    produce: Producer,
    golden: SnapshotStore,
    pending: SnapshotStore,
    regen: bool,
    declared_failure: bool = False,
    policy: RegressionPolicy = BUILT_IN,
    declarations: Declarations = Declarations(),
) -> CheckResult:
    """The produced files written to `pending`, then written to `golden` (regen: when a second, fresh production
    agrees, `declarations.vet` finds nothing and no regression of `policy`'s classes is unacknowledged) or compared
    with it, failing where `declarations.vet` finds something; `result` names the check (its `accept`: the -k that
    selects it). `declared_failure`: the one file is the `.error` of a case declared not to lower;
    `declarations.file`: the file whose declaration acknowledges a regression."""
    try:
        produced = produce(False)
        for path, text in produced.items():
            pending.write(path, text)
        comparison = compare_case(produced, golden, policy.classes)
        result = replace(result, regressions=policy.acknowledged(comparison.regressions))
        vetted = declarations.vet(produced) if declarations.vet else None
        if regen:
            if vetted:  # what is wrong with the files themselves comes before what changed
                return _failed(result, vetted, outcome=comparison.outcome(declared_failure), accept=None)
            if result.unacknowledged:
                refusal = regression_refusal(result, golden, declarations.file)
                return _failed(result, refusal, outcome=CaseOutcome.CHANGED, mismatches=comparison.mismatches)
            acknowledged = [r for r in result.regressions if r.acknowledged]
            if acknowledged:
                read_ledger(golden, result.check)  # a corrupt one stops the case before its snapshots are written
            written = regen_files(produced, produce(True), golden)
            if acknowledged:
                version = installed_tilelang_version()
                written |= record_acknowledged(golden, result.check, acknowledged, version)
            return replace(result, written=written)
    except CorruptSnapshot as error:  # the family's ledger of acknowledged regressions
        return _failed(result, str(error), f"nothing under {golden.prefix} was written for it", accept=None)
    except LoweringError as error:
        lines = (str(error), f"nothing under {golden.prefix} was written for it")
        return _failed(result, *lines, outcome=CaseOutcome.FAILED, accept=None)
    except RegenRefused as error:
        return _failed(result, str(error), accept=None)
    except NowLowers as error:  # the snapshot is out of date because the declaration is: the remedy says both
        case = error.case
        found = tuple(
            kind_of(path).mismatch(f"{golden.prefix}{path}", FileChange.NOW_LOWERS, reason=case.not_lowering_note)
            for path in case_files(case)
        )
        lines = [f"{m.path}: {m.headline}" for m in found]
        return _failed(result, *lines, error.remedy, outcome=CaseOutcome.NOW_LOWERS, mismatches=found)
    result = replace(result, outcome=comparison.outcome(declared_failure), fields=comparison.fields)
    if not comparison.mismatches:
        return _failed(result, vetted, accept=None) if vetted else result
    regressions = [f"regression: {r.line()}" for r in result.regressions]
    lines = [f"{m.path}: {m.headline}" for m in comparison.mismatches]
    command = regen_command(result.accept, [r.name for r in result.unacknowledged])
    accept = None if vetted else f"to accept these changes: {command}"  # a regen would refuse them as they are
    found = (vetted, *regressions, *lines, _version_note(golden), accept)
    return _failed(result, *found, mismatches=comparison.mismatches, accept=None if vetted else result.accept)


def check_case(
    case: Case,
    lowerings: LoweringSession,
    golden: SnapshotStore,
    pending: SnapshotStore,
    regen: bool = False,
    accepted: Mapping[str, str] = {},
    declaration_checked: bool = True,
) -> CheckResult:
    """One case: when its variant does not build, skipped where the run checks its family's declaration
    (test_family_declaration says why, once per family; `declaration_checked`), failed with the reason where it does
    not; else its files compared with (or written to) `golden`, failing (and none of them written) where its facts
    contradict its machine facts or a compiler warning means a wrong result, until the kernel is fixed or the variant
    says why it is right: a static run says so whether or not a snapshot is committed, so a first run names what the
    regen would refuse. A first snapshot's spills are the result's findings.
    `accepted`: regression class -> reason, from the regen's `--accept-regression` options."""
    result = CheckResult(case.id, case=(case.family.name, case.variant.name, case.target), accept=case.id)
    started, fresh_seconds = time.perf_counter(), 0.0  # the result's `seconds`: what producing the case costs a run
    try:
        lowerings.build(case.family, case.variant)
    except BuildError as error:
        if not declaration_checked:
            return _failed(result, f"{error}\nnothing was written for it", accept=None)
        reason = f"not run, because variant {case.variant.name!r} does not build: {first_lines(error)}"
        return replace(result, status=Status.SKIPPED, accept=None, text=reason)
    declared = case.does_not_lower is not None
    policy = RegressionPolicy(case.family.regression_classes, case.variant.acknowledged_regressions, accepted)
    made: dict[str, str] = {}  # what this run produced, for what is said of it beside the check
    machine = machine_file(case)
    first = machine is not None and golden.read(machine) is None  # no machine facts snapshot yet: read before writing
    parse = functools.cache(load_yaml)  # the produced facts, read by the contradiction, spill and warning checks once

    def produce(fresh: bool) -> dict[str, str]:
        nonlocal fresh_seconds
        begun = time.perf_counter()
        files = lowerings.files(case, fresh=fresh)
        if fresh:  # the regen's second lowering, which no static run pays
            fresh_seconds += time.perf_counter() - begun
        else:
            made.update(files)
        return files

    consequence = f", so nothing under {golden.prefix} was written for it" if regen else ""
    vet = functools.partial(_refusals, case, pending.prefix, consequence, parse)
    declarations = Declarations(case.family.file or case.family.name, vet)
    result = check_files(result, produce, golden, pending, regen, declared, policy, declarations)
    spilled = first_snapshot_spills(case, made, (golden if result.written else pending).prefix, parse) if first else ()
    seconds = round(time.perf_counter() - started - fresh_seconds, 3)
    findings = (*result.findings, *spilled)
    result = replace(result, lowering=lowerings.sources.get(case.id, ""), seconds=seconds, findings=findings)
    if result.outcome in (CaseOutcome.PASSED, CaseOutcome.CHANGED, CaseOutcome.CORRUPT) and not declared:
        result = replace(result, source_change=_source_change(result, golden.prefix + source_file(case)))
    return result


def _refusals(
    case: Case, where: str, consequence: str, parse: Callable[[str], Any], files: Mapping[str, str]
) -> str | None:
    """What a regen refuses to write in a case's produced `files`, found whatever the snapshots hold (so a first run
    says it beside `no snapshot`): facts that contradict the machine code, a warning that means a wrong result.
    `where`: the folder holding the files; `consequence`: what the run did about it."""
    found = [unacknowledged_contradictions(case, files, where, consequence, parse)]
    if facts_file(case) in files:  # a case declared not to lower has its `.error` alone
        found.append(unacknowledged_warnings(case, parse(files[facts_file(case)]), consequence))
    return "\n".join(refusal for refusal in found if refusal) or None


def _source_change(result: CheckResult, path: str) -> FileChange:
    """The kernel source's own change: UNCHANGED where it equals its snapshot."""
    return next((m.kind for m in result.mismatches if m.path == path), FileChange.UNCHANGED)
