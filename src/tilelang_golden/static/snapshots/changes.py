"""What differs between a snapshot and what was produced now, as data: the vocabulary of every report.

A FileChange says how one file compares with its snapshot, a Mismatch records one that differs, and a
CaseOutcome says what a run makes of a case. A check's result (tilelang_golden.static.snapshots.results) is made of
these, and every report reads that result, so no layer parses another's prose. Standard library only: the CI summary
imports it without TileLang.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any


def lowering_line(sources: Mapping[str, int], cache: str | None = None) -> str:
    """`12 cases lowered, 270 from the lowering cache (build/lowering-cache)`: how a run got its cases."""
    where = f" ({cache})" if cache else ""
    return f"{sources.get('lowered', 0)} cases lowered, {sources.get('cache', 0)} from the lowering cache{where}"


def no_machine_facts_line(targets: Iterable[str]) -> str:
    """Said once per run that checks a HIP target: its cases have no machine facts, and why."""
    return (
        f"no machine facts on {', '.join(targets)}: PyPI has no ROCm compiler to build them with "
        "(docs/machine-facts.md says what it would take)"
    )


class FileChange(enum.Enum):
    """How one file compares with its snapshot (or a committed file with what is produced now); values are the
    words people read, but a kernel source's change is named by its language (`label`: `CUDA changed`)."""

    UNCHANGED = "identical"  # never a Mismatch: tilelang_golden.static.snapshots.diff gives None for an equal file
    MISSING = "no snapshot yet"
    CORRUPT = "corrupt snapshot"
    FACTS = "facts changed"
    COMMENTS = "comments changed only"  # the code is the same token for token
    WHITESPACE = "whitespace changed only"  # the code and its comments are the same token for token
    RENAMED = "identifiers renamed only"
    MOVED = "declarations moved only"  # local array declarations moved between scopes, nothing else
    SOURCE = "source changed"  # the kernel source changed: `CUDA changed`, or `HIP changed` for a `.hip` (label)
    TEXT = "text differs"  # a file that is neither kernel source nor facts (a summary), or facts equal as data
    ORPHAN = "orphan"  # a committed file that no registered variant produces
    NOW_LOWERS = "now lowers"  # the `.error` snapshot of a case declared not to lower (Variant.does_not_lower)

    def label(self, subject: str) -> str:
        """The change as a reader of a file of `subject` (its kind's words) sees it: `CUDA changed` for a CUDA
        source."""
        return f"{subject} changed" if self is FileChange.SOURCE and subject else self.value


class CaseOutcome(enum.Enum):
    """What a run says about one case, from its files' changes or its lowering; values are the words people read."""

    PASSED = "identical"  # every file equals its snapshot
    CHANGED = "changed"  # a file differs: the case's FileChange says how
    # (tilelang_golden.static.kinds.CaseComparison)
    NEW = "no snapshot yet"
    CORRUPT = "corrupt snapshot"  # a snapshot of it cannot be read
    FAILED = "failed to lower"  # it did not lower, or, declared not to, it fails with another error
    NOW_LOWERS = "now lowers"  # declared not to lower (Variant.does_not_lower), it lowered
    STILL_FAILS = "still fails as declared"  # declared not to lower, it fails with the snapshotted error


# A case's change is its most telling file's: a snapshot it cannot be compared with first, then a fact change
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


def case_change(mismatches: Iterable[Mismatch]) -> FileChange:
    """A case's change (CASE_PRECEDENCE): UNCHANGED where no file differs."""
    kinds = {found.kind for found in mismatches}
    return next((kind for kind in CASE_PRECEDENCE if kind in kinds), FileChange.UNCHANGED)


