"""The GPU check end to end: compile -> agree with the static snapshot -> numerics -> repeated launches -> timing
-> sweeps, and with `--sanitize` compute-sanitizer's pass.

`check_cases` is the reusable part (no baseline, no files written): every stage keeps what it found per variant (the
repeated launches and the sanitizer pass: tilelang_golden.gpu.race_checks), and each variant's result is built once at
the end. `run_gpu_check` adds the baseline comparison or recording (tilelang_golden.gpu.gate.gate judges) and the
reports, and returns the exit status.
"""

from __future__ import annotations

import dataclasses
import os
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from tilelang_golden.catalog.cases import Case
from tilelang_golden.gpu.baseline_use import BaselineUse
from tilelang_golden.gpu.gate.ab_gate import AbComparison, compare_ab
from tilelang_golden.gpu.gate.baseline_file import (
    BaselineRefused,
)
from tilelang_golden.gpu.gate.numerics_gate import NumericsResult, validate_seeds
from tilelang_golden.gpu.gate.repeat_gate import DEFAULT_LAUNCHES, RepeatCheck
from tilelang_golden.gpu.gate.sanitizer_gate import SanitizerResult
from tilelang_golden.gpu.kernel_session import CompiledWithSource, Kernels, KernelSession, TimingRequest, raised
from tilelang_golden.gpu.measure.numerics import fresh_seeds
from tilelang_golden.gpu.measure.timing import (
    DEFAULT_ROUNDS,
    REPEAT_MS,
    TIMER_TOOLS,
    TIMERS,
    WARMUP_MS,
    Bench,
    PairedTiming,
    Timing,
    throughput,
)
from tilelang_golden.gpu.race_checks import not_held, repeats_stage, sanitize_stage, sanitizer_record
from tilelang_golden.gpu.report.results import GpuRun, SnapshotCheck, VariantFailure, VariantResult, build_sweeps
from tilelang_golden.gpu.run.against import AbPairs
from tilelang_golden.gpu.run.compile import CompiledCase
from tilelang_golden.gpu.run.device import Device, NoCudaDevice, UnknownTarget, require_cuda
from tilelang_golden.gpu.run.gpu_state import summarize
from tilelang_golden.gpu.run.worker import RAISED, TimeLimits
from tilelang_golden.gpu.sanitize import SanitizerPlan
from tilelang_golden.gpu.selection import Log, NothingToRun, not_runnable, selection_stage
from tilelang_golden.gpu.snapshot_agreement import agree_with_snapshots
from tilelang_golden.static.snapshots.case_files import facts_file
from tilelang_golden.static.snapshots.snapshot import (
    SnapshotStore,
)

T = TypeVar("T")
# against(device, cases) -> what the A/B timing compares (tilelang_golden.gpu.run.against.pair_with_base on the
# device's target)
Against = Callable[[Device, Sequence[Case]], AbPairs]


@dataclass(frozen=True)
class CheckPlan:
    """What one GPU check runs: `select(device)`, the variants checked on the device at hand; `not_run(device)`,
    those left out on it and why, for the report; the input seeds (fresh when None); the timing; the static
    snapshots the kernels must agree with (`snapshotted(case)`: whether its family has any: a test-only family has
    none); and `against(device, cases)`, the A/B timing of the variants changed since a base commit (`--against`)."""

    select: Callable[[Device], Sequence[Case]]
    not_run: Callable[[Device], Mapping[str, str]] = lambda device: {}
    seeds: Sequence[int] | None = None
    rounds: int = DEFAULT_ROUNDS
    golden: Path = Path("golden")
    snapshotted: Callable[[Case], bool] = lambda case: True
    warmup_ms: float = WARMUP_MS
    repeat_ms: float = REPEAT_MS
    timer: str = TIMERS[0]
    timing_seed: int | None = None  # the random order's (fresh when None)
    against: Against | None = None
    repeats: int = DEFAULT_LAUNCHES  # launches of each variant on the first seed's inputs, compared bit for bit
    sanitizer: SanitizerPlan | None = None  # `--sanitize`: every variant under compute-sanitizer's tools


