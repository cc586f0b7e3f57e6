"""Seed criteria evaluated on facts, including facts altered so that a criterion must fail."""

from __future__ import annotations

import copy

import pytest

from kernels.gemm_num_stages import CRITERIA as NUM_STAGES_CRITERIA
from kernels.gemm_num_stages import num_stages_criteria
from tilelang_golden.analysis import source_lines_changed
from tilelang_golden.static.variant_effects import changed_cuda_lines


def facts(n: int) -> dict:
    """Facts shaped like the sm_80 128x128x32 sweep (what the real lowering gives)."""
    stage = None if n == 0 else [0, 0, max(n - 1, 1)]
    return {
        "pipelines": [] if n == 0 else [{"software_pipeline_stage": stage}],
        "shared_buffers": {"A_s": {"shape": [n, 128, 32] if n >= 2 else [128, 32]}},
        "sync": {
            "cp_async_wait": [] if n == 0 else list(range(n - 1, -1, -1)) if n >= 2 else [0, 0],
            "syncthreads_main_loop": 2,
        },
    }


def verdicts(sweep: dict) -> dict[str, bool]:
    return {c.name: c.holds for c in num_stages_criteria(sweep)}


SWEEP = {n: facts(n) for n in (0, 1, 2, 3, 4, 6)}


def test_consistent_sweep_passes_every_criterion():
    assert verdicts(SWEEP) == {name: True for name in NUM_STAGES_CRITERIA}


@pytest.mark.parametrize(
    "alter, broken",
    [
        (lambda s: s[3]["pipelines"][0].update(software_pipeline_stage=[0, 1, 2]), NUM_STAGES_CRITERIA[0]),
        (lambda s: s[1]["pipelines"][0].update(software_pipeline_stage=[0, 0, 0]), NUM_STAGES_CRITERIA[1]),
        (lambda s: s[0]["pipelines"].append({"software_pipeline_stage": [0, 0, 1]}), NUM_STAGES_CRITERIA[2]),
        (lambda s: s[4]["shared_buffers"]["A_s"].update(shape=[3, 128, 32]), NUM_STAGES_CRITERIA[3]),
        (lambda s: s[6]["sync"].update(cp_async_wait=[1, 0]), NUM_STAGES_CRITERIA[4]),
        (lambda s: s[6]["sync"].update(syncthreads_main_loop=7), NUM_STAGES_CRITERIA[5]),
    ],
)
def test_each_criterion_fails_on_altered_facts(alter, broken):
    sweep = copy.deepcopy(SWEEP)
    alter(sweep)
    result = verdicts(sweep)
    assert result[broken] is False
    assert all(passed for name, passed in result.items() if name != broken)


def test_observed_values_are_reported():
    (first,) = [c for c in num_stages_criteria(SWEEP) if c.name == NUM_STAGES_CRITERIA[0]]
    assert first.observed.startswith("N=2: [0, 0, 1], N=3: [0, 0, 2]")


def test_missing_pipeline_fails_stage_criterion():
    sweep = {n: facts(n) for n in (2, 3)}
    sweep[2]["pipelines"] = []
    assert verdicts(sweep)[NUM_STAGES_CRITERIA[0]] is False


def test_criteria_about_absent_n_are_not_claimed():
    assert set(verdicts({n: facts(n) for n in (2, 3)})) == {NUM_STAGES_CRITERIA[i] for i in (0, 3, 4, 5)}


def _one():
    x = 1
    return x


def _two():
    x = 2
    return x


def _three():
    x = 1
    y = 2
    return x + y


def test_source_lines_changed_ignores_def_line():
    assert source_lines_changed(_one, _one) == 0
    assert source_lines_changed(_one, _two) == 1
    assert source_lines_changed(_one, _three) == 2


def test_changed_cuda_lines():
    assert changed_cuda_lines("a\nb\nc\n", "a\nb\nc\n") == 0
    assert changed_cuda_lines("a\nb\nc\n", "a\nB\nc\nd\n") == 3
