"""`tilelang-golden history`: add a GPU run of main to the performance history, or render the history's site.

    tilelang-golden history record --report out/gpu/report.json --commit SHA --into HISTORY
    tilelang-golden history page --history origin/gpu-history --output build/history-page

HISTORY is a checkout of the history branch (docs/history.md), or for `page` also a git ref of it: `record` writes one
file under its records/, `page` reads them all, skipping (and naming) any it cannot read, and writes a static site
whose index.html opens offline.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import subprocess
import sys
import tarfile
import tempfile
from datetime import datetime, timezone
from pathlib import Path

from tilelang_golden.github import append_step_summary
from tilelang_golden.history.records import RECORDS, BadRecord, read_history, record_from_report, write_record


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="tilelang-golden history", description=__doc__.split("\n\n")[0])
    verbs = parser.add_subparsers(dest="verb", required=True)
    record = verbs.add_parser("record", help="add one GPU run (its report.json) to the history")
    record.add_argument("--report", type=Path, required=True, help="the run's report.json (nox -s gpu's output)")
    record.add_argument("--commit", required=True, help="the full SHA of the commit the run checked")
    record.add_argument("--commit-time", help="its committer time, ISO 8601 (default: git's, in this checkout)")
    record.add_argument("--run-url", default=_run_url(), help="the run's page (default: the Actions run's)")
    record.add_argument("--run-time", help="when it ran, ISO 8601 (default: now)")
    record.add_argument("--into", type=Path, required=True, help="the history's checkout")
    page = verbs.add_parser("page", help="render the history as a static site")
    page.add_argument(
        "--history", required=True, help="the history's checkout, or a git ref of it (origin/gpu-history)"
    )
    page.add_argument("--output", type=Path, required=True, help="the site's folder")
    page.add_argument("--repository-url", default=_repository_url(), help="links commits (default: the Actions run's)")
    page.add_argument("--summary", action="store_true", help="on Actions, also write the job summary")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return record(args) if args.verb == "record" else page(args)


def record(args: argparse.Namespace) -> int:
    try:
        report = json.loads(args.report.read_text(encoding="utf-8"))
        if not isinstance(report, dict):
            raise BadRecord(f"{args.report}: not a GPU report (a JSON object)")
        commit_time = args.commit_time or _git_commit_time(args.commit)
        run_time = args.run_time or datetime.now(timezone.utc).isoformat(timespec="seconds")
        made = record_from_report(report, args.commit, commit_time, args.run_url, run_time, str(args.report))
    except (OSError, ValueError) as error:  # BadRecord, and JSON's errors, are ValueErrors
        print(f"tilelang-golden history record: {error}; nothing was added to the history", file=sys.stderr)
        return 2
    path = write_record(made, args.into)
    print(f"added {path.relative_to(args.into)}: {made.gpu}, {len(made.variants)} variants at {made.commit[:12]}")
    return 0


def page(args: argparse.Namespace) -> int:
    from tilelang_golden.history.page import write_site  # matplotlib and ruptures: only to render

    with tempfile.TemporaryDirectory() as scratch:
        try:
            folder = history_folder(args.history, Path(scratch))
        except BadRecord as error:
            print(f"tilelang-golden history page: {error}", file=sys.stderr)
            return 2
        try:
            site = write_site(read_history(folder), args.output, args.repository_url)
        except FileExistsError as error:
            print(f"tilelang-golden history page: {error}", file=sys.stderr)
            return 2
    print(site.summary())
    if args.summary:
        append_step_summary(site.markdown(f"artifact gpu-history-page of {_run_url() or 'this run'}"))
    for skipped in site.skipped:
        print(f"  skipped {skipped}")
    return 0


def history_folder(given: str, scratch: Path) -> Path:
    """The folder `given`, or the records of the git ref `given` unpacked under `scratch` (regular files only)."""
    if Path(given).is_dir():
        return Path(given)
    archive = subprocess.run(["git", "archive", "--format=tar", given, RECORDS], capture_output=True, check=False)
    if archive.returncode != 0:
        said = archive.stderr.decode(errors="replace").strip()
        raise BadRecord(
            f"--history {given}: no such folder, nor a git ref with a {RECORDS}/ folder ({said}); fetch the history "
            "branch first (git fetch origin gpu-history), or give its checkout"
        )
    with tarfile.open(fileobj=io.BytesIO(archive.stdout)) as members:
        members.extractall(scratch, filter="data")
    return scratch


def _git_commit_time(commit: str) -> str:
    said = subprocess.run(["git", "show", "-s", "--format=%cI", commit], capture_output=True, text=True, check=False)
    if said.returncode != 0:
        raise BadRecord(f"git knows no commit {commit!r} here ({said.stderr.strip()}): give --commit-time")
    return said.stdout.strip()


def _repository_url() -> str:
    server, repository = os.environ.get("GITHUB_SERVER_URL"), os.environ.get("GITHUB_REPOSITORY")
    return f"{server}/{repository}" if server and repository else ""


def _run_url() -> str:
    run = os.environ.get("GITHUB_RUN_ID")
    return f"{_repository_url()}/actions/runs/{run}" if run and _repository_url() else ""