def check_cases(
    plan: CheckPlan, *, bench: Bench | None = None, kernels: Kernels | None = None, log: Log = print
) -> GpuRun:
    """Compile, check and time what `plan` selects on the current GPU; raises NoCudaDevice without one,
    UnknownTarget when the project snapshots no target for it, NothingToRun when the selection is empty on it.

    The stages run in `kernels`: a worker process (tilelang_golden.gpu.kernel_session.Kernels.in_worker, each
    request within its limits) or, by default, this process with `bench`. A stage's failure ends that variant's
    check; the others go on."""
    device = require_cuda()
    seeds = validate_seeds(fresh_seeds() if plan.seeds is None else plan.seeds)
    cases, left_out = selection_stage(device, plan.select, plan.not_run, log)
    kernels = kernels or Kernels.in_process(KernelSession(bench=bench))
    ab_pairs = None if plan.against is None else plan.against(device, cases)
    base_cases = [] if ab_pairs is None else list(ab_pairs.pairs.values())
    # Each stage answers for each variant it is given, with what it found or the variant's failure; a failure
    # ends that variant's check, and the next stage is given the others.
    failures: dict[str, VariantFailure] = {}

    def kept(answers: Mapping[str, T | VariantFailure]) -> dict[str, T]:
        failures.update({key: a for key, a in answers.items() if isinstance(a, VariantFailure)})
        return {key: a for key, a in answers.items() if not isinstance(a, VariantFailure)}

    started = time.perf_counter()
    compiled, base_compiled, snapshots, compile_seconds = _compile_and_agree(
        kernels, plan, cases, base_cases, kept, log
    )
    runnable = {
        c.case.key: c
        for c in compiled
        if c.case.key not in failures
        and not_runnable(c, snapshots[c.case.key], device.shared_memory_per_block_bytes) is None
    }

    launch_s = kept(work_stage(runnable, device))
    launch_s |= kept(reference_stage(kernels, {k: c for k, c in runnable.items() if k in launch_s}, launch_s, seeds[0]))
    checked = [c for key, c in runnable.items() if key not in failures]
    log(f"numerics: {len(checked)} kernels x seeds {seeds}")
    numerics = kept(numerics_stage(kernels, checked, seeds, launch_s))
    repeated, repeat_seconds = repeats_stage(kernels, runnable, numerics, seeds[0], plan.repeats, launch_s, log)
    repeats = kept(repeated)

    timing_seed = fresh_seeds(1)[0] if plan.timing_seed is None else plan.timing_seed
    request = TimingRequest(plan.rounds, timing_seed, seeds[0], plan.timer, plan.warmup_ms, plan.repeat_ms)
    held = not_held(repeats) | set(failures)
    passing, pair_limits, note, others = timing_plan(kernels, runnable, numerics, launch_s, request, log, held)
    measured = kept(time_stage(kernels, passing, request, pair_limits))
    ab = ab_pairs and ab_stage(kernels, ab_pairs, base_compiled, passing, request, pair_limits, failures, log)
    sanitized, sanitize_seconds = sanitize_stage(plan.sanitizer, list(runnable.values()), seeds[0], log)
    results = variant_results(compiled, device, snapshots, failures, numerics, measured, repeats, sanitized)
    timed = [r for r in results if r.paired is not None]
    reference_timings, reference_throughput = reference_figures(timed, device)

    return GpuRun(
        device=device,
        seeds=seeds,
        timer=timer_record(request),
        gpu_state=summarize([s for r in timed for s in r.paired.states]),
        gpu_state_note=note,
        other_processes=others,
        pairs={key: kernels.pairs[key] for key in measured if key in kernels.pairs},
        variants=results,
        references=reference_timings,
        reference_throughput=reference_throughput,
        sweeps=build_sweeps(results),
        compile_seconds=compile_seconds,
        wall_seconds=time.perf_counter() - started,
        remeasure=remeasurer(kernels, passing, request, pair_limits, log),
        not_run=left_out,
        ab=ab,
        repeats={"launches": plan.repeats, "seed": seeds[0], "seconds": round(repeat_seconds, 2)},
        sanitizer=None if plan.sanitizer is None else sanitizer_record(plan.sanitizer, sanitize_seconds),
    )


