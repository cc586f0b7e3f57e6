"""Timing baselines: one committed file per GPU model under golden/timing/, and the soft gate.

A baseline holds each variant's ratio to its reference (reference ms / variant ms, so higher
is faster), keyed by the GPU name and the CUDA, torch and TileLang versions.
Ratios, not milliseconds, because cuBLAS in the same process absorbs most of what a shared
GPU's clocks and neighbours do to both. A variant more than WARN_SLOWER slower per unit of its
reference than the baseline warns; more than FAIL_SLOWER fails, but only if a re-measurement
confirms it (docs/gpu.md says how these were chosen). Another key, or no file: report only.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from harness.environment import running_under_ci
from harness.files import atomic_write

TIMING_DIR = Path("golden") / "timing"
# Measured by scripts/bench_timing.py on the H200 (docs/gpu.md, "How sharp the gate is").
WARN_SLOWER = 0.03
FAIL_SLOWER = 0.04
BASELINE_FORMAT = 1
CORRUPT = "corrupt"  # the Comparison status for a baseline file that cannot be read
RECORD_COMMAND = "nox -s gpu -- --record-baseline"
HEADER = (
    "# Timing baseline for one GPU model: each variant's ratio to its reference (reference ms / variant ms).\n"
    f"# Written by `{RECORD_COMMAND}` on that GPU; never edit by hand.\n"
)

# variant keys -> their re-measured ratios
Remeasure = Callable[[Sequence[str]], Mapping[str, float]]


class CorruptBaseline(ValueError):
    """A baseline file that cannot be read; the message names it and what to do."""


class BaselineRefused(RuntimeError):
    """Recording a baseline is not allowed in this run."""


@dataclass(frozen=True)
class Baseline:
    key: dict[str, str]
    ratios: dict[str, float]
    problems: dict[str, str] = field(default_factory=dict)  # variant -> the problem its ratio was measured at


@dataclass
class Verdict:
    variant: str
    level: str  # ok | warn | fail | new
    ratio: float
    baseline_ratio: float | None = None
    remeasured_ratio: float | None = None
    message: str = ""

    @property
    def slower_by(self) -> float | None:
        return None if self.baseline_ratio is None else slower_by(self.ratio, self.baseline_ratio)


@dataclass
class Comparison:
    status: str  # compared | missing | key mismatch | recorded | corrupt
    path: str
    message: str
    verdicts: dict[str, Verdict] = field(default_factory=dict)
    not_checked: list[str] = field(default_factory=list)  # in the baseline, absent from this run

    def of_level(self, level: str) -> list[Verdict]:
        return [v for v in self.verdicts.values() if v.level == level]


def baseline_path(gpu_name: str, root: Path = TIMING_DIR) -> Path:
    """`NVIDIA H200` -> golden/timing/nvidia-h200.yaml."""
    slug = re.sub(r"[^a-z0-9]+", "-", gpu_name.lower()).strip("-")
    return root / f"{slug}.yaml"


def baseline_key(gpu_name: str, versions: Mapping[str, str]) -> dict[str, str]:
    """What a ratio depends on besides the kernel: the GPU and the software. Problem shapes belong to
    the families and are in the static snapshots, which a GPU run checks its kernels against."""
    return {"gpu": str(gpu_name), **{name: str(versions[name]) for name in ("cuda", "torch", "tilelang")}}


def slower_by(ratio: float, baseline_ratio: float) -> float:
    """How much more time per unit of the reference than the baseline: 0.05 = 5 % slower, negative = faster.

    A kernel doing 5 % more work, at the same speed, is 5 % slower by this measure."""
    return baseline_ratio / ratio - 1.0


def read_baseline(path: Path) -> Baseline | None:
    if not path.is_file():
        return None
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as error:
        raise CorruptBaseline(f"{path}: not valid YAML ({error}); record it again with `{RECORD_COMMAND}`") from None
    if not isinstance(data, dict) or data.get("format") != BASELINE_FORMAT:
        raise CorruptBaseline(f"{path}: expected a mapping with format: {BASELINE_FORMAT}; record it again")
    key, ratios = data.get("key"), data.get("ratios")
    if not isinstance(key, dict) or not isinstance(ratios, dict):
        raise CorruptBaseline(f"{path}: expected mappings under 'key' and 'ratios'; record it again")
    bad = [name for name, value in ratios.items() if not isinstance(value, (int, float)) or value <= 0]
    if bad:
        raise CorruptBaseline(f"{path}: ratios must be positive numbers, not for {bad}; record it again")
    problems = data.get("problems") or {}
    if not isinstance(problems, dict):
        raise CorruptBaseline(f"{path}: expected a mapping under 'problems'; record it again")
    return Baseline(
        {str(k): str(v) for k, v in key.items()},
        {str(k): float(v) for k, v in ratios.items()},
        {str(k): str(v) for k, v in problems.items()},
    )


def render_baseline(
    key: Mapping[str, str], ratios: Mapping[str, float], problems: Mapping[str, str], timer: Mapping[str, Any]
) -> str:
    data = {
        "format": BASELINE_FORMAT,
        "key": {str(k): str(v) for k, v in key.items()},
        "timer": {str(k): v for k, v in timer.items()},
        "ratios": {str(name): round(float(ratios[name]), 4) for name in sorted(ratios)},
        "problems": {str(name): str(problems[name]) for name in sorted(ratios)},
    }
    return HEADER + yaml.safe_dump(data, sort_keys=False, width=120)


def check_may_record(force: bool, environ: Mapping[str, str] = os.environ) -> None:
    """Recording is a person's decision after looking at the numbers, not something CI does by itself."""
    if running_under_ci(environ) and not force:
        raise BaselineRefused(
            f"refusing to record a timing baseline while CI={environ.get('CI')!r}: a baseline is recorded by a "
            f"person on the GPU it describes (`{RECORD_COMMAND}`), then reviewed and committed. Pass "
            "--force-record-under-ci if this job exists to produce one as an artifact."
        )


