"""Snapshot kinds: what each file under golden/ is, in one class per kind.

A kind names its files (a suffix, which the snapshot layer's naming rules give to the cases that have it), renders
it from a case's lowering, reads it back, compares a snapshot of it with what was produced now (a Mismatch, whose
`subject` is the words every report uses for the file), so adding a kind (PTX, SASS, a HIP assembly) is one class
here, its line in tilelang_golden.static.snapshots.case_files, and its tests.
`compare_case` compares a case's files, each by its kind.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from tilelang_golden.regressions import REGRESSION_CLASSES, Regression, RegressionClass, find_regressions
from tilelang_golden.static.snapshots.case_files import ERROR_SUFFIX, FACTS_SUFFIX, MACHINE_SUFFIX, case_suffixes
from tilelang_golden.static.snapshots.changes import CaseOutcome, FileChange, Mismatch, case_change
from tilelang_golden.static.snapshots.diff import capped, changed_fields, fact_changes, text_diff
from tilelang_golden.static.snapshots.normalize import normalized_source
from tilelang_golden.static.snapshots.renaming import classify, comments
from tilelang_golden.static.snapshots.snapshot import (
    MACHINE_HEADER,
    CorruptSnapshot,
    SnapshotStore,
    cuda_header,
    load_yaml,
    parse_facts,
    parse_machine_facts,
    render_facts,
    strip_cuda_header,
)
from tilelang_golden.targets import SOURCE_SUFFIXES

if TYPE_CHECKING:
    from tilelang_golden.catalog.cases import Case
    from tilelang_golden.static.produce.lowering import Lowering
    from tilelang_golden.static.produce.machine_code import MachineCode

Lower = Callable[[], "Lowering"]  # lowers the case once (a session memoizes it); LoweringError where it does not


@dataclass(frozen=True)
class CaseInputs:
    """What the kinds render a case's files from: its lowering, and the machine code of its CUDA modules, which a
    session may have compiled with other cases' (`machine_code.compile_together`); compiled alone otherwise."""

    lower: Lower
    compiled: Callable[[], list[MachineCode]] | None = None

    def machine_code(self) -> list[MachineCode]:
        if self.compiled is not None:
            return self.compiled()
        from tilelang_golden.static.produce.machine_code import compile_lowering  # it compiles: CompileError

        return compile_lowering(self.lower())


class SnapshotKind:
    """A text file: rendered as is, compared line by line. The base of every kind, and the kind of a file no other
    kind claims."""

    suffix: str = ""  # how its paths end
    subject: str = "text"  # what reports call the file

    def applies_to(self, case: Case) -> bool:
        """Whether `case` produces a file of this kind: the snapshot layer's naming rules say which files a case has
        (tilelang_golden.static.snapshots.case_files); a kind that no case produces, a summary, says no."""
        return bool(self.suffix) and self.suffix in case_suffixes(case)

    def render(self, case: Case, inputs: CaseInputs) -> str:
        raise NotImplementedError(f"{type(self).__name__} is not produced by a case")

    def read(self, text: str, path: str) -> Any:
        """The snapshot's content as the harness uses it; CorruptSnapshot naming `path` where it cannot be read."""
        return text

    def compare(self, path: str, golden: str, produced: str, prefix: str) -> Mismatch:
        """How a produced file differs from its (different) snapshot; `prefix` names the snapshot's folder."""
        return self.mismatch(prefix + path, FileChange.TEXT, diff=self.raw_diff(path, golden, produced, prefix))

    def mismatch(self, path: str, kind: FileChange, **details: Any) -> Mismatch:
        return Mismatch(path, kind, subject=self.subject, **details)

    @staticmethod
    def raw_diff(path: str, golden: str, produced: str, prefix: str) -> tuple[str, ...]:
        return tuple(text_diff(golden, produced, path, (prefix, "produced/")))


