"""The GPU check end to end: compile -> agree with the static snapshot -> numerics -> timing -> sweeps.

`check_cases` is the reusable part (no baseline, no files written): every stage keeps what it
found per variant, and each variant's result is built once at the end. `run_gpu_check` adds
the baseline comparison or recording (tilelang_golden.gpu.gate.gate judges) and the reports, and returns the
exit status.
"""

from __future__ import annotations

import dataclasses
import functools
import os
import re
import shutil
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from tilelang_golden.families.cases import Case
from tilelang_golden.gpu.gate.ab_gate import AbComparison, compare_ab
from tilelang_golden.gpu.gate.baseline import (
    BaselineRefused,
)
from tilelang_golden.gpu.gate.numerics_gate import NumericsResult, validate_seeds
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
from tilelang_golden.gpu.report.results import GpuRun, SnapshotCheck, VariantFailure, VariantResult, build_sweeps
from tilelang_golden.gpu.run.against import Plan
from tilelang_golden.gpu.run.compile import DRIVER_ATTRIBUTES, CompiledCase
from tilelang_golden.gpu.run.device import Device, NoCudaDevice, UnknownTarget, require_cuda
from tilelang_golden.gpu.run.gpu_state import summarize
from tilelang_golden.gpu.run.worker import RAISED, TimeLimits
from tilelang_golden.gpu.selection import Log, NothingToRun, not_runnable, selection_stage
from tilelang_golden.gpu.stages import Compiled, Kernels, KernelSession, TimingRequest, raised
from tilelang_golden.gpu.timing_baseline import BaselineUse
from tilelang_golden.static.kinds import facts_file, machine_file, source_file
from tilelang_golden.static.snapshots.results import regen_command
from tilelang_golden.static.snapshots.snapshot import (
    CorruptSnapshot,
    SnapshotStore,
    parse_facts,
    parse_machine_facts,
    strip_cuda_header,
)

T = TypeVar("T")
# against(device, cases) -> what the A/B timing compares (tilelang_golden.gpu.run.against.plan on the device's target)
Against = Callable[[Device, Sequence[Case]], Plan]


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


def check_cases(
    plan: CheckPlan, *, bench: Bench | None = None, kernels: Kernels | None = None, log: Log = print
) -> GpuRun:
    """Compile, check and time what `plan` selects on the current GPU; raises NoCudaDevice without one,
    UnknownTarget when the project snapshots no target for it, NothingToRun when the selection is empty on it.

    The stages run in `kernels`: a worker process (tilelang_golden.gpu.stages.Kernels.in_worker, each request within its
    limits) or, by default, this process with `bench`. A stage's failure ends that variant's check; the
    others go on."""
    device = require_cuda()
    seeds = validate_seeds(fresh_seeds() if plan.seeds is None else plan.seeds)
    cases, left_out = selection_stage(device, plan.select, plan.not_run, log)
    kernels = kernels or Kernels.in_process(KernelSession(bench=bench))
    ab_plan = None if plan.against is None else plan.against(device, cases)
    base_cases = [] if ab_plan is None else list(ab_plan.pairs.values())
    # Each stage answers for each variant it is given, with what it found or the variant's failure; a failure
    # ends that variant's check, and the next stage is given the others.
    failures: dict[str, VariantFailure] = {}

    def kept(answers: Mapping[str, T | VariantFailure]) -> dict[str, T]:
        failures.update({key: a for key, a in answers.items() if isinstance(a, VariantFailure)})
        return {key: a for key, a in answers.items() if not isinstance(a, VariantFailure)}

    started = time.perf_counter()
    built = kept(compile_stage(kernels, [*cases, *base_cases], kernels.limits))
    compiled = [compiled_case(case, built) for case in cases]
    base_compiled = [compiled_case(case, built) for case in base_cases]
    compile_seconds = time.perf_counter() - started
    log(f"compiled {sum(not c.error and c.case.key in built for c in compiled)}/{len(compiled)} kernels in "
        f"{compile_seconds:.1f} s")  # fmt: skip
    store = SnapshotStore(plan.golden)
    snapshots = {c.case.key: SnapshotCheck(f"{store.root.as_posix()}/{facts_file(c.case)}") for c in compiled}
    snapshots |= kept(snapshot_stage([c for c in compiled if c.case.key in built], built, store, plan.snapshotted))
    runnable = {
        c.case.key: c for c in compiled
        if c.case.key not in failures
        and not_runnable(c, snapshots[c.case.key], device.shared_memory_per_block_bytes) is None
    }  # fmt: skip

    launch_s = kept(work_stage(runnable, device))
    launch_s |= kept(reference_stage(kernels, {k: c for k, c in runnable.items() if k in launch_s}, launch_s, seeds[0]))
    checked = [c for key, c in runnable.items() if key not in failures]
    log(f"numerics: {len(checked)} kernels x seeds {seeds}")
    numerics = kept(numerics_stage(kernels, checked, seeds, launch_s))

    timing_seed = fresh_seeds(1)[0] if plan.timing_seed is None else plan.timing_seed
    request = TimingRequest(plan.rounds, timing_seed, seeds[0], plan.timer, plan.warmup_ms, plan.repeat_ms)
    passing, pair_limits, note, others = timing_plan(kernels, runnable, numerics, launch_s, request, log)
    measured = kept(time_stage(kernels, passing, request, pair_limits))
    ab = (
        None
        if ab_plan is None
        else ab_stage(kernels, ab_plan, base_compiled, passing, request, pair_limits, failures, log)
    )
    results = [
        VariantResult(c, device, snapshots[c.case.key], failure=failures.get(c.case.key),
                      numerics=numerics.get(c.case.key), paired=measured.get(c.case.key))
        for c in compiled
    ]  # fmt: skip
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
    )


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
        again = time_stage(kernels, {k: passing[k] for k in keys}, dataclasses.replace(request, seed=request.seed + 1),
                           limits)  # fmt: skip
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
        r.reference: throughput(r.compiled.case.family.work(r.compiled.case.params), timings[r.reference].median_ms,
                                device.peak)
        for r in timed
    }  # fmt: skip
    return timings, throughputs


