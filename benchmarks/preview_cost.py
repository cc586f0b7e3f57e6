"""What an upgrade preview costs against a cold static run of the same cases, side by side in one run on one machine.

    python -m benchmarks.preview_cost [--rounds N] [--preview-python .nox/upgrade-preview/bin/python] [-- OPTIONS]

The static run is `tilelang-golden static --no-cache` in the static session's venv (the pinned TileLang); the preview
is `tilelang-golden upgrade-preview` in the venv `nox -s upgrade-preview -- VERSION` made (the TileLang previewed),
which runs the same static session, cold, and writes its report. OPTIONS (pytest's `-k EXPR`, `-n N`) go to both,
so both lower the same cases. The runs alternate (static, preview, per round), so a busy machine slows both alike;
the table gives each run's seconds and the preview's ratio to the static run's.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
STATIC_PYTHON = REPO / ".nox" / "static" / "bin" / "python"
PREVIEW_PYTHON = REPO / ".nox" / "upgrade-preview" / "bin" / "python"


def timed(command: list[str]) -> tuple[float, int]:
    """Seconds the command took, and its exit status (the static run fails on the cases the pin does not match)."""
    start = time.perf_counter()
    done = subprocess.run(command, cwd=REPO, capture_output=True, text=True)
    return time.perf_counter() - start, done.returncode


def tilelang_of(python: Path) -> str:
    done = subprocess.run(
        [str(python), "-c", "import importlib.metadata as m; print(m.version('tilelang'))"],
        capture_output=True,
        text=True,
    )
    return done.stdout.strip() or "?"


def main() -> int:
    parser = argparse.ArgumentParser(
        prog=f"python -m benchmarks.{Path(__file__).stem}",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--rounds", type=int, default=1, help="static and preview runs each (default 1)")
    parser.add_argument("--preview-python", type=Path, default=PREVIEW_PYTHON, help="the preview venv's Python")
    parser.add_argument("options", nargs="*", help="options for both runs, after `--` (e.g. -k EXPR)")
    args = parser.parse_args()
    seconds: dict[str, list[float]] = {"static": [], "preview": []}
    with tempfile.TemporaryDirectory() as scratch:
        for round_ in range(args.rounds):
            pending, output = Path(scratch) / f"static-{round_}", Path(scratch) / f"preview-{round_}"
            static = [str(STATIC_PYTHON), "-m", "tilelang_golden", "static", "--no-cache", f"--pending-dir={pending}"]
            preview = [str(args.preview_python), "-m", "tilelang_golden", "upgrade-preview", f"--output={output}"]
            for name, command in (("static", static), ("preview", preview)):
                wall, status = timed([*command, *args.options])
                seconds[name].append(wall)
                print(f"round {round_ + 1}: {name} {wall:.1f} s (exit {status})", file=sys.stderr)
    static_s, preview_s = statistics.median(seconds["static"]), statistics.median(seconds["preview"])
    print(f"| run | TileLang | seconds (median of {args.rounds}) |")
    print("| --- | --- | --- |")
    print(f"| static, cold | {tilelang_of(STATIC_PYTHON)} | {static_s:.1f} |")
    print(f"| upgrade preview | {tilelang_of(args.preview_python)} | {preview_s:.1f} |")
    print(f"\npreview / static: {preview_s / static_s:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
