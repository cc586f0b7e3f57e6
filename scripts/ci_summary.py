"""Job summary and error annotations for a static run on GitHub Actions.

    python scripts/ci_summary.py build/golden-pending --artifact golden-pending-shard-1

The logic (and its tests) is in harness/static/job_summary.py; this file only parses the command line.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TextIO

from harness.static.job_summary import publish


def main(argv: Sequence[str] | None = None, environ: Mapping[str, str] = os.environ, out: TextIO = sys.stdout) -> int:
    parser = argparse.ArgumentParser(
        prog="scripts/ci_summary.py",
        description="Turn the static session's results into a GitHub job summary and annotations.",
    )
    parser.add_argument(
        "pending",
        type=Path,
        nargs="?",
        default=Path("build/golden-pending"),
        help="the session's pending folder (--pending-dir), which holds its results (default: build/golden-pending)",
    )
    parser.add_argument("--title", default="Golden snapshots", help="heading of the summary")
    parser.add_argument("--artifact", default=None, help="name of the artifact that holds build/golden-pending/")
    parser.add_argument(
        "--no-produced-files", action="store_true", help="the checks produce no snapshot (the orphan check)"
    )
    parser.add_argument(
        "--comment-file",
        type=Path,
        default=None,
        help="also write the summary to this file (the pull request comment workflow posts it)",
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
    )


if __name__ == "__main__":
    sys.exit(main())
