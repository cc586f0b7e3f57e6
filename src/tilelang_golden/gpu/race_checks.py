"""The GPU check's stages that keep a race or a read of memory nothing wrote from passing by luck.

A numeric check that passes on three seeds proves little about a kernel with a missing barrier: the wrong
interleaving may be rare, or the stale value close to the right one. Two stages look for it directly:

- **repeated launches** (every run): each variant whose numeric check ran is launched `CheckPlan.repeats` times on
  the first seed's inputs, in the kernels' worker (tilelang_golden.gpu.measure.repeats), and fails when an output
  differs in any bit between launches, unless its family declares it nondeterministic;
- **the sanitizer** (`--sanitize`): each variant under compute-sanitizer's racecheck, synccheck and initcheck at its
  family's small shape, in processes of its own (tilelang_golden.gpu.sanitize), after the timing, which it would
  disturb.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from tilelang_golden.gpu.gate.numerics_gate import NumericsResult
from tilelang_golden.gpu.gate.repeat_gate import RepeatCheck
from tilelang_golden.gpu.gate.sanitizer_gate import SanitizerResult
from tilelang_golden.gpu.kernel_session import Kernels
from tilelang_golden.gpu.report.results import VariantFailure
from tilelang_golden.gpu.run.compile import CompiledCase
from tilelang_golden.gpu.sanitize import SanitizerPlan, sanitize_cases


def repeats_stage(
    kernels: Kernels,
    runnable: Mapping[str, CompiledCase],
    numerics: Mapping[str, NumericsResult],
    seed: int,
    launches: int,
    launch_s: Mapping[str, float],
    log: Callable[[str], None] = print,
) -> tuple[dict[str, RepeatCheck | VariantFailure], float]:
    """Each variant whose kernel ran on every seed (a seed whose kernel raised already fails it) launched `launches`
    times on `seed`'s inputs, each within its own limit; and the stage's seconds. Nothing with fewer than 2."""
    if launches < 2:
        return {}, 0.0
    ran = [key for key, result in numerics.items() if result.seeds and all(s.error is None for s in result.seeds)]
    log(f"repeated launches: {len(ran)} kernels x {launches} launches on seed {seed}'s inputs, compared bit for bit")
    started = time.perf_counter()
    found = {
        key: kernels.repeats(runnable[key].case, seed, launches, kernels.limits.limit(launches, launch_s[key]))
        for key in ran
    }
    return found, time.perf_counter() - started


def sanitize_stage(
    plan: SanitizerPlan | None, runnable: Sequence[CompiledCase], seed: int, log: Callable[[str], None] = print
) -> tuple[dict[str, SanitizerResult], float]:
    """Every runnable variant under the plan's tools (nothing without a plan), and the stage's seconds. A SIGINT or
    SIGTERM during the stage ends it after every sanitizer process was stopped (tilelang_golden.gpu.sanitize)."""
    if plan is None or not runnable:
        return {}, 0.0
    started = time.perf_counter()
    found = sanitize_cases([compiled.case for compiled in runnable], plan, seed, log)
    return found, time.perf_counter() - started


def sanitizer_record(plan: SanitizerPlan, seconds: float) -> dict[str, Any]:
    """How the sanitizer pass ran, as the report records it."""
    return {
        "executable": plan.executable,
        "tools": list(plan.tools),
        "jobs": plan.jobs,
        "limit_s": plan.limit_s,
        "seconds": round(seconds, 2),
    }


def not_held(repeats: Mapping[str, RepeatCheck]) -> set[str]:
    """The variants whose repeated launches failed: not timed, as a variant whose numerics failed is not."""
    return {key for key, check in repeats.items() if not check.passed}
