"""What a GPU run tells people and machines: JSON report, Markdown summary, sweep plots, Actions annotations.

Everything goes into one output folder a workflow can upload; the Markdown is also appended
to $GITHUB_STEP_SUMMARY and the warnings and failures become workflow commands when
$GITHUB_ACTIONS is set.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from tilelang_golden.files import atomic_write
from tilelang_golden.github import append_step_summary, capped, on_actions, workflow_command
from tilelang_golden.gpu.gate.ab_gate import AB_FAIL_SLOWER, AB_WARN_SLOWER, FASTER, AbComparison, slower_than_base
from tilelang_golden.gpu.gate.gate import DOES_NOT_FIT, PASS, UNUSABLE_BASELINE
from tilelang_golden.gpu.gate.numerics_gate import NAMES, STATISTICS, THRESHOLDS, NumericsResult, OutputCheck
from tilelang_golden.gpu.gate.timing_gate import FAIL, MISSING, NEW, OK, WARN, TimingVerdict
from tilelang_golden.gpu.measure.sweep import SweepCurve, conclusions
from tilelang_golden.gpu.measure.timing import Throughput
from tilelang_golden.gpu.report.results import GpuRun, VariantResult

# 3: numerics per output, each with its own tolerance; 4: and beside its precision twin's error; 5: a variant's
# failure (stage, kind: raised, did not finish, crashed), those that did not finish or crashed first among failures;
# 6: `against`, the changed variants timed next to the base commit's kernels; 7: a tolerance's `why` (a variant's own
# bound), a chain's kernels, an output's storage mapping; 8: `repeats` (repeated launches, per variant and the run's)
# and `sanitizer` (compute-sanitizer's findings, `--sanitize`)
REPORT_FORMAT = 8
REPORT = "report.json"
NOT_RUN = "not_run"  # the count of variants not run on this device's target (GpuRun.not_run)
SUMMARY = "summary.md"
MARKDOWN_HEADER = "<!-- Written by `nox -s gpu` (tilelang-golden gpu) from one run; report.json holds the data. -->"


def plot_name(family: str) -> str:
    return f"sweep_{family}.png"


def _families_with_sweeps(run: GpuRun) -> dict[str, list[SweepCurve]]:
    found: dict[str, list[SweepCurve]] = {}
    for curve in run.sweeps:
        found.setdefault(curve.family, []).append(curve)
    return found


def report_data(run: GpuRun) -> dict[str, Any]:
    fastest = run.fastest()
    return {
        "format": REPORT_FORMAT,
        "written_by": "nox -s gpu (tilelang-golden gpu)",
        "passed": run.passed,
        "device": run.device.as_dict(),
        "seeds": run.seeds,
        "timer": run.timer,
        "compile_seconds": round(run.compile_seconds, 2),
        "wall_seconds": round(run.wall_seconds, 2),
        "counts": _counts(run),
        "failures": {v.key: list(run.verdict(v).failures) for v in run.failures},
        "does_not_fit": {v.key: v.fit_note() for v in run.not_fitting},
        "not_run": run.not_run,
        "warnings": run.warnings(),
        "gpu_state": run.gpu_state,
        "gpu_state_note": run.gpu_state_note,
        "other_processes": run.other_processes,
        "fastest": None if fastest is None else {"variant": fastest.key, "ratio_to_reference": fastest.ratio},
        "references": {
            name: {**timing.as_dict(), "throughput": _as_dict(run.reference_throughput.get(name))}
            for name, timing in run.references.items()
        },
        "baseline": None
        if run.comparison is None
        else {
            "status": run.comparison.status,
            "path": run.comparison.path,
            "message": run.comparison.message,
            "not_checked": run.comparison.not_checked,
        },
        "against": None if run.ab is None else _ab_data(run.ab),
        "repeats": run.repeats,
        "sanitizer": run.sanitizer,
        "variants": [_variant_data(run, v) for v in run.variants],
        "sweeps": {"curves": [s.as_dict() for s in run.sweeps], "conclusions": conclusions(run.sweeps)},
    }


def _variant_data(run: GpuRun, v: VariantResult) -> dict[str, Any]:
    compiled, snapshot, verdict = v.compiled, v.snapshot, run.verdict(v)
    timing = verdict.timing
    return {
        "variant": v.key,
        "reference": v.reference,
        "status": verdict.status,
        "failure": None if v.failure is None else v.failure.as_dict(),
        "problems": list(verdict.failures) + ([] if v.fits else [v.fit_note()]),
        "compile_target": compiled.compile_target,
        "dynamic_shared_memory_bytes": compiled.dynamic_shared_memory_bytes,
        "snapshot_dynamic_shared_memory_bytes": snapshot.shared_memory_bytes,
        "snapshot": snapshot.path,
        "cuda_matches_snapshot": snapshot.cuda_matches,
        "machine_matches_snapshot": snapshot.machine_matches,
        "machine_differences": list(snapshot.machine_differences),
        "kernel_resources": compiled.kernel_resources,
        "static_shared_memory_bytes": compiled.static_shared_memory_bytes,
        "registers_per_thread": compiled.registers_per_thread,
        "resources_note": compiled.resources_note,
        "fits": v.fits,
        "needs_shared_memory_bytes": v.needs_bytes,
        "numerics": None if v.numerics is None else v.numerics.as_dict(),
        "timing": None if v.paired is None else v.paired.as_dict(),
        "repeats": None if v.repeats is None else v.repeats.as_dict(),
        "sanitizer": None if v.sanitized is None else v.sanitized.as_dict(),
        "ratio_to_reference": v.ratio,
        "throughput": _as_dict(v.throughput),
        "baseline": None
        if timing is None
        else {
            "level": timing.level,
            "baseline_ratio": timing.baseline_ratio,
            "slower_by": timing.slower_by,
            "remeasured_ratio": timing.remeasured_ratio,
            "message": timing.message,
        },
    }


def _ab_data(ab: AbComparison) -> dict[str, Any]:
    verdicts = {
        key: {
            "level": v.level,
            "slower_by": v.slower_by,
            "spread": v.spread,
            "rounds": list(v.rounds),
            "again": list(v.again),
            "message": v.message,
        }
        for key, v in ab.verdicts.items()
    }
    return {
        "base": ab.base,
        "verdicts": verdicts,
        "not_compared": ab.not_compared,
        "unchanged": ab.unchanged,
        "gone": ab.gone,
    }


def _counts(run: GpuRun) -> dict[str, int]:
    """Every variant once: run (pass, fail, does not fit) or not run on this device's target."""
    statuses = [run.verdict(v).status for v in run.variants]
    return {**{status: statuses.count(status) for status in (PASS, FAIL, DOES_NOT_FIT)}, NOT_RUN: len(run.not_run)}


