"""Seed 03's source-level claims: four kernels, one dataflow, annotation-only differences."""

from __future__ import annotations

import pytest

from kernels import gemm_num_stages, gemm_relu_schedules
from tilelang_golden.analysis import dataflow, source_lines_changed

SHAPE = {"M": 1024, "N": 1024, "K": 1024}


@pytest.mark.parametrize("name", list(gemm_relu_schedules.SCHEDULES))
def test_each_variant_changes_only_its_annotation_lines(name):
    build, _dimension, seed_lines = gemm_relu_schedules.SCHEDULES[name]
    baseline = gemm_relu_schedules.SCHEDULES[gemm_relu_schedules.BASELINE][0]
    assert source_lines_changed(baseline, build) == seed_lines


def test_four_schedules_share_one_dataflow():
    flows = [dataflow(build(**SHAPE)) for build, _, _ in gemm_relu_schedules.SCHEDULES.values()]
    assert flows[0] and all(flow == flows[0] for flow in flows)
    assert ("tl.tileop.gemm", "A_s", "B_s", "C_l") in flows[0]


def test_dataflow_detects_a_different_computation():
    """The GEMM without ReLU lacks the store step: its dataflow must differ."""
    relu = dataflow(gemm_relu_schedules.v0_baseline(**SHAPE))
    plain = dataflow(gemm_num_stages.gemm_num_stages(**SHAPE, block_M=128, block_N=128, block_K=32, num_stages=3))
    assert plain != relu
    assert [step for step in relu if step[0] == "store"] and not [step for step in plain if step[0] == "store"]
