"""How sharp the GPU timing gates are, measured on the GPU at hand; each part prints a table.

    python3 -m benchmarks.timing ab [--select GLOB ...] [--trials 20] [--slowdowns 1 2 3 5]
    python3 -m benchmarks.timing baseline [--repetitions 5] [--rounds 7] [--timer interleaved]

`ab`, the A/B gate (`nox -s gpu -- --against REF`): for each selected variant, its kernel timed
against itself (identical pairs: every warning or failure is a false alarm), then against itself
followed by a delay sized to cost 1, 2, 3 and 5 % of the kernel's time (`torch.cuda._sleep`,
calibrated on the run: the cost of the extra launch alone is measured first and subtracted, and
each achieved slowdown is measured again over many rounds and printed beside its target). Each
trial is one verdict of the gate as a run makes it (tilelang_golden.gpu.gate.ab_gate.compare_ab: a first
measurement, a second one for a suspect). A variant whose kernel is too short for a level (the
extra launch alone costs more) says so instead of measuring it.

`baseline`, the baseline gate: every registered variant compiled once, plus the twin each family
may declare (`Family.timing_twin`: one variant with one dimension raised so that it does about 5 % more
work); the session's timing repeated `--repetitions` times, with a table per criterion:
1. identical kernels: variants whose snapshotted CUDA is byte-identical, max/min - 1 of their
   ratios within each repetition;
2. repeatability: each variant's ratio, max/min - 1 over the repetitions;
3. detection: each twin's slowdown per unit of its original's reference, and the gate's verdict
   comparing it with the original's entry in golden/timing/<gpu>.yaml; and the verdicts of every
   unchanged variant (none may warn or fail).
It needs a baseline recorded with the same method (`nox -s gpu -- --record-baseline`).
"""

from __future__ import annotations

import argparse
import dataclasses
import fnmatch
import statistics
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from tilelang_golden.gpu.gate.ab_gate import compare_ab
from tilelang_golden.gpu.gate.timing_gate import (
    FAIL,
    FAIL_SLOWER,
    OK,
    WARN,
    WARN_SLOWER,
    Comparison,
    compare_ratios,
    slower_by,
)
from tilelang_golden.gpu.measure.timing import REPEAT_MS, TIMERS, WARMUP_MS, Pair

REPO = Path(__file__).resolve().parents[1]
IDENTICAL_WITHIN = 0.01  # baseline criterion 1: byte-identical kernels, max/min - 1 of their ratios
REPEATABLE_WITHIN = 0.01  # baseline criterion 2: a variant's ratio over the repetitions
Log = Callable[[str], None]


# -- the A/B gate ---------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class AbRow:
    """One variant at one slowdown: what was asked, what the delay achieved, and the gate's verdicts."""

    variant: str
    target: float  # the slowdown asked for (0: an identical pair)
    achieved: float | None  # measured over many rounds; None: not measurable on this kernel
    levels: tuple[str, ...] = ()  # one verdict per trial
    note: str = ""


def ab_trial(measure: Callable[[int], Sequence[float]], seed: int) -> str:
    """One verdict of the A/B gate, as a run makes it: `measure(seed)` gives a measurement's rounds' time ratios,
    asked again (another seed: another order) only for a suspect."""
    comparison = compare_ab(
        "bench", {"v": measure(seed)}, lambda keys: {key: measure(seed + 1_000_003) for key in keys}
    )
    return comparison.verdicts["v"].level


