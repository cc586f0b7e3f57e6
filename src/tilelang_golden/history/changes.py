"""Each variant's history on each GPU model as a series of runs, and where its level changed.

The change points are ruptures' (Pelt, the exact optimal segmentation under a penalty, in its C kernel form with the
linear kernel: the least-squares cost of a change in mean). A change is kept where it lowers the squared error by more
than PENALTY * noise^2 * ln(runs), the noise read from the series itself (the spread of run-to-run differences, robust
to the steps), so a GPU model whose runs move more needs a larger step. The series is the ratio to the PyTorch
reference: a kernel that got slower, or a reference that got faster, both move it. benchmarks/history.py
measures what this finds in synthetic histories made of the H200's own noise (docs/history.md).
"""

from __future__ import annotations

import itertools
import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field

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
    ratio_before: float  # the mean of the level before it
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
    levels: list[float] = field(default_factory=list)  # each level's mean ratio, oldest first, once found

    @property
    def ratios(self) -> list[float]:
        return [run.timed.ratio for run in self.runs]


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
    means = [statistics.fmean(ratios[a:b]) for a, b in itertools.pairwise(bounds)]
    series.levels = means
    series.changes = [
        Change(series.runs[at - 1].record, series.runs[at].record, means[i], means[i + 1], at)
        for i, at in enumerate(starts)
    ]
    return series


def change_points(values: Sequence[float]) -> list[int]:
    """The index of the first value of each new level, by ruptures' Pelt under this module's penalty."""
    if len(values) < 2 * SHORTEST_LEVEL:
        return []
    import numpy as np
    import ruptures

    signal = np.asarray(values, dtype=float)
    sigma = max(noise(values), NOISE_FLOOR * float(np.median(np.abs(signal))))
    penalty = PENALTY * sigma**2 * math.log(len(values))
    found = ruptures.KernelCPD(kernel="linear", min_size=SHORTEST_LEVEL).fit(signal.reshape(-1, 1)).predict(pen=penalty)
    return [int(end) for end in found[:-1]]  # its last entry is the series' end


def noise(values: Sequence[float]) -> float:
    """The standard deviation of one run's figure, from the median absolute deviation of run-to-run differences:
    a step moves one difference, so it hardly counts."""
    differences = [b - a for a, b in itertools.pairwise(values)]
    middle = statistics.median(differences)
    return statistics.median(abs(d - middle) for d in differences) * MAD_TO_SIGMA / math.sqrt(2)


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
        change = series.changes[-1] if series.changes else None
        said = f"last change {change.size:+.1%} at {change.commits}" if change else "no change of level"
        # The sparkline spans its own range: the range in words keeps a 1 % wobble from reading as a cliff.
        lines[series.variant] = f"{spark} {ratios[-1]:.3f} (range {high / low - 1:.1%}), {said}"
    return lines