def _compile_and_agree(
    kernels: Kernels,
    plan: CheckPlan,
    cases: Sequence[Case],
    base_cases: Sequence[Case],
    kept: Callable[[Mapping[str, Any]], dict[str, Any]],
    log: Log,
) -> tuple[list[CompiledCase], list[CompiledCase], dict[str, SnapshotCheck], float]:
    """The variants and the A/B bases compiled in one stage (and its seconds), and each compiled variant's machine
    facts held to its static snapshot; `kept` keeps what passed and records the failures."""
    started = time.perf_counter()
    built = kept(compile_stage(kernels, [*cases, *base_cases], kernels.limits))
    compiled = [compiled_case(case, built) for case in cases]
    base_compiled = [compiled_case(case, built) for case in base_cases]
    compile_seconds = time.perf_counter() - started
    log(
        f"compiled {sum(not c.error and c.case.key in built for c in compiled)}/{len(compiled)} kernels in "
        f"{compile_seconds:.1f} s"
    )
    store = SnapshotStore(plan.golden)
    snapshots = {c.case.key: SnapshotCheck(f"{store.root.as_posix()}/{facts_file(c.case)}") for c in compiled}
    snapshots |= kept(
        agree_with_snapshots([c for c in compiled if c.case.key in built], built, store, plan.snapshotted)
    )
    return compiled, base_compiled, snapshots, compile_seconds


def variant_results(
    compiled: Sequence[CompiledCase],
    device: Device,
    snapshots: Mapping[str, SnapshotCheck],
    failures: Mapping[str, VariantFailure],
    numerics: Mapping[str, NumericsResult],
    measured: Mapping[str, PairedTiming],
    repeats: Mapping[str, RepeatCheck] | None = None,
    sanitized: Mapping[str, SanitizerResult] | None = None,
) -> list[VariantResult]:
    """Each variant's result, built once from what every stage found for it (or the failure that ended its check)."""
    repeats, sanitized = repeats or {}, sanitized or {}
    return [
        VariantResult(
            c,
            device,
            snapshots[c.case.key],
            failure=failures.get(c.case.key),
            numerics=numerics.get(c.case.key),
            paired=measured.get(c.case.key),
            repeats=repeats.get(c.case.key),
            sanitized=sanitized.get(c.case.key),
        )
        for c in compiled
    ]


def main_history(run: GpuRun, folder: Path | None, log: Log) -> dict[str, str]:
    """The recent runs on main of each variant timed against the base, from the history under `folder`, if any.
    Context beside a verdict, never a verdict: a history that cannot be shown is logged, and the run goes on."""
    if run.ab is None or folder is None or not folder.is_dir():
        return {}
    try:
        from tilelang_golden.history.changes import recent
        from tilelang_golden.history.records import read_history

        history = read_history(folder)
        shown = recent(history, run.device.name, list(run.ab.verdicts))
    except (ImportError, OSError, ValueError) as error:  # e.g. no ruptures where the runner's lock lacks it
        log(f"performance history not shown: {type(error).__name__}: {error}")
        return {}
    for skipped in history.skipped:
        log(f"performance history: {skipped}")
    return shown


def remeasurer(
    kernels: Kernels, passing: Mapping[str, Case], request: TimingRequest, limits: Mapping[str, float], log: Log
) -> Callable[[Sequence[str]], dict[str, float]]:
    """How the baseline's gate confirms a suspect: its pair timed again in a fresh random order."""

    def remeasure(keys: Sequence[str]) -> dict[str, float]:
        log(f"re-measuring {list(keys)} to confirm a suspected regression")
        again = time_stage(
            kernels, {k: passing[k] for k in keys}, dataclasses.replace(request, seed=request.seed + 1), limits
        )
        return {k: t.ratio for k, t in again.items() if not isinstance(t, VariantFailure)}

    return remeasure


def work_stage(runnable: Mapping[str, CompiledCase], device: Device) -> dict[str, float | VariantFailure]:
    """What one launch of each variant's work takes at the device's datasheet peaks (0 where they are unknown); the
    report computes throughput from the work too, so a family's `work` that raises fails its variant here."""
    peak = device.peak
    answers: dict[str, float | VariantFailure] = {}
    for key, c in runnable.items():
        try:
            work = c.case.family.work(c.case.params)
        except Exception as error:
            answers[key] = raised("work", c.case, error)
            continue
        answers[key] = 0.0 if peak is None else max(work.flops / (peak.tflops * 1e12), work.bytes / (peak.gbps * 1e9))
    return answers


