"""A static session's JUnit XML -> GitHub job summary (Markdown) and error annotations.

The static check states each snapshot problem as report lines (`golden/<path>: <what>`, indented
details, `to accept these changes: <command>`); this module only regroups those lines per
snapshot file, so what a reviewer reads on GitHub is what the session printed.
"""

from __future__ import annotations

import os
import re
import sys
import xml.etree.ElementTree as ElementTree
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

# GitHub shows at most 10 error annotations per step; the rest are counted in one notice.
MAX_ERROR_ANNOTATIONS = 10
# A step summary may hold 1 MiB; stay below it and list what did not fit by name.
MAX_SUMMARY_BYTES = 900_000
ACCEPT_PREFIX = "to accept these changes:"

# A snapshot path, then `: headline` on a report line, or nothing on a listing line.
_SNAPSHOT_LINE = re.compile(r"(golden/[\w.\-/]+\.(?:cu|yaml|md))(?::\s*(.*))?")
# pytest marks assertion text in a traceback with "E" and three spaces.
_TRACEBACK_MARK = re.compile(r"^E   ")
_PYTEST_PREFIX = re.compile(r"^(?:Failed|AssertionError|[A-Za-z]+Error):\s*")


class JUnitReportError(ValueError):
    """The JUnit file is missing, unreadable or holds no test case."""


@dataclass(frozen=True)
class SnapshotProblem:
    """One snapshot file named by a failing check."""

    path: str  # golden/<family>/<variant>/<target>.<suffix>
    headline: str  # "2 field(s) changed", "text differs", "missing ...", ...
    details: tuple[str, ...]  # field-level changes or diff lines, as the session printed them


@dataclass(frozen=True)
class FailedCheck:
    """One failing pytest item of the static session."""

    name: str  # the pytest item name, e.g. test_case[<family>/<variant>/<target>]
    message: str  # the full failure text (with the traceback, when pytest printed one)
    short_message: str  # pytest's one-paragraph form: the exception text, without traceback
    problems: tuple[SnapshotProblem, ...]
    accept_command: str | None

    @property
    def label(self) -> str:
        """The case id inside the brackets when there is one, else the item name."""
        match = re.fullmatch(r"[\w]+\[(.*)\](?:@.*)?", self.name)  # xdist's loadgroup appends @<group>
        return match.group(1) if match else self.name


@dataclass(frozen=True)
class StaticReport:
    checks: int
    skipped: int
    failed: tuple[FailedCheck, ...]


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
    for case in cases:
        outcome = case.find("failure")
        if outcome is None:
            outcome = case.find("error")
        if outcome is None:
            skipped += case.find("skipped") is not None
            continue
        short_message = outcome.get("message") or ""
        message = (outcome.text or short_message).strip("\n")
        failed.append(parse_failure(case.get("name", "?"), message, short_message))
    return StaticReport(checks=len(cases), skipped=skipped, failed=tuple(failed))


def parse_failure(name: str, message: str, short_message: str = "") -> FailedCheck:
    """Group a failure's report lines by the snapshot file they describe.

    `golden/<path>: <headline>` opens a problem and the indented lines under it are its details;
    a bare `golden/<path>` line (a listing, as the orphan check prints) is a problem of its own,
    headed by the first line of the exception text.
    """
    short_message = short_message or message
    lines = [_TRACEBACK_MARK.sub("", line) for line in message.splitlines()]
    first_line = _PYTEST_PREFIX.sub("", short_message.strip().splitlines()[0] if short_message.strip() else "")
    first_line = first_line.rstrip(":")
    problems: list[SnapshotProblem] = []
    accept_command = None
    open_path, open_headline, details = None, "", []
    for line in lines:
        text = line.strip()
        match = _SNAPSHOT_LINE.fullmatch(text)
        opens_new = match is not None or text.startswith(ACCEPT_PREFIX) or not line[:1].isspace()
        if opens_new and open_path is not None:
            problems.append(SnapshotProblem(open_path, open_headline, tuple(details)))
            open_path = None
        if text.startswith(ACCEPT_PREFIX):
            accept_command = text[len(ACCEPT_PREFIX) :].strip()
        elif match and match.group(2) is None:
            problems.append(SnapshotProblem(match.group(1), first_line, ()))
        elif match:
            open_path, open_headline, details = match.group(1), match.group(2), []
        elif open_path is not None:
            details.append(line[2:] if line.startswith("  ") else text)
    if open_path is not None:
        problems.append(SnapshotProblem(open_path, open_headline, tuple(details)))
    return FailedCheck(name, message, short_message, tuple(problems), accept_command)


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
    """`::error` lines: one per failing snapshot file, one per failing check that names no file."""
    errors = []
    for check in report.failed:
        accept = [f"{ACCEPT_PREFIX} {check.accept_command}"] if check.accept_command else []
        for problem in check.problems:
            body = "\n".join([*problem.details, *accept]) or check.short_message
            # GitHub shows an annotation in "Files changed" only with a line; the file's first is the honest one.
            errors.append(
                workflow_command("error", body, file=problem.path, line="1", title=f"{check.label}: {problem.headline}")
            )
        if not check.problems:
            errors.append(workflow_command("error", check.short_message, title=check.label))
    return capped(errors, "failing snapshot(s)", limit)


