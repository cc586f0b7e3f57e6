"""One result per check of a static run, as data, in one file that every report reads.

Each check of the session (a case, a family check, a summary, the manifest, the orphan check) ends as one
CheckResult, written as one line of RESULTS in the pending folder by the process that ran it. The terminal
verdict, the CI job summary, the pull request comment and the upgrade preview read these records; none reads
another's printed text. Standard library only: the CI summary imports it without TileLang.
"""

from __future__ import annotations

import enum
import json
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tilelang_golden.regressions import Regression
from tilelang_golden.static.snapshots.changes import CaseOutcome, FileChange, Mismatch

CaseKey = tuple[str, str, str]  # family, variant, target
# The file in the pending folder, beside the snapshots (SnapshotStore.files leaves it out).
RESULTS = "RESULTS.jsonl"
# The check that fails where something other than the command line deselected checks (static.selection).
HIDING = "test_no_hidden_checks"
# Where a static run writes what it produced and its results, unless `--pending-dir` says otherwise.
PENDING_DIR = Path("build/golden-pending")


class Status(enum.Enum):
    """pytest's outcome of the check."""

    PASSED = "passed"
    FAILED = "failed"
    SKIPPED = "skipped"


@dataclass(frozen=True)
class CheckResult:
    """What one check found: what it produced, how each file compares, why it failed or was skipped."""

    check: str  # a case's id (`family/variant/target`), or the check's parametrization id or name
    status: Status = Status.PASSED
    case: CaseKey | None = None  # a case's family, variant and target
    outcome: CaseOutcome | None = None  # what the run says of a case it compared (None: not compared)
    mismatches: tuple[Mismatch, ...] = ()  # one per snapshot file that differs
    fields: tuple[str, ...] = ()  # the changed fact fields (tilelang_golden.static.snapshots.diff.changed_fields)
    source_change: FileChange | None = None  # the kernel source's own change, where it was compared
    # The `-k` expression of the regen that accepts the mismatches: "" for an unfiltered regen, None where no
    # regen does (a harness error, a kernel to fix).
    accept: str | None = None
    text: str = ""  # the failure's or skip's text, as the check printed it
    written: Mapping[str, str] = field(default_factory=dict)  # a regen: path -> created, updated, deleted, unchanged
    findings: tuple[str, ...] = ()  # lines a reviewer must see even when the check passes
    lowering: str = ""  # a case: where its files came from, `lowered` in this run or the lowering `cache`
    regressions: tuple[Regression, ...] = ()  # a case: its changes that make the kernel worse, acknowledged or not
    # A case: seconds to build it and produce its files, from `lowering` (a regen's second lowering left out): with
    # `lowered`, what a lowering-cache miss costs, which the shards are balanced by (static.snapshots.costs).
    seconds: float = 0.0

    @property
    def failed(self) -> bool:
        return self.status is Status.FAILED

    @property
    def family(self) -> str:
        return self.case[0] if self.case else ""

    def to_json(self) -> str:
        return json.dumps(
            {
                "check": self.check,
                "status": self.status.value,
                "case": self.case,
                "outcome": self.outcome and self.outcome.value,
                "mismatches": [m.to_dict() for m in self.mismatches],
                "fields": self.fields,
                "source_change": self.source_change and self.source_change.value,
                "accept": self.accept,
                "text": self.text,
                "written": dict(self.written),
                "findings": self.findings,
                "lowering": self.lowering,
                "seconds": self.seconds,
                "regressions": [r.to_list() for r in self.regressions],
            }
        )

    @classmethod
    def from_json(cls, line: str) -> CheckResult:
        """The inverse of to_json; ValueError (or KeyError, TypeError) on anything else."""
        data: dict[str, Any] = json.loads(line)
        return cls(
            check=data["check"],
            status=Status(data["status"]),
            case=tuple(data["case"]) if data["case"] else None,  # type: ignore[arg-type]
            outcome=CaseOutcome(data["outcome"]) if data["outcome"] else None,
            mismatches=tuple(Mismatch.from_dict(m) for m in data["mismatches"]),
            fields=tuple(data["fields"]),
            source_change=FileChange(data["source_change"]) if data["source_change"] else None,
            accept=data["accept"],
            text=data["text"],
            written=dict(data["written"]),
            findings=tuple(data["findings"]),
            lowering=data["lowering"],
            seconds=float(data["seconds"]),
            regressions=tuple(Regression.from_list(r) for r in data["regressions"]),
        )

    @property
    def unacknowledged(self) -> tuple[Regression, ...]:
        """The regressions no declaration or regen option acknowledged: a regen will not write them."""
        return tuple(r for r in self.regressions if not r.acknowledged)


class ResultsError(ValueError):
    """The results file is missing, unreadable or holds no check."""


def append_result(folder: Path, result: CheckResult) -> None:
    """Add one record to the folder's results. One write of one line to a file opened for appending: the
    xdist workers of one run append to the same file without mixing their lines."""
    folder.mkdir(parents=True, exist_ok=True)
    descriptor = os.open(folder / RESULTS, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        os.write(descriptor, (result.to_json() + "\n").encode())
    finally:
        os.close(descriptor)


def read_results(folder: Path) -> list[CheckResult]:
    """Every record of a run, in the order the checks ended; a run that recorded no check is an error, never a
    pass."""
    path = folder / RESULTS
    if not path.is_file():
        raise ResultsError(f"{path}: no results; the static session stopped before running its checks (see its log)")
    results = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        try:
            results.append(CheckResult.from_json(line))
        except (ValueError, KeyError, TypeError) as error:
            raise ResultsError(f"{path}:{number}: not a check's result ({error!r})") from None
    if not results:
        raise ResultsError(f"{path}: holds no check; a run that checks nothing cannot pass")
    return results


def unchanged_cases(results: Iterable[CheckResult]) -> list[CaseKey]:
    """The cases that passed: a verdict entry names those of its family."""
    return [r.case for r in results if r.case and r.status is Status.PASSED]
