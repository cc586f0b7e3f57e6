"""`tilelang-golden gpu`: numeric and timing checks of every registered variant on the GPU at hand (`nox -s gpu`).

Exit status: 0 the gate passed, 1 it failed, 2 nothing could be checked (no CUDA device, no
snapshot target for it, no nvcc, no selected variant for its target, a refused baseline
recording, bad options, `--sanitize` without compute-sanitizer). See docs/gpu.md.
"""

from __future__ import annotations

import argparse
import fnmatch
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from tilelang_golden.config import ConfigError, read_config
from tilelang_golden.gpu.gate.numerics_gate import MIN_SEEDS
from tilelang_golden.gpu.gate.repeat_gate import DEFAULT_LAUNCHES
from tilelang_golden.gpu.measure.timing import DEFAULT_ROUNDS, REPEAT_MS, TIMERS, WARMUP_MS
from tilelang_golden.gpu.run.device import Device, gpu_unavailable

if TYPE_CHECKING:
    from tilelang_golden.family import Family
    from tilelang_golden.gpu.check import CheckPlan
    from tilelang_golden.gpu.sanitize import SanitizerPlan


class NothingSelected(Exception):
    """`--select` matches no variant of the families found."""


def build_parser() -> argparse.ArgumentParser:
    """The command's options: what it checks, how it times, where its files are, what it compares against."""
    parser = argparse.ArgumentParser(prog="tilelang-golden gpu", description=__doc__.splitlines()[0])
    parser.add_argument(
        "--output", type=Path, default=Path("build/gpu-report"), help="report folder (default: build/gpu-report)"
    )
    _measuring_options(parser)
    _scope_options(parser)
    _comparison_options(parser)
    _race_options(parser)
    parser.add_argument(
        "--record-baseline", action="store_true", help="write this run's ratios as the baseline for this GPU model"
    )
    parser.add_argument(
        "--force-record-under-ci", action="store_true", help="allow --record-baseline although CI is set"
    )
    return parser


def _measuring_options(parser: argparse.ArgumentParser) -> None:
    """Inputs and timing: seeds, rounds, the timer and its windows."""
    parser.add_argument(
        "--seeds",
        type=int,
        nargs="+",
        help=f"input seeds, at least {MIN_SEEDS} (default: fresh ones, recorded in the report)",
    )
    parser.add_argument(
        "--rounds",
        type=int,
        default=DEFAULT_ROUNDS,
        help="timing rounds, each variant next to its reference in random order; at least 2 (default: %(default)s)",
    )
    parser.add_argument(
        "--timer",
        choices=TIMERS,
        default=TIMERS[0],
        help="alternating launches (interleaved), do_bench (events) or do_bench_cudagraph (default: %(default)s)",
    )
    parser.add_argument("--timing-seed", type=int, help="seed of the random order (default: fresh, recorded)")
    parser.add_argument(
        "--warmup-ms", type=float, default=WARMUP_MS, help="warm-up per measurement (default: %(default)s)"
    )
    parser.add_argument(
        "--repeat-ms",
        type=float,
        default=REPEAT_MS,
        help="timed launches per measurement and side (default: %(default)s)",
    )


def _scope_options(parser: argparse.ArgumentParser) -> None:
    """What is checked and where its files are: the variants, their packages, the snapshot and baseline folders."""
    parser.add_argument(
        "--select", action="append", metavar="GLOB", help="only variants whose family/name matches (repeatable)"
    )
    parser.add_argument(
        "--families",
        nargs="+",
        default=None,
        metavar="PACKAGE",
        help="packages of family files (default: those the static check snapshots, pyproject.toml's "
        "[tool.tilelang-golden] families); others, such as the test-only tests.gpu_families, have no snapshots "
        "to agree with and never record a baseline",
    )
    parser.add_argument(
        "--golden-dir", type=Path, default=None, help="static snapshots (default: [tool.tilelang-golden] golden)"
    )
    parser.add_argument(
        "--timing-dir", type=Path, default=None, help="timing baselines (default: [tool.tilelang-golden] timing)"
    )


