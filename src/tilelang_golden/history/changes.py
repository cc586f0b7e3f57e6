"""Each variant's history on each GPU model as a series of runs, and where its level changed.

The change points are ruptures' (Pelt, the exact optimal segmentation under a penalty, in its C kernel form with the
linear kernel: the least-squares cost of a change in mean), on the series with each run clipped near its neighbours'
median. A change is proposed where it lowers the squared error by more than PENALTY * noise^2 * ln(runs), the noise
read from the series itself (the spread of run-to-run differences, robust to the steps), so a GPU model whose runs
move more needs a larger step; it is kept where a rank test tells its two levels apart, so single slow runs and slow
machine starts, which a GPU in CI gives, are not changes. The series is the ratio to the PyTorch
reference: a kernel that got slower, or a reference that got faster, both move it. benchmarks/history.py
measures what this finds in synthetic histories made of the H200's own noise (docs/history.md).
"""

from __future__ import annotations

import itertools
import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from tilelang_golden.history.records import History, Record, VariantFigures

# Squared-error gain a change must bring, in units of noise^2 * ln(runs): chosen on the synthetic histories of the
# H200's noise (benchmarks/history.py, docs/measurements.md).
PENALTY = 4.0
# Runs: a level is at least this long, so a change shows once three runs after it agree, and a pair of runs on one
# machine start (whose figures move together) is not a level of its own; the synthetic histories find the same steps
# with 2 or 3 (docs/measurements.md).
SHORTEST_LEVEL = 3
# The noise is at least this fraction of the series' level: runs that repeat one figure do not make every wobble a
# change.
NOISE_FLOOR = 0.001
# A change stays only where Mann-Whitney's two-sided p-value between its two levels is at most this
# (docs/history.md): three runs all beyond twenty before them give 1/1771, a slow machine start of two runs with one
# ordinary run about 0.05.
LEVELS_DIFFER = 0.001
# Before the least squares see it, each run is clipped to CLIP noises of the median of itself and its LOCAL runs each
# side: a slow run, or a slow machine start of two runs, is outvoted by the runs around it, while a level's edge,
# where most of the window agrees, stays where it is (docs/measurements.md: 3 finds fewer false changes than 2).
LOCAL = 3
CLIP = 2.0
# A slowdown is news while at least this fraction of it is still there: the latest level against the one before it.
STILL_THERE = 0.5
RANK_EXACT = 60  # runs in two levels: up to this many the test's p-value is exact, beyond it the normal approximation
MAD_TO_SIGMA = 1 / statistics.NormalDist().inv_cdf(0.75)  # a normal's standard deviation per median absolute deviation


@dataclass(frozen=True)
class Run:
    """One variant in one run: the record and the variant's figures in it."""

    record: Record
    timed: VariantFigures


@dataclass(frozen=True)
class Change:
    """A change of level: between the last run before it and the first after, the mean ratio moved by `size`."""

    before: Record
    after: Record
    ratio_before: float  # the median of the level before it
    ratio_after: float
    at: int  # the first run of the new level, counted in the series

    @property
    def size(self) -> float:
        """The change of the ratio to the reference: +0.03 = 3 % faster than before, -0.03 slower."""
        return self.ratio_after / self.ratio_before - 1

    @property
    def commits(self) -> str:
        """`9ba5a60..d2881d7`, the commit range that brought it; one commit when the runs share it (a version moved)."""
        if self.before.commit == self.after.commit:
            return self.after.commit[:7]
        return f"{self.before.commit[:7]}..{self.after.commit[:7]}"

    def versions_moved(self) -> list[str]:
        """`torch 2.11.0 -> 2.13.0`: what else changed between the two runs."""
        old, new = self.before.versions, self.after.versions
        return [
            f"{name} {old.get(name, '?')} -> {new.get(name, '?')}"
            for name in sorted(set(old) | set(new))
            if old.get(name) != new.get(name)
        ]


@dataclass
class Series:
    """One variant on one GPU model over the history's runs, oldest first, with its changes once found."""

    family: str
    variant: str  # family/variant
    gpu: str
    runs: list[Run] = field(default_factory=list)
    changes: list[Change] = field(default_factory=list)
    levels: list[float] = field(default_factory=list)  # each level's median ratio, oldest first, once found

    @property
    def ratios(self) -> list[float]:
        return [run.timed.ratio for run in self.runs]

    def still_slower(self) -> tuple[Change, float] | None:
        """The latest slowdown that is still there, and how much slower the latest level is than the level before it
        (-0.03: 3 % slower now); None where every slowdown was recovered (or there was none): that is history."""
        for change in reversed(self.changes):
            now = self.levels[-1] / change.ratio_before - 1
            if change.size < 0 and now <= STILL_THERE * change.size:
                return change, now
        return None


def series_of(history: History) -> list[Series]:
    """Every variant on every GPU model, by family, variant and GPU; a run that did not time a variant is no point."""
    found: dict[tuple[str, str], Series] = {}
    for record in history.records:
        for key, timed in record.variants.items():
            series = found.setdefault((key, record.gpu), Series(key.partition("/")[0], key, record.gpu))
            series.runs.append(Run(record, timed))
    return [found[k] for k in sorted(found)]