@dataclass(frozen=True)
class KernelSource(SnapshotKind):
    """The normalized kernel source of a case that lowers, on the targets of one backend (`.cu`, `.hip`); compared
    token for token, so that whitespace, comments, renamed locals and moved declarations are told apart."""

    backend: str

    @property
    def suffix(self) -> str:  # type: ignore[override]
        return SOURCE_SUFFIXES[self.backend]

    @property
    def subject(self) -> str:  # type: ignore[override]
        return self.backend.upper()

    def render(self, case: Case, inputs: CaseInputs) -> str:
        kernels = [(step.name, step.cuda) for step in inputs.lower().kernels]
        return cuda_header(case.id, case.target) + normalized_source(kernels)

    def read(self, text: str, path: str) -> str:
        return strip_cuda_header(text)

    def compare(self, path: str, golden: str, produced: str, prefix: str) -> Mismatch:
        shown, raw = prefix + path, self.raw_diff(path, golden, produced, prefix)
        old, new = self.read(golden, path), self.read(produced, path)
        found = classify(old, new, (f"{shown} (locals renamed as produced)", f"produced/{path}"))
        if found.renamed_only and not found.renaming:  # the same code token for token
            change = FileChange.WHITESPACE if comments(old) == comments(new) else FileChange.COMMENTS
            return self.mismatch(shown, change, diff=raw)
        renaming = tuple(found.renaming.items())
        if found.renamed_only:
            return self.mismatch(shown, FileChange.RENAMED, diff=raw, renaming=renaming)
        # The diff with the renaming undone holds every real change; the raw one is `diff -u` of the two files.
        canonical = tuple(capped(found.canonical_diff))
        if found.moved:
            return self.mismatch(shown, FileChange.MOVED, diff=canonical, renaming=renaming, moved=found.moved)
        return self.mismatch(shown, FileChange.SOURCE, diff=canonical)


class Facts(SnapshotKind):
    """The facts of a case that lowers, as YAML; compared field by field."""

    suffix = FACTS_SUFFIX
    subject = "facts"

    def render(self, case: Case, inputs: CaseInputs) -> str:
        from tilelang_golden.static.produce.facts import (
            extract_facts,  # it imports TileLang: lowering is what it is for
        )

        return render_facts(extract_facts(inputs.lower()))

    def read(self, text: str, path: str) -> dict[str, Any]:
        return parse_facts(text, path)

    def compare(self, path: str, golden: str, produced: str, prefix: str) -> Mismatch:
        shown = prefix + path
        try:
            old = self.read(golden, shown)
        except CorruptSnapshot as error:
            # The error names the file first, for readers of the exception; the record keeps the path apart.
            return self.mismatch(shown, FileChange.CORRUPT, reason=str(error).removeprefix(f"{shown}: "))
        changes = fact_changes(old, load_yaml(produced))
        if changes:
            return self.mismatch(shown, FileChange.FACTS, facts=tuple(changes))
        return super().compare(path, golden, produced, prefix)  # equal as data: the text says what differs


class MachineFacts(Facts):
    """The machine code facts of a case on a CUDA target (registers, spills, occupancy, SASS instruction classes),
    from NVIDIA's compilers; compared field by field, as the facts are."""

    suffix = MACHINE_SUFFIX
    subject = "machine code"

    def render(self, case: Case, inputs: CaseInputs) -> str:
        from tilelang_golden.static.produce.machine_facts import machine_facts

        return render_facts(machine_facts(inputs.lower(), inputs.machine_code()), MACHINE_HEADER)

    def read(self, text: str, path: str) -> dict[str, Any]:
        return parse_machine_facts(text, path)


class DeclaredError(SnapshotKind):
    """The error TileLang raises for a case declared not to lower on its target (`Variant.does_not_lower`)."""

    suffix = ERROR_SUFFIX
    subject = "error"

    def render(self, case: Case, inputs: CaseInputs) -> str:
        from tilelang_golden.static.produce.produced import error_text  # NowLowers where it lowers and compiles

        return error_text(case, inputs.lower)


class Summary(SnapshotKind):
    """A family's summary of which annotations change its kernel source (tilelang_golden.static.variant_effects)."""

    suffix = ".md"
    subject = "summary"


# Every kind, in the order a case's files are listed (its source first); a path takes the first kind it ends with.
KINDS: tuple[SnapshotKind, ...] = (
    KernelSource("cuda"),
    KernelSource("hip"),
    MachineFacts(),
    Facts(),
    DeclaredError(),
    Summary(),
)


