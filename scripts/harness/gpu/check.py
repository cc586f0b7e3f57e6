"""The GPU check end to end: compile -> agree with the static snapshot -> numerics -> timing -> sweeps.

`check_cases` is the reusable part (no baseline, no files written): every stage keeps what it
found per variant, and each variant's result is built once at the end. `run_gpu_check` adds
the baseline comparison or recording (harness.gpu.gate judges) and the reports, and returns the
exit status.
"""

from __future__ import annotations

import dataclasses
import os
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from harness.family import Family
from harness.gpu.baseline import (
    BaselineRefused,
    CorruptBaseline,
    baseline_key,
    baseline_path,
    check_may_record,
    read_baseline,
    render_baseline,
    write_baseline,
)
from harness.gpu.compile import CompiledCase, compile_cases, read_driver_resources
from harness.gpu.device import Device, NoCudaDevice, UnknownTarget, require_cuda
from harness.gpu.gate import CORRUPT, RECORDED, Comparison, compare
from harness.gpu.gpu_state import GpuState, summarize
from harness.gpu.numerics import FamilyCallError, NumericsCase, check_numerics, fresh_seeds, prepare, validate_seeds
from harness.gpu.results import GpuRun, SnapshotCheck, VariantResult, fits_in, reference_name, shape_name
from harness.gpu.sweep import SweepCurve, SweepPoint
from harness.gpu.timing import (
    DEFAULT_ROUNDS,
    REPEAT_MS,
    TIMER_TOOLS,
    TIMERS,
    WARMUP_MS,
    Bench,
    Pair,
    Timing,
    make_bench,
    measure_pairs,
    throughput,
)
from harness.static.cases import Case
from harness.static.normalize import normalize_cuda
from harness.static.snapshot import CorruptSnapshot, SnapshotStore, parse_facts, strip_cuda_header

Log = Callable[[str], None]


class NothingToRun(RuntimeError):
    """No selected variant runs on this device's target: a run that checks nothing must not pass."""


def device_selection(families: Sequence[Family], target: str) -> tuple[list[Case], dict[str, str]]:
    """What a GPU run on a device of `target` runs, and what it leaves out with why: every variant of the families
    is in exactly one of the two. Left out: the variants of a family that does not declare the target, and those
    declared not to lower on it (their snapshot is the error, there is no kernel to run)."""
    cases: list[Case] = []
    left_out: dict[str, str] = {}
    for family in families:
        for variant in family.variants:
            case = Case(family, variant, target)
            if target not in family.target_names:
                left_out[case.key] = (
                    f"{family.file} declares targets {list(family.target_names)} and this device is {target}"
                )
            elif case.does_not_lower is not None:
                left_out[case.key] = f"{case.not_lowering_note}, as {family.file} declares"
            else:
                cases.append(case)
    return cases, left_out


def device_cases(families: Sequence[Family], target: str) -> list[Case]:
    """The variants a run on a device of `target` runs (device_selection's first half)."""
    return device_selection(families, target)[0]


def not_run_on(families: Sequence[Family], target: str) -> dict[str, str]:
    """family/variant -> why a run on `target` leaves it out: what the report lists and counts, never as a pass."""
    return device_selection(families, target)[1]