def _comparison_options(parser: argparse.ArgumentParser) -> None:
    """What the run times against besides the references: another commit's kernels, main's history."""
    parser.add_argument(
        "--against",
        metavar="REF",
        help="also time every variant whose snapshot changed since the commit REF next to REF's kernel of it, "
        "in alternation, and gate on the time ratio (in CI: the pull request's merge base)",
    )
    parser.add_argument(
        "--against-all",
        action="store_true",
        help="with --against, time unchanged variants against REF too (identical kernels: the gate's false alarms)",
    )
    parser.add_argument(
        "--history",
        type=Path,
        default=Path("build/gpu-history"),
        help="a checkout of main's performance history: the A/B table shows each variant's recent runs on main "
        "(default: %(default)s, where the GPU workflow puts it for a pull request's run; skipped where absent)",
    )


def _race_options(parser: argparse.ArgumentParser) -> None:
    """Races and uninitialized reads: repeated launches, the opt-in sanitizer pass."""
    parser.add_argument(
        "--repeats",
        type=int,
        default=DEFAULT_LAUNCHES,
        metavar="N",
        help="launch every variant N times on the first seed's inputs and fail it where an output is not bitwise "
        "identical across the launches (a race, an uninitialized read); 1 turns this off (default: %(default)s)",
    )
    parser.add_argument(
        "--sanitize",
        action="store_true",
        help="also run every variant under compute-sanitizer's racecheck, synccheck and initcheck at its family's "
        "sanitize_shape, one process per variant and tool, and fail it where a tool reports a hazard",
    )
    parser.add_argument(
        "--sanitize-jobs",
        type=int,
        default=None,
        metavar="N",
        help="with --sanitize, sanitizer processes at a time (default: the cores, at most 16)",
    )
    parser.add_argument(
        "--sanitize-limit",
        type=float,
        default=None,
        metavar="SECONDS",
        help="with --sanitize, how long one variant may run under one tool before it is stopped and fails (default: "
        "TimeLimits.sanitizer_s)",
    )


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """The options given, the repository's settings ([tool.tilelang-golden]) where none is, then refused where
    they cannot be used together."""
    parser = build_parser()
    options = parser.parse_args(argv)
    try:
        settings = read_config()
    except ConfigError as error:
        parser.error(str(error))
    options.snapshotted = settings.families  # what the static check snapshots: what a variant must agree with
    options.families = options.families or list(settings.families)
    options.golden_dir = options.golden_dir or settings.golden
    options.timing_dir = options.timing_dir or settings.timing
    options.targets = settings.targets
    if options.seeds is not None and len(set(options.seeds)) < MIN_SEEDS:
        parser.error(f"--seeds needs at least {MIN_SEEDS} distinct seeds")
    if options.against_all and not options.against:
        parser.error("--against-all needs --against REF")
    if options.rounds < 2:
        parser.error("--rounds must be at least 2: the spread between rounds is the measured noise")
    if options.repeats < 1:
        parser.error("--repeats must be at least 1 (1: no repeated launches)")
    if options.sanitize_jobs is not None and (not options.sanitize or options.sanitize_jobs < 1):
        parser.error("--sanitize-jobs needs --sanitize and at least 1")
    if options.sanitize_limit is not None and (not options.sanitize or options.sanitize_limit <= 0):
        parser.error("--sanitize-limit needs --sanitize and more than 0 seconds")
    return options


