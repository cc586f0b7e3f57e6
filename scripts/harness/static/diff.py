"""The comparison engine: how a case's snapshots differ from what the harness produced now.

One Mismatch per differing file, with readable field changes and diffs, and the case's class drawn
from them (`compare_case`). The static check fails a case on these records and the upgrade preview
counts their class, so a change is classified here and nowhere else."""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from harness.static.changes import CaseOutcome, FactChange, FileChange, Mismatch
from harness.static.renaming import classify, comments
from harness.static.snapshot import CorruptSnapshot, SnapshotStore, load_yaml, parse_facts, strip_cuda_header
from harness.targets import SOURCE_SUFFIXES

MAX_DIFF_LINES = 120


def _changes(old: dict[str, Any], new: dict[str, Any]) -> list[tuple[list[Any], str, str]]:
    """(path as keys and indices, before, after) per changed field, via deepdiff."""
    from deepdiff import DeepDiff

    diff = DeepDiff(old, new, verbose_level=2, view="tree")
    changes = []
    for change_type in sorted(diff):
        for change in diff[change_type]:
            before = "<absent>" if change_type.endswith("_added") else _short(change.t1)
            after = "<absent>" if change_type.endswith("_removed") else _short(change.t2)
            changes.append((change.path(output_format="list"), before, after))
    return changes


def _kernel_names(facts: dict[str, Any]) -> list[str]:
    kernels = facts.get("kernels")
    if not isinstance(kernels, list):
        return []
    return [str(k.get("name", f"kernel {i}")) if isinstance(k, dict) else f"kernel {i}" for i, k in enumerate(kernels)]


def fact_changes(old: dict[str, Any], new: dict[str, Any]) -> list[FactChange]:
    """One record per changed field. Per-kernel facts (`kernels.<i>.<path>`) lose their `kernels.<i>`
    prefix and are named by their kernel only where the module launches several."""
    names = _kernel_names(new) or _kernel_names(old)
    several = len(names) > 1
    found = []
    for path, before, after in _changes(old, new):
        kernel = ""
        if len(path) > 2 and path[0] == "kernels" and isinstance(path[1], int):
            kernel = (names[path[1]] if path[1] < len(names) else f"kernel {path[1]}") if several else ""
            path = path[2:]
        found.append(FactChange(tuple(path), before, after, kernel))
    return found


def changed_fields(old: dict[str, Any], new: dict[str, Any]) -> list[str]:
    """Fact fields that differ, list indices and numeric keys dropped (`sync.cp_async_wait`, not
    `...wait.0`; `loops.unrolled`, not `loops.unrolled.4`), sorted; the case's own name and
    parameters left out (they differ between any two variants). A kernel's field is named as it is
    within the kernel when both sides launch one kernel (`sync.cp_async_wait`), and under the kernel's
    name when either launches several (`kernels.main_kernel_1.sync.cp_async_wait`). Built from the
    paths, not from the printed lines, so a key holding `:` (a C++ name) stays whole."""
    kernels = [facts.get("kernels") if isinstance(facts.get("kernels"), list) else [] for facts in (old, new)]
    one_kernel = [len(side) for side in kernels] == [1, 1]
    fields = set()
    for path, _, _ in _changes(old, new):
        if path[:1] == ["kernels"] and len(path) > 1 and isinstance(path[1], int):
            sides = [side[path[1]] for side in reversed(kernels) if path[1] < len(side)]
            name = next((kernel["name"] for kernel in sides if isinstance(kernel, dict) and "name" in kernel), path[1])
            path = path[2:] if one_kernel else ["kernels", str(name), *path[2:]]
        fields.add(".".join(str(p) for p in path if not isinstance(p, int)))
    return sorted(f for f in fields if not f.startswith(("case.", "params.")))


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 100 else text[:97] + "..."


def text_diff(old: str, new: str, path: str, prefixes: tuple[str, str], context: int = 3) -> list[str]:
    """Unified diff (limited context, capped length) of two texts of `path`, named by the folder prefixes of
    their sides (`golden/`, `produced/`)."""
    before, after = (f"{prefix}{path}" for prefix in prefixes)
    lines = difflib.unified_diff(old.splitlines(), new.splitlines(), before, after, n=context, lineterm="")
    return _capped(list(lines))


def _capped(lines: list[str]) -> list[str]:
    if len(lines) > MAX_DIFF_LINES:
        hidden = len(lines) - MAX_DIFF_LINES
        lines = lines[:MAX_DIFF_LINES] + [f"... {hidden} more diff lines; the full file is in the pending folder"]
    return lines


