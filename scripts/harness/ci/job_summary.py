"""A static session's JUnit XML -> GitHub job summary (Markdown) and error annotations.

Each failing check of the static session attaches its findings to the report as JUnit properties
(`harness.static.changes`: its case id, one mismatch record per snapshot file, the remedy); this
module reads those records, never the printed messages, and renders them with the same functions
the session prints them with. A check without records (a family check, the manifest) is shown by
its failure text.
"""

from __future__ import annotations

import os
import re
import sys
import xml.etree.ElementTree as ElementTree
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TextIO

from harness.static.changes import CASE_ID, LOWERING_SOURCE, MISMATCH, REMEDY, Mismatch, lowering_line, report_lines
from harness.static.snapshot import SnapshotStore
from harness.static.target_identity import identity_lines

# GitHub shows at most 10 error annotations per step; the rest are counted in one notice.
MAX_ERROR_ANNOTATIONS = 10
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

    def report(self) -> str:
        """The check's report: rendered from its records when it has some, else its failure text."""
        return "\n".join(report_lines(self.mismatches, self.remedy)) if self.mismatches else self.message


@dataclass(frozen=True)
class StaticReport:
    checks: int
    skipped: int
    failed: tuple[FailedCheck, ...]
    lowering: Mapping[str, int] = field(default_factory=dict)  # cases `lowered` and taken from the `cache`


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
        if outcome is None:
            skipped += case.find("skipped") is not None
            continue
        properties = [(p.get("name"), p.get("value") or "") for p in case.findall("properties/property")]
        found = dict(properties)  # the case id and remedy are recorded once per check
        try:
            mismatches = tuple(Mismatch.from_json(value) for name, value in properties if name == MISMATCH)
        except (ValueError, KeyError, TypeError) as error:
            unreadable = f"an unreadable {MISMATCH} property of {case.get('name')} ({error})"
            raise JUnitReportError(f"{path}: {unreadable}") from None
        short_message = outcome.get("message") or ""
        failed.append(
            FailedCheck(
                case_id=found.get(CASE_ID) or case.get("name", "?"),
                message=(outcome.text or short_message).strip("\n"),
                short_message=short_message,
                mismatches=mismatches,
                remedy=found.get(REMEDY, ""),
            )
        )
    return StaticReport(checks=len(cases), skipped=skipped, failed=tuple(failed), lowering=dict(lowering))


def escape_data(text: str) -> str:
    """Workflow-command message escaping (GitHub's toolkit: %, CR, LF)."""
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def escape_property(text: str) -> str:
    """Workflow-command property escaping: the message rules plus `:` and `,`."""
    return escape_data(text).replace(":", "%3A").replace(",", "%2C")


def workflow_command(command: str, message: str, **properties: str) -> str:
    """One workflow command (`::error title=...::message`), its properties and message escaped."""
    listed = ",".join(f"{name}={escape_property(value)}" for name, value in properties.items())
    return f"::{command}{' ' + listed if listed else ''}::{escape_data(message)}"


def capped(commands: list[str], noun: str, limit: int = MAX_ERROR_ANNOTATIONS) -> list[str]:
    """At most `limit` annotations of each kind (GitHub shows 10 per step); a notice per kind counts the rest."""
    kept: list[str] = []
    shown: dict[str, int] = {}
    hidden: dict[str, int] = {}
    for line in commands:
        kind = re.match(r"::(\w+)", line)[1]
        if shown.get(kind, 0) < limit:
            kept.append(line)
            shown[kind] = shown.get(kind, 0) + 1
        else:
            hidden[kind] = hidden.get(kind, 0) + 1
    return kept + [
        workflow_command(
            "notice",
            f"{count} more {noun} not annotated (GitHub shows {limit} {kind}s per step); see the job summary",
            title=f"more {kind}s",
        )
        for kind, count in hidden.items()
    ]