@dataclass(frozen=True)
class FactChange:
    """One changed fact field."""

    path: tuple[str | int, ...]  # keys and list indices below the kernel (below the module for module facts)
    before: str  # the value's repr, shortened; `<absent>` when the field is new
    after: str
    kernel: str = ""  # the kernel's name where the module launches several, else empty

    @property
    def name(self) -> str:
        """`pipelines.0.extent`, after the kernel's name where the module has several."""
        dotted = ".".join(str(part) for part in self.path) or "<root>"
        return f"{self.kernel}: {dotted}" if self.kernel else dotted

    def line(self) -> str:
        return f"{self.name}: {self.before} -> {self.after}"


@dataclass(frozen=True)
class Mismatch:
    """One snapshot file that differs from what the harness produced (or that nothing produces)."""

    path: str  # as reports name it: the store's folder prefix, then the path inside it
    kind: FileChange
    subject: str = ""  # what the file is, in the words of its kind (tilelang_golden.static.kinds): `CUDA`, `facts`
    facts: tuple[FactChange, ...] = ()  # FACTS: one per changed field
    diff: tuple[str, ...] = ()  # unified diff lines (SOURCE, MOVED: with the old text's locals renamed as the new's)
    renaming: tuple[tuple[str, str], ...] = ()  # RENAMED, MOVED: (old name, new name) per renamed local
    reason: str = ""  # CORRUPT: why the snapshot cannot be read; NOW_LOWERS: what was declared
    moved: tuple[str, ...] = ()  # MOVED: the declarations that moved (`half_t C_local_cast[4];`)

    @property
    def fields(self) -> tuple[str, ...]:
        """FACTS: one `field: before -> after` line per changed field."""
        return tuple(change.line() for change in self.facts)

    @property
    def headline(self) -> str:
        """What changed, in one line (after the path)."""
        if self.kind is FileChange.MISSING:
            return "missing (no snapshot committed for this case)"
        if self.kind is FileChange.CORRUPT:
            return self.reason
        if self.kind is FileChange.FACTS:
            return f"{len(self.facts)} field(s) changed"
        if self.kind in (FileChange.COMMENTS, FileChange.WHITESPACE):
            return f"{self.kind.value} (the code is the same token for token)"
        if self.kind is FileChange.RENAMED:
            pairs = ", ".join(f"{old} -> {new}" for old, new in self.renaming)
            return f"{self.kind.value} ({len(self.renaming)}: {pairs})"
        if self.kind is FileChange.MOVED:
            renamed = f"; {len(self.renaming)} identifiers renamed" if self.renaming else ""
            return f"{self.kind.value} ({', '.join(self.moved)}{renamed})"
        if self.kind is FileChange.SOURCE:
            return f"{self.label} (local names canonicalized)"
        if self.kind is FileChange.NOW_LOWERS:
            return f"{self.kind.value}, though declared not to ({self.reason})"
        if self.kind is FileChange.ORPHAN:
            return "orphan: no registered variant produces it"
        return self.label

    @property
    def label(self) -> str:
        """The change in a word or two: `CUDA changed`, `facts changed`."""
        return self.kind.label(self.subject)

    @property
    def details(self) -> tuple[str, ...]:
        """The lines under the headline: changed fields, then diff lines."""
        return self.fields + self.diff

    def lines(self) -> list[str]:
        """`<path>: <headline>`, then the details indented by two spaces."""
        return [f"{self.path}: {self.headline}", *(f"  {line}" for line in self.details)]

    def to_dict(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "kind": self.kind.value,
            "subject": self.subject,
            "facts": [[list(c.path), c.before, c.after, c.kernel] for c in self.facts],
            "diff": self.diff,
            "renaming": self.renaming,
            "reason": self.reason,
            "moved": self.moved,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Mismatch:
        """The inverse of to_dict; ValueError (or KeyError, TypeError) on anything else."""
        return cls(
            path=data["path"],
            kind=FileChange(data["kind"]),
            subject=data["subject"],
            facts=tuple(
                FactChange(tuple(path), before, after, kernel) for path, before, after, kernel in data["facts"]
            ),
            diff=tuple(data["diff"]),
            renaming=tuple((old, new) for old, new in data["renaming"]),
            reason=data["reason"],
            moved=tuple(data["moved"]),
        )
