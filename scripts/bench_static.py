"""How long the static check takes: per-case lowering time, then `nox -s static` end to end.

    .nox/static/bin/python scripts/bench_static.py            # both parts (after `nox -s static` once)
    .nox/static/bin/python scripts/bench_static.py --no-nox   # only the per-case lowering table

It runs in the static session's Python, which holds this project; `nox` itself is taken from PATH.

The nox runs reuse their virtualenv, as a developer's second run would: `-r` (pip still confirms
the pins) and `-R` (no install step).
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def time_lowerings() -> list[tuple[str, float]]:
    """Lower every case once in this process, timing lowering plus fact extraction plus normalization."""
    from harness.static.cases import all_cases
    from harness.static.produce import case_files

    timings = []
    for case in all_cases():
        start = time.perf_counter()
        case_files(case, fresh=True)
        timings.append((case.id, time.perf_counter() - start))
    return timings


# -r reuses the venv but lets pip confirm the pins; -R also skips that install step.
NOX_REUSE_FLAGS = ("-r", "-R")


def time_nox_static(nox: str, reuse_flag: str) -> tuple[float, int]:
    start = time.perf_counter()
    completed = subprocess.run([nox, reuse_flag, "-s", "static"], cwd=REPO, capture_output=True, text=True)
    return time.perf_counter() - start, completed.returncode


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--no-nox", action="store_true", help="skip the end-to-end `nox -s static` timings")
    parser.add_argument("--runs", type=int, default=2, help="end-to-end runs (default 2; the spread shows noise)")
    args = parser.parse_args()

    start = time.perf_counter()
    import tilelang  # noqa: F401

    import_seconds = time.perf_counter() - start
    timings = time_lowerings()
    by_group: dict[str, list[float]] = {}
    for case_id, seconds in timings:
        family, _variant, target = case_id.split("/")
        for group in (family, target, f"{family} {target}"):
            by_group.setdefault(group, []).append(seconds)

    print(f"cores: {os.cpu_count()}, import tilelang: {import_seconds:.2f} s")
    print(f"{'case':<56} {'seconds':>8}")
    for case_id, seconds in sorted(timings, key=lambda t: -t[1]):
        print(f"{case_id:<56} {seconds:8.2f}")
    print()
    print(f"{'family / target':<34} {'cases':>5} {'total s':>8} {'mean s':>7} {'max s':>6}")
    for group, values in sorted(by_group.items()):
        print(f"{group:<34} {len(values):>5} {sum(values):8.1f} {sum(values) / len(values):7.2f} {max(values):6.2f}")
    total = sum(s for _, s in timings)
    print(f"{'all':<34} {len(timings):>5} {total:8.1f}  (serial, one process)")

    nox = shutil.which("nox")
    if not args.no_nox and nox is None:
        print("\nnox is not on PATH: `python3 -m pip install nox`, or pass --no-nox", file=sys.stderr)
        return 2
    if not args.no_nox:
        print()
        print(f"{'command':<22} {'run':>3} {'wall s':>7} {'exit':>5}")
        for run in range(1, args.runs + 1):
            for flag in NOX_REUSE_FLAGS:  # alternated, so both see the same machine load
                seconds, code = time_nox_static(nox, flag)
                print(f"{'nox ' + flag + ' -s static':<22} {run:>3} {seconds:7.1f} {code:>5}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