def timing_plan(
    kernels: Kernels,
    runnable: Mapping[str, CompiledCase],
    numerics: Mapping[str, NumericsResult],
    launch_s: Mapping[str, float],
    request: TimingRequest,
    log: Log,
) -> tuple[dict[str, Case], dict[str, float], str | None, list[int]]:
    """What is timed (the variants whose numerics passed; the others' kernels are dropped), each pair's time
    limit, and the GPU's state note and the other processes on it."""
    passing = {key: runnable[key].case for key, result in numerics.items() if result.passed}
    kernels.drop([key for key in runnable if key not in passing])
    note, others = kernels.gpu_state()
    if others:
        log(f"warning: other processes use this GPU while it is timed (pids {others}); timings may be off")
    # Each pair's own limit: the measurement's budget whatever the kernel does, and its launches (do_bench's
    # estimate and its least pairs) at the kernel's allowance.
    nominal_s = 2 * (request.warmup_ms + request.repeat_ms) / 1e3
    pair_limits = {key: kernels.limits.limit(16, launch_s[key], nominal_s) for key in passing}
    log(f"timing: {len(passing)} kernels next to their references, {request.rounds} rounds in random order "
        f"(seed {request.seed})")  # fmt: skip
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


def compile_stage(kernels: Kernels, cases: Sequence[Case], limits: TimeLimits) -> dict[str, Compiled | VariantFailure]:
    """Every case compiled (with its kernel's source), or the failure of its compilation."""
    found = kernels.compile(cases, limits.compile_limit(len(cases)))
    missing = "the compiler gave no result for it"
    return {
        case.key: found.get(case.key)
        or VariantFailure("compile", RAISED, f"{case.family.file}: variant {case.variant.name!r}: {missing}")
        for case in cases
    }


def compiled_case(case: Case, built: Mapping[str, Compiled]) -> CompiledCase:
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
    plan: Plan,
    base_compiled: Sequence[CompiledCase],
    passing: Mapping[str, Case],
    request: TimingRequest,
    limits: Mapping[str, float],
    failures: Mapping[str, VariantFailure],
    log: Log,
) -> AbComparison:
    """Each changed variant whose own checks passed, timed next to the base's kernel of it, in alternation; the
    suspects timed so again, independently (a fresh random order). What is not compared says why."""
    not_compared = dict(plan.not_compared)
    built = {c.case.key for c in base_compiled if not c.error and c.case.key not in failures}
    pairs: dict[str, Case] = {}
    for key, base_case in plan.pairs.items():
        if base_case.key not in built:
            why = failures.get(base_case.key)
            error = why.message if why else next(c.error for c in base_compiled if c.case.key == base_case.key)
            not_compared[key] = f"the base's kernel did not compile: {error}"
        elif key not in passing:
            not_compared[key] = "its own checks did not pass"
        else:
            pairs[key] = base_case
    label = f"{plan.base.ref} ({plan.base.short})"
    log(f"timing against {label}: {len(pairs)} changed variants, each next to the base's kernel")

    def rounds(keys: Sequence[str], seed: int) -> dict[str, tuple[float, ...]]:
        timed = time_stage(kernels, {k: passing[k] for k in keys}, dataclasses.replace(request, seed=seed), limits,
                           against=pairs)  # fmt: skip
        lost = {k: t for k, t in timed.items() if isinstance(t, VariantFailure)}
        not_compared.update({k: f"timing against the base failed: {f.message}" for k, f in lost.items()})
        return {k: t.time_ratios for k, t in timed.items() if k not in lost}

    first = rounds(list(pairs), request.seed)
    return compare_ab(label, first, lambda keys: rounds(keys, request.seed + 1), not_compared=not_compared,
                      unchanged=plan.unchanged, gone=plan.gone)  # fmt: skip