def with_changes(series: Series) -> Series:
    """The series with its changes found."""
    ratios = series.ratios
    starts = change_points(ratios)
    bounds = [0, *starts, len(ratios)]
    # The median: a slow run moves a level's mean, not its median.
    levels = [statistics.median(ratios[a:b]) for a, b in itertools.pairwise(bounds)]
    series.levels = levels
    series.changes = [
        Change(series.runs[at - 1].record, series.runs[at].record, levels[i], levels[i + 1], at)
        for i, at in enumerate(starts)
    ]
    return series


def change_points(values: Sequence[float]) -> list[int]:
    """The index of the first value of each new level: ruptures' Pelt proposes them under this module's penalty, and
    each is kept only where a rank test tells the levels on its two sides apart (`significant`)."""
    if len(values) < 2 * SHORTEST_LEVEL:
        return []
    import numpy as np
    import ruptures

    signal = np.asarray(values, dtype=float)
    sigma = max(noise(values), NOISE_FLOOR * float(np.median(np.abs(signal))))
    penalty = PENALTY * sigma**2 * math.log(len(values))
    clipped = np.clip(signal, *(local_median(signal) + np.array([[-CLIP], [CLIP]]) * sigma))
    found = (
        ruptures.KernelCPD(kernel="linear", min_size=SHORTEST_LEVEL).fit(clipped.reshape(-1, 1)).predict(pen=penalty)
    )
    return significant(signal, [int(end) for end in found[:-1]])  # its last entry is the series' end


def local_median(signal: Any) -> Any:
    """Each value's median with its LOCAL runs either side (fewer at the ends): a level's edge stays where it is, and
    a slow run or a slow machine start of two runs is outvoted by its neighbours."""
    import numpy as np

    padded = np.pad(signal, LOCAL, constant_values=np.nan)
    windows = np.lib.stride_tricks.sliding_window_view(padded, 2 * LOCAL + 1)
    return np.nanmedian(windows, axis=1)


def significant(values: Sequence[float], starts: Sequence[int]) -> list[int]:
    """Of the proposed `starts`, those whose two levels differ by Mann-Whitney's rank test at LEVELS_DIFFER, the
    least significant dropped first and its two levels merged. Least squares makes a level of every slow run or
    slow machine start (one run 8 % slower outweighs the penalty); ranks weigh that run as one of the level's runs."""
    from scipy.stats import mannwhitneyu

    kept = list(starts)
    while kept:
        bounds = [0, *kept, len(values)]
        p_values = [
            mannwhitneyu(values[a:at], values[at:b], method="asymptotic" if b - a > RANK_EXACT else "exact").pvalue
            for a, at, b in zip(bounds, bounds[1:], bounds[2:], strict=False)
        ]
        weakest = max(range(len(kept)), key=p_values.__getitem__)
        if p_values[weakest] <= LEVELS_DIFFER:
            break
        del kept[weakest]
    return kept


def noise(values: Sequence[float]) -> float:
    """The standard deviation of one run's figure, from the median absolute deviation of run-to-run differences:
    a step moves one difference, so it hardly counts."""
    differences = [b - a for a, b in itertools.pairwise(values)]
    middle = statistics.median(differences)
    return statistics.median(abs(d - middle) for d in differences) * MAD_TO_SIGMA / math.sqrt(2)


def _latest_news(series: Series) -> str:
    """What is slower now than before a change, else the latest change, else that there was none."""
    slower = series.still_slower()
    if slower:
        return f"slower now: {slower[1]:+.1%} since {slower[0].commits}"
    if series.changes:
        return f"last change {series.changes[-1].size:+.1%} at {series.changes[-1].commits}"
    return "no change of level"


SPARKS = "▁▂▃▄▅▆▇█"


def recent(history: History, gpu: str, variants: Sequence[str], runs: int = 10) -> dict[str, str]:
    """For each of `variants` that main's history has on `gpu`: its last `runs` ratios as a sparkline (higher is
    faster), the latest, their range and the series' latest change of level, e.g.
    `▅▅▆▅▁▁▁ 0.531 (range 3.4%), last change -3.0% at a..b`."""
    wanted = set(variants)
    lines = {}
    for series in series_of(history):
        if series.gpu != gpu or series.variant not in wanted:
            continue
        ratios = with_changes(series).ratios[-runs:]
        low, high = min(ratios), max(ratios)
        spark = "".join(
            SPARKS[round((r - low) / (high - low) * (len(SPARKS) - 1)) if high > low else 3] for r in ratios
        )
        said = _latest_news(series)
        # The sparkline spans its own range: the range in words keeps a 1 % wobble from reading as a cliff.
        lines[series.variant] = f"{spark} {ratios[-1]:.3f} (range {high / low - 1:.1%}), {said}"
    return lines