def describe_mismatch(path: str, golden: str | None, produced: str, prefix: str) -> Mismatch | None:
    """How one produced file differs from its snapshot; None when they match byte for byte.

    `prefix` is the snapshot store's folder prefix (`golden/`), which names the file in reports."""
    if golden == produced:
        return None
    shown = f"{prefix}{path}"
    if golden is None:
        return Mismatch(shown, FileChange.MISSING)
    if path.endswith(".yaml"):
        try:
            old = parse_facts(golden, shown)
        except CorruptSnapshot as error:
            # The error names the file first, for readers of the exception; the record keeps the path apart.
            return Mismatch(shown, FileChange.CORRUPT, reason=str(error).removeprefix(f"{shown}: "))
        changes = fact_changes(old, load_yaml(produced))
        if changes:
            return Mismatch(shown, FileChange.FACTS, facts=tuple(changes))
    raw = tuple(text_diff(golden, produced, path, (prefix, "produced/")))
    if not path.endswith(tuple(SOURCE_SUFFIXES.values())):
        return Mismatch(shown, FileChange.TEXT, diff=raw)
    old_cuda, new_cuda = strip_cuda_header(golden), strip_cuda_header(produced)
    found = classify(old_cuda, new_cuda, (f"{shown} (locals renamed as produced)", f"produced/{path}"))
    if found.renamed_only and not found.renaming:  # the same code token for token
        same_comments = comments(old_cuda) == comments(new_cuda)
        return Mismatch(shown, FileChange.WHITESPACE if same_comments else FileChange.COMMENTS, diff=raw)
    if found.renamed_only:
        return Mismatch(shown, FileChange.RENAMED, diff=raw, renaming=tuple(found.renaming.items()))
    # The diff with the renaming undone holds every real change; the raw one is `diff -u` of the two files.
    canonical = tuple(_capped(found.canonical_diff))
    if found.moved:
        return Mismatch(
            shown, FileChange.MOVED, diff=canonical, renaming=tuple(found.renaming.items()), moved=found.moved
        )
    return Mismatch(shown, FileChange.SOURCE, diff=canonical)


# A case's class is its most telling file's: a snapshot it cannot be compared with first, then a fact change
# (which names what the source change did), then the kernel source's class, then any other text.
CASE_PRECEDENCE = (
    FileChange.MISSING,
    FileChange.CORRUPT,
    FileChange.FACTS,
    FileChange.SOURCE,
    FileChange.MOVED,
    FileChange.RENAMED,
    FileChange.COMMENTS,
    FileChange.WHITESPACE,
    FileChange.TEXT,
)


@dataclass(frozen=True)
class CaseComparison:
    """How one case's produced files compare with their snapshots: the static check fails the case on its
    mismatches, the upgrade preview reports its change and outcome."""

    files: Mapping[str, Mismatch | None]  # per produced file (as named inside the store): its record, None if equal
    fields: tuple[str, ...] = ()  # the changed fact fields (changed_fields), where a facts file changed

    @property
    def mismatches(self) -> tuple[Mismatch, ...]:
        """The differing files' records, in the produced files' order."""
        return tuple(found for found in self.files.values() if found is not None)

    def change_of(self, path: str) -> FileChange:
        """One file's change: UNCHANGED where it equals its snapshot."""
        found = self.files[path]
        return FileChange.UNCHANGED if found is None else found.kind

    @property
    def change(self) -> FileChange:
        """The case's change (CASE_PRECEDENCE): UNCHANGED where every file equals its snapshot."""
        kinds = {found.kind for found in self.mismatches}
        return next((kind for kind in CASE_PRECEDENCE if kind in kinds), FileChange.UNCHANGED)

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


def compare_case(produced: Mapping[str, str], golden: SnapshotStore) -> CaseComparison:
    """Every produced file of a case (or a summary) against its snapshot in `golden`."""
    snapshots = {path: golden.read(path) for path in produced}
    files = {path: describe_mismatch(path, snapshots[path], text, golden.prefix) for path, text in produced.items()}
    fields: tuple[str, ...] = ()
    for path, found in files.items():
        if found is not None and found.kind is FileChange.FACTS:  # both sides parsed: the snapshot is not corrupt
            old = parse_facts(snapshots[path] or "", found.path)
            fields += tuple(changed_fields(old, load_yaml(produced[path])))
    return CaseComparison(files, fields)
