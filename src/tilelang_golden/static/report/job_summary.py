"""A static session's results -> GitHub job summary (Markdown) and error annotations.

Every check of the static session leaves one result in the pending folder (`tilelang_golden.static.snapshots.results`:
its case, one mismatch record per snapshot file, the regen that accepts them); this module reads those records, never
the printed messages, and renders the same verdict the session closes with (`tilelang_golden.static.report.verdict`):
one entry per change, its facts first, its CUDA/HIP folded. A check without mismatch records (a family check, the
manifest) is shown by its failure text.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TextIO

from tilelang_golden.github import MAX_ANNOTATIONS, append_step_summary, capped, workflow_command
from tilelang_golden.static.report.markdown import entries_markdown, folded, overview_lines
from tilelang_golden.static.report.verdict import Verdict, build_verdict
from tilelang_golden.static.snapshots.changes import lowering_line
from tilelang_golden.static.snapshots.results import (
    PENDING_DIR,
    CaseKey,
    CheckResult,
    ResultsError,
    Status,
    read_results,
    unchanged_cases,
)
from tilelang_golden.static.snapshots.snapshot import SnapshotStore
from tilelang_golden.static.snapshots.target_identity import identity_lines

# A step summary may hold 1 MiB; stay below it and say what did not fit.
MAX_SUMMARY_BYTES = 900_000
# The pull request comment joins every golden shard's summary and GitHub keeps 65,536 characters of a comment (the
# comment workflow cuts its body at 60,000 bytes): each shard's summary gets its share, quoted (static.yml passes
# 56,000 / N); this is two shards' share.
COMMENT_BYTES = 28_000


@dataclass(frozen=True)
class StaticReport:
    checks: int
    skipped: int
    failed: tuple[CheckResult, ...]
    lowering: Mapping[str, int] = field(default_factory=dict)  # cases `lowered` and taken from the `cache`
    unchanged: tuple[CaseKey, ...] = ()  # the cases that passed

    def verdict(self) -> Verdict:
        return build_verdict(self.failed, self.unchanged)


def static_report(results: Sequence[CheckResult]) -> StaticReport:
    """The counts, failures and cases of a run's results (tilelang_golden.static.snapshots.results.read_results)."""
    return StaticReport(
        checks=len(results),
        skipped=sum(r.status is Status.SKIPPED for r in results),
        failed=tuple(r for r in results if r.failed),
        lowering=dict(Counter(r.lowering for r in results if r.lowering)),
        unchanged=tuple(unchanged_cases(results)),
    )


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
    counts = Counter(mismatch.label for check in report.failed for mismatch in check.mismatches)
    return dict(sorted(counts.items(), key=lambda item: (-item[1], item[0])))