def reference_stage(
    kernels: Kernels, runnable: Mapping[str, CompiledCase], work_s: Mapping[str, float], seed: int
) -> dict[str, float | VariantFailure]:
    """Each variant's timed pair made on `seed`, and the seconds one launch may be expected to take: the larger of
    its work at the device's peaks (`work_s`) and one call of its reference (what its time limits scale)."""
    answers: dict[str, float | VariantFailure] = {}
    for key, c in runnable.items():
        answer = kernels.reference(c.case, seed, kernels.limits.limit(3, work_s[key]))
        answers[key] = answer if isinstance(answer, VariantFailure) else max(work_s[key], answer)
    return answers


def numerics_stage(
    kernels: Kernels, checked: Sequence[CompiledCase], seeds: Sequence[int], launch_s: Mapping[str, float]
) -> dict[str, NumericsResult | VariantFailure]:
    """Each variant's numeric verdict on every seed, each within its own limit, or the failure that stopped it."""
    return {
        c.case.key: kernels.numerics(c.case, seeds, kernels.limits.limit(3 * len(seeds), launch_s[c.case.key]))
        for c in checked
    }


def reference_figures(timed: Sequence[VariantResult], device: Device) -> tuple[dict[str, Timing], dict[str, Any]]:
    """Each reference's timing over every round it was measured in (beside any variant), and its throughput."""
    rounds: dict[str, list[float]] = {}
    for result in timed:
        rounds.setdefault(result.reference, []).extend(result.paired.reference.rounds_ms)
    timings = {name: Timing(tuple(values)) for name, values in rounds.items()}
    throughputs = {
        r.reference: throughput(
            r.compiled.case.family.work(r.compiled.case.params), timings[r.reference].median_ms, device.peak
        )
        for r in timed
    }
    return timings, throughputs


def timing_plan(
    kernels: Kernels,
    runnable: Mapping[str, CompiledCase],
    numerics: Mapping[str, NumericsResult],
    launch_s: Mapping[str, float],
    request: TimingRequest,
    log: Log,
    held: set[str] | None = None,
) -> tuple[dict[str, Case], dict[str, float], str | None, list[int]]:
    """What is timed (the variants whose numerics passed and that `held` does not name: those that failed since;
    the others' kernels are dropped), each pair's time limit, and the GPU's state note and the other processes on it."""
    held = held or set()
    passing = {key: runnable[key].case for key, result in numerics.items() if result.passed and key not in held}
    kernels.drop([key for key in runnable if key not in passing])
    note, others = kernels.gpu_state()
    if others:
        log(f"warning: other processes use this GPU while it is timed (pids {others}); timings may be off")
    # Each pair's own limit: the measurement's budget whatever the kernel does, and its launches (do_bench's
    # estimate and its least pairs) at the kernel's allowance.
    nominal_s = 2 * (request.warmup_ms + request.repeat_ms) / 1e3
    pair_limits = {key: kernels.limits.limit(16, launch_s[key], nominal_s) for key in passing}
    log(
        f"timing: {len(passing)} kernels next to their references, {request.rounds} rounds in random order "
        f"(seed {request.seed})"
    )
    return passing, pair_limits, note, others


def timer_record(request: TimingRequest) -> dict[str, Any]:
    """How the run timed, as the report and the baseline record it."""
    return {
        "tool": TIMER_TOOLS[request.timer],
        "statistic": "median of per-round ratios to the reference",
        "warmup_ms": request.warmup_ms,
        "repeat_ms": request.repeat_ms,
        "rounds": request.rounds,
        "paired": True,
        "order_seed": request.seed,
    }


def compile_stage(
    kernels: Kernels, cases: Sequence[Case], limits: TimeLimits
) -> dict[str, CompiledWithSource | VariantFailure]:
    """Every case compiled (with its kernel's source), or the failure of its compilation."""
    found = kernels.compile(cases, limits.compile_limit(len(cases)))
    missing = "the compiler gave no result for it"
    return {
        case.key: found.get(case.key)
        or VariantFailure("compile", RAISED, f"{case.family.file}: variant {case.variant.name!r}: {missing}")
        for case in cases
    }


def compiled_case(case: Case, built: Mapping[str, CompiledWithSource]) -> CompiledCase:
    """The case as compiled (its case object, not the worker's copy), or as not compiled."""
    return dataclasses.replace(built[case.key].compiled, case=case) if case.key in built else CompiledCase(case, None)


