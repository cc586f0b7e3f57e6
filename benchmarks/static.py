"""How long the static check takes: per-case lowering and key time, then `nox -s static` end to end.

    .nox/static/bin/python -m benchmarks.static                              # both parts
    .nox/static/bin/python -m benchmarks.static --no-nox                     # only the per-case table
    .nox/static/bin/python -m benchmarks.static --edit kernels/x.py OLD NEW  # and a one-family change

It runs in the static session's Python, which holds this project; `nox` itself is taken from PATH,
and its runs reuse the virtualenv (`-R`, no install step), as a developer's second run would.

The end-to-end runs, one after the other on the same machine: without the lowering cache (every
case lowered), cold (every case lowered and stored in a fresh cache), warm (every case from that
cache), and, with `--edit FILE OLD NEW`, warm after replacing OLD by NEW in one family's file
(restored afterwards; its cases then differ from golden/, so that run exits 1). The warm run's
produced files must equal the cold run's, byte for byte, for every case.
"""

from __future__ import annotations

import argparse
import filecmp
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
# The static check must take at most this times the serial lowering time divided by the cores.
WALL_LIMIT = 1.2
# A GitHub runner's cores (ubuntu-24.04: 4 for public repositories, 2 for private ones), for the shard count.
RUNNER_CORES = (2, 4)
LOWERING_LINE = re.compile(r"(\d+) cases lowered, (\d+) from the lowering cache")


def time_cases() -> list[tuple[str, str, float, float]]:
    """Per case, in this process: (case id, family, seconds to trace and key it, seconds to lower it,
    extract its facts and normalize it)."""
    from tilelang_golden.catalog.cases import all_cases
    from tilelang_golden.catalog.loading import load_families
    from tilelang_golden.static.session import LoweringSession

    lowerings = LoweringSession()
    timings = []
    for case in all_cases(load_families()):
        start = time.perf_counter()
        lowerings.key(case)
        keyed = time.perf_counter()
        lowerings.files(case, fresh=True)
        timings.append((case.id, case.family.name, keyed - start, time.perf_counter() - keyed))
    return timings


def shard_count(work_seconds: float, cores: int, job_overhead: float) -> int:
    """docs/ci.md, "The shard count": the smallest N with N (N + 1) >= W / (c O)."""
    shards = 1
    while shards * (shards + 1) < work_seconds / (cores * job_overhead):
        shards += 1
    return shards


@dataclass(frozen=True)
class Run:
    name: str
    wall: float
    exit: int
    lowered: int | None
    cached: int | None


def nox_static(nox: str, name: str, *options: str) -> Run:
    start = time.perf_counter()
    done = subprocess.run([nox, "-R", "-s", "static", "--", *options], cwd=REPO, capture_output=True, text=True)
    wall = time.perf_counter() - start
    found = LOWERING_LINE.search(done.stdout)
    lowered, cached = (int(found[1]), int(found[2])) if found else (None, None)
    return Run(name, wall, done.returncode, lowered, cached)


def end_to_end(nox: str, edit: list[str] | None, serial: float) -> None:
    with tempfile.TemporaryDirectory() as scratch:
        folder = Path(scratch)
        cache = f"--lowering-cache={folder / 'cache'}"
        pending = {name: f"--pending-dir={folder / name}" for name in ("cold", "warm", "edited")}
        runs = [
            nox_static(nox, "no cache", "--no-cache"),
            nox_static(nox, "cold", cache, "--refresh-cache", pending["cold"]),
            nox_static(nox, "warm", cache, pending["warm"]),
        ]
        if edit:
            path, old, new = REPO / edit[0], edit[1], edit[2]
            original = path.read_text()
            if old not in original:
                raise SystemExit(f"--edit: {old!r} is not in {edit[0]}")
            try:
                path.write_text(original.replace(old, new, 1))
                runs.append(nox_static(nox, f"one family edited ({edit[0]})", cache, pending["edited"]))
            finally:
                path.write_text(original)
        print(f"{'run':<42} {'wall s':>7} {'exit':>5} {'lowered':>8} {'cached':>7} {'of no cache':>12}")
        for run in runs:
            share = f"{run.wall / runs[0].wall:11.0%}"
            print(f"{run.name:<42} {run.wall:7.1f} {run.exit:>5} {run.lowered!s:>8} {run.cached!s:>7} {share:>12}")
        same, differ = _compare_folders(folder / "cold", folder / "warm")
        print(
            f"\nwarm run's produced files against the cold run's: {same} identical, {len(differ)} differ {differ[:5]}"
        )
    cores = os.cpu_count() or 1
    ratio = runs[0].wall / (serial / cores)
    print(
        f"nox -R -s static -- --no-cache: {runs[0].wall:.1f} s against serial lowering / cores = {serial:.1f} / "
        f"{cores} = {serial / cores:.1f} s: {ratio:.2f}x, {'within' if ratio <= WALL_LIMIT else 'over'} the "
        f"{WALL_LIMIT}x limit"
    )


