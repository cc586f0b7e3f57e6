"""What differs between a snapshot and what was produced now, as data: the vocabulary of every report.

The static check's failure text and the JUnit properties the CI job summary reads come from these
types, and the upgrade preview's statuses are its kinds, so no layer parses another's prose. Standard library
only: the CI summary imports it without TileLang.
"""

from __future__ import annotations

import enum
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

# JUnit properties of a static-session item (pytest's user_properties): the summary reads these.
CASE_ID = "case_id"  # the check's case id: its parametrization id, or its function's name
MISMATCH = "mismatch"  # one Mismatch as JSON, per differing file
REMEDY = "remedy"  # the line saying how to accept (or delete) what the mismatches show
LOWERING_SOURCE = "lowering"  # where a case's files came from: `lowered` in this run, or the lowering `cache`


def lowering_line(sources: Mapping[str, int], cache: str | None = None) -> str:
    """`12 cases lowered, 270 from the lowering cache (build/lowering-cache)`: how a run got its cases."""
    where = f" ({cache})" if cache else ""
    return f"{sources.get('lowered', 0)} cases lowered, {sources.get('cache', 0)} from the lowering cache{where}"


class ChangeKind(enum.Enum):
    """How a file (or, in the upgrade preview, a case) compares with its snapshot; values are the labels people read."""

    IDENTICAL = "identical"  # the upgrade preview's unchanged case; never a Mismatch
    MISSING = "no snapshot yet"
    CORRUPT = "corrupt snapshot"
    FACTS = "facts changed"
    COMMENTS = "comments changed only"  # the code is the same token for token
    WHITESPACE = "whitespace changed only"  # the code and its comments are the same token for token
    RENAMED = "identifiers renamed only"
    CUDA = "CUDA changed"
    TEXT = "text differs"  # a file that is neither CUDA nor facts (a summary), or facts equal as data
    ORPHAN = "orphan"  # a committed file that no registered variant produces
    FAILED = "failed to lower"  # the upgrade preview's case that did not lower (or read); never a Mismatch
    NOW_LOWERS = "now lowers"  # a case declared not to lower (Variant.does_not_lower) lowered
    STILL_FAILS = "still fails as declared"  # the upgrade preview's declared failure, same error; never a Mismatch


@dataclass(frozen=True)
class Mismatch:
    """One snapshot file that differs from what the harness produced (or that nothing produces)."""

    path: str  # as reports name it: the store's folder prefix, then the path inside it
    kind: ChangeKind
    fields: tuple[str, ...] = ()  # FACTS: one `field: before -> after` per changed field
    diff: tuple[str, ...] = ()  # unified diff lines (CUDA: the canonicalized diff, then the raw one)
    renaming: tuple[tuple[str, str], ...] = ()  # RENAMED: (old name, new name) per renamed local
    reason: str = ""  # CORRUPT: why the snapshot cannot be read; NOW_LOWERS: what was declared

    def __post_init__(self) -> None:
        if self.kind in (ChangeKind.IDENTICAL, ChangeKind.FAILED, ChangeKind.STILL_FAILS):
            raise ValueError(f"{self.path}: {self.kind.value!r} is a case's outcome, not a file's mismatch")

    @property
    def headline(self) -> str:
        """What changed, in one line (after the path)."""
        if self.kind is ChangeKind.MISSING:
            return "missing (no snapshot committed for this case)"
        if self.kind is ChangeKind.CORRUPT:
            return self.reason
        if self.kind is ChangeKind.FACTS:
            return f"{len(self.fields)} field(s) changed"
        if self.kind in (ChangeKind.COMMENTS, ChangeKind.WHITESPACE):
            return f"{self.kind.value} (the code is the same token for token)"
        if self.kind is ChangeKind.RENAMED:
            pairs = ", ".join(f"{old} -> {new}" for old, new in self.renaming)
            return f"{self.kind.value} ({len(self.renaming)}: {pairs})"
        if self.kind is ChangeKind.CUDA:
            return f"{self.kind.value} (first with local names canonicalized, then as is)"
        if self.kind is ChangeKind.NOW_LOWERS:
            return f"{self.kind.value}, though declared not to ({self.reason})"
        if self.kind is ChangeKind.ORPHAN:
            return "orphan: no registered variant produces it"
        return self.kind.value

    @property
    def details(self) -> tuple[str, ...]:
        """The lines under the headline: changed fields, then diff lines."""
        return self.fields + self.diff

    def lines(self) -> list[str]:
        """`<path>: <headline>`, then the details indented by two spaces."""
        return [f"{self.path}: {self.headline}", *(f"  {line}" for line in self.details)]

    def to_json(self) -> str:
        return json.dumps(
            {
                "path": self.path,
                "kind": self.kind.value,
                "fields": self.fields,
                "diff": self.diff,
                "renaming": self.renaming,
                "reason": self.reason,
            }
        )

    @classmethod
    def from_json(cls, text: str) -> Mismatch:
        """The inverse of to_json; ValueError (or KeyError, TypeError) on anything else."""
        data = json.loads(text)
        return cls(
            path=data["path"],
            kind=ChangeKind(data["kind"]),
            fields=tuple(data["fields"]),
            diff=tuple(data["diff"]),
            renaming=tuple((old, new) for old, new in data["renaming"]),
            reason=data["reason"],
        )


def report_lines(mismatches: Sequence[Mismatch], remedy: str, note: str | None = None) -> list[str]:
    """A failing check's text: each mismatch's lines, then the note and the remedy (each when given)."""
    return [line for mismatch in mismatches for line in mismatch.lines()] + [text for text in (note, remedy) if text]
