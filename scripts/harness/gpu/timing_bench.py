"""The timing benchmark behind the gate's levels (scripts/bench_timing.py): repetitions of the
session's timing method, and the statistics the timing issue asks of them, judged by the gate itself
(harness.gpu.gate's levels and `compare`).

The statistics are pure functions (tested with fakes); `run_benchmark` needs a CUDA GPU.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from harness.gpu.gate import FAIL, FAIL_SLOWER, WARN, WARN_SLOWER, Comparison, compare
from harness.gpu.timing import slower_by

IDENTICAL_WITHIN = 0.01  # criterion 1: byte-identical kernels, max/min - 1 of their ratios
REPEATABLE_WITHIN = 0.01  # criterion 2: a variant's ratio over the repetitions


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


def run_benchmark(
    repetitions: int,
    rounds: int,
    timer: str,
    repeat_ms: float,
    timing_dir: Path,
    golden: Path,
    log: Callable[[str], None] = print,
) -> tuple[list[str], bool]:
    """The benchmark on the current GPU, with every family's declared twin: table lines and whether
    every criterion holds."""
    from harness.family import registry
    from harness.gpu.baseline import baseline_key, baseline_path, key_differences, read_baseline
    from harness.gpu.check import check_cases, device_cases, timed_pair
    from harness.gpu.compile import compile_cases
    from harness.gpu.gpu_state import GpuState, summarize
    from harness.gpu.results import shape_name
    from harness.gpu.timing import Pair, make_bench, measure_pairs
    from harness.static.cases import Case
    from harness.static.snapshot import SnapshotStore, strip_cuda_header

    run = check_cases(
        lambda device: device_cases(registry().families, device.target), rounds=2, timer=timer, repeat_ms=repeat_ms,
        golden=golden, log=lambda line: None,
    )  # fmt: skip
    device, pairs = run.device, dict(run.pairs)
    path = baseline_path(device.name, timing_dir)
    baseline = read_baseline(path)
    key = baseline_key(device.name, device.versions)
    if baseline is None or key_differences(baseline, key):
        return [f"{path}: no baseline for this setup; record one with `nox -s gpu -- --record-baseline`"], False
    by_key = {r.key: r for r in run.variants}
    problems = {r.key: shape_name(r.compiled.case) for r in run.variants}
    twins: dict[str, str] = {}
    lines = [f"{device.name}, {timer} timer, {rounds} rounds per repetition, {repetitions} repetitions", ""]
    lines += ["| twin | of | dimension | work |", "|---|---|---|---|"]
    declared = [
        (f"{f.name}/{f.timing_twin.variant}", f.timing_twin.dimension, f.timing_twin.value)
        for f in registry().families
        if f.timing_twin
    ]
    for original, dimension, value in declared:
        result = by_key[original]
        case = result.compiled.case
        variant = dataclasses.replace(
            case.variant, name=f"{case.variant.name}_twin", shape={**case.variant.shape, dimension: value}
        )
        twin_case = Case(case.family, variant, case.target)
        twin = compile_cases([twin_case])[0]
        if twin.kernel is None:
            return [f"twin of {original} did not compile: {twin.error}"], False
        kernel = timed_pair(twin, run.seeds[0]).run
        pairs[twin_case.key] = Pair(twin_case.key, kernel, pairs[original].reference, pairs[original].reference_run)
        twins[twin_case.key] = original
        more = case.family.work(twin_case.params).flops / case.family.work(case.params).flops - 1
        lines.append(f"| {twin_case.key} | {original} | {dimension} = {value} | {more:+.1%} |")

    bench, state = make_bench(timer, repeat_ms=repeat_ms), GpuState()
    measured_reps: list[Repetition] = []
    for index in range(repetitions):
        measured = measure_pairs(list(pairs.values()), rounds, bench, seed=1000 + index, sample=state.sample)
        ratios = {k: m.ratio for k, m in measured.items()}

        def again(keys: Sequence[str], twin_of: Mapping[str, str] | None = None, seed: int = 2000 + index) -> dict:
            timed = {k: (twin_of or {}).get(k, k) for k in keys}  # baseline key -> timed key
            remeasured = measure_pairs([pairs[t] for t in timed.values()], rounds, bench, seed=seed)
            return {k: remeasured[t].ratio for k, t in timed.items()}

        unchanged = compare(baseline, path, key, {k: ratios[k] for k in by_key if k in ratios}, again, problems)
        twin_verdicts = {
            twin: compare(
                baseline,
                path,
                key,
                {original: ratios[twin]},
                lambda ks, t=twin: again(ks, {ks[0]: t}),
                {original: problems[original]},
            )  # fmt: skip
            for twin, original in twins.items()
        }
        states = [s for m in measured.values() for s in m.states]
        measured_reps.append(Repetition(ratios, unchanged, twin_verdicts, summarize(states)))
        log(f"repetition {index + 1}: " + ", ".join(f"{k} {v:.4f}" for k, v in ratios.items()))

    store = SnapshotStore(golden)

    def snapshot_source(key: str) -> str | None:  # the case's `.cu` or `.hip`, as the static check wrote it
        text = store.read(by_key[key].compiled.case.source_file)
        return None if text is None else strip_cuda_header(text)

    groups = identical_groups([k for k in by_key if by_key[k].paired is not None], snapshot_source)
    lines += ["", "| variant | " + " | ".join(f"rep {i + 1}" for i in range(repetitions)) + " | max/min - 1 |"]
    lines.append("|---" * (repetitions + 2) + "|")
    for k in pairs:
        values = [r.ratios[k] for r in measured_reps]
        lines.append(f"| {k} | " + " | ".join(f"{v:.4f}" for v in values) + f" | {spread(values):.2%} |")
    lines += ["", "identical groups: " + "; ".join(", ".join(g) for g in groups), ""]
    for index, r in enumerate(measured_reps, start=1):
        slow = ", ".join(
            f"{t}: {r.ratios[o] / r.ratios[t] - 1:+.2%} ({r.twins[t].verdicts[o].level}, "
            f"{slower_by(r.ratios[t], baseline.ratios[o]):+.2%} vs baseline)"
            for t, o in twins.items()
        )
        s = r.gpu_state or {}
        alarms = f"{len(r.unchanged.of_level('warn'))} warn, {len(r.unchanged.of_level('fail'))} fail"
        state = f"SM clock {s.get('sm_clock_mhz')}, capped {s.get('capped_fraction')}"
        lines.append(f"rep {index}: twins {slow}; unchanged: {alarms}; {state}")
    results = criteria(measured_reps, groups, twins)
    lines += ["", "| criterion | holds | measured |", "|---|---|---|"]
    lines += [f"| {name} | {'yes' if holds else 'NO'} | {evidence} |" for name, holds, evidence in results]
    return lines, all(holds for _, holds, _ in results)
