"""What a change that touches every case writes for a reviewer, at 1x, 3x and 10x this library: the job summary's
bytes (GitHub keeps 1 MiB of a step summary), the pull request comment's characters (65,536; two shards' comment
files, each its share, as the comment workflow joins them), the terminal's lines, and the time to render them.

    python -m benchmarks.verdict_scale RESULTS.jsonl [--copies 1 3 10]

RESULTS.jsonl is a real run's results: e.g. the upgrade preview's (`build/upgrade-preview/<version>/`), whose changes
touch every case. A larger library is made by copying every family under new names (`<family>_x2`, ...): each copy
changed as its original did, as a bump changes families that share kernels alike. Nothing is lowered.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from tilelang_golden.static.report.job_summary import COMMENT_BYTES, render_job_summary, static_report
from tilelang_golden.static.report.verdict import footer_lines, terminal_lines
from tilelang_golden.static.snapshots.results import CheckResult, read_results

# GitHub's limits: a step summary's bytes, an issue comment's characters.
SUMMARY_LIMIT = 1024 * 1024
COMMENT_LIMIT = 65_536
SHARDS = 2  # the golden shards whose comment files the comment workflow joins


def renamed(result: CheckResult, copy: int) -> CheckResult:
    """The result as the same check of the family's `copy`-th copy would give it (copy 1: the result itself)."""
    if copy == 1 or result.case is None:
        return result
    family, variant, target = result.case
    name = f"{family}_x{copy}"

    def moved(text: str) -> str:
        return text.replace(f"{family}/", f"{name}/")

    return dataclasses.replace(
        result,
        check=moved(result.check),
        case=(name, variant, target),
        mismatches=tuple(dataclasses.replace(m, path=moved(m.path)) for m in result.mismatches),
        accept=None if result.accept is None else moved(result.accept),
    )


def scaled(results: Sequence[CheckResult], copies: int) -> list[CheckResult]:
    return [renamed(result, copy) for copy in range(1, copies + 1) for result in results]


def measure(results: Sequence[CheckResult], copies: int) -> dict[str, float]:
    started = time.perf_counter()
    report = static_report(scaled(results, copies))
    verdict = report.verdict()
    summary = render_job_summary(report, "Golden snapshots", "golden-pending")
    comment = render_job_summary(report, "Golden snapshots", "golden-pending", limit=COMMENT_BYTES)
    quoted = sum(len(f"> {line}\n") for line in comment.splitlines())  # the comment workflow quotes each shard's
    terminal = terminal_lines(verdict) + footer_lines(verdict)
    return {
        "copies": copies,
        "checks": report.checks,
        "failed": len(report.failed),
        "entries": len(verdict.entries),
        "summary_kib": len(summary.encode()) / 1024,
        "comment_chars": SHARDS * quoted + 200,  # each shard's, quoted, under the bot's two lines
        "terminal_lines": len(terminal),
        "render_s": time.perf_counter() - started,
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.verdict_scale", description=__doc__.splitlines()[0])
    parser.add_argument("results", type=Path, help="a run's RESULTS.jsonl, or the folder that holds it")
    parser.add_argument("--copies", type=int, nargs="+", default=[1, 3, 10])
    options = parser.parse_args(argv)
    folder = options.results.parent if options.results.is_file() else options.results
    results = read_results(folder)
    rows = [measure(results, copies) for copies in options.copies]
    print("| copies | checks | failed | entries | summary KiB | comment chars | terminal lines | render s |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for row in rows:
        print(
            f"| {row['copies']}x | {row['checks']} | {row['failed']} | {row['entries']} | {row['summary_kib']:.0f} | "
            f"{row['comment_chars']:.0f} | {row['terminal_lines']} | {row['render_s']:.1f} |"
        )
    over = [r for r in rows if r["summary_kib"] * 1024 > SUMMARY_LIMIT or r["comment_chars"] > COMMENT_LIMIT]
    for row in over:
        print(f"{row['copies']}x: over GitHub's limits (summary 1 MiB, comment {COMMENT_LIMIT} characters)")
    return 1 if over else 0


if __name__ == "__main__":
    sys.exit(main())
