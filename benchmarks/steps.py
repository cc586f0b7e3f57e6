"""What each schedule choice contributes, one change at a time, on the GPU at hand.

    python3 -m benchmarks.steps STEP [STEP ...] [--rounds 7] [--seeds S S S]

A STEP is `family/variant` or `family/variant:name=value,...` (that variant with some parameters
replaced). Every step is compiled, checked against its family's reference and timed next to it
with `nox -s gpu`'s timing, in one run; the table gives each step's ratio to its reference and
its change against the step before. Exit status 2 without a CUDA GPU or with a bad step.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from tilelang_golden.gpu.measure.timing import DEFAULT_ROUNDS

REPO = Path(__file__).resolve().parents[1]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog=f"python -m benchmarks.{Path(__file__).stem}", description=__doc__.splitlines()[0]
    )
    parser.add_argument("steps", nargs="+", metavar="STEP")
    parser.add_argument("--rounds", type=int, default=DEFAULT_ROUNDS)
    parser.add_argument("--seeds", type=int, nargs="+", help="input seeds (default: three fresh ones)")
    options = parser.parse_args(argv)

    from tilelang_golden.gpu.run.device import gpu_unavailable

    problem = gpu_unavailable()
    if problem:
        print(f"benchmarks.steps: {problem}", file=sys.stderr)
        return 2
    from tilelang_golden.gpu.measure.numerics import fresh_seeds
    from tilelang_golden.gpu.schedule_steps import BadStep, run_steps

    try:
        lines = run_steps(options.steps, options.rounds, options.seeds or fresh_seeds())
    except BadStep as error:
        print(f"benchmarks.steps: {error}", file=sys.stderr)
        return 2
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