def write_baseline(path: Path, text: str, force: bool, environ: Mapping[str, str] = os.environ) -> None:
    check_may_record(force, environ)
    atomic_write(path, text)


def compare(
    baseline: Baseline | None,
    path: Path,
    key: Mapping[str, str],
    ratios: Mapping[str, float],
    remeasure: Remeasure,
    problems: Mapping[str, str] | None = None,
) -> Comparison:
    """The soft gate for every measured ratio; `remeasure` is asked only about suspected failures."""
    if baseline is None:
        return Comparison(
            "missing",
            str(path),
            f"no timing baseline for {key['gpu']} ({path}): timings are reported only. "
            f"Record one on this GPU with `{RECORD_COMMAND}` and commit it.",
        )
    differing = [
        f"{name}: baseline {baseline.key.get(name)!r}, now {value!r}"
        for name, value in key.items()
        if baseline.key.get(name) != value
    ]
    if differing:
        return Comparison(
            "key mismatch",
            str(path),
            f"{path} was recorded under another key ({'; '.join(differing)}): ratios are not compared, "
            f"timings are reported only. Record a baseline for this setup with `{RECORD_COMMAND}`.",
        )
    verdicts: dict[str, Verdict] = {}
    suspects: list[str] = []
    for variant, ratio in ratios.items():
        if variant not in baseline.ratios:
            verdicts[variant] = Verdict(variant, "new", ratio, message="no baseline entry yet")
            continue
        recorded, now = baseline.problems.get(variant), (problems or {}).get(variant)
        if recorded is not None and now is not None and recorded != now:
            verdicts[variant] = Verdict(
                variant, "new", ratio, message=f"problem changed ({recorded} -> {now}): not compared; record again"
            )
            continue
        verdict = Verdict(variant, "ok", ratio, baseline.ratios[variant])
        change = slower_by(ratio, verdict.baseline_ratio)
        if change > FAIL_SLOWER:
            suspects.append(variant)
        elif change > WARN_SLOWER:
            verdict.level = "warn"
            verdict.message = (
                f"{change:.1%} slower than the baseline ratio {verdict.baseline_ratio:.3f} "
                f"(warn above {WARN_SLOWER:.0%})"
            )
        verdicts[variant] = verdict
    remeasured = remeasure(suspects) if suspects else {}
    for variant in suspects:
        verdict = verdicts[variant]
        first = slower_by(verdict.ratio, verdict.baseline_ratio)
        again = remeasured.get(variant)
        verdict.remeasured_ratio = again
        if again is not None and slower_by(again, verdict.baseline_ratio) > FAIL_SLOWER:
            verdict.level = "fail"
            verdict.message = (
                f"{first:.1%} slower than the baseline ratio {verdict.baseline_ratio:.3f}, confirmed by a "
                f"re-measurement ({slower_by(again, verdict.baseline_ratio):.1%} slower; fail above {FAIL_SLOWER:.0%})"
            )
        else:
            verdict.level = "warn"
            again_text = (
                "no re-measurement"
                if again is None
                else f"{slower_by(again, verdict.baseline_ratio):.1%} on re-measurement"
            )
            verdict.message = (
                f"{first:.1%} slower than the baseline ratio {verdict.baseline_ratio:.3f} at first, "
                f"{again_text}: not confirmed, so a warning"
            )
    not_checked = sorted(set(baseline.ratios) - set(ratios))
    fails, warns = (
        len([v for v in verdicts.values() if v.level == "fail"]),
        len([v for v in verdicts.values() if v.level == "warn"]),
    )
    rest = len(verdicts) - fails - warns
    message = f"compared with {path}: {fails} confirmed regressions, {warns} warnings, {rest} within limits or new"
    return Comparison("compared", str(path), message, verdicts, not_checked)
