"""A GPU run's ratios against the committed timing baseline of its GPU model (tilelang_golden.gpu.gate.timing_gate
judges), or recorded as that baseline."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from tilelang_golden.gpu.gate.baseline_file import (
    BaselineRefused,
    CorruptBaseline,
    baseline_key,
    baseline_path,
    check_may_record,
    read_baseline,
    render_baseline,
    write_baseline,
)
from tilelang_golden.gpu.gate.timing_gate import CORRUPT, RECORDED, Comparison, compare_ratios
from tilelang_golden.gpu.report.results import GpuRun, shape_name


@dataclass(frozen=True)
class BaselineUse:
    """What a run does with the baseline of its GPU model under `folder`: compare its ratios with it, or, with
    `record`, write them as the new baseline (`force` under CI, and only from a `complete_selection`: every variant
    of every family)."""

    folder: Path
    record: bool = False
    force: bool = False
    complete_selection: bool = True

    def check_may_record(self, environ: Mapping[str, str]) -> None:
        """BaselineRefused before anything runs when this run may not record."""
        if not self.record:
            return
        check_may_record(self.force, environ)
        if not self.complete_selection:
            raise BaselineRefused(
                "refusing to record a baseline from a selection of variants; run without --select and --families"
            )

    def judge(self, run: GpuRun, environ: Mapping[str, str], log: Callable[[str], None]) -> Comparison | None:
        """The timing gate's comparison, or the recording's; None where recording was refused (logged)."""
        if not self.record:
            return compare_with_baseline(run, self.folder)
        try:
            return record_baseline(run, self.folder, self.force, environ)
        except BaselineRefused as error:
            log(str(error))
            return None


def _shapes(run: GpuRun) -> dict[str, str]:
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
    return compare_ratios(baseline, path, key, ratios, run.remeasure or (lambda keys: {}), _shapes(run))


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
    write_baseline(path, render_baseline(key, ratios, _shapes(run), run.timer), force, environ)
    return Comparison(
        RECORDED, str(path), f"recorded a new baseline in {path} ({len(ratios)} ratios); review its diff and commit it"
    )
