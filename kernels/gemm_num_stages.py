"""Seed 01: one fp16 GEMM (fp32 accumulation), swept over `num_stages` and three tile shapes.

Its family check is the seed's five correctness criteria, evaluated on fresh facts for every
tile shape and target; where TileLang 0.1.15 makes a criterion false, the deviation is
recorded here with its reason (`deviations`, by what the target has), so a change in either direction fails the check.
"""

import itertools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any

import tilelang.language as T

from tilelang_golden.family import CaseFacts, Claim, Family, Params, Sweep, Target, Variant, target_record
from kernels._gemm import TOLERANCE, float32_matmul, gemm_inputs, gemm_work, torch_matmul

NUM_STAGES = (0, 1, 2, 3, 4, 6)
# (block_M, block_N, block_K): the seed's two shapes and a small one with a quarter of the
# 128x128x32 tile's shared memory per stage.
TILE_SHAPES = ((128, 128, 32), (128, 256, 64), (64, 64, 32))


def gemm_num_stages(M, N, K, block_M, block_N, block_K, num_stages, threads=128):
    @T.prim_func
    def gemm(A: T.Tensor((M, K), "float16"), B: T.Tensor((K, N), "float16"), C: T.Tensor((M, N), "float16")):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=threads) as (bx, by):
            A_s = T.alloc_shared((block_M, block_K), "float16")
            B_s = T.alloc_shared((block_K, block_N), "float16")
            C_l = T.alloc_fragment((block_M, block_N), "float32")
            T.clear(C_l)
            for k in T.Pipelined(T.ceildiv(K, block_K), num_stages=num_stages):
                T.copy(A[by * block_M, k * block_K], A_s)
                T.copy(B[k * block_K, bx * block_N], B_s)
                T.gemm(A_s, B_s, C_l)
            T.copy(C_l, C[by * block_M, bx * block_N])

    return gemm


def variant_name(num_stages: int, block_M: int, block_N: int, block_K: int) -> str:
    return f"ns{num_stages}_{block_M}x{block_N}x{block_K}"


def variant(num_stages: int, block_M: int, block_N: int, block_K: int) -> Variant:
    """The variant for these parameters; also builds ones outside the registered sweep (scripts)."""
    params = {"block_M": block_M, "block_N": block_N, "block_K": block_K, "num_stages": num_stages}
    return Variant(variant_name(num_stages, block_M, block_N, block_K), gemm_num_stages, params)


def tile_of(p: Params) -> str:
    return f"{p['block_M']}x{p['block_N']}x{p['block_K']}"


# -- seed 01's criteria --------------------------------------------------------------------------

CRITERIA = (
    "1. N >= 2: last stage is N - 1, both copies in stage 0",
    "2. N = 1: stages are still [0, 0, 1]",
    "3. N = 0: no pipeline annotation",
    "4. shared buffers' version dimension grows with N",
    "5a. cp_async_wait in-flight count grows with N",
    "5b. steady-state loop's __syncthreads() count does not grow with N",
)

# The facts each criterion reads: key paths into one N's facts, any one of which will do. The facts
# leave out what a target cannot have (no cp.async on HIP, say): a criterion none of whose facts is in
# every N's facts is not applicable on that target, neither holding nor failing (`not_applicable`).
# The in-flight waits are cp.async group waits on CUDA and the `s_waitcnt vmcnt` they compile to on HIP.
CRITERION_FACTS: dict[str, tuple[tuple[str, ...], ...]] = {
    CRITERIA[0]: (("pipelines",),),
    CRITERIA[1]: (("pipelines",),),
    CRITERIA[2]: (("pipelines",),),
    CRITERIA[3]: (("shared_buffers",),),
    CRITERIA[4]: (("sync", "cp_async_wait"), ("sync", "vmcnt_waits")),
    CRITERIA[5]: (("sync", "syncthreads_main_loop"),),
}

# Where the criteria are false for TileLang 0.1.15, with the reason (docs/seeds.md, "Checks that do not
# depend on the snapshots"), keyed on what the target has. The check demands exactly these, so a
# TileLang change shows up.
WARP_SPECIALIZED = {
    CRITERIA[0]: "warp specialization consumes the annotation",
    CRITERIA[1]: "warp specialization consumes the annotation",
    CRITERIA[4]: "TMA + mbarriers replace cp.async",
}
# Criteria false where T.Pipelined is not software-pipelined (on ROCm all but gfx950, whose pipeline alone "has
# been validated", src/transform/pipeline_planning.cc): a plain sequential loop, num_stages changes nothing.
NOT_PIPELINED = (CRITERIA[0], CRITERIA[1], CRITERIA[3], CRITERIA[4])


def deviations(target: Target) -> dict[str, str]:
    """criterion -> why TileLang 0.1.15 makes it false on `target`: on targets without software pipelining the
    annotation is dropped; on targets with TMA, warp specialization replaces the cp.async pipeline."""
    if not target.features.software_pipelining:
        reason = f"TileLang 0.1.15 does not software-pipeline on {target.name}: num_stages is dropped"
        return dict.fromkeys(NOT_PIPELINED, reason)
    return WARP_SPECIALIZED if target.features.tma else {}


def version_dimension(shape: list[int]) -> int | None:
    """The leading dimension software pipelining added to a 2-D tile buffer (its versions), or None."""
    return shape[0] if len(shape) == 3 else None


