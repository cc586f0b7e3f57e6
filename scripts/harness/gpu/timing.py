"""Timing on a shared, power-capped GPU: each variant measured next to its reference, in random order.

One measurement is `triton.testing.do_bench` (CUDA events, L2 flushed before every repetition,
median of the repetitions) or, with `timer="cudagraph"`, `do_bench_cudagraph` (the same launches
replayed from a CUDA graph, so launch gaps drop out). A round measures every variant once,
together with its reference, back to back in a random order within the pair, and the variants
in a random order within the round (seeded, the seed recorded): whatever the clock does between
two measurements (these kernels run into the power cap, so the SM clock moves with what ran just
before) hits the variant and its reference alike, and a position in the sequence is noise that
averages out, not a bias. A variant's figure is the median over rounds of its per-round ratio
(reference ms / variant ms), its spread the range of those ratios relative to their median.
"""

from __future__ import annotations

import random
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from harness.family import Work
from harness.gpu.device import Peak

DEFAULT_ROUNDS = 7
WARMUP_MS = 25
REPEAT_MS = 100
TIMERS = ("events", "cudagraph")

# bench(fn) -> milliseconds for one launch of fn.
Bench = Callable[[Callable[[], Any]], float]
# sample() -> the GPU's state right now (clocks, power, throttle reasons), or {} when unknown.
Sampler = Callable[[], dict[str, Any]]


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


@dataclass(frozen=True)
class Pair:
    """A variant and the reference it is timed against, each a callable that launches once."""

    key: str
    run: Callable[[], Any]
    reference: str
    reference_run: Callable[[], Any]


@dataclass(frozen=True)
class PairedTiming:
    variant: Timing
    reference: Timing  # the reference's measurements next to this variant, round by round
    states: tuple[dict[str, Any], ...] = field(default=(), compare=False)  # GPU state after each round's pair

    @property
    def ratios(self) -> tuple[float, ...]:
        return tuple(r / v for r, v in zip(self.reference.rounds_ms, self.variant.rounds_ms, strict=True))

    @property
    def ratio(self) -> float:
        """Median over rounds of reference ms / variant ms: higher is faster."""
        return statistics.median(self.ratios)

    @property
    def ratio_spread(self) -> float:
        ratios = self.ratios
        return (max(ratios) - min(ratios)) / statistics.median(ratios)

    def as_dict(self) -> dict[str, Any]:
        return {
            **self.variant.as_dict(),
            "reference_rounds_ms": list(self.reference.rounds_ms),
            "ratios": list(self.ratios),
            "ratio": self.ratio,
            "ratio_spread": self.ratio_spread,
            "gpu_states": list(self.states),
        }


def make_bench(timer: str = "events", warmup_ms: float = WARMUP_MS, repeat_ms: float = REPEAT_MS) -> Bench:
    """The median of triton's `do_bench` (timer "events") or `do_bench_cudagraph` ("cudagraph")."""
    if timer not in TIMERS:
        raise ValueError(f"timer {timer!r}: choose one of {TIMERS}")
    from triton.testing import do_bench, do_bench_cudagraph

    def events(fn: Callable[[], Any]) -> float:
        return float(do_bench(fn, warmup=warmup_ms, rep=repeat_ms, return_mode="median"))

    def cudagraph(fn: Callable[[], Any]) -> float:
        return float(do_bench_cudagraph(fn, rep=repeat_ms, return_mode="median"))

    return events if timer == "events" else cudagraph


def measure_pairs(
    pairs: Sequence[Pair],
    rounds: int = DEFAULT_ROUNDS,
    bench: Bench | None = None,
    seed: int = 0,
    sample: Sampler | None = None,
) -> dict[str, PairedTiming]:
    """key -> PairedTiming; every round shuffles the pairs and, within each pair, who goes first."""
    if rounds < 2:
        raise ValueError(f"rounds={rounds}: at least 2 rounds are needed to measure the spread")
    bench = bench or make_bench()
    order = random.Random(seed)
    variant_ms: dict[str, list[float]] = {p.key: [] for p in pairs}
    reference_ms: dict[str, list[float]] = {p.key: [] for p in pairs}
    states: dict[str, list[dict[str, Any]]] = {p.key: [] for p in pairs}
    for _round in range(rounds):
        shuffled = list(pairs)
        order.shuffle(shuffled)
        for pair in shuffled:
            if order.random() < 0.5:
                reference_ms[pair.key].append(bench(pair.reference_run))
                variant_ms[pair.key].append(bench(pair.run))
            else:
                variant_ms[pair.key].append(bench(pair.run))
                reference_ms[pair.key].append(bench(pair.reference_run))
            if sample is not None:
                states[pair.key].append(sample())
    return {
        p.key: PairedTiming(Timing(tuple(variant_ms[p.key])), Timing(tuple(reference_ms[p.key])), tuple(states[p.key]))
        for p in pairs
    }


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