def ab_table(rows: Sequence[AbRow], trials: int) -> list[str]:
    """The table: per variant and slowdown, how often the gate failed, warned or passed."""
    lines = [
        f"| variant | slowdown asked | achieved | fails | warns | passes (of {trials}) | |",
        "|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        achieved = "—" if row.achieved is None else f"{row.achieved:+.2%}"
        counts = [str(row.levels.count(level)) if row.levels else "—" for level in (FAIL, WARN)]
        passes = str(len(row.levels) - row.levels.count(FAIL) - row.levels.count(WARN)) if row.levels else "—"
        asked = "identical" if row.target == 0 else f"+{row.target:.0%}"
        lines.append(f"| {row.variant} | {asked} | {achieved} | {' | '.join(counts)} | {passes} | {row.note} |")
    return lines


def ab_summary(rows: Sequence[AbRow]) -> list[str]:
    """What the table says, in words: false alarms, and the catch rate per slowdown."""
    identical = [level for row in rows if row.target == 0 for level in row.levels]
    alarms = sum(level != OK for level in identical)
    lines = [f"identical pairs: {alarms} alarms (warn or fail) in {len(identical)} trials"]
    for target in sorted({row.target for row in rows if row.target > 0}):
        levels = [level for row in rows if row.target == target for level in row.levels]
        if levels:
            lines.append(f"+{target:.0%}: failed {levels.count(FAIL)} of {len(levels)} trials")
    return lines


def run_ab(select: Sequence[str] | None, trials: int, slowdowns: Sequence[float], rounds: int, log: Log) -> list[str]:
    """The A/B benchmark on the current GPU: each selected variant's identical and delayed pairs."""
    import torch

    from tilelang_golden.catalog.loading import load_families
    from tilelang_golden.gpu.measure.timing import cuda_event_timer
    from tilelang_golden.gpu.run.compile import compile_cases
    from tilelang_golden.gpu.run.device import require_cuda
    from tilelang_golden.gpu.selection import device_cases

    device = require_cuda()
    families = load_families().families
    select = select or [f"{f.name}/{f.timing_twin.variant}" for f in families if f.timing_twin is not None]
    cases = [c for c in device_cases(families, device.target) if any(fnmatch.fnmatch(c.key, p) for p in select)]
    timer = cuda_event_timer()
    per_mcycle_ms = statistics.median(timer([lambda: torch.cuda._sleep(1_000_000)] * 9))
    rows: list[AbRow] = []
    for compiled in compile_cases(cases):
        if compiled.kernel is None:
            rows.append(AbRow(compiled.case.key, 0.0, None, note=f"did not compile: {compiled.error}"))
            continue
        rows += ab_rows(compiled, timer, per_mcycle_ms, trials, slowdowns, rounds, log)
    return [f"{device.name}: A/B gate, interleaved timer, {rounds} rounds per measurement, {trials} trials", "",
            *ab_table(rows, trials), "", *ab_summary(rows)]  # fmt: skip


def ab_rows(
    compiled: Any,
    timer: Any,
    per_mcycle_ms: float,
    trials: int,
    slowdowns: Sequence[float],
    rounds: int,
    log: Log,
) -> list[AbRow]:
    """One variant's kernel against itself (the base), then against itself followed by each calibrated delay."""
    import torch

    from tilelang_golden.gpu.measure.numerics import prepare
    from tilelang_golden.gpu.measure.timing import interleaved_bench, measure_pairs
    from tilelang_golden.gpu.pairs import numerics_case

    key, kernel, bench = compiled.case.key, compiled.kernel, interleaved_bench(timer, WARMUP_MS, REPEAT_MS)
    base_args = prepare(numerics_case(compiled), 1, "cuda", checking=False).arguments
    ours_args = prepare(numerics_case(compiled), 1, "cuda", checking=False).arguments

    def base() -> None:
        kernel(*base_args)

    def delayed(cycles: int | None) -> Callable[[], None]:
        """Our launch, followed by a delay kernel spinning `cycles` (None: no delay kernel at all)."""

        def run() -> None:
            kernel(*ours_args)
            if cycles is not None:
                torch.cuda._sleep(cycles)

        return run

    def ratios(launch: Callable[[], None], seed: int, count: int = rounds) -> list[float]:
        return list(measure_pairs([Pair("ab", launch, "base", base)], count, bench, seed)["ab"].time_ratios)

    kernel_ms = statistics.median(timer([base] * 21))
    extra_launch = statistics.median(ratios(delayed(0), 0, 3 * rounds)) - 1
    log(f"{key}: {kernel_ms:.3f} ms a launch; an extra launch of the delay alone costs {extra_launch:+.2%}")
    rows = []
    for target in [0.0, *slowdowns]:
        if 0 < target <= extra_launch:
            rows.append(AbRow(key, target, None, note=f"too short: an extra launch costs {extra_launch:.2%}"))
            continue
        launch = delayed(None if target == 0 else int((target - extra_launch) * kernel_ms / per_mcycle_ms * 1e6))
        achieved = statistics.median(ratios(launch, 7, 3 * rounds)) - 1
        levels = tuple(ab_trial(lambda seed, launch=launch: ratios(launch, seed), 100 + t) for t in range(trials))
        rows.append(AbRow(key, target, achieved, levels))
        log(f"{key} +{target:.0%}: achieved {achieved:+.2%}, verdicts {levels}")
    return rows


# -- the baseline gate ----------------------------------------------------------------------------


def spread(values: Sequence[float]) -> float:
    """max / min - 1."""
    return max(values) / min(values) - 1


def identical_groups(keys: Sequence[str], cuda_of: Callable[[str], str | None]) -> list[list[str]]:
    """Groups (two or more) of variants whose snapshotted CUDA is byte-identical."""
    groups: dict[str, list[str]] = {}
    for key in keys:
        text = cuda_of(key)
        if text is not None:
            groups.setdefault(text, []).append(key)
    return [group for group in groups.values() if len(group) > 1]


@dataclasses.dataclass
class Repetition:
    ratios: dict[str, float]  # every timed key, twins included
    unchanged: Comparison  # the gate on every registered variant
    twins: dict[str, Comparison]  # twin key -> the gate on it, against its original's entry
    gpu_state: dict[str, Any] | None


def criteria(
    repetitions: Sequence[Repetition], groups: Sequence[Sequence[str]], twins: Mapping[str, str]
) -> list[tuple[str, bool, str]]:
    """(criterion, holds, evidence) for the three measured criteria; `twins` maps twin -> original."""
    group_spreads = [max((spread([r.ratios[k] for k in g]) for g in groups), default=0.0) for r in repetitions]
    keys = [k for k in repetitions[0].ratios if k not in twins]
    repeat = {k: spread([r.ratios[k] for r in repetitions]) for k in keys}
    worst = max(repeat, key=repeat.get)
    slowdowns = [r.ratios[original] / r.ratios[twin] - 1 for r in repetitions for twin, original in twins.items()]
    twin_levels = [c.verdicts[original].level for r in repetitions for twin, original in twins.items() for c in
                   [r.twins[twin]]]  # fmt: skip
    alarms = [v for r in repetitions for v in r.unchanged.verdicts.values() if v.level in (WARN, FAIL)]
    return [
        (
            f"1. byte-identical kernels within {IDENTICAL_WITHIN:.0%} of each other in every repetition",
            all(s <= IDENTICAL_WITHIN for s in group_spreads),
            "largest spread per repetition: " + ", ".join(f"{s:.2%}" for s in group_spreads),
        ),
        (
            f"2. every ratio repeats within {REPEATABLE_WITHIN:.0%} over the repetitions",
            repeat[worst] <= REPEATABLE_WITHIN,
            f"worst {worst} {repeat[worst]:.2%}; median {sorted(repeat.values())[len(repeat) // 2]:.2%}",
        ),
        (
            # criterion 3: a twin doing a few per cent more work must measure beyond the gate's fail level
            f"3a. every twin measured at least {FAIL_SLOWER:.0%} slower per unit of its reference",
            bool(slowdowns) and min(slowdowns) >= FAIL_SLOWER,
            f"slowdowns {min(slowdowns):.2%} to {max(slowdowns):.2%}" if slowdowns else "no twin",
        ),
        (
            "3b. the gate fails every twin against its original's baseline entry",
            bool(twin_levels) and all(level == FAIL for level in twin_levels),
            f"verdicts: {', '.join(sorted(set(twin_levels)))}",
        ),
        (
            f"3c. no unchanged variant warns (> {WARN_SLOWER:.0%}) or fails (> {FAIL_SLOWER:.0%}) in any repetition",
            not alarms,
            f"{len(alarms)} alarms" + "".join(f"; {v.variant} {v.message}" for v in alarms[:5]),
        ),
    ]


def twin_pairs(run: Any, pairs: dict[str, Pair]) -> tuple[dict[str, str], list[str]]:
    """Each family's declared twin compiled and added to `pairs` beside its original's reference: twin -> original,
    and the table lines saying how much more work each does. Raises RuntimeError when a twin does not compile."""
    from tilelang_golden.catalog.cases import Case
    from tilelang_golden.catalog.loading import load_families
    from tilelang_golden.gpu.pairs import timed_pair
    from tilelang_golden.gpu.run.compile import compile_cases

    by_key = {r.key: r for r in run.variants}
    twins: dict[str, str] = {}
    lines = ["| twin | of | dimension | work |", "|---|---|---|---|"]
    for family in load_families().families:
        if family.timing_twin is None:
            continue
        declared = family.timing_twin
        original, dimension = f"{family.name}/{declared.variant}", declared.dimension
        case = by_key[original].compiled.case
        variant = dataclasses.replace(
            case.variant, name=f"{case.variant.name}_twin", shape={**case.variant.shape, dimension: declared.value}
        )
        twin_case = Case(case.family, variant, case.target)
        twin = compile_cases([twin_case])[0]
        if twin.kernel is None:
            raise RuntimeError(f"twin of {original} did not compile: {twin.error}")
        kernel = timed_pair(twin, run.seeds[0]).run
        pairs[twin_case.key] = Pair(twin_case.key, kernel, pairs[original].reference, pairs[original].reference_run)
        twins[twin_case.key] = original
        more = case.family.work(twin_case.params).flops / case.family.work(case.params).flops - 1
        lines.append(f"| {twin_case.key} | {original} | {dimension} = {declared.value} | {more:+.1%} |")
    return twins, lines


def repetition_lines(reps: Sequence[Repetition], twins: Mapping[str, str], baseline: Any) -> list[str]:
    """Each repetition's twins against their originals, its alarms and the GPU's state, one line each."""
    lines = []
    for index, r in enumerate(reps, start=1):
        slow = ", ".join(
            f"{t}: {r.ratios[o] / r.ratios[t] - 1:+.2%} ({r.twins[t].verdicts[o].level}, "
            f"{slower_by(r.ratios[t], baseline.ratios[o]):+.2%} vs baseline)"
            for t, o in twins.items()
        )
        s = r.gpu_state or {}
        alarms = f"{len(r.unchanged.of_level(WARN))} warn, {len(r.unchanged.of_level(FAIL))} fail"
        lines.append(f"rep {index}: twins {slow}; unchanged: {alarms}; SM clock {s.get('sm_clock_mhz')}, "
                     f"capped {s.get('capped_fraction')}")  # fmt: skip
    return lines


def run_baseline(
    repetitions: int, rounds: int, timer: str, repeat_ms: float, timing_dir: Path, golden: Path, log: Log
) -> tuple[list[str], bool]:
    """The baseline benchmark on the current GPU, with every family's declared twin: table lines and whether
    every criterion holds."""
    from tilelang_golden.catalog.loading import load_families
    from tilelang_golden.gpu.check import CheckPlan, check_cases
    from tilelang_golden.gpu.gate.baseline_file import baseline_key, baseline_path, key_differences, read_baseline
    from tilelang_golden.gpu.measure.timing import make_bench, measure_pairs
    from tilelang_golden.gpu.report.results import shape_name
    from tilelang_golden.gpu.run.gpu_state import GpuState, summarize
    from tilelang_golden.gpu.selection import device_cases
    from tilelang_golden.static.snapshots.case_files import source_file
    from tilelang_golden.static.snapshots.snapshot import SnapshotStore, strip_cuda_header

    families = load_families().families
    plan = CheckPlan(
        lambda device: device_cases(families, device.target), rounds=2, timer=timer, repeat_ms=repeat_ms, golden=golden
    )
    run = check_cases(plan, log=lambda line: None)
    device, pairs = run.device, dict(run.pairs)
    path, key = baseline_path(device.name, timing_dir), baseline_key(device.name, device.versions)
    baseline = read_baseline(path)
    if baseline is None or key_differences(baseline, key):
        return [f"{path}: no baseline for this setup; record one with `nox -s gpu -- --record-baseline`"], False
    by_key = {r.key: r for r in run.variants}
    sizes = {r.key: shape_name(r.compiled.case) for r in run.variants}
    twins, twin_lines = twin_pairs(run, pairs)
    bench, state = make_bench(timer, repeat_ms=repeat_ms), GpuState()
    reps: list[Repetition] = []
    for index in range(repetitions):
        measured = measure_pairs(list(pairs.values()), rounds, bench, seed=1000 + index, sample=state.sample)
        ratios = {k: m.ratio for k, m in measured.items()}

        def again(keys: Sequence[str], twin_of: Mapping[str, str] | None = None, seed: int = 2000 + index) -> dict:
            timed = {k: (twin_of or {}).get(k, k) for k in keys}  # baseline key -> timed key
            remeasured = measure_pairs([pairs[t] for t in timed.values()], rounds, bench, seed=seed)
            return {k: remeasured[t].ratio for k, t in timed.items()}

        unchanged = compare_ratios(baseline, path, key, {k: ratios[k] for k in by_key if k in ratios}, again, sizes)
        twin_verdicts = {
            t: compare_ratios(baseline, path, key, {o: ratios[t]}, lambda ks, t=t: again(ks, {ks[0]: t}), {o: sizes[o]})
            for t, o in twins.items()
        }
        reps.append(Repetition(ratios, unchanged, twin_verdicts, summarize([s for m in measured.values()
                                                                            for s in m.states])))  # fmt: skip
        log(f"repetition {index + 1}: " + ", ".join(f"{k} {v:.4f}" for k, v in ratios.items()))
    store = SnapshotStore(golden)

    def snapshot_source(key: str) -> str | None:  # the case's `.cu` or `.hip`, as the static check wrote it
        text = store.read(source_file(by_key[key].compiled.case))
        return None if text is None else strip_cuda_header(text)

    groups = identical_groups([k for k in by_key if by_key[k].paired is not None], snapshot_source)
    lines = [f"{device.name}, {timer} timer, {rounds} rounds per repetition, {repetitions} repetitions", "",
             *twin_lines, "", "| variant | " + " | ".join(f"rep {i + 1}" for i in range(repetitions))
             + " | max/min - 1 |", "|---" * (repetitions + 2) + "|"]  # fmt: skip
    for k in pairs:
        values = [r.ratios[k] for r in reps]
        lines.append(f"| {k} | " + " | ".join(f"{v:.4f}" for v in values) + f" | {spread(values):.2%} |")
    lines += ["", "identical groups: " + "; ".join(", ".join(g) for g in groups), ""]
    lines += repetition_lines(reps, twins, baseline)
    results = criteria(reps, groups, twins)
    lines += ["", "| criterion | holds | measured |", "|---|---|---|"]
    lines += [f"| {name} | {'yes' if holds else 'NO'} | {evidence} |" for name, holds, evidence in results]
    return lines, all(holds for _, holds, _ in results)


# -- the command line -----------------------------------------------------------------------------


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog=f"python -m benchmarks.{Path(__file__).stem}", description=__doc__.splitlines()[0]
    )
    parts = parser.add_subparsers(dest="gate", required=True)
    ab = parts.add_parser("ab", help="the A/B gate: identical and delayed pairs")
    ab.add_argument(
        "--select", nargs="+", metavar="GLOB", help="variants (default: those a family names as its timing twin's)"
    )
    ab.add_argument("--trials", type=int, default=20, help="verdicts per variant and slowdown (default: %(default)s)")
    ab.add_argument("--slowdowns", type=float, nargs="+", default=[1, 2, 3, 5], help="per cent (default: %(default)s)")
    ab.add_argument("--rounds", type=int, default=7)
    baseline = parts.add_parser("baseline", help="the baseline gate: repetitions, identical kernels and twins")
    baseline.add_argument("--repetitions", type=int, default=5)
    baseline.add_argument("--rounds", type=int, default=7)
    baseline.add_argument("--timer", choices=TIMERS, default=TIMERS[0])
    baseline.add_argument("--repeat-ms", type=float, default=100)
    baseline.add_argument("--timing-dir", type=Path, default=REPO / "golden" / "timing")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    options = parse_args(argv)
    from tilelang_golden.gpu.run.device import gpu_unavailable

    problem = gpu_unavailable()
    if problem:
        print(f"benchmarks.timing: {problem}", file=sys.stderr)
        return 2
    started = time.perf_counter()
    if options.gate == "ab":
        slowdowns = [s / 100 for s in options.slowdowns]
        lines, passed = run_ab(options.select, options.trials, slowdowns, options.rounds, print), True
    else:
        lines, passed = run_baseline(options.repetitions, options.rounds, options.timer, options.repeat_ms,
                                     options.timing_dir, REPO / "golden", print)  # fmt: skip
    print("\n".join(lines))
    print(f"\nbenchmark wall time {time.perf_counter() - started:.0f} s")
    return 0 if passed else 1


if __name__ == "__main__":
    sys.exit(main())
