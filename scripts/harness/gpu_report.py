"""What a GPU run tells people and machines: JSON report, Markdown summary, plot, Actions annotations.

Everything goes into one output folder a workflow can upload; the Markdown is also appended
to $GITHUB_STEP_SUMMARY and the warnings and failures become annotations when
$GITHUB_ACTIONS is set.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from harness.baseline import CORRUPT
from harness.gpu_results import DOES_NOT_FIT, FAIL, PASS, GpuRun, VariantResult
from harness.snapshot import atomic_write
from harness.sweep import conclusions
from harness.timing import tflops

REPORT_FORMAT = 1
REPORT = "report.json"
SUMMARY = "summary.md"
PLOT = "num_stages_sweep.png"


def report_data(run: GpuRun) -> dict[str, Any]:
    fastest = run.fastest()
    return {
        "format": REPORT_FORMAT,
        "passed": run.passed,
        "device": run.device.as_dict(),
        "problem": run.shape,
        "seeds": run.seeds,
        "timer": run.timer,
        "compile_seconds": round(run.compile_seconds, 2),
        "wall_seconds": round(run.wall_seconds, 2),
        "counts": {status: sum(v.status == status for v in run.variants) for status in (PASS, FAIL, DOES_NOT_FIT)},
        "failures": {v.key: v.hard_problems() for v in run.failures},
        "does_not_fit": {v.key: v.fit_note() for v in run.not_fitting},
        "warnings": run.warnings(),
        "fastest": None if fastest is None else {"variant": fastest.key, "ratio_to_reference": fastest.ratio},
        "references": {
            name: {**timing.as_dict(), "tflops": tflops(run.shape, timing.median_ms)}
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
        "variants": [{**v.as_dict(), "tflops": _tflops(run, v)} for v in run.variants],
        "num_stages_sweep": {"tiles": [s.as_dict() for s in run.sweeps], "conclusions": conclusions(run.sweeps)},
    }


def render_summary(run: GpuRun, plot_name: str | None = PLOT) -> str:
    d = run.device
    counts = {status: sum(v.status == status for v in run.variants) for status in (PASS, FAIL, DOES_NOT_FIT)}
    lines = [
        f"## GPU check {'passed' if run.passed else 'FAILED'} on {d.name} ({d.target})",
        "",
        f"CUDA {d.versions['cuda']}, torch {d.versions['torch']}, TileLang {d.versions['tilelang']}; "
        f"fp16 {run.shape['M']}x{run.shape['N']}x{run.shape['K']}; seeds {', '.join(map(str, run.seeds))}; "
        f"{run.timer['tool']} median, {run.timer['rounds']} interleaved rounds; "
        f"wall time {run.wall_seconds:.0f} s (compilation {run.compile_seconds:.0f} s).",
        "",
        f"- {counts[PASS]} passed, {counts[FAIL]} failed, {counts[DOES_NOT_FIT]} do not fit on this GPU",
    ]
    lines += [f"- **{v.key} {v.fit_note()}**: not run, not counted as a pass" for v in run.not_fitting]
    if run.comparison is not None:
        lines.append(f"- timing baseline: {run.comparison.message}")
    fastest = run.fastest()
    if fastest is not None:
        lines.append(f"- fastest: {fastest.key}, {fastest.ratio:.2f}x the speed of its reference ({fastest.reference})")
    if run.failures:
        lines += ["", "### Failures", ""]
        lines += [f"- {v.key}: {problem}" for v in run.failures for problem in v.hard_problems()]
    warnings = [w for w in run.warnings() if "does not fit" not in w]
    if warnings:
        lines += ["", "### Timing warnings", ""] + [f"- {w}" for w in warnings]
    lines += ["", "### Variants", "", _variant_table(run), "", _reference_table(run), ""]
    lines += ["### Seed 01: latency and shared memory against num_stages", "", _sweep_table(run), ""]
    lines += [f"- {line}" for line in conclusions(run.sweeps)]
    if plot_name:
        lines += ["", f"![latency and shared memory against num_stages]({plot_name})"]
    return "\n".join(lines) + "\n"


def _variant_table(run: GpuRun) -> str:
    rows = [
        "| variant | status | ms | spread | TFLOP/s | vs reference | baseline | dynamic shared memory (B) "
        "| registers |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for v in run.variants:
        timing = v.timing
        rows.append(
            "| "
            + " | ".join(
                [
                    v.key,
                    v.status,
                    _num(timing and timing.median_ms, ".3f"),
                    _pct(timing and timing.spread),
                    _num(_tflops(run, v), ".0f"),
                    _num(v.ratio, ".2f"),
                    _baseline_cell(v),
                    _num(v.shared_memory_bytes, "d"),
                    _num(v.compiled.registers_per_thread, "d"),
                ]
            )
            + " |"
        )
    return "\n".join(rows)


def _reference_table(run: GpuRun) -> str:
    rows = ["| reference (cuBLAS through torch) | ms | spread | TFLOP/s |", "|---|---|---|---|"]
    ops = {"matmul": "torch.matmul(A, B)", "matmul_relu": "torch.relu(torch.matmul(A, B))"}
    for name, timing in run.references.items():
        rows.append(
            f"| {ops.get(name, name)} | {timing.median_ms:.3f} | {_pct(timing.spread)} "
            f"| {tflops(run.shape, timing.median_ms):.0f} |"
        )
    return "\n".join(rows)


def _sweep_table(run: GpuRun) -> str:
    rows = ["| tile | num_stages | ms | spread | dynamic shared memory (KiB) | |", "|---|---|---|---|---|---|"]
    for sweep in run.sweeps:
        knee = sweep.knee
        for p in sorted(sweep.points, key=lambda p: p.num_stages):
            note = "does not fit" if not p.fits else ("knee" if p.num_stages == knee and sweep.plateau else "")
            smem = "?" if p.shared_memory_bytes is None else f"{p.shared_memory_bytes / 1024:g}"
            spread = _pct(None if p.median_ms is None else p.spread)
            rows.append(f"| {sweep.tile} | {p.num_stages} | {_num(p.median_ms, '.3f')} | {spread} | {smem} | {note} |")
    return "\n".join(rows)


def _baseline_cell(v: VariantResult) -> str:
    verdict = v.verdict
    if verdict is None:
        return ""
    if verdict.level == "new":
        return "new"
    change = -verdict.worse_by
    return f"{verdict.level} ({change:+.0%})"


def _tflops(run: GpuRun, v: VariantResult) -> float | None:
    return None if v.timing is None else tflops(run.shape, v.timing.median_ms)


def _num(value: float | int | None, spec: str) -> str:
    return "—" if value is None else format(value, spec)


def _pct(value: float | None) -> str:
    return "—" if value is None else f"{value:.1%}"


def annotations(run: GpuRun) -> list[str]:
    """GitHub Actions workflow commands for what a maintainer must see without opening the log."""
    lines = [f"::error title=gpu check {v.key}::{p}" for v in run.failures for p in v.hard_problems()]
    lines += [f"::warning title=gpu check::{w}" for w in run.warnings()]
    if run.comparison is not None and run.comparison.status == CORRUPT:
        lines.append(f"::error title=gpu timing baseline::{run.comparison.message}")
    if run.comparison is not None and run.comparison.status in ("missing", "key mismatch"):
        lines.append(f"::notice title=gpu timing baseline::{run.comparison.message}")
    return [line.replace("\n", " ") for line in lines]


def write_reports(
    run: GpuRun, folder: Path, environ: Mapping[str, str], log: Callable[[str], None] = print
) -> list[Path]:
    """report.json, summary.md and the sweep plot in `folder`; step summary and annotations on Actions."""
    folder.mkdir(parents=True, exist_ok=True)
    written = [folder / REPORT, folder / SUMMARY]
    atomic_write(folder / REPORT, json.dumps(report_data(run), indent=2) + "\n")
    plot = folder / PLOT
    plot_name: str | None = PLOT
    try:
        from harness.sweep_plot import plot_sweeps

        plot_sweeps(run.sweeps, run.device.shared_memory_per_block_bytes, run.device.name, plot)
        written.append(plot)
    except ImportError as error:
        log(f"no plot: {error} (install requirements-gpu.txt)")
        plot_name = None
    summary = render_summary(run, plot_name)
    atomic_write(folder / SUMMARY, summary)
    step_summary = environ.get("GITHUB_STEP_SUMMARY")
    if step_summary:  # the job page cannot show a file of the run: point at the uploaded folder instead
        note = f"\nThe plot is {PLOT} in the uploaded report folder.\n" if plot_name else ""
        with open(step_summary, "a", encoding="utf-8") as stream:
            stream.write(render_summary(run, plot_name=None) + note)
    if environ.get("GITHUB_ACTIONS") == "true":
        for line in annotations(run):
            log(line)
    log(summary)
    return written