def time_stage(
    kernels: Kernels,
    cases: Mapping[str, Case],
    request: TimingRequest,
    limits: Mapping[str, float],
    against: Mapping[str, Case] | None = None,
) -> dict[str, PairedTiming | VariantFailure]:
    """Every pair timed together; a variant whose timing fails is dropped and the others are timed again
    without it (its failure may have ended the worker, and every pair's rounds go together). With `against`
    (variant -> the base's case), each variant is timed next to the base's kernel instead of its reference."""
    left = dict(cases)
    answers: dict[str, PairedTiming | VariantFailure] = {}
    while left:
        timed = kernels.time(left, request, limits, None if against is None else {k: against[k] for k in left})
        if timed.failure is None:
            return answers | timed.measured
        blamed = [timed.failed] if timed.failed in left else list(left)  # not known: every pair
        for key in blamed:
            answers[key] = timed.failure
            del left[key]
        kernels.drop(blamed)
    return answers


def ab_stage(
    kernels: Kernels,
    ab: AbPairs,
    base_compiled: Sequence[CompiledCase],
    passing: Mapping[str, Case],
    request: TimingRequest,
    limits: Mapping[str, float],
    failures: Mapping[str, VariantFailure],
    log: Log,
) -> AbComparison:
    """Each changed variant whose own checks passed, timed next to the base's kernel of it, in alternation; the
    suspects timed so again, independently (a fresh random order). What is not compared says why."""
    not_compared = dict(ab.not_compared)
    built = {c.case.key for c in base_compiled if not c.error and c.case.key not in failures}
    pairs: dict[str, Case] = {}
    for key, base_case in ab.pairs.items():
        if base_case.key not in built:
            why = failures.get(base_case.key)
            error = why.message if why else next(c.error for c in base_compiled if c.case.key == base_case.key)
            not_compared[key] = f"the base's kernel did not compile: {error}"
        elif key not in passing:
            not_compared[key] = "its own checks did not pass"
        else:
            pairs[key] = base_case
    label = f"{ab.base.ref} ({ab.base.short})"
    log(f"timing against {label}: {len(pairs)} changed variants, each next to the base's kernel")

    def rounds(keys: Sequence[str], seed: int) -> dict[str, tuple[float, ...]]:
        timed = time_stage(
            kernels, {k: passing[k] for k in keys}, dataclasses.replace(request, seed=seed), limits, against=pairs
        )
        lost = {k: t for k, t in timed.items() if isinstance(t, VariantFailure)}
        not_compared.update({k: f"timing against the base failed: {f.message}" for k, f in lost.items()})
        return {k: t.time_ratios for k, t in timed.items() if k not in lost}

    first = rounds(list(pairs), request.seed)
    return compare_ab(
        label,
        first,
        lambda keys: rounds(keys, request.seed + 1),
        not_compared=not_compared,
        unchanged=ab.unchanged,
        gone=ab.gone,
    )


def run_gpu_check(
    plan: CheckPlan,
    *,
    output: Path,
    baseline: BaselineUse,
    environ: Mapping[str, str] = os.environ,
    kernels: Kernels | None = None,
    log: Log = print,
    history: Path | None = None,
) -> int:
    """The `nox -s gpu` run: 0 when the gate passes, 1 when it fails, 2 when nothing could be checked; its reports
    are written under `output`. `history`: a checkout of main's performance history, whose recent runs the A/B
    verdicts are shown beside.

    The kernels run in a worker process (tilelang_golden.gpu.kernel_session.Kernels.in_worker) unless `kernels` says
    where."""
    from tilelang_golden.gpu.report.report import write_reports

    started = time.perf_counter()
    kernels = kernels or Kernels.in_worker(log=log)
    try:
        try:
            baseline.check_may_record(environ)
            run = check_cases(plan, log=log, kernels=kernels)
        except (NoCudaDevice, UnknownTarget, NothingToRun, BaselineRefused) as error:
            log(f"gpu check stopped, nothing was checked: {error}")
            return 2
        comparison = baseline.judge(run, environ, log)
        run = dataclasses.replace(
            run,
            comparison=comparison,
            wall_seconds=time.perf_counter() - started,
            history=main_history(run, history, log),
        )
        for path in write_reports(run, output, environ, log):
            log(f"wrote {path}")
    finally:
        kernels.close()
    if baseline.record and comparison is None:
        return 1
    return 0 if run.passed else 1