def _code_block(text: str) -> str:
    """A fenced block that no backtick run inside `text` can close early."""
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}text\n{text}\n{fence}"


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


# What a snapshot problem's headline says, as the class the job summary counts.
CLASSES = (
    ("identifiers renamed only", "identifiers renamed only"),
    ("changed only (the code is the same token for token)", "comments or whitespace only"),
    ("CUDA changed", "CUDA changed"),
    ("text differs", "CUDA changed"),
    ("field(s) changed", "facts changed"),
    ("missing", "missing"),
)


def problem_class(headline: str) -> str:
    return next((name for marker, name in CLASSES if marker in headline), "other")


def class_counts(report: StaticReport) -> dict[str, int]:
    """Snapshot files per class across the failed checks, most frequent first."""
    counts: dict[str, int] = {}
    for check in report.failed:
        for problem in check.problems:
            name = problem_class(problem.headline)
            counts[name] = counts.get(name, 0) + 1
    return dict(sorted(counts.items(), key=lambda item: (-item[1], item[0])))


def render_job_summary(report: StaticReport, title: str, artifact: str | None = None, produced: bool = True) -> str:
    """Markdown for $GITHUB_STEP_SUMMARY: an overview table, then each failure's full report.

    `produced=False` for a job whose checks produce no snapshot files (the orphan check): its
    summary then points at the committed files only."""
    passed = report.checks - len(report.failed) - report.skipped
    head = f"## {title}: {len(report.failed)} of {report.checks} checks failed"
    if not report.failed:
        skipped = f", {report.skipped} skipped" if report.skipped else ""
        return f"## {title}: all {passed} checks passed{skipped}\n"
    parts = [head, ""]
    where = f"the `{artifact}` artifact of this run" if artifact else "the pending folder"
    parts.append(
        f"What this run produced is in {where} (`build/golden-pending/`, laid out like `golden/`). "
        "Compare it with the committed snapshots; if every change is intended, run the command under each "
        "failure locally and commit the result."
        if produced
        else "These checks compare the committed files with the registered variants; they produce no snapshot. "
        "Run the command under each failure locally and commit the result."
    )
    counts = class_counts(report)
    if counts:
        parts += ["", "Snapshot files by class: " + ", ".join(f"{n} {name}" for name, n in counts.items()) + "."]
    parts += ["", "| check | snapshot | change |", "| --- | --- | --- |"]
    for check in report.failed:
        for problem in check.problems or (SnapshotProblem("", "see below", ()),):
            path = f"`{problem.path}`" if problem.path else ""
            parts.append(f"| `{_cell(check.label)}` | {path} | {_cell(problem.headline)} |")
    parts.append("")
    size = sum(len(part.encode()) + 1 for part in parts)
    left_out = []
    for check in report.failed:
        section = f"### `{check.label}`\n\n{_code_block(check.message)}\n"
        if size + len(section.encode()) > MAX_SUMMARY_BYTES:
            left_out.append(check.label)
            continue
        parts.append(section)
        size += len(section.encode()) + 1
    if left_out:
        parts.append(
            f"{len(left_out)} failure report(s) did not fit in the summary (see the job log and the JUnit XML in the "
            f"artifact): {', '.join(left_out)}\n"
        )
    return "\n".join(parts)


def publish(
    junit: Path,
    title: str,
    artifact: str | None,
    environ: Mapping[str, str] = os.environ,
    out: TextIO = sys.stdout,
    produced: bool = True,
) -> int:
    """Print the annotations, append the summary to $GITHUB_STEP_SUMMARY (stdout when unset); 1 without a report."""
    try:
        report = read_junit(junit)
    except JUnitReportError as error:
        print(workflow_command("error", str(error), title=title), file=out)
        return 1
    for line in error_annotations(report):
        print(line, file=out)
    summary = render_job_summary(report, title, artifact, produced)
    summary_path = environ.get("GITHUB_STEP_SUMMARY")
    if summary_path:
        with open(summary_path, "a", encoding="utf-8") as step_summary:
            step_summary.write(summary + "\n")
    else:
        print(summary, file=out)
    return 0