def check_cases(
    select: Callable[[Device], Sequence[Case]],
    *,
    not_run: Callable[[Device], Mapping[str, str]] = lambda device: {},
    seeds: Sequence[int] | None = None,
    rounds: int = DEFAULT_ROUNDS,
    golden: Path = Path("golden"),
    warmup_ms: float = WARMUP_MS,
    repeat_ms: float = REPEAT_MS,
    timer: str = TIMERS[0],
    timing_seed: int | None = None,
    bench: Bench | None = None,
    log: Log = print,
) -> GpuRun:
    """Compile, check and time `select(device)` on the current GPU; raises NoCudaDevice without one, UnknownTarget
    when the project snapshots no target for it, NothingToRun when the selection is empty on it.
    `not_run(device)` names the variants left out on this device and why, for the report."""
    import torch

    device = require_cuda()
    cases = list(select(device))
    left_out = dict(not_run(device))
    seeds = validate_seeds(fresh_seeds() if seeds is None else seeds)
    log(f"device: {device.name} ({device.reports} -> {device.target})")
    for key, why in left_out.items():
        log(f"not run: {key}: {why}")
    if not cases:
        raise NothingToRun(
            f"no selected variant runs on {device.name} ({device.target})"
            + (f"; {len(left_out)} not run here, each listed above with why" if left_out else "")
        )

    started = time.perf_counter()
    compiled = compile_cases(cases)
    compile_seconds = time.perf_counter() - started
    log(f"compiled {sum(c.kernel is not None for c in compiled)}/{len(compiled)} kernels in {compile_seconds:.1f} s")

    torch.empty(1, device="cuda")  # the context (PyTorch names ROCm's `cuda` too), before asking the driver
    store = SnapshotStore(golden)
    for c in compiled:
        if not c.error:
            read_driver_resources(c)
    snapshots = {c.case.key: check_snapshot(c, store) for c in compiled}
    limit = device.shared_memory_per_block_bytes
    runnable = [
        c for c in compiled
        if not c.error and not snapshots[c.case.key].problems and fits_in(c, snapshots[c.case.key], limit)
    ]  # fmt: skip

    log(f"numerics: {len(runnable)} kernels x seeds {seeds}")
    numerics = check_numerics([numerics_case(c) for c in runnable], seeds)

    bench = bench or make_bench(timer, warmup_ms, repeat_ms)
    timing_seed = fresh_seeds(1)[0] if timing_seed is None else timing_seed
    state = GpuState(torch.cuda.current_device())
    others = state.other_processes()
    if others:
        log(f"warning: other processes use this GPU while it is timed (pids {others}); timings may be off")
    pairs: dict[str, Pair] = {}
    reference_errors: dict[str, str] = {}
    for c in runnable:
        if numerics[c.case.key].passed:
            try:
                pairs[c.case.key] = timed_pair(c, seeds[0])
            except FamilyCallError as error:
                reference_errors[c.case.key] = str(error)

    log(f"timing: {len(pairs)} kernels next to their references, {rounds} rounds in random order (seed {timing_seed})")
    measured = measure_pairs(list(pairs.values()), rounds, bench, timing_seed, state.sample)
    results = [
        VariantResult(
            c, device, snapshots[c.case.key], reference_error=reference_errors.get(c.case.key),
            numerics=numerics.get(c.case.key), paired=measured.get(c.case.key),
        )
        for c in compiled
    ]  # fmt: skip
    timed = [r for r in results if r.paired is not None]
    reference_rounds: dict[str, list[float]] = {}
    for result in timed:
        reference_rounds.setdefault(result.reference, []).extend(result.paired.reference.rounds_ms)
    reference_timings = {name: Timing(tuple(values)) for name, values in reference_rounds.items()}
    reference_throughput = {
        r.reference: throughput(r.compiled.case.family.work(r.compiled.case.params),
                                reference_timings[r.reference].median_ms, device.peak)
        for r in timed
    }  # fmt: skip

    def remeasure(keys: Sequence[str]) -> dict[str, float]:
        log(f"re-measuring {list(keys)} to confirm a suspected regression")
        again = measure_pairs([pairs[k] for k in keys], rounds, bench, timing_seed + 1, state.sample)
        return {k: again[k].ratio for k in keys}

    return GpuRun(
        device=device,
        seeds=seeds,
        timer={
            "tool": TIMER_TOOLS[timer],
            "statistic": "median of per-round ratios to the reference",
            "warmup_ms": warmup_ms,
            "repeat_ms": repeat_ms,
            "rounds": rounds,
            "paired": True,
            "order_seed": timing_seed,
        },
        gpu_state=summarize([s for r in timed for s in r.paired.states]),
        gpu_state_note=state.note,
        other_processes=others,
        pairs=pairs,
        variants=results,
        references=reference_timings,
        reference_throughput=reference_throughput,
        sweeps=build_sweeps(results),
        compile_seconds=compile_seconds,
        wall_seconds=time.perf_counter() - started,
        remeasure=remeasure,
        not_run=left_out,
    )


def numerics_case(compiled: CompiledCase, key: str | None = None) -> NumericsCase:
    """What the numeric gate and the timing need of a compiled case, under its key (`family/variant` by default)."""
    case = compiled.case
    run = compiled.kernel
    return NumericsCase(
        key or case.key, case.family, case.params, run, compiled.arguments, compiled.outputs, compiled.tolerances
    )


def timed_pair(compiled: CompiledCase, seed: int) -> Pair:
    """The kernel and its PyTorch op on one seed's inputs, ready to be timed; each call returns fresh outputs,
    as it does for the kernel's users."""
    case = compiled.case
    family, params = case.family, case.params
    prepared = prepare(numerics_case(compiled), seed, "cuda", checking=False)

    def reference() -> Any:
        return family.speed_reference(params, *prepared.inputs)

    try:
        reference()  # once before timing: a failing op is this case's failure, not the run's
    except Exception as error:
        raise FamilyCallError(f"{family.file}: speed_reference raised {type(error).__name__}: {error}") from error
    return Pair(case.key, lambda: compiled.kernel(*prepared.inputs), reference_name(case), reference)


