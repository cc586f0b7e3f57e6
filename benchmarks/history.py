"""The performance history's change points on synthetic histories made of the H200's noise, and the time to render a
large history. Prints two tables; `--quick` runs fewer histories and a smaller render.

    python -m benchmarks.history [--histories 300] [--runs 1000] [--variants 100]

The noise: on one H200 start, 57 A/B pairs of identical kernels gave medians from -1.1 % to +1.4 %, 54 of them within
1 % (docs/measurements.md): a normal spread of 0.52 % for the difference of two measurements. Each synthetic run's
ratio gets a normal error of that spread / sqrt(2) ("as measured": two runs then differ as the pairs did), and, to
leave a margin, of the whole 0.52 % ("doubled variance").
"""

from __future__ import annotations

import argparse
import hashlib
import math
import random
import shutil
import statistics
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path

from tilelang_golden.history.changes import change_points
from tilelang_golden.history.records import Record, VariantFigures, read_history, write_record

AB_PAIRS, WITHIN_ONE_PERCENT = 57, 54
PAIR_NOISE = 0.01 / statistics.NormalDist().inv_cdf((1 + WITHIN_ONE_PERCENT / AB_PAIRS) / 2)  # 0.52 %
NOISES = {"as measured": PAIR_NOISE / math.sqrt(2), "doubled variance": PAIR_NOISE}


def synthetic(runs: int, steps: dict[int, float], seed: int, noise: float, level: float = 0.8) -> list[float]:
    """`runs` ratios around `level` with a normal error of relative spread `noise`; from run `at` on, each step
    multiplies the level by 1 + size."""
    rng = random.Random(seed)
    values = []
    for run in range(runs):
        for at, size in steps.items():
            if run == at:
                level *= 1 + size
        values.append(level * (1 + rng.gauss(0, noise)))
    return values


@dataclass(frozen=True)
class Scenario:
    name: str
    runs: int
    steps: dict[int, float]


SCENARIOS = (
    Scenario("one 3 % step (slower)", 60, {30: -0.03}),
    Scenario("five 1.5 % steps (slower)", 120, {20: -0.015, 40: -0.015, 60: -0.015, 80: -0.015, 100: -0.015}),
    Scenario("noise only", 200, {}),
)


@dataclass(frozen=True)
class Found:
    """Over many histories of one scenario: in how many every step had a change found at its run, within one run
    and within two, and the most changes found in one history that are no step's (more than two runs from every
    step)."""

    histories: int
    exact: int
    within_one: int
    within_two: int
    most_false: int


def detect(scenario: Scenario, histories: int, noise: float) -> Found:
    steps = sorted(scenario.steps)
    hits = {0: 0, 1: 0, 2: 0}
    most_false = 0
    for seed in range(histories):
        found = change_points(synthetic(scenario.runs, scenario.steps, seed, noise))
        for runs in hits:
            hits[runs] += all(any(abs(f - s) <= runs for f in found) for s in steps)
        most_false = max(most_false, sum(1 for f in found if all(abs(f - s) > 2 for s in steps)))
    return Found(histories, hits[0], hits[1], hits[2], most_false)


def commit(run: int) -> str:
    """A made-up commit's SHA for run `run`."""
    return hashlib.sha1(str(run).encode()).hexdigest()


def synthetic_history(folder: Path, runs: int, variants: int, steps: dict[int, float], seed: int = 0) -> None:
    """`runs` records of `variants` variants under `folder`, each variant with `steps` (run -> size)."""
    start = datetime(2026, 1, 1, tzinfo=timezone.utc)
    series = [synthetic(runs, steps, seed + v, NOISES["as measured"]) for v in range(variants)]
    for run in range(runs):
        when = (start + timedelta(hours=run)).isoformat()
        timed = {
            f"family{v % 10}/variant{v}": VariantFigures(1.0 / s[run], 0.01, s[run], 0.01) for v, s in enumerate(series)
        }
        write_record(Record(commit(run), when, when, "", "NVIDIA H200", {"tilelang": "0.1.15"}, timed), folder)


def render_seconds(runs: int, variants: int) -> tuple[float, float, str]:
    """Seconds to write the synthetic history, seconds to read and render it, and the site's summary."""
    from tilelang_golden.history.page import write_site

    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder)
        began = time.perf_counter()
        synthetic_history(root / "history", runs, variants, {runs // 2: -0.03})
        written = time.perf_counter()
        site = write_site(read_history(root / "history"), root / "site")
        return written - began, time.perf_counter() - written, site.summary()


def example_plot(path: Path) -> None:
    """The site's plot of one synthetic history with the five 1.5 % steps, written to `path` (docs/history.md)."""
    from tilelang_golden.history.page import write_site

    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder)
        scenario = SCENARIOS[1]
        synthetic_history(root / "history", scenario.runs, 1, scenario.steps)
        write_site(read_history(root / "history"), root / "site", workers=1)
        path.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(root / "site" / "plots" / "family0" / "family0--variant0--nvidia-h200.svg", path)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog=f"python -m benchmarks.{Path(__file__).stem}", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--histories", type=int, default=300)
    parser.add_argument("--runs", type=int, default=1000)
    parser.add_argument("--variants", type=int, default=100)
    parser.add_argument("--quick", action="store_true", help="30 histories, 100 runs x 20 variants")
    parser.add_argument("--example", type=Path, help="only write the plot of a synthetic history with five steps here")
    args = parser.parse_args(argv)
    if args.example:
        example_plot(args.example)
        return
    if args.quick:
        args.histories, args.runs, args.variants = 30, 100, 20
    print(
        f"Synthetic histories of the H200's noise, {args.histories} of each (false changes: the most in one history):\n"
    )
    print("| scenario | runs | noise (one run) | steps found: at their run | within 1 run | within 2 | false changes |")
    print("|---|---|---|---|---|---|---|")
    for scenario in SCENARIOS:
        for name, noise in NOISES.items():
            found = detect(scenario, args.histories, noise)
            counts = (found.exact, found.within_one, found.within_two)
            cells = [f"{n}/{found.histories}" if scenario.steps else "—" for n in counts]
            cells = [scenario.name, str(scenario.runs), f"{name}, {noise:.2%}", *cells, str(found.most_false)]
            print(f"| {' | '.join(cells)} |")
    writing, rendering, summary = render_seconds(args.runs, args.variants)
    print(f"\nRendering {args.runs} runs x {args.variants} variants: written in {writing:.1f} s, "
          f"read and rendered in {rendering:.1f} s\n  {summary}")  # fmt: skip


if __name__ == "__main__":
    main()
