"""How sharp the GPU timing gate is, measured: the session's timing method repeated on the GPU at hand.

    python3 scripts/bench_timing.py [--repetitions 5] [--rounds 7] [--timer interleaved|events|cudagraph]

Compiles every registered variant once, plus the twin each family may declare (`Family.timing_twin`:
one variant with one dimension raised so that it does about 5 % more work), then runs the
session's timing (`measure_pairs`) `--repetitions` times back to back and prints a table per
criterion of the timing issue:
1. identical kernels: variants whose snapshotted CUDA is byte-identical, max/min - 1 of their
   ratios within each repetition;
2. repeatability: each variant's ratio, max/min - 1 over the repetitions;
3. detection: each twin's slowdown per unit of its original's reference, and the gate's verdict
   comparing it with the original's entry in golden/timing/<gpu>.yaml; and the verdicts of every
   unchanged variant (none may warn or fail).
Needs a CUDA GPU and a baseline recorded with the same method (`nox -s gpu -- --record-baseline`).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from harness.gpu.timing import TIMERS

REPO = Path(__file__).resolve().parents[1]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repetitions", type=int, default=5)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--timer", choices=TIMERS, default=TIMERS[0])
    parser.add_argument("--repeat-ms", type=float, default=100)
    parser.add_argument("--timing-dir", type=Path, default=REPO / "golden" / "timing")
    options = parser.parse_args(argv)

    from harness.gpu.device import gpu_unavailable

    problem = gpu_unavailable()
    if problem:
        print(f"bench_timing: {problem}", file=sys.stderr)
        return 2
    from harness.gpu.timing_bench import run_benchmark

    started = time.perf_counter()
    lines, passed = run_benchmark(
        options.repetitions, options.rounds, options.timer, options.repeat_ms, options.timing_dir, REPO / "golden"
    )
    print("\n".join(lines))
    print(f"\nbenchmark wall time {time.perf_counter() - started:.0f} s")
    return 0 if passed else 1


if __name__ == "__main__":
    sys.exit(main())
