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


def tflops(shape: Mapping[str, int], milliseconds: float) -> float:
    """Dense GEMM rate: 2*M*N*K floating-point operations in `milliseconds`."""
    return 2 * shape["M"] * shape["N"] * shape["K"] / (milliseconds * 1e-3) / 1e12


def reference_runs(a: Any, b: Any) -> dict[str, Callable[[], Any]]:
    """The cuBLAS-backed torch op for each Variant.reference, on the same inputs as the kernels."""
    import torch

    return {"matmul": lambda: torch.matmul(a, b), "matmul_relu": lambda: torch.relu(torch.matmul(a, b))}