def _as_dict(value: Throughput | None) -> dict[str, Any] | None:
    return None if value is None else vars(value)


def render_markdown(run: GpuRun, plots: list[str] | None = None) -> str:
    d = run.device
    counts = _counts(run)
    lines = [
        MARKDOWN_HEADER,
        f"## GPU check {'passed' if run.passed else 'FAILED'} on {d.name} ({d.target})",
        "",
        *_unusable_baseline(run),
        *([] if run.ab is None else _ab_section(run.ab, run.history)),
        f"{d.runtime}, torch {d.versions['torch']}, TileLang {d.versions['tilelang']}; "
        f"seeds {', '.join(map(str, run.seeds))}; {run.timer['tool']}, each variant next to its reference, "
        f"{run.timer['rounds']} rounds in random order (seed {run.timer.get('order_seed')}), ratio = median of the "
        f"rounds' ratios; wall time {run.wall_seconds:.0f} s (compilation {run.compile_seconds:.0f} s).",
        "",
        f"- {counts[PASS]} passed, {counts[FAIL]} failed, {counts[DOES_NOT_FIT]} do not fit on this GPU, "
        f"{counts[NOT_RUN]} not run on {d.target}",
    ]
    stopped = [v for v in run.failures if v.stopped]
    if stopped:
        lines.append(
            f"- **{len(stopped)} did not finish or crashed** ("
            + ", ".join(f"{v.key}: {v.failure.kind}" for v in stopped)
            + "), listed first under Failures"
        )
    lines += [f"- **{v.key} {v.fit_note()}**: not run, not counted as a pass" for v in run.not_fitting]
    lines += [f"- **{key}**: not run: {why}; not counted as a pass" for key, why in run.not_run.items()]
    lines += _race_check_lines(run)
    if run.comparison is not None:
        lines.append(f"- timing baseline: {run.comparison.message}")
    lines.append(f"- {gpu_state_line(run)}")
    if run.other_processes:
        lines.append(f"- **other processes used this GPU while it was timed** (pids {run.other_processes})")
    fastest = run.fastest()
    if fastest is not None:
        lines.append(f"- fastest: {fastest.key}, {fastest.ratio:.2f}x the speed of its reference ({fastest.reference})")
    if run.failures:
        lines += ["", "### Failures", ""]
        lines += [f"- {v.key}: {failure}" for v in run.failures for failure in run.verdict(v).failures]
    warnings = [w for w in run.warnings() if "does not fit" not in w]
    if warnings:
        lines += ["", "### Warnings", ""] + [f"- {w}" for w in warnings]
    declared = [f"- {v.key}: {note}" for v in run.variants if v.repeats for note in v.repeats.notes()]
    if declared:
        lines += ["", "### Not held to bitwise equality", "", *declared]
    peak = d.peak
    peak_note = (
        f"Fraction of peak: of {peak.tflops:g} TFLOP/s (dense fp16/bf16) for compute-bound work, of "
        f"{peak.gbps / 1000:g} TB/s for memory-bound work, whichever the work's arithmetic intensity falls on."
        if peak
        else f"No datasheet peaks known for {d.name}: rates without fractions of peak."
    )
    lines += ["", "### Variants", "", peak_note, "", _variant_table(run), "", _reference_table(run), ""]
    lines += ["### Numerics", "", NUMERICS_NOTE, "", _numerics_table(run), ""]
    for family, curves in _families_with_sweeps(run).items():
        axis = curves[0].axis
        lines += [f"### {family}: latency and shared memory against {axis}", "", _sweep_table(curves), ""]
        lines += [f"- {line}" for line in conclusions(curves)]
        if plots and plot_name(family) in plots:
            lines += ["", f"![latency and shared memory against {axis}]({plot_name(family)})"]
        lines.append("")
    return "\n".join(lines).rstrip("\n") + "\n"


