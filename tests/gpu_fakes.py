"""A GpuRun built from fake timings and numerics, for the GPU harness's CPU tests."""

from __future__ import annotations

from collections.abc import Mapping

from harness.gpu_device import Device
from harness.gpu_results import GpuRun, VariantResult
from harness.jit import CompiledVariant
from harness.numerics import NumericsResult, SeedCheck
from harness.timing import Timing
from kernels import PROBLEM_SHAPE, Variant

LIMIT = 232448  # an H200's opt-in shared memory per block; the harness queries it on a real device
SEEDS = [11, 22, 33]


def device(name: str = "NVIDIA H200", torch_version: str = "2.11.0+cu130") -> Device:
    return Device(name, (9, 0), "sm_90", LIMIT, 132, {"cuda": "13.0", "torch": torch_version, "tilelang": "0.1.15"})


def variant(family: str, name: str, reference: str = "matmul", **params: int) -> Variant:
    return Variant(family, name, build=lambda **_: None, params=params, reference=reference)


def sweep_variant(num_stages: int, tile: tuple[int, int, int]) -> Variant:
    bm, bn, bk = tile
    return variant(
        "gemm_num_stages", f"ns{num_stages}_{bm}x{bn}x{bk}", block_M=bm, block_N=bn, block_K=bk, num_stages=num_stages
    )


def result(
    v: Variant,
    shared: int,
    rounds_ms: tuple[float, ...] | None = (2.0, 2.02, 1.98),
    reference_ms: float = 1.0,
    numerics_ok: bool = True,
) -> VariantResult:
    """A checked variant: compiled, matching its snapshot; timed unless it does not fit or rounds_ms is None."""
    compiled = CompiledVariant(
        v, kernel=object(), dynamic_shared_memory_bytes=shared, registers_per_thread=168, compile_target="sm_90a"
    )
    r = VariantResult(
        compiled, LIMIT, f"golden/{v.key}/sm_90.yaml", snapshot_shared_memory_bytes=shared, cuda_matches_snapshot=True
    )
    if not r.fits:
        return r
    r.numerics = NumericsResult(v.reference, [SeedCheck(s) for s in SEEDS])
    if not numerics_ok:
        r.numerics.seeds[1].mismatches = 7
        r.numerics.seeds[1].max_abs_error = 3.5
        return r
    if rounds_ms is not None:
        r.timing = Timing(rounds_ms)
        r.ratio = reference_ms / r.timing.median_ms
    return r


def run(results: list[VariantResult], references: Mapping[str, float] | None = None) -> GpuRun:
    from harness.gpu_check import build_sweeps

    references = references or {"matmul": 1.0}
    return GpuRun(
        device=device(),
        shape=dict(PROBLEM_SHAPE),
        seeds=list(SEEDS),
        timer={"tool": "triton.testing.do_bench", "statistic": "median", "rounds": 3},
        variants=results,
        references={name: Timing((ms, ms * 1.01, ms * 0.99)) for name, ms in references.items()},
        sweeps=build_sweeps(results),
        compile_seconds=12.0,
        wall_seconds=95.0,
    )
