"""A static session's JUnit XML -> GitHub job summary (Markdown) and error annotations.

Each failing check of the static session attaches its findings to the report as JUnit properties
(`harness.static.changes`: its case id and case, one mismatch record per snapshot file, the remedy);
this module reads those records, never the printed messages, and renders the same verdict the
session closes with (`harness.static.verdict`): one entry per change, its facts first, its CUDA/HIP
folded. A check without records (a family check, the manifest) is shown by its failure text.
"""

from __future__ import annotations

import json
import os
import sys
import xml.etree.ElementTree as ElementTree
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TextIO

from harness.ci.workflow_commands import MAX_ANNOTATIONS, append_step_summary, capped, workflow_command
from harness.static.changes import CASE, CASE_ID, LOWERING_SOURCE, MISMATCH, REMEDY, Mismatch, lowering_line
from harness.static.snapshot import SnapshotStore
from harness.static.target_identity import identity_lines
from harness.static.verdict import (
    CaseKey,
    Failure,
    Verdict,
    build_verdict,
    entries_markdown,
    folded,
    overview_lines,
)

# A step summary may hold 1 MiB; stay below it and list what did not fit by name.
MAX_SUMMARY_BYTES = 900_000


class JUnitReportError(ValueError):
    """The JUnit file is missing, unreadable or holds no test case."""


@dataclass(frozen=True)
class FailedCheck:
    """One failing pytest item of the static session."""

    case_id: str  # its case id property (e.g. <family>/<variant>/<target>); its JUnit name without one
    message: str  # the full failure text (with the traceback, when pytest printed one)
    short_message: str  # pytest's one-paragraph form: the exception text, without traceback
    mismatches: tuple[Mismatch, ...] = ()
    remedy: str = ""  # how to accept (or delete) what the mismatches show
    case: CaseKey | None = None  # a case's family, variant and target

    def failure(self) -> Failure:
        """The check as the verdict reads it."""
        return Failure(self.case_id, self.case, self.mismatches, self.remedy, "" if self.mismatches else self.message)


@dataclass(frozen=True)
class StaticReport:
    checks: int
    skipped: int
    failed: tuple[FailedCheck, ...]
    lowering: Mapping[str, int] = field(default_factory=dict)  # cases `lowered` and taken from the `cache`
    unchanged: tuple[CaseKey, ...] = ()  # the cases that passed

    def verdict(self) -> Verdict:
        return build_verdict([check.failure() for check in self.failed], self.unchanged)


def read_junit(path: Path) -> StaticReport:
    """Parse pytest's JUnit XML; a report with no test case is an error, never a pass."""
    if not path.is_file():
        raise JUnitReportError(
            f"{path}: no JUnit report; the static session stopped before running its checks (see its log above)"
        )
    try:
        root = ElementTree.parse(path).getroot()
    except ElementTree.ParseError as error:
        raise JUnitReportError(f"{path}: not valid JUnit XML ({error})") from None
    cases = root.findall(".//testcase")
    if not cases:
        raise JUnitReportError(f"{path}: the report holds no test case; a run that checks nothing cannot pass")
    failed = []
    unchanged = []
    skipped = 0
    lowering: Counter[str] = Counter(
        p.get("value") or ""
        for p in root.findall(".//testcase/properties/property")
        if p.get("name") == LOWERING_SOURCE
    )
    for case in cases:
        outcome = case.find("failure")
        if outcome is None:
            outcome = case.find("error")
        properties = [(p.get("name"), p.get("value") or "") for p in case.findall("properties/property")]
        found = dict(properties)  # the case id, the case and the remedy are recorded once per check
        try:
            key = tuple(json.loads(found[CASE])) if CASE in found else None
            mismatches = tuple(Mismatch.from_json(value) for name, value in properties if name == MISMATCH)
        except (ValueError, KeyError, TypeError) as error:
            unreadable = f"an unreadable {MISMATCH} property of {case.get('name')} ({error})"
            raise JUnitReportError(f"{path}: {unreadable}") from None
        if outcome is None:
            skipped += case.find("skipped") is not None
            if key and case.find("skipped") is None:
                unchanged.append(key)
            continue
        short_message = outcome.get("message") or ""
        failed.append(
            FailedCheck(
                case_id=found.get(CASE_ID) or case.get("name", "?"),
                message=(outcome.text or short_message).strip("\n"),
                short_message=short_message,
                mismatches=mismatches,
                remedy=found.get(REMEDY, ""),
                case=key,
            )
        )
    return StaticReport(len(cases), skipped, tuple(failed), dict(lowering), tuple(unchanged))


