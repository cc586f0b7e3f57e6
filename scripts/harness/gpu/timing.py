"""Timing on a shared, noisy GPU: every candidate measured in interleaved rounds, median and spread.

One measurement is `triton.testing.do_bench` (CUDA events, L2 flushed before every repetition,
median of the repetitions). A round measures every candidate once, in order; rounds repeat
that, so slow drift of clocks or neighbours hits all candidates alike. A candidate's figure is
the median over rounds, its spread the range over rounds relative to that median: the
difference between back-to-back runs of the same kernel, i.e. the noise a change must beat.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from harness.family import Work
from harness.gpu.device import Peak

DEFAULT_ROUNDS = 3
WARMUP_MS = 25
REPEAT_MS = 100

# bench(fn) -> milliseconds for one launch of fn.
Bench = Callable[[Callable[[], Any]], float]


@dataclass(frozen=True)
class Timing:
    rounds_ms: tuple[float, ...]

    @property
    def median_ms(self) -> float:
        return statistics.median(self.rounds_ms)

    @property
    def spread(self) -> float:
        """(max - min) / median over rounds; 0 with a single round."""
        return (max(self.rounds_ms) - min(self.rounds_ms)) / self.median_ms

    def as_dict(self) -> dict[str, Any]:
        return {"median_ms": self.median_ms, "spread": self.spread, "rounds_ms": list(self.rounds_ms)}


def triton_bench(warmup_ms: float = WARMUP_MS, repeat_ms: float = REPEAT_MS) -> Bench:
    """do_bench with its median (its warm-up and repeat arguments are milliseconds of running)."""
    from triton.testing import do_bench

    def bench(fn: Callable[[], Any]) -> float:
        return float(do_bench(fn, warmup=warmup_ms, rep=repeat_ms, return_mode="median"))

    return bench


def measure_interleaved(
    candidates: Mapping[str, Callable[[], Any]], rounds: int = DEFAULT_ROUNDS, bench: Bench | None = None
) -> dict[str, Timing]:
    """name -> Timing; each round measures every candidate once, in the mapping's order."""
    if rounds < 2:
        raise ValueError(f"rounds={rounds}: at least 2 rounds are needed to measure the spread")
    bench = bench or triton_bench()
    measured: dict[str, list[float]] = {name: [] for name in candidates}
    for _round in range(rounds):
        for name, fn in candidates.items():
            measured[name].append(bench(fn))
    return {name: Timing(tuple(values)) for name, values in measured.items()}


@dataclass(frozen=True)
class Throughput:
    """What a timed launch achieves, and against which of the device's peaks it is judged."""

    tflops: float
    gbps: float
    bound: str | None  # "compute" or "memory": the roofline side the work falls on (None: peaks unknown)
    fraction_of_peak: float | None  # of that bound's peak; None on a GPU without a known peak


def throughput(work: Work, milliseconds: float, peak: Peak | None) -> Throughput:
    """Rates of one launch of `work` in `milliseconds`; the bound is the roofline's side for it."""
    seconds = milliseconds * 1e-3
    tflops, gbps = work.flops / seconds / 1e12, work.bytes / seconds / 1e9
    if peak is None:
        return Throughput(tflops, gbps, None, None)
    ridge = peak.tflops * 1e12 / (peak.gbps * 1e9)  # flops per byte where both peaks meet
    if work.flops / max(work.bytes, 1) >= ridge:
        return Throughput(tflops, gbps, "compute", tflops / peak.tflops)
    return Throughput(tflops, gbps, "memory", gbps / peak.gbps)
