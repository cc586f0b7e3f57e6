"""What the machine facts cost the static check: `tilelang-golden static` of a baseline commit and of this working tree,
side by side in one run on one machine, each cold (a fresh lowering cache, every case lowered and compiled) and then
warm (every case from that cache).

    .nox/static/bin/python -m benchmarks.machine_cost --baseline REF [--rounds N] [-- PYTEST OPTIONS]

The baseline is checked out into a temporary git worktree; both trees run in this Python (the static session's venv,
which holds NVIDIA's compilers), each with its own source first on the path, so the packages are the same and the code
is the only difference. The runs alternate (baseline cold, tree cold, baseline warm, tree warm, per round), so a busy
machine slows both alike; the table gives each run's seconds and the tree's ratio to the baseline's.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.static import LOWERING_LINE, Run

REPO = Path(__file__).resolve().parents[1]


def static_run(tree: Path, name: str, cache: Path, options: list[str]) -> Run:
    """`python -m tilelang_golden static` in `tree`, with the tree's harness and families first on the path."""
    environment = dict(os.environ, PYTHONPATH=os.pathsep.join([str(tree / "src"), str(tree)]))
    environment.pop("CI", None)
    command = [sys.executable, "-m", "tilelang_golden", "static", f"--lowering-cache={cache}", *options]
    start = time.perf_counter()
    done = subprocess.run(command, cwd=tree, env=environment, capture_output=True, text=True)
    wall = time.perf_counter() - start
    found = LOWERING_LINE.search(done.stdout)
    lowered, cached = (int(found[1]), int(found[2])) if found else (None, None)
    if done.returncode != 0:
        print(f"{name}: exit {done.returncode}; its last lines:\n{done.stdout[-1500:]}", file=sys.stderr)
    return Run(name, wall, done.returncode, lowered, cached)


def main() -> int:
    parser = argparse.ArgumentParser(
        prog=f"python -m benchmarks.{Path(__file__).stem}",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--baseline", required=True, help="the commit to compare with (before the machine facts)")
    parser.add_argument("--rounds", type=int, default=1, help="cold and warm runs of each tree (default 1)")
    parser.add_argument("options", nargs="*", help="pytest options for every run, after `--`")
    args = parser.parse_args()
    runs: dict[tuple[str, str], list[Run]] = {}
    with tempfile.TemporaryDirectory() as scratch:
        baseline = Path(scratch) / "baseline"
        subprocess.run(["git", "worktree", "add", "--detach", str(baseline), args.baseline], cwd=REPO, check=True)
        try:
            trees = {f"baseline {args.baseline}": baseline, "this tree": REPO}
            for round_ in range(args.rounds):
                caches = {name: Path(scratch) / f"cache-{index}-{round_}" for index, name in enumerate(trees)}
                for mode in ("cold", "warm"):
                    for name, tree in trees.items():
                        run = static_run(tree, f"{name} {mode}", caches[name], args.options)
                        runs.setdefault((name, mode), []).append(run)
                        print(f"{run.name}: {run.wall:.1f} s, exit {run.exit}", file=sys.stderr, flush=True)
        finally:
            subprocess.run(["git", "worktree", "remove", "--force", str(baseline)], cwd=REPO, check=False)
    print(f"{'tree':<28} {'mode':<5} {'median s':>9} {'runs s':<24} {'lowered':>8} {'cached':>7} {'exit':>5}")
    medians = {}
    for (name, mode), found in runs.items():
        medians[name, mode] = statistics.median(run.wall for run in found)
        walls = " ".join(f"{run.wall:.0f}" for run in found)
        last = found[-1]
        print(
            f"{name:<28} {mode:<5} {medians[name, mode]:9.1f} {walls:<24} {last.lowered!s:>8} {last.cached!s:>7} "
            f"{last.exit:>5}"
        )
    base = f"baseline {args.baseline}"
    for mode in ("cold", "warm"):
        print(f"{mode}: this tree / baseline = {medians['this tree', mode] / medians[base, mode]:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
