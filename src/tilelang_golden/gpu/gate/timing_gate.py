"""The timing gate: a variant's ratio to its reference against the committed baseline of this GPU model.

Each variant's ratio (tilelang_golden.gpu.measure.timing) against its baseline entry, which
tilelang_golden.gpu.gate.baseline_file reads. More than WARN_SLOWER more time per unit of the reference than the
baseline warns; more than FAIL_SLOWER fails, but only if a re-measurement confirms it. No baseline for this GPU: the
timings are reported only (a new model). A baseline recorded under another key (GPU, CUDA, torch, TileLang) fails the
run (tilelang_golden.gpu.gate.gate): reported only, a changed key would switch the gate off unseen, which is what a
stale or tampered baseline did. docs/gpu.md ("How sharp the gate is") says how the levels were chosen;
benchmarks/timing.py measures them again.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from tilelang_golden.gpu.gate.baseline_file import RECORD_COMMAND, Baseline, key_differences

# Measured by benchmarks/timing.py on the H200 (docs/gpu.md, "How sharp the gate is").
# Between machine starts an unchanged kernel's ratio moved by up to 6.7 % (docs/measurements.md): the baseline
# catches drift beyond that, summed over many pull requests; a pull request's own change is the A/B gate's.
WARN_SLOWER = 0.08
FAIL_SLOWER = 0.10

# The level of a timing verdict (the A/B gate's too, with its FASTER).
OK, WARN, FAIL, NEW = "ok", "warn", "fail", "new"
# A Comparison's status: what the run's timings were held against.
COMPARED, MISSING, KEY_MISMATCH, RECORDED, CORRUPT = "compared", "missing", "key mismatch", "recorded", "corrupt"

# variant keys -> their re-measured ratios
Remeasure = Callable[[Sequence[str]], Mapping[str, float]]


def slower_by(ratio: float, earlier_ratio: float) -> float:
    """How much more time per unit of the reference than at `earlier_ratio`: 0.05 = 5 % slower, negative = faster.

    A kernel doing 5 % more work, at the same speed, is 5 % slower by this measure."""
    return earlier_ratio / ratio - 1.0


@dataclass(frozen=True)
class TimingVerdict:
    """The timing gate's word on one variant's ratio."""

    variant: str
    level: str  # OK | WARN | FAIL | NEW
    ratio: float
    baseline_ratio: float | None = None
    remeasured_ratio: float | None = None
    message: str = ""

    @property
    def slower_by(self) -> float | None:
        return None if self.baseline_ratio is None else slower_by(self.ratio, self.baseline_ratio)


@dataclass(frozen=True)
class Comparison:
    status: str  # COMPARED | MISSING | KEY_MISMATCH | RECORDED | CORRUPT
    path: str
    message: str
    verdicts: dict[str, TimingVerdict] = field(default_factory=dict)
    not_checked: list[str] = field(default_factory=list)  # in the baseline, absent from this run

    def of_level(self, level: str) -> list[TimingVerdict]:
        return [v for v in self.verdicts.values() if v.level == level]


def suspected(ratio: float, baseline_ratio: float) -> bool:
    """Slow enough that only a re-measurement can tell a regression from noise."""
    return slower_by(ratio, baseline_ratio) > FAIL_SLOWER


def judge(variant: str, ratio: float, baseline_ratio: float, again: float | None = None) -> TimingVerdict:
    """One ratio against its baseline entry; `again` is the re-measured ratio of a suspect (None: not re-measured)."""
    first = slower_by(ratio, baseline_ratio)
    than = f"slower than the baseline ratio {baseline_ratio:.3f}"
    if first <= WARN_SLOWER:
        return TimingVerdict(variant, OK, ratio, baseline_ratio)
    if not suspected(ratio, baseline_ratio):
        message = f"{first:.1%} {than} (warn above {WARN_SLOWER:.0%})"
        return TimingVerdict(variant, WARN, ratio, baseline_ratio, message=message)
    if again is not None and suspected(again, baseline_ratio):
        message = (
            f"{first:.1%} {than}, confirmed by a re-measurement ({slower_by(again, baseline_ratio):.1%} slower; "
            f"fail above {FAIL_SLOWER:.0%})"
        )
        return TimingVerdict(variant, FAIL, ratio, baseline_ratio, again, message)
    again_text = "no re-measurement" if again is None else f"{slower_by(again, baseline_ratio):.1%} on re-measurement"
    message = f"{first:.1%} {than} at first, {again_text}: not confirmed, so a warning"
    return TimingVerdict(variant, WARN, ratio, baseline_ratio, again, message)


def compare_ratios(
    baseline: Baseline | None,
    path: Path | str,
    key: Mapping[str, str],
    ratios: Mapping[str, float],
    remeasure: Remeasure,
    shapes: Mapping[str, str] | None = None,
) -> Comparison:
    """The timing gate for every measured ratio; `remeasure` is asked only about suspected failures.

    `shapes`: variant -> the problem shape it was measured at; a ratio recorded at another one is not compared."""
    if baseline is None:
        return Comparison(
            MISSING,
            str(path),
            f"no timing baseline for {key['gpu']} ({path}): timings are reported only. "
            f"Record one on this GPU with `{RECORD_COMMAND}` and commit it.",
        )
    differing = key_differences(baseline, key)
    if differing:
        return Comparison(
            KEY_MISMATCH,
            str(path),
            f"{path} was recorded under another key ({'; '.join(differing)}): no ratio can be compared, so the "
            f"GPU check fails. Record the baseline again on this GPU with `{RECORD_COMMAND}`, review its diff and "
            "commit it (or fix the GPU lock, if it is the lock that moved by mistake).",
        )
    new: dict[str, TimingVerdict] = {}
    for variant, ratio in ratios.items():
        recorded, now = baseline.shapes.get(variant), (shapes or {}).get(variant)
        if variant not in baseline.ratios:
            new[variant] = TimingVerdict(variant, NEW, ratio, message="no baseline entry yet")
        elif recorded is not None and now is not None and recorded != now:
            message = f"shape changed ({recorded} -> {now}): not compared; record again"
            new[variant] = TimingVerdict(variant, NEW, ratio, message=message)
    compared = {variant: ratio for variant, ratio in ratios.items() if variant not in new}
    suspects = [variant for variant, ratio in compared.items() if suspected(ratio, baseline.ratios[variant])]
    remeasured = remeasure(suspects) if suspects else {}
    judged = {v: judge(v, ratio, baseline.ratios[v], remeasured.get(v)) for v, ratio in compared.items()}
    verdicts = {variant: judged.get(variant) or new[variant] for variant in ratios}  # in the run's order
    levels = [v.level for v in judged.values()]
    fails, warns = levels.count(FAIL), levels.count(WARN)
    message = (
        f"compared with {path}: {fails} confirmed regressions, {warns} warnings, "
        f"{len(verdicts) - fails - warns} within limits or new"
    )
    return Comparison(COMPARED, str(path), message, verdicts, sorted(set(baseline.ratios) - set(ratios)))