def _compare_folders(one: Path, other: Path) -> tuple[int, list[str]]:
    """(files byte-identical in both folders, the files that differ or exist in one only)."""
    files = sorted({str(p.relative_to(root)) for root in (one, other) for p in root.rglob("*") if p.is_file()})
    differ = [
        f
        for f in files
        if not ((one / f).is_file() and (other / f).is_file() and filecmp.cmp(one / f, other / f, shallow=False))
    ]
    return len(files) - len(differ), differ


def main() -> int:
    parser = argparse.ArgumentParser(
        prog=f"python -m benchmarks.{Path(__file__).stem}",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--no-nox", action="store_true", help="skip the end-to-end `nox -s static` runs")
    parser.add_argument(
        "--edit", nargs=3, metavar=("FILE", "OLD", "NEW"), help="a one-family change for the last warm run"
    )
    parser.add_argument(
        "--job-overhead",
        type=float,
        default=45.0,
        help="O of docs/ci.md's shard rule: seconds a CI job pays before its first case (default 45)",
    )
    args = parser.parse_args()
    nox = shutil.which("nox")
    if not args.no_nox and nox is None:
        print("nox is not on PATH: `python3 -m pip install nox`, or pass --no-nox", file=sys.stderr)
        return 2

    start = time.perf_counter()
    import tilelang  # noqa: F401

    import_seconds = time.perf_counter() - start
    timings = time_cases()
    by_group: dict[str, list[tuple[float, float]]] = {}
    for case_id, family, key_seconds, seconds in timings:
        target = case_id.rsplit("/", 1)[1]
        for group in (family, target, f"{family} {target}"):
            by_group.setdefault(group, []).append((key_seconds, seconds))

    print(f"cores: {os.cpu_count()}, import tilelang: {import_seconds:.2f} s")
    print(f"{'case':<56} {'lower s':>8}")
    for case_id, _, _, seconds in sorted(timings, key=lambda t: -t[3])[:10]:
        print(f"{case_id:<56} {seconds:8.2f}")
    print()
    print(f"{'family / target':<34} {'cases':>5} {'lower s':>8} {'mean s':>7} {'max s':>6} {'trace+key s':>12}")
    for group, values in sorted(by_group.items()):
        lowering = [s for _, s in values]
        keys = sum(k for k, _ in values)
        print(
            f"{group:<34} {len(values):>5} {sum(lowering):8.1f} {sum(lowering) / len(values):7.2f} "
            f"{max(lowering):6.2f} {keys:12.2f}"
        )
    serial = sum(t[3] for t in timings)
    print(f"{'all':<34} {len(timings):>5} {serial:8.1f}  (serial, one process)")
    print()
    for cores in RUNNER_CORES:
        shards = shard_count(serial, cores, args.job_overhead)
        print(f"shards by docs/ci.md's rule at {cores} cores, O = {args.job_overhead:.0f} s: {shards}")
    if not args.no_nox:
        print()
        end_to_end(nox, args.edit, serial)
    return 0


if __name__ == "__main__":
    sys.exit(main())
