"""One environment's side of a GPU speed comparison (`tilelang-golden upgrade-preview --gpu` starts it).

    PYTHON -m tilelang_golden.upgrade.timing_worker [--timer interleaved] [--seeds S S S]

Compiles and checks every registered variant with the TileLang of the Python that runs it (the
GPU check: snapshot agreement, numerics), prints one JSON line with its versions and each
variant's status, then answers each request line `{"rounds": n, "seed": s}` on standard input
with one JSON line of ratios (reference ms / variant ms, median over the rounds). Its log goes
to standard error. Exit status 2 when there is no CUDA GPU or no nvcc.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from tilelang_golden.config import read_config
from tilelang_golden.gpu.measure.timing import REPEAT_MS, TIMERS


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--timer", choices=TIMERS, default=TIMERS[0])
    parser.add_argument("--repeat-ms", type=float, default=REPEAT_MS)
    parser.add_argument("--seeds", type=int, nargs="+", help="input seeds (default: fresh ones)")
    parser.add_argument("--golden-dir", type=Path, help="default: the repository's settings ([tool.tilelang-golden])")
    options = parser.parse_args(argv)
    settings = read_config()

    from tilelang_golden.gpu.run.device import gpu_unavailable

    problem = gpu_unavailable()
    if problem:
        print(f"gpu timing worker: {problem}", file=sys.stderr)
        return 2
    # Answers go to the original standard output; everything else written there (compiler and
    # library messages, from Python or C) goes to standard error, so it cannot garble an answer.
    answers = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)
    sys.stdout = sys.stderr

    from tilelang_golden.catalog.loading import load_families, on_targets
    from tilelang_golden.gpu.check import CheckPlan, check_cases
    from tilelang_golden.gpu.measure.timing import make_bench, measure_pairs
    from tilelang_golden.gpu.selection import device_cases
    from tilelang_golden.upgrade.speed import serve

    def log(line: str) -> None:
        print(line, file=sys.stderr, flush=True)

    families = on_targets(load_families(*settings.families), settings.targets).families
    plan = CheckPlan(
        lambda device: device_cases(families, device.target),
        seeds=options.seeds,
        rounds=2,
        golden=options.golden_dir or settings.golden,
        timer=options.timer,
        repeat_ms=options.repeat_ms,
    )
    run = check_cases(plan, log=log)
    verdicts = {r.key: run.verdict(r) for r in run.variants}
    hello = {
        "tilelang": run.device.versions["tilelang"],
        "torch": run.device.versions["torch"],
        "device": run.device.name,
        "seeds": list(run.seeds),
        "variants": {key: {"status": v.status, "problems": list(v.failures)} for key, v in verdicts.items()},
    }
    bench, pairs = make_bench(options.timer, repeat_ms=options.repeat_ms), list(run.pairs.values())

    def time_block(rounds: int, seed: int) -> dict[str, float]:
        return {key: timing.ratio for key, timing in measure_pairs(pairs, rounds, bench, seed).items()}

    serve(hello, time_block, sys.stdin, answers)
    return 0


if __name__ == "__main__":
    sys.exit(main())
