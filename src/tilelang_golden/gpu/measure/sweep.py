"""Latency and shared memory along a family's sweep axis (e.g. num_stages), one curve per series.

A family declares a `Sweep` (seed 01: num_stages, one series per tile shape). The knee is the
first axis value after which no larger value is faster by more than the measured noise (the
larger spread of the two points compared). `conclusions` says in words whether latency flattens
there while shared memory keeps growing, and whether the knee is the same for every series.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class SweepPoint:
    value: int  # the sweep axis' value, e.g. num_stages
    shared_memory_bytes: int | None
    fits: bool  # within the device's shared memory per block
    median_ms: float | None = None  # None: not timed (does not fit, or failed)
    spread: float = 0.0


@dataclass
class SweepCurve:
    family: str
    axis: str  # the swept parameter
    series: str  # the series, e.g. a tile shape "128x128x32"
    points: list[SweepPoint] = field(default_factory=list)

    @property
    def timed(self) -> list[SweepPoint]:
        return sorted((p for p in self.points if p.median_ms is not None), key=lambda p: p.value)

    @property
    def knee(self) -> int | None:
        return find_knee(self.points)

    @property
    def plateau(self) -> bool:
        """Whether latency stopped improving before the last timed axis value."""
        timed = self.timed
        return bool(timed) and self.knee != timed[-1].value

    def as_dict(self) -> dict[str, Any]:
        return {
            "family": self.family,
            "axis": self.axis,
            "series": self.series,
            "knee": self.knee,
            "plateau": self.plateau,
            "points": [
                {
                    "value": p.value,
                    "median_ms": p.median_ms,
                    "spread": p.spread,
                    "shared_memory_bytes": p.shared_memory_bytes,
                    "fits": p.fits,
                }
                for p in sorted(self.points, key=lambda p: p.value)
            ],
        }


def find_knee(points: Sequence[SweepPoint]) -> int | None:
    """The first axis value that no later value beats by more than their noise; None if none timed."""
    timed = sorted((p for p in points if p.median_ms is not None), key=lambda p: p.value)
    for index, point in enumerate(timed):
        later = timed[index + 1 :]
        if all(q.median_ms >= point.median_ms * (1 - max(point.spread, q.spread)) for q in later):
            return point.value
    return None


def conclusions(sweeps: Sequence[SweepCurve]) -> list[str]:
    """One sentence per curve, and per family whether the knee is the same for every series."""
    lines = []
    for sweep in sweeps:
        knee, curve = sweep.knee, f"{sweep.family} {sweep.series}"
        if knee is None:
            lines.append(f"{curve}: no {sweep.axis} was timed, so there is no curve")
            continue
        at_knee = next(p for p in sweep.points if p.value == knee)
        if not sweep.plateau:
            lines.append(
                f"{curve}: latency still improves up to {sweep.axis}={knee} ({at_knee.median_ms:.3f} ms), "
                "the largest that was timed: no knee inside the sweep"
            )
            continue
        beyond = [p for p in sweep.points if p.value > knee and p.shared_memory_bytes is not None]
        largest = max(beyond, key=lambda p: p.value)
        grows = largest.shared_memory_bytes > (at_knee.shared_memory_bytes or 0)
        memory = (
            f"shared memory keeps growing, {_kib(at_knee.shared_memory_bytes)} -> {_kib(largest.shared_memory_bytes)} "
            f"at {sweep.axis}={largest.value}{'' if largest.fits else ', which does not fit'}"
            if grows
            else "shared memory does not grow beyond it"
        )
        lines.append(
            f"{curve}: latency stops improving after {sweep.axis}={knee} ({at_knee.median_ms:.3f} ms); {memory}"
        )
    for family in dict.fromkeys(s.family for s in sweeps):
        knees = {s.series: s.knee for s in sweeps if s.family == family and s.knee is not None}
        if len(knees) > 1:
            same = len(set(knees.values())) == 1
            listed = ", ".join(f"{tile}: {knee}" for tile, knee in knees.items())
            lines.append(f"{family}: same knee for every series: {'yes' if same else 'no'} ({listed})")
    return lines


def _kib(size: int | None) -> str:
    return "?" if size is None else f"{size / 1024:g} KiB"