def render_job_summary(
    report: StaticReport,
    title: str,
    artifact: str | None = None,
    produced: bool = True,
    identity: Sequence[str] = (),
    limit: int = MAX_SUMMARY_BYTES,
) -> str:
    """Markdown for $GITHUB_STEP_SUMMARY: what changed and how to accept it first, then one entry per change
    (facts shown, CUDA/HIP folded), every failing file in a folded table, then `identity`
    (`tilelang_golden.static.snapshots.target_identity`: which targets emitted the same source). Within `limit`
    bytes: the entries and files that do not fit are counted and left to the job log and the artifact.

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
        f"What this run produced is in {where}, laid out like the snapshot folder. "
        "If every change is intended, run the command locally and commit the result."
        if produced
        else "These checks compare the committed files with the registered variants; they produce no snapshot. "
        "Run the command locally and commit the result."
    )
    parts.append(lowering)
    # What is always shown (the heading, the overview, the identity section) comes first; the entries get most of
    # what is left, the table of files the rest.
    left = limit - len("\n".join(parts).encode()) - len(identity_section.encode()) - SUMMARY_SLACK
    entries = entries_markdown(verdict, limit=left * 3 // 4, elsewhere=f"the job log and {where} hold them")
    parts.append(entries)
    parts.append(_files_table(report, left - len(entries.encode()), where))
    return "\n".join(parts) + "\n" + identity_section


# Bytes kept free under a summary's limit for the lines that join its parts and say what was left out.
SUMMARY_SLACK = 1_000


def _files_table(report: StaticReport, limit: int, where: str) -> str:
    """Every failing snapshot file in a folded table, its rows within `limit` bytes and the rest counted."""
    counts = kind_counts(report)
    if not counts:
        return ""
    rows = ["| check | snapshot | change |", "| --- | --- | --- |"]
    size, total = 0, 0
    for check in report.failed:
        for mismatch in check.mismatches:
            total += 1
            row = f"| `{_cell(check.check)}` | `{mismatch.path}` | {_cell(mismatch.headline)} |"
            size += len(row.encode()) + 1
            if size <= limit:
                rows.append(row)
    if len(rows) - 2 < total:
        rows.append(f"\n{total - len(rows) + 2} more files did not fit here; {where} holds them all.")
    by_kind = ", ".join(f"{n} {name}" for name, n in counts.items())
    return folded(f"Every failing snapshot file: {by_kind}", "\n".join(rows))


def _identity_section(identity: Sequence[str]) -> str:
    if not identity:
        return ""
    lines = "".join(f"- {line}\n" for line in identity)
    return f"\n### Targets with byte-identical kernel source\n\n{lines}"


def publish(
    pending: Path,
    title: str,
    artifact: str | None,
    environ: Mapping[str, str] = os.environ,
    out: TextIO = sys.stdout,
    produced: bool = True,
    comment: Path | None = None,
    comment_bytes: int = COMMENT_BYTES,
) -> int:
    """Print the annotations, append the summary to $GITHUB_STEP_SUMMARY (stdout when unset); 1 without results.

    `pending`: the run's pending folder, which holds its results and, unless `produced` is False, the snapshots
    it produced, whose targets with identical source the summary names.
    `comment`: a file that gets the summary too (or the error), for the pull request comment, within
    `comment_bytes`."""
    try:
        report = static_report(read_results(pending))
    except ResultsError as error:
        print(workflow_command("error", str(error), title=title), file=out)
        if comment is not None:
            _write(comment, f"## {title}\n\n{error}\n")
        return 1
    for line in error_annotations(report):
        print(line, file=out)
    identity = identity_lines(SnapshotStore(pending)) if produced else []
    summary = render_job_summary(report, title, artifact, produced, identity)
    if comment is not None:
        _write(comment, render_job_summary(report, title, artifact, produced, identity, comment_bytes) + "\n")
    if not append_step_summary(summary + "\n", environ):
        print(summary, file=out)
    return 0


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


def main(argv: Sequence[str] | None = None, environ: Mapping[str, str] = os.environ, out: TextIO = sys.stdout) -> int:
    parser = argparse.ArgumentParser(
        prog="tilelang-golden summary",
        description="Turn the static session's results into a GitHub job summary and annotations.",
    )
    parser.add_argument(
        "pending",
        type=Path,
        nargs="?",
        default=PENDING_DIR,
        help=f"the session's pending folder (--pending-dir), which holds its results (default: {PENDING_DIR})",
    )
    parser.add_argument("--title", default="Golden snapshots", help="heading of the summary")
    parser.add_argument("--artifact", default=None, help="name of the artifact that holds the pending folder")
    parser.add_argument(
        "--no-produced-files", action="store_true", help="the checks produce no snapshot (the orphan check)"
    )
    parser.add_argument(
        "--comment-file",
        type=Path,
        default=None,
        help="also write the summary to this file (the pull request comment workflow posts it)",
    )
    parser.add_argument(
        "--comment-bytes",
        type=int,
        default=COMMENT_BYTES,
        help=f"the comment file's bytes at most: this job's share of the comment (default {COMMENT_BYTES}: 2 shards)",
    )
    args = parser.parse_args(argv)
    return publish(
        args.pending,
        args.title,
        args.artifact,
        environ,
        out,
        produced=not args.no_produced_files,
        comment=args.comment_file,
        comment_bytes=args.comment_bytes,
    )