def _unusable_baseline(run: GpuRun) -> list[str]:
    """The timing baseline's failure, first under the headline: it fails the run whatever the variants did."""
    comparison = run.comparison
    if comparison is None or comparison.status not in UNUSABLE_BASELINE:
        return []
    return [f"**The timing baseline fails the run: {comparison.message}**", ""]


def _race_check_lines(run: GpuRun) -> list[str]:
    """What the repeated launches and the sanitizer pass found, in one line each."""
    launches, checked = run.repeats["launches"], [v.repeats for v in run.variants if v.repeats is not None]
    if launches < 2:
        lines = ["- repeated launches: off (`--repeats 1`); a race can pass the numeric check by luck"]
    else:
        differed = sum(not check.passed for check in checked)
        declared = sum(1 for check in checked for output in check.outputs if output.declared is not None)
        lines = [
            f"- repeated launches: {len(checked)} variants launched {launches} times each on seed "
            f"{run.repeats['seed']}'s inputs ({run.repeats['seconds']:.0f} s): {len(checked) - differed} bitwise "
            f"identical, {differed} not (failures)"
            + (f"; {declared} output(s) declared nondeterministic, not held to it (below)" if declared else "")
        ]
    if run.sanitizer is not None:
        found = [v.sanitized for v in run.variants if v.sanitized is not None]
        dirty = sum(not result.passed for result in found)
        lines.append(
            f"- sanitizer: {', '.join(run.sanitizer['tools'])} on {len(found)} variants at their sanitize shapes "
            f"({run.sanitizer['jobs']} processes at a time, {run.sanitizer['seconds']:.0f} s): {len(found) - dirty} "
            f"clean, {dirty} with findings (failures)"
        )
    return lines