def kind_of(path: str) -> SnapshotKind:
    return next((kind for kind in KINDS if kind.suffix and path.endswith(kind.suffix)), SnapshotKind())


def case_kinds(case: Case) -> tuple[SnapshotKind, ...]:
    """The kinds of the files a case produces."""
    return tuple(kind for kind in KINDS if kind.applies_to(case))


def render_case(case: Case, inputs: CaseInputs) -> dict[str, str]:
    """`{"<id>.cu": ..., "<id>.yaml": ...}`: every file of a case, by its kinds, from its lowering."""
    return {f"{case.id}{kind.suffix}": kind.render(case, inputs) for kind in case_kinds(case)}


def describe_mismatch(path: str, golden: str | None, produced: str, prefix: str) -> Mismatch | None:
    """How one produced file differs from its snapshot, by its kind; None when they match byte for byte.

    `prefix` is the snapshot store's folder prefix (`golden/`), which names the file in reports."""
    if golden == produced:
        return None
    if golden is None:
        return kind_of(path).mismatch(prefix + path, FileChange.MISSING)
    return kind_of(path).compare(path, golden, produced, prefix)


@dataclass(frozen=True)
class CaseComparison:
    """How one case's produced files compare with their snapshots: the engine's result holds its mismatches and
    outcome."""

    files: Mapping[str, Mismatch | None]  # per produced file (as named inside the store): its record, None if equal
    fields: tuple[str, ...] = ()  # the changed fact fields (changed_fields), where a facts file changed
    regressions: tuple[Regression, ...] = ()  # the changed facts that make the kernel worse (regressions)

    @property
    def mismatches(self) -> tuple[Mismatch, ...]:
        """The differing files' records, in the produced files' order."""
        return tuple(found for found in self.files.values() if found is not None)

    @property
    def change(self) -> FileChange:
        """The case's change (changes.CASE_PRECEDENCE): UNCHANGED where every file equals its snapshot."""
        return case_change(self.mismatches)

    def outcome(self, declared_failure: bool = False) -> CaseOutcome:
        """What the comparison says of the case; `declared_failure`: its one file is the `.error` of a case declared
        not to lower, which either still holds the error or no longer does."""
        change = self.change
        if change is FileChange.MISSING:
            return CaseOutcome.NEW
        if change is FileChange.CORRUPT:
            return CaseOutcome.CORRUPT
        if change is FileChange.UNCHANGED:
            return CaseOutcome.STILL_FAILS if declared_failure else CaseOutcome.PASSED
        return CaseOutcome.FAILED if declared_failure else CaseOutcome.CHANGED


def compare_case(
    produced: Mapping[str, str], golden: SnapshotStore, classes: Sequence[RegressionClass] = REGRESSION_CLASSES
) -> CaseComparison:
    """Every produced file of a case (or a summary) against its snapshot in `golden`; the regressions of `classes`
    among the changed facts."""
    snapshots = {path: golden.read(path) for path in produced}
    files = {path: describe_mismatch(path, snapshots[path], text, golden.prefix) for path, text in produced.items()}
    fields: tuple[str, ...] = ()
    regressions: list[Regression] = []
    for path, found in files.items():
        if found is not None and found.kind is FileChange.FACTS:  # both sides parsed: the snapshot is not corrupt
            kind = kind_of(path)
            old, new = kind.read(snapshots[path] or "", found.path), load_yaml(produced[path])
            fields += tuple(changed_fields(old, new))
            regressions += find_regressions(kind.subject, old, new, classes)
    return CaseComparison(files, fields, merged_regressions(regressions, classes))


def merged_regressions(found: Sequence[Regression], classes: Sequence[RegressionClass]) -> tuple[Regression, ...]:
    """One regression per class and kernel, in the table's order, its changes from both files joined (`LDGSTS 24 ->
    none; cp.async 6 -> none`: the machine code's first)."""
    merged: dict[tuple[str, str], Regression] = {}
    for regression in found:
        key = (regression.name, regression.kernel)
        if key in merged:
            regression = replace(regression, change=f"{merged[key].change}; {regression.change}")
        merged[key] = regression
    order = [regression_class.name for regression_class in classes]
    return tuple(sorted(merged.values(), key=lambda regression: order.index(regression.name)))