def error_annotations(report: StaticReport, limit: int = MAX_ERROR_ANNOTATIONS) -> list[str]:
    """`::error` lines: one per mismatching snapshot file, one per failing check that has no mismatch."""
    errors = []
    for check in report.failed:
        for mismatch in check.mismatches:
            body = "\n".join(line for line in (*mismatch.details, check.remedy) if line) or mismatch.headline
            # GitHub shows an annotation in "Files changed" only with a line; the file's first is the honest one.
            errors.append(
                workflow_command(
                    "error", body, file=mismatch.path, line="1", title=f"{check.case_id}: {mismatch.headline}"
                )
            )
        if not check.mismatches:
            errors.append(workflow_command("error", check.short_message, title=check.case_id))
    return capped(errors, "failing snapshot(s)", limit)


def _code_block(text: str) -> str:
    """A fenced block that no backtick run inside `text` can close early."""
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}text\n{text}\n{fence}"


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def kind_counts(report: StaticReport) -> dict[str, int]:
    """Snapshot files per kind of change across the failed checks, most frequent first."""
    counts = Counter(mismatch.kind.value for check in report.failed for mismatch in check.mismatches)
    return dict(sorted(counts.items(), key=lambda item: (-item[1], item[0])))


def render_job_summary(
    report: StaticReport,
    title: str,
    artifact: str | None = None,
    produced: bool = True,
    identity: Sequence[str] = (),
) -> str:
    """Markdown for $GITHUB_STEP_SUMMARY: an overview table, then each failure's full report, then
    `identity` (`harness.static.target_identity`: which targets emitted the same source).

    `produced=False` for a job whose checks produce no snapshot files (the orphan check): its
    summary then points at the committed files only."""
    identity_section = _identity_section(identity)
    lowering = f"\n{lowering_line(report.lowering)}.\n" if report.lowering else ""
    passed = report.checks - len(report.failed) - report.skipped
    head = f"## {title}: {len(report.failed)} of {report.checks} checks failed"
    if not report.failed:
        skipped = f", {report.skipped} skipped" if report.skipped else ""
        return f"## {title}: all {passed} checks passed{skipped}\n{lowering}{identity_section}"
    parts = [head, lowering]
    where = f"the `{artifact}` artifact of this run" if artifact else "the pending folder"
    parts.append(
        f"What this run produced is in {where} (`build/golden-pending/`, laid out like `golden/`). "
        "Compare it with the committed snapshots; if every change is intended, run the command under each "
        "failure locally and commit the result."
        if produced
        else "These checks compare the committed files with the registered variants; they produce no snapshot. "
        "Run the command under each failure locally and commit the result."
    )
    counts = kind_counts(report)
    if counts:
        parts += ["", "Snapshot files by kind: " + ", ".join(f"{n} {name}" for name, n in counts.items()) + "."]
    parts += ["", "| check | snapshot | change |", "| --- | --- | --- |"]
    for check in report.failed:
        rows = [(f"`{m.path}`", m.headline) for m in check.mismatches] or [("", "see below")]
        parts += [f"| `{_cell(check.case_id)}` | {path} | {_cell(change)} |" for path, change in rows]
    parts.append("")
    size = sum(len(part.encode()) + 1 for part in parts)
    left_out = []
    for check in report.failed:
        section = f"### `{check.case_id}`\n\n{_code_block(check.report())}\n"
        if size + len(section.encode()) > MAX_SUMMARY_BYTES:
            left_out.append(check.case_id)
            continue
        parts.append(section)
        size += len(section.encode()) + 1
    if left_out:
        parts.append(
            f"{len(left_out)} failure report(s) did not fit in the summary (see the job log and the JUnit XML in the "
            f"artifact): {', '.join(left_out)}\n"
        )
    return "\n".join(parts) + identity_section


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
) -> int:
    """Print the annotations, append the summary to $GITHUB_STEP_SUMMARY (stdout when unset); 1 without a report.

    `pending`: the folder of produced snapshots, whose targets with identical source the summary names."""
    try:
        report = read_junit(junit)
    except JUnitReportError as error:
        print(workflow_command("error", str(error), title=title), file=out)
        return 1
    for line in error_annotations(report):
        print(line, file=out)
    identity = identity_lines(SnapshotStore(pending)) if pending is not None and pending.is_dir() else []
    summary = render_job_summary(report, title, artifact, produced, identity)
    summary_path = environ.get("GITHUB_STEP_SUMMARY")
    if summary_path:
        with open(summary_path, "a", encoding="utf-8") as step_summary:
            step_summary.write(summary + "\n")
    else:
        print(summary, file=out)
    return 0
