"""Seed 01's experiment: latency and shared memory against num_stages, per tile shape, and the knee.

The knee is the first num_stages after which no larger num_stages is faster by more than the
measured noise (the larger spread of the two points compared). The seed asks whether latency
flattens there while shared memory keeps growing, and whether the knee is the same for every
tile shape; `conclusions` answers both in words.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class SweepPoint:
    num_stages: int
    shared_memory_bytes: int | None
    fits: bool  # within the device's shared memory per block
    median_ms: float | None = None  # None: not timed (does not fit, or failed)
    spread: float = 0.0


@dataclass
class TileSweep:
    tile: str  # "128x128x32"
    points: list[SweepPoint] = field(default_factory=list)

    @property
    def timed(self) -> list[SweepPoint]:
        return sorted((p for p in self.points if p.median_ms is not None), key=lambda p: p.num_stages)

    @property
    def knee(self) -> int | None:
        return find_knee(self.points)

    @property
    def plateau(self) -> bool:
        """Whether latency stopped improving before the last timed num_stages."""
        timed = self.timed
        return bool(timed) and self.knee != timed[-1].num_stages

    def as_dict(self) -> dict[str, Any]:
        return {
            "tile": self.tile,
            "knee": self.knee,
            "plateau": self.plateau,
            "points": [
                {
                    "num_stages": p.num_stages,
                    "median_ms": p.median_ms,
                    "spread": p.spread,
                    "shared_memory_bytes": p.shared_memory_bytes,
                    "fits": p.fits,
                }
                for p in sorted(self.points, key=lambda p: p.num_stages)
            ],
        }


def find_knee(points: Sequence[SweepPoint]) -> int | None:
    """The first num_stages that no later num_stages beats by more than their noise; None if none timed."""
    timed = sorted((p for p in points if p.median_ms is not None), key=lambda p: p.num_stages)
    for index, point in enumerate(timed):
        later = timed[index + 1 :]
        if all(q.median_ms >= point.median_ms * (1 - max(point.spread, q.spread)) for q in later):
            return point.num_stages
    return None


def conclusions(sweeps: Sequence[TileSweep]) -> list[str]:
    """One sentence per tile shape, and one on whether the knee is the same for all of them."""
    lines = []
    for sweep in sweeps:
        knee = sweep.knee
        if knee is None:
            lines.append(f"{sweep.tile}: no num_stages was timed, so there is no curve")
            continue
        at_knee = next(p for p in sweep.points if p.num_stages == knee)
        if not sweep.plateau:
            lines.append(
                f"{sweep.tile}: latency still improves up to num_stages={knee} ({at_knee.median_ms:.3f} ms), "
                "the largest that was timed: no knee inside the sweep"
            )
            continue
        beyond = [p for p in sweep.points if p.num_stages > knee and p.shared_memory_bytes is not None]
        largest = max(beyond, key=lambda p: p.num_stages)
        grows = largest.shared_memory_bytes > (at_knee.shared_memory_bytes or 0)
        memory = (
            f"shared memory keeps growing, {_kib(at_knee.shared_memory_bytes)} -> {_kib(largest.shared_memory_bytes)} "
            f"at num_stages={largest.num_stages}{'' if largest.fits else ', which does not fit'}"
            if grows
            else "shared memory does not grow beyond it"
        )
        lines.append(
            f"{sweep.tile}: latency stops improving after num_stages={knee} ({at_knee.median_ms:.3f} ms); {memory}"
        )
    knees = {s.tile: s.knee for s in sweeps if s.knee is not None}
    if len(knees) > 1:
        same = len(set(knees.values())) == 1
        listed = ", ".join(f"{tile}: {knee}" for tile, knee in knees.items())
        lines.append(f"same knee for every tile shape: {'yes' if same else 'no'} ({listed})")
    return lines


def _kib(size: int | None) -> str:
    return "?" if size is None else f"{size / 1024:g} KiB"