def error_annotations(report: StaticReport, limit: int = MAX_ANNOTATIONS) -> list[str]:
    """`::error` lines: one per entry of the verdict (a change, wherever it applies), on a snapshot file of it
    where it has one; its text is the headline and the command that accepts it."""
    errors = []
    for entry in report.verdict().entries:
        body = "\n".join(line for line in (entry.headline, entry.accept and f"to accept: {entry.accept}") if line)
        where = {"file": entry.path, "line": "1"} if entry.path else {}
        errors.append(workflow_command("error", body, **where, title=entry.title))
    return capped(errors, "changes", limit)


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def kind_counts(report: StaticReport) -> dict[str, int]:
    """Snapshot files per kind of change (`HIP changed` for a `.hip`) across the failed checks, most frequent first."""
    counts = Counter(mismatch.kind.label(mismatch.path) for check in report.failed for mismatch in check.mismatches)
    return dict(sorted(counts.items(), key=lambda item: (-item[1], item[0])))


def render_job_summary(
    report: StaticReport,
    title: str,
    artifact: str | None = None,
    produced: bool = True,
    identity: Sequence[str] = (),
) -> str:
    """Markdown for $GITHUB_STEP_SUMMARY: what changed and how to accept it first, then one entry per change
    (facts shown, CUDA/HIP folded), every failing file in a folded table, then `identity`
    (`harness.static.target_identity`: which targets emitted the same source).

    `produced=False` for a job whose checks produce no snapshot files (the orphan check): its
    summary then points at the committed files only."""
    identity_section = _identity_section(identity)
    lowering = f"\n{lowering_line(report.lowering)}.\n" if report.lowering else ""
    passed = report.checks - len(report.failed) - report.skipped
    if not report.failed:
        skipped = f", {report.skipped} skipped" if report.skipped else ""
        return f"## {title}: all {passed} checks passed{skipped}\n{lowering}{identity_section}"
    verdict = report.verdict()
    parts = [f"## {title}: {len(report.failed)} of {report.checks} checks failed", "", *overview_lines(verdict), ""]
    where = f"the `{artifact}` artifact of this run" if artifact else "the pending folder"
    parts.append(
        f"What this run produced is in {where} (`build/golden-pending/`, laid out like `golden/`). "
        "If every change is intended, run the command locally and commit the result."
        if produced
        else "These checks compare the committed files with the registered variants; they produce no snapshot. "
        "Run the command locally and commit the result."
    )
    parts.append(lowering)
    entries = entries_markdown(verdict)
    if len(entries.encode()) > MAX_SUMMARY_BYTES:
        titles = ", ".join(entry.title for entry in verdict.entries)
        entries = (
            f"The changes did not fit in the summary (see the job log and the JUnit XML in the artifact): {titles}\n"
        )
    parts.append(entries)
    counts = kind_counts(report)
    if counts:
        rows = ["| check | snapshot | change |", "| --- | --- | --- |"]
        for check in report.failed:
            for mismatch in check.mismatches:
                rows.append(f"| `{_cell(check.case_id)}` | `{mismatch.path}` | {_cell(mismatch.headline)} |")
        by_kind = ", ".join(f"{n} {name}" for name, n in counts.items())
        parts.append(folded(f"Every failing snapshot file: {by_kind}", "\n".join(rows)))
    return "\n".join(parts) + "\n" + identity_section


def _identity_section(identity: Sequence[str]) -> str:
    if not identity:
        return ""
    lines = "".join(f"- {line}\n" for line in identity)
    return f"\n### Targets with byte-identical kernel source\n\n{lines}"


def publish(
    junit: Path,
    title: str,
    artifact: str | None,
    environ: Mapping[str, str] = os.environ,
    out: TextIO = sys.stdout,
    produced: bool = True,
    pending: Path | None = None,
    comment: Path | None = None,
) -> int:
    """Print the annotations, append the summary to $GITHUB_STEP_SUMMARY (stdout when unset); 1 without a report.

    `pending`: the folder of produced snapshots, whose targets with identical source the summary names.
    `comment`: a file that gets the summary too (or the error), for the pull request comment."""
    try:
        report = read_junit(junit)
    except JUnitReportError as error:
        print(workflow_command("error", str(error), title=title), file=out)
        if comment is not None:
            _write(comment, f"## {title}\n\n{error}\n")
        return 1
    for line in error_annotations(report):
        print(line, file=out)
    identity = identity_lines(SnapshotStore(pending)) if pending is not None and pending.is_dir() else []
    summary = render_job_summary(report, title, artifact, produced, identity)
    if comment is not None:
        _write(comment, summary + "\n")
    if not append_step_summary(summary + "\n", environ):
        print(summary, file=out)
    return 0


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
