"""Timing on a shared, power-capped GPU: each variant measured next to its reference, in random order.

These kernels run into the power cap, so the SM clock moves with what ran just before, on a scale
of milliseconds. One measurement therefore times a variant and its reference together:
- timer "interleaved" (the default): launches alternate, variant and reference, in an ABBA order,
  the L2 cache flushed before each launch as `triton.testing.do_bench` does, each launch timed by
  CUDA events; each side's figure is the median of its launches. Both sides see the same clocks.
  The loop takes what times a launch as an argument, so the CPU tests run it on a fake clock.
- timer "events": `do_bench` on the variant, then `do_bench` on the reference (100 ms each), so a
  clock change between the two moves the ratio;
- timer "cudagraph": the same with `do_bench_cudagraph` (launch gaps replayed from a graph).
A round measures every variant once with its reference, who goes first and the variants' order
random (seeded, the seed recorded), so a position in the sequence is noise that averages out,
not a bias. A variant's figure is the median over rounds of its per-round ratio
(reference ms / variant ms), its spread the range of those ratios relative to their median.
"""

from __future__ import annotations

import random
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from tilelang_golden.family import Work
from tilelang_golden.gpu.run.device import Peak

DEFAULT_ROUNDS = 7
WARMUP_MS = 25
REPEAT_MS = 100
TIMER_TOOLS = {  # timer -> what it is, as the report and the baseline name it
    "interleaved": "CUDA events around alternating launches, L2 flushed before each (as triton.testing.do_bench)",
    "events": "triton.testing.do_bench",
    "cudagraph": "triton.testing.do_bench_cudagraph",
}
TIMERS = tuple(TIMER_TOOLS)  # the first is the default

Launch = Callable[[], Any]
# bench(first, second) -> (first's ms, second's ms) for one launch of each, measured together.
Bench = Callable[[Launch, Launch], tuple[float, float]]
# timed(launches) -> each launch's milliseconds, the launches run in the order given.
LaunchTimer = Callable[[Sequence[Launch]], list[float]]
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
    def time_ratios(self) -> tuple[float, ...]:
        """Each round's variant ms over the reference's (the A/B gate's figure, whose reference is the base)."""
        return tuple(v / r for v, r in zip(self.variant.rounds_ms, self.reference.rounds_ms, strict=True))

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


def one_after_the_other(bench: Callable[[Launch], float]) -> Bench:
    """A pair bench from a single-launch one: the first measured, then the second."""
    return lambda first, second: (bench(first), bench(second))


def make_bench(timer: str = "interleaved", warmup_ms: float = WARMUP_MS, repeat_ms: float = REPEAT_MS) -> Bench:
    """The pair bench of `timer`: "interleaved", "events" (`do_bench`) or "cudagraph" (`do_bench_cudagraph`)."""
    if timer not in TIMERS:
        raise ValueError(f"timer {timer!r}: choose one of {TIMERS}")
    if timer == "interleaved":
        return interleaved_bench(cuda_event_timer(), warmup_ms, repeat_ms)
    from triton.testing import do_bench, do_bench_cudagraph

    if timer == "events":
        return one_after_the_other(
            lambda fn: float(do_bench(fn, warmup=warmup_ms, rep=repeat_ms, return_mode="median"))
        )
    return one_after_the_other(lambda fn: float(do_bench_cudagraph(fn, rep=repeat_ms, return_mode="median")))


def abba(pairs: int) -> list[int]:
    """Which side launches when: 0 1 1 0 0 1 1 0 ..., so each side goes first and follows itself equally often."""
    return [side for i in range(pairs) for side in ((0, 1) if i % 2 == 0 else (1, 0))]


def interleaved_bench(timed: LaunchTimer, warmup_ms: float = WARMUP_MS, repeat_ms: float = REPEAT_MS) -> Bench:
    """do_bench's loop over two launches that take turns, ABBA...; `timed` times each launch (CUDA events
    on the GPU, a fake clock in the CPU tests), so the bookkeeping here is the same in both."""

    def bench(first: Launch, second: Launch) -> tuple[float, float]:
        estimate = timed([first, second] * 3)  # like do_bench: size the loop from a short run
        per_pair_ms = max(sum(estimate) / 3, 1e-3)
        warmup_pairs, pairs = max(1, round(warmup_ms / per_pair_ms)), max(2, round(repeat_ms / per_pair_ms))
        timed([first, second] * warmup_pairs)
        sides = abba(pairs)
        times = timed([(first, second)[side] for side in sides])
        first_ms = [t for t, side in zip(times, sides, strict=True) if side == 0]
        second_ms = [t for t, side in zip(times, sides, strict=True) if side == 1]
        return statistics.median(first_ms), statistics.median(second_ms)

    return bench


def cuda_event_timer() -> LaunchTimer:
    """Each launch timed by CUDA events, the L2 cache flushed before it as `triton.testing.do_bench` does."""
    import torch
    from triton import runtime

    driver = runtime.driver.active
    flush_buffer = driver.get_empty_cache_for_benchmark()
    clear = getattr(driver, "clear_cache", None) or (lambda buffer: buffer.zero_())

    def timed(launches: Sequence[Launch]) -> list[float]:
        events = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in launches]
        for launch, (start, stop) in zip(launches, events, strict=True):
            clear(flush_buffer)
            start.record()
            launch()
            stop.record()
        torch.cuda.synchronize()
        return [start.elapsed_time(stop) for start, stop in events]

    return timed


def measure_pairs(
    pairs: Sequence[Pair],
    rounds: int = DEFAULT_ROUNDS,
    bench: Bench | None = None,
    seed: int = 0,
    sample: Sampler | None = None,
    starting: Callable[[str], None] | None = None,
) -> dict[str, PairedTiming]:
    """key -> PairedTiming; every round shuffles the pairs and, within each pair, who goes first.

    `starting(key)` is told before each pair's measurement, outside it (a worker tells its driver which
    variant it is on)."""
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
            if starting is not None:
                starting(pair.key)
            if order.random() < 0.5:
                reference, variant = bench(pair.reference_run, pair.run)
            else:
                variant, reference = bench(pair.run, pair.reference_run)
            reference_ms[pair.key].append(reference)
            variant_ms[pair.key].append(variant)
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