def check_plan(options: argparse.Namespace, families: Sequence[Family]) -> CheckPlan:
    """What the check runs, from the options: the variants `--select` chooses on the device's target, and with
    `--against` the A/B pairs against the base (BaseUnavailable where the base cannot be read)."""
    from tilelang_golden.catalog.cases import Case, family_cases
    from tilelang_golden.gpu.check import CheckPlan
    from tilelang_golden.gpu.selection import device_cases, not_run_on

    def chosen(key: str) -> bool:  # a variant's `family/variant`
        return not options.select or any(fnmatch.fnmatchcase(key, pattern) for pattern in options.select)

    if options.select and not any(chosen(c.key) for family in families for c in family_cases(family)):
        raise NothingSelected(f"no variant matches --select {options.select}")
    against = None
    if options.against:
        from tilelang_golden.gpu.run.against import AbPairs, pair_with_base, resolve

        base = resolve(options.against, options.families)
        known = [f"{family.name}/{variant.name}" for family in families for variant in family.variants]

        def against(device: Device, cases: Sequence[Case]) -> AbPairs:
            return pair_with_base(base, cases, device.target, options.golden_dir, known, every=options.against_all)

    return CheckPlan(
        lambda device: [c for c in device_cases(families, device.target) if chosen(c.key)],
        not_run=lambda device: {key: why for key, why in not_run_on(families, device.target).items() if chosen(key)},
        seeds=options.seeds,
        rounds=options.rounds,
        golden=options.golden_dir,
        snapshotted=lambda case: case.family.package in options.snapshotted,
        warmup_ms=options.warmup_ms,
        repeat_ms=options.repeat_ms,
        timer=options.timer,
        timing_seed=options.timing_seed,
        against=against,
        repeats=options.repeats,
        sanitizer=sanitizer_plan(options),
    )


def sanitizer_plan(options: argparse.Namespace) -> SanitizerPlan | None:
    """`--sanitize`'s plan: the compute-sanitizer `main` found, the processes at a time, each one's limit."""
    from tilelang_golden.gpu.sanitize import SanitizerPlan

    if not options.sanitize:
        return None
    jobs = {} if options.sanitize_jobs is None else {"jobs": options.sanitize_jobs}
    limit = {} if options.sanitize_limit is None else {"limit_s": options.sanitize_limit}
    return SanitizerPlan(options.sanitizer_executable, **jobs, **limit)


def main(argv: list[str] | None = None) -> int:
    options = parse_args(argv)
    problem = gpu_unavailable()  # before TileLang's slow import and before compiling anything
    if problem:
        print(f"gpu check stopped, nothing was checked: {problem}", file=sys.stderr)
        return 2
    if options.sanitize:
        from tilelang_golden.gpu.sanitize import find_sanitizer, not_found_message

        options.sanitizer_executable = find_sanitizer()
        if options.sanitizer_executable is None:  # asked for: never a run that silently leaves it out
            print(f"gpu check stopped, nothing was checked: {not_found_message()}", file=sys.stderr)
            return 2

    from tilelang_golden.catalog.loading import load_families, on_targets
    from tilelang_golden.gpu.baseline_use import BaselineUse
    from tilelang_golden.gpu.check import run_gpu_check
    from tilelang_golden.gpu.run.against import BaseUnavailable
    from tilelang_golden.static.snapshots.snapshot import SnapshotStore

    snapshot_folder = SnapshotStore(options.golden_dir).prefix
    loaded = [
        on_targets(load_families(package, snapshot_folder=snapshot_folder), options.targets)
        for package in options.families
    ]
    families = [family for each in loaded for family in each.families]
    broken = [b for each in loaded for b in each.broken]
    for each in broken:
        print(f"gpu check: family not checked: {each.error}", file=sys.stderr)
    try:
        plan = check_plan(options, families)
    except NothingSelected as error:
        print(f"gpu check stopped: {error}", file=sys.stderr)
        return 2
    except BaseUnavailable as error:
        print(f"gpu check stopped, nothing was checked: {error}", file=sys.stderr)
        return 2
    status = run_gpu_check(
        plan,
        output=options.output,
        baseline=BaselineUse(
            options.timing_dir,
            record=options.record_baseline,
            force=options.force_record_under_ci,
            complete_selection=not options.select and not broken and options.families == list(options.snapshotted),
        ),
        history=options.history,
    )
    return 1 if broken and status == 0 else status