def _stages(facts: Mapping[str, Any]) -> list[int] | None:
    pipelines = facts["pipelines"]
    return pipelines[0]["software_pipeline_stage"] if pipelines else None


def _version_dim(facts: Mapping[str, Any]) -> int:
    """Versions of the A tile buffer; 1 when it has no version dimension."""
    return version_dimension(facts["shared_buffers"]["A_s"]["shape"]) or 1


def _in_flight(facts: Mapping[str, Any]) -> int | None:
    sync = facts["sync"]  # CRITERION_FACTS: cp.async group waits on CUDA, s_waitcnt vmcnt on HIP
    waits = sync.get("cp_async_wait", sync.get("vmcnt_waits", []))
    return max(waits) if waits else None


def _strictly_increasing(values: list[Any]) -> bool:
    return all(a is not None and b is not None and a < b for a, b in itertools.pairwise(values))


def has_fact(facts: Mapping[str, Any], path: Sequence[str]) -> bool:
    """Whether the facts hold this key path (`("sync", "cp_async_wait")`)."""
    for key in path:
        if not isinstance(facts, Mapping) or key not in facts:
            return False
        facts = facts[key]
    return True


def not_applicable(facts_by_n: Mapping[int, Mapping[str, Any]]) -> dict[str, str]:
    """criterion -> the facts it reads (`sync.cp_async_wait or sync.vmcnt_waits`), where no one of them is in
    the facts of every N: not applicable there."""
    return {
        name: " or ".join(".".join(path) for path in paths)
        for name, paths in CRITERION_FACTS.items()
        if not any(all(has_fact(facts, path) for facts in facts_by_n.values()) for path in paths)
    }


def num_stages_criteria(facts_by_n: Mapping[int, Mapping[str, Any]]) -> list[Claim]:
    """The criteria over the N values present (a criterion about absent N is skipped, and so is one whose fact
    the target does not have: `not_applicable`)."""
    ns = sorted(facts_by_n)
    absent = not_applicable(facts_by_n)
    results: list[Claim] = []

    def shown(value_of: Callable[[Mapping[str, Any]], Any], among: list[int]) -> str:
        return ", ".join(f"N={n}: {value_of(facts_by_n[n])}" for n in among)

    deep = [n for n in ns if n >= 2]
    if deep and CRITERIA[0] not in absent:
        ok = all((s := _stages(facts_by_n[n])) is not None and s[-1] == n - 1 and s[:2] == [0, 0] for n in deep)
        results.append(Claim(CRITERIA[0], ok, shown(_stages, deep)))
    if 1 in facts_by_n and CRITERIA[1] not in absent:
        results.append(Claim(CRITERIA[1], _stages(facts_by_n[1]) == [0, 0, 1], shown(_stages, [1])))
    if 0 in facts_by_n and CRITERIA[2] not in absent:
        results.append(Claim(CRITERIA[2], facts_by_n[0]["pipelines"] == [], shown(_stages, [0])))
    positive = [n for n in ns if n >= 1]
    if len(positive) >= 2 and CRITERIA[3] not in absent:
        versions = [_version_dim(facts_by_n[n]) for n in positive]
        results.append(Claim(CRITERIA[3], _strictly_increasing(versions), shown(_version_dim, positive)))
    if len(positive) >= 2 and CRITERIA[4] not in absent:
        in_flight = [_in_flight(facts_by_n[n]) for n in positive]
        results.append(Claim(CRITERIA[4], _strictly_increasing(in_flight), shown(_in_flight, positive)))
    if len(ns) >= 2 and CRITERIA[5] not in absent:
        loop_syncs = [facts_by_n[n]["sync"]["syncthreads_main_loop"] for n in ns]
        steady = all(count <= loop_syncs[0] for count in loop_syncs)
        results.append(Claim(CRITERIA[5], steady, shown(lambda f: f["sync"]["syncthreads_main_loop"], ns)))
    return results


def check_sweep(cases: Sequence[CaseFacts]) -> list[Claim]:
    """Seed 01's criteria over one tile shape and target (one group); recorded deviations expected."""
    expected_false = deviations(target_record(cases[0].target))
    facts = {case.params["num_stages"]: case.kernel for case in cases}
    return [
        replace(claim, expected=claim.name not in expected_false, why=expected_false.get(claim.name, ""))
        for claim in num_stages_criteria(facts)
    ]


FAMILY = Family(
    name="gemm_num_stages",
    shape={"M": 8192, "N": 8192, "K": 8192},
    # --sanitize: two tiles of the largest shape, more k-steps than the deepest pipeline has stages.
    sanitize_shape={"M": 256, "N": 256, "K": 512},
    variants=[variant(n, bm, bn, bk) for bm, bn, bk in TILE_SHAPES for n in NUM_STAGES],
    inputs=gemm_inputs,
    outputs=[2],
    reference=lambda p, a, b: float32_matmul(a, b),
    tolerance=TOLERANCE,
    speed_reference=torch_matmul,
    speed_reference_label="torch.matmul(A, B)",
    work=gemm_work,
    checks=check_sweep,
    # A num_stages sweep (one tile, one target) is lowered by one worker and checked together.
    group=lambda p, target: f"gemm_num_stages/{tile_of(p)}/{target}",
    sweep=Sweep(axis="num_stages", series=tile_of),
)