def snapshot_stage(
    compiled: Sequence[CompiledCase],
    built: Mapping[str, Compiled],
    store: SnapshotStore,
    snapshotted: Callable[[Case], bool],
) -> dict[str, SnapshotCheck | VariantFailure]:
    """Each compiled kernel against its static snapshot; a test-only family's has none to agree with."""
    answers: dict[str, SnapshotCheck | VariantFailure] = {}
    for c in compiled:
        key = c.case.key
        if not snapshotted(c.case):
            answers[key] = SnapshotCheck("none: a test-only family, never snapshotted")
            continue
        try:
            answers[key] = check_snapshot(c, built[key].source, store)
        except Exception as error:
            answers[key] = raised("snapshot", c.case, error)
    return answers


def check_snapshot(compiled: CompiledCase, source: str | None, store: SnapshotStore) -> SnapshotCheck:
    """The compiled kernel (its CUDA `source`) against its static snapshot for its target (nothing to compare when
    it did not compile)."""
    case = compiled.case
    facts_path = facts_file(case)
    shown = (store.root / facts_path).as_posix()
    if compiled.error:
        return SnapshotCheck(shown)
    regen = regen_command(case.id)
    text = store.read(facts_path)
    if text is None:
        missing = f"{shown}: no static snapshot for this variant and target; run `{regen}` and commit it"
        return SnapshotCheck(shown, failures=(missing,))
    try:
        kernels = parse_facts(text, shown)["kernels"]
    except CorruptSnapshot as error:
        return SnapshotCheck(shown, failures=(str(error),))
    snapshot = {kernel["name"]: kernel["dynamic_shared_memory_bytes"] for kernel in kernels}
    failures = ()
    if compiled.launches != snapshot:
        failures = (
            f"{shown}: the snapshot's kernels launch with dynamic shared memory {snapshot} (bytes), but those "
            f"compiled here launch with {compiled.launches}; run `nox -s static` to see what changed, then `{regen}`",
        )
    cuda = store.read(source_file(case))
    matches = None if cuda is None or source is None else source == strip_cuda_header(cuda)
    machine = compare_machine(compiled, store)
    return SnapshotCheck(shown, max(snapshot.values()), matches, failures, *machine)


def compare_machine(compiled: CompiledCase, store: SnapshotStore) -> tuple[bool | None, tuple[str, ...], str]:
    """(whether the driver's registers, local and static shared memory of each kernel equal the machine facts', each
    difference as `snapshot -> here`, both compilers in words); (None, (), "") where there is nothing to compare."""
    path = machine_file(compiled.case)
    text = None if path is None or not compiled.kernel_resources else store.read(path)
    if text is None:
        return None, (), ""
    snapshot = parse_machine_facts(text, (store.root / path).as_posix())
    toolchain = snapshot["toolchain"]
    compilers = f"the snapshot's {toolchain['arch']} by NVRTC + ptxas {toolchain['cuda']}, here {runner_compiler()}"
    differences = tuple(
        f"{compiled.case.id} {kernel['name']}: {field} {kernel[field]} -> {found[field]}"
        for kernel in snapshot["kernels"]
        for found in [compiled.kernel_resources.get(kernel["name"], {})]
        for field in DRIVER_ATTRIBUTES
        if field in found and found[field] != kernel[field]
    )
    return not differences, differences, compilers


@functools.cache
def runner_compiler() -> str:
    """The compiler TileLang's JIT used here, as `nvcc --version` names it: `nvcc 13.0.88`."""
    nvcc = shutil.which("nvcc") or str(Path(os.environ.get("CUDA_HOME", "/usr/local/cuda")) / "bin" / "nvcc")
    try:
        version = subprocess.run([nvcc, "--version"], capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return "TileLang's JIT, nvcc of unknown version"
    found = re.search(r"release [\d.]+, V([\d.]+)", version)
    return f"TileLang's JIT, nvcc {found[1] if found else 'of unknown version'}"


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

    The kernels run in a worker process (tilelang_golden.gpu.stages.Kernels.in_worker) unless `kernels` says
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
        run = dataclasses.replace(run, comparison=comparison, wall_seconds=time.perf_counter() - started,
                                  history=main_history(run, history, log))  # fmt: skip
        for path in write_reports(run, output, environ, log):
            log(f"wrote {path}")
    finally:
        kernels.close()
    if baseline.record and comparison is None:
        return 1
    return 0 if run.passed else 1