def check_snapshot(compiled: CompiledCase, store: SnapshotStore) -> SnapshotCheck:
    """The compiled kernel against its static snapshot for its target (nothing to compare when it did not compile)."""
    case = compiled.case
    facts_path = f"{case.id}.yaml"
    shown = (store.root / facts_path).as_posix()
    if compiled.error:
        return SnapshotCheck(shown)
    regen = f'nox -s regen-golden -- -k "{case.id}"'
    text = store.read(facts_path)
    if text is None:
        missing = f"{shown}: no static snapshot for this variant and target; run `{regen}` and commit it"
        return SnapshotCheck(shown, problems=(missing,))
    try:
        kernels = parse_facts(text, shown)["kernels"]
    except CorruptSnapshot as error:
        return SnapshotCheck(shown, problems=(str(error),))
    snapshot = {kernel["name"]: kernel["dynamic_shared_memory_bytes"] for kernel in kernels}
    problems = ()
    if compiled.launches != snapshot:
        problems = (
            f"{shown}: the snapshot's kernels launch with dynamic shared memory {snapshot} (bytes), but those "
            f"compiled here launch with {compiled.launches}; run `nox -s static` to see what changed, then `{regen}`",
        )
    cuda = store.read(case.source_file)
    matches = None if cuda is None else normalize_cuda(compiled.kernel.kernel_source) == strip_cuda_header(cuda)
    return SnapshotCheck(shown, max(snapshot.values()), matches, problems)


def build_sweeps(results: Sequence[VariantResult]) -> list[SweepCurve]:
    """The curves of every family that declares a sweep: one per series, in declaration order."""
    curves: dict[tuple[str, str], SweepCurve] = {}
    for result in results:
        case = result.compiled.case
        sweep = case.family.sweep
        if sweep is None:
            continue
        params = case.params
        series = sweep.series(params)
        timing = result.timing
        curves.setdefault((case.family.name, series), SweepCurve(case.family.name, sweep.axis, series)).points.append(
            SweepPoint(
                value=params[sweep.axis],
                shared_memory_bytes=result.shared_memory_bytes,
                fits=result.fits,
                median_ms=None if timing is None else timing.median_ms,
                spread=0.0 if timing is None else timing.spread,
            )
        )
    return list(curves.values())


def _problems(run: GpuRun) -> dict[str, str]:
    return {r.key: shape_name(r.compiled.case) for r in run.variants}


def compare_with_baseline(run: GpuRun, timing_dir: Path) -> Comparison:
    """The timing gate's verdicts on the run's ratios, against the baseline of its GPU model."""
    path = baseline_path(run.device.name, timing_dir)
    key = baseline_key(run.device.name, run.device.versions)
    ratios = {r.key: r.ratio for r in run.variants if r.ratio is not None}
    try:
        baseline = read_baseline(path)
    except CorruptBaseline as error:  # a broken committed file fails the run; it must not read as "no baseline"
        return Comparison(CORRUPT, str(path), str(error))
    return compare(baseline, path, key, ratios, run.remeasure or (lambda keys: {}), _problems(run))


def record_baseline(run: GpuRun, timing_dir: Path, force: bool, environ: Mapping[str, str] = os.environ) -> Comparison:
    """Write this run's ratios as the baseline for its GPU model (only from a run without failures)."""
    if run.failures:
        raise BaselineRefused(
            f"refusing to record a timing baseline from a run with {len(run.failures)} failing variants "
            f"({', '.join(r.key for r in run.failures)}); fix them first"
        )
    path = baseline_path(run.device.name, timing_dir)
    key = baseline_key(run.device.name, run.device.versions)
    ratios = {r.key: r.ratio for r in run.variants if r.ratio is not None}
    write_baseline(path, render_baseline(key, ratios, _problems(run), run.timer), force, environ)
    return Comparison(
        RECORDED, str(path), f"recorded a new baseline in {path} ({len(ratios)} ratios); review its diff and commit it"
    )


def run_gpu_check(
    select: Callable[[Device], Sequence[Case]],
    *,
    output: Path,
    timing_dir: Path,
    record: bool = False,
    force_record: bool = False,
    complete_selection: bool = True,
    environ: Mapping[str, str] = os.environ,
    log: Log = print,
    **check_options: Any,
) -> int:
    """The `nox -s gpu` run: 0 when the gate passes, 1 when it fails, 2 when nothing could be checked."""
    from harness.gpu.report import write_reports

    started = time.perf_counter()
    try:
        if record:
            check_may_record(force_record, environ)
            if not complete_selection:
                raise BaselineRefused(
                    "refusing to record a baseline from a selection of variants; run without --select"
                )
        run = check_cases(select, log=log, **check_options)
    except (NoCudaDevice, UnknownTarget, NothingToRun, BaselineRefused) as error:
        log(f"gpu check stopped, nothing was checked: {error}")
        return 2
    comparison: Comparison | None = None
    if record:
        try:
            comparison = record_baseline(run, timing_dir, force_record, environ)
        except BaselineRefused as error:
            log(str(error))
    else:
        comparison = compare_with_baseline(run, timing_dir)
    run = dataclasses.replace(run, comparison=comparison, wall_seconds=time.perf_counter() - started)
    for path in write_reports(run, output, environ, log):
        log(f"wrote {path}")
    if record and comparison is None:
        return 1
    return 0 if run.passed else 1