def _ab_section(ab: AbComparison, history: Mapping[str, str]) -> list[str]:
    """The A/B table first: each changed variant's time over the base's, worst first, beside its recent runs on main
    when the performance history has them, then what was not compared."""
    levels = [v.level for v in ab.verdicts.values()]
    counted = ", ".join(f"{levels.count(level)} {word}" for level, word in AB_WORDS.items() if level in levels)
    lines = [
        f"### Against {ab.base}: {len(ab.verdicts)} changed variants timed next to the base's kernel"
        + (f" ({counted})" if counted else ""),
        "",
    ]
    if ab.verdicts:
        lines += [AB_NOTE + (HISTORY_NOTE if history else ""), ""]
        lines += [
            "| variant | time vs base | spread | second measurement | verdict |" + (" on main |" if history else "")
        ]
        lines.append("|---|---|---|---|---|" + ("---|" if history else ""))
        for v in sorted(ab.verdicts.values(), key=lambda v: -v.slower_by):
            again = f"{slower_than_base(v.again):+.1%}" if v.again else ""
            row = f"| {v.variant} | {v.slower_by:+.1%} | {v.spread:.1%} | {again} | {AB_WORDS[v.level]} |"
            lines.append(row + (f" {history.get(v.variant, 'no history yet')} |" if history else ""))
        lines.append("")
    lines += [f"- {key}: not compared: {why}" for key, why in ab.not_compared.items()]
    lines += [f"- {key}: gone from the working tree (the base has it)" for key in ab.gone]
    if ab.unchanged:
        lines.append(f"- {len(ab.unchanged)} variants unchanged since the base: checked against the baseline only")
    return [*lines, ""]


AB_WORDS = {FAIL: "slower (fails)", WARN: "slower (warning)", OK: "within 1 %", FASTER: "faster"}
AB_NOTE = (
    f"The pull request's kernel and the base's, launched in alternation in one process, over the run's rounds; time "
    f"vs base = the median round's time ratio minus 1. Fails from +{AB_FAIL_SLOWER:.0%} when a second, independent "
    f"measurement agrees; warns from +{AB_WARN_SLOWER:.0%}."
)


HISTORY_NOTE = (
    " On main: the variant's ratio to its reference over main's last runs on this GPU model (higher is faster), the "
    "latest, and its latest change of level (the performance history, docs/history.md)."
)


def gpu_state_line(run: GpuRun) -> str:
    state = run.gpu_state
    if state is None:
        return run.gpu_state_note or "no GPU state recorded"
    low, high = state["sm_clock_mhz"]
    caps = ", ".join(state["caps"])
    throttled = (
        f"a power or thermal cap was active in {state['capped_fraction']:.0%} of the samples ({caps})"
        if state["caps"]
        else "no power or thermal cap was active"
    )
    return (
        f"GPU while timed: SM clock {low}-{high} MHz, up to {state['max_power_w']:.0f} W of "
        f"{state['power_limit_w']:.0f} W; {throttled} ({state['samples']} samples, one after every measured pair)"
    )


def _rates(value: Throughput | None) -> list[str]:
    if value is None:
        return ["—", "—", "—"]
    fraction = "—" if value.fraction_of_peak is None else f"{value.fraction_of_peak:.0%} ({value.bound})"
    return [f"{value.tflops:.1f}", f"{value.gbps:.0f}", fraction]


def _variant_table(run: GpuRun) -> str:
    rows = [
        "| variant | status | ms | ratio spread | TFLOP/s | GB/s | of peak | vs reference | baseline "
        "| dynamic shared memory (B) | registers |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for v in run.variants:
        timing = v.timing
        cells = [
            v.key,
            run.verdict(v).status + (f" ({v.failure.kind})" if v.stopped else ""),
            _num(timing and timing.median_ms, ".3f"),
            _pct(v.paired and v.paired.ratio_spread),
            *_rates(v.throughput),
            _num(v.ratio, ".2f"),
            _baseline_cell(run.verdict(v).timing),
            _num(v.shared_memory_bytes, "d"),
            _num(v.compiled.registers_per_thread, "d"),
        ]
        rows.append("| " + " | ".join(cells) + " |")
    return "\n".join(rows)


def _reference_table(run: GpuRun) -> str:
    rows = ["| reference (PyTorch) | ms | spread | TFLOP/s | GB/s | of peak |", "|---|---|---|---|---|---|"]
    for name, timing in run.references.items():
        rates = " | ".join(_rates(run.reference_throughput.get(name)))
        rows.append(f"| {name} | {timing.median_ms:.3f} | {_pct(timing.spread)} | {rates} |")
    return "\n".join(rows)


NUMERICS_NOTE = (
    "Each output's error against the high-precision reference, the kernel's / its precision twin's (the family's "
    "PyTorch op at the kernel's precision, on the same inputs), on the seed where it came closest to a bound. "
    f"Bounds: max abs error {THRESHOLDS.max_factor:g}x the twin's, mean abs error {THRESHOLDS.mean_factor:g}x; "
    f"|bias| the twin's plus {THRESHOLDS.bias_fraction:g} of its mean abs error, |scale| (least-squares, "
    f"<out, ref>/<ref, ref> - 1) the twin's plus {THRESHOLDS.scale_fraction:g} of its relative mean abs error; each "
    f"plus {THRESHOLDS.floor:g} of the output's mean |ref|; an output whose family declares a precision budget "
    "has the factors it names instead, shown with the reason. *of bound*: the largest fraction of its bound a "
    "statistic took (over 100 % fails). The Tolerance applies too, and alone where there is no twin."
)


def _numerics_table(run: GpuRun) -> str:
    rows = [
        "| variant | output | seed | " + " | ".join(NAMES[name] for name in STATISTICS) + " | of bound |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for v in run.variants:
        if v.numerics is None:
            continue
        for index, output in enumerate(v.numerics.outputs):
            found = _closest_to_bound(v.numerics, index)
            if found is None:
                rows.append(f"| {v.key} | {output.name} | — | — | — | — | — | no seed compared it |")
                continue
            seed, check = found
            cells = [_side_by_side(check, name) for name in STATISTICS]
            rows.append(f"| {v.key} | {output.name} | {seed} | " + " | ".join(cells) + f" | {_of_bound(check)} |")
    return "\n".join(rows)


def _closest_to_bound(numerics: NumericsResult, index: int) -> tuple[int, OutputCheck] | None:
    """The seed on which output `index` came closest to failing: its largest fraction of a bound, or without a
    twin its largest max abs error."""
    checked = [(s.seed, s.outputs[index]) for s in numerics.seeds if len(s.outputs) > index]
    if not checked:
        return None

    def closeness(found: tuple[int, OutputCheck]) -> float:
        tightest = found[1].tightest
        return found[1].max_abs_error if tightest is None else tightest[1]

    return max(checked, key=closeness)


def _side_by_side(check: OutputCheck, name: str) -> str:
    if check.errors is None:
        return "—"
    kernel = f"{getattr(check.errors, name):.3g}"
    return kernel if check.twin is None else f"{kernel} / {getattr(check.twin, name):.3g}"


def _of_bound(check: OutputCheck) -> str:
    tightest = check.tightest
    if tightest is None:
        return "no twin: Tolerance only"
    name, fraction = tightest
    budget = check.output.tolerance.precision_budget
    if budget is None:
        return f"{fraction:.0%} ({NAMES[name]})"
    factors = ", ".join(f"{field} {value:g}" for field, value in budget.factors().items())
    return f"{fraction:.0%} ({NAMES[name]}); budget {factors}: {budget.why}"


def _sweep_table(curves: list[SweepCurve]) -> str:
    axis = curves[0].axis
    rows = [f"| series | {axis} | ms | spread | dynamic shared memory (KiB) | |", "|---|---|---|---|---|---|"]
    for curve in curves:
        knee = curve.knee
        for p in sorted(curve.points, key=lambda p: p.value):
            note = "does not fit" if not p.fits else ("knee" if p.value == knee and curve.plateau else "")
            smem = "?" if p.shared_memory_bytes is None else f"{p.shared_memory_bytes / 1024:g}"
            spread = _pct(None if p.median_ms is None else p.spread)
            rows.append(f"| {curve.series} | {p.value} | {_num(p.median_ms, '.3f')} | {spread} | {smem} | {note} |")
    return "\n".join(rows)


def _baseline_cell(verdict: TimingVerdict | None) -> str:
    if verdict is None:
        return ""
    if verdict.level == NEW:
        return "new"
    return f"{verdict.level} ({verdict.slower_by:+.1%} time)"


def _num(value: float | int | None, spec: str) -> str:
    return "—" if value is None else format(value, spec)


def _pct(value: float | None) -> str:
    return "—" if value is None else f"{value:.1%}"


def workflow_commands(run: GpuRun) -> list[str]:
    """GitHub Actions workflow commands for what a maintainer must see without opening the log,
    escaped and capped as the static summary's are (GitHub shows 10 of each kind per step)."""
    lines = []
    # An unusable baseline fails the whole run: said first, before any variant's finding.
    if run.comparison is not None and run.comparison.status in UNUSABLE_BASELINE:
        lines.append(workflow_command("error", run.comparison.message, title="gpu timing baseline"))
    lines += [
        workflow_command("error", p, title=f"gpu check {v.key}") for v in run.failures for p in run.verdict(v).failures
    ]
    lines += [workflow_command("warning", w, title="gpu check") for w in run.warnings()]
    if run.comparison is not None and run.comparison.status == MISSING:
        lines.append(workflow_command("notice", run.comparison.message, title="gpu timing baseline"))
    return capped(lines, "GPU finding(s)")


def write_reports(
    run: GpuRun, folder: Path, environ: Mapping[str, str], log: Callable[[str], None] = print
) -> list[Path]:
    """report.json, summary.md and a sweep plot per family in `folder`; step summary and commands on Actions."""
    folder.mkdir(parents=True, exist_ok=True)
    written = [folder / REPORT, folder / SUMMARY]
    atomic_write(folder / REPORT, json.dumps(report_data(run), indent=2) + "\n")
    plots: list[str] = []
    try:
        from tilelang_golden.gpu.report.sweep_plot import plot_sweeps

        for family, curves in _families_with_sweeps(run).items():
            plot_sweeps(curves, run.device.shared_memory_per_block_bytes, run.device.name, folder / plot_name(family))
            plots.append(plot_name(family))
            written.append(folder / plot_name(family))
    except ImportError as error:
        log(f"no plot: {error} (install requirements-gpu.txt)")
    summary = render_markdown(run, plots)
    atomic_write(folder / SUMMARY, summary)
    # The job page cannot show a file of the run: point at the uploaded folder instead.
    note = f"\nThe plots ({', '.join(plots)}) are in the uploaded report folder.\n" if plots else ""
    append_step_summary(render_markdown(run) + note, environ)
    if on_actions(environ):
        for line in workflow_commands(run):
            log(line)
    log(summary)
    return written
