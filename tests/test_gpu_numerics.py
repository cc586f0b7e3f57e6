"""The numeric gate on the CPU: fake kernels that are right, partly unwritten, wrong, or touch their inputs."""

from __future__ import annotations

import pytest
import torch

from harness.numerics import check_numerics, fresh_seeds, reference_output, validate_seeds

SHAPE = {"M": 64, "N": 48, "K": 32}
SEEDS = [1, 2, 3]


def right(a, b, c):
    c.copy_((a.float() @ b.float()).half())


def right_relu(a, b, c):
    c.copy_(torch.relu(a.float() @ b.float()).half())


def last_row_unwritten(a, b, c):
    c[:-1].copy_((a.float() @ b.float()).half()[:-1])


def off_by_one_element(a, b, c):
    right(a, b, c)
    c[3, 5] += 1.0


def scribbles_on_input(a, b, c):
    right(a, b, c)
    a[0, 0] = 0.0


def raises(a, b, c):
    raise RuntimeError("launch failed")


def check(run, reference="matmul"):
    return check_numerics({"f/v": (run, reference)}, SEEDS, SHAPE, device="cpu")["f/v"]


def test_a_right_kernel_passes_on_every_seed():
    result = check(right)
    assert result.passed and [s.seed for s in result.seeds] == SEEDS
    assert result.problems() == []
    assert check(right_relu, "matmul_relu").passed


def test_unwritten_output_stays_poisoned_and_fails():
    result = check(last_row_unwritten)
    assert not result.passed
    assert all(s.nonfinite == SHAPE["N"] for s in result.seeds)
    assert f"seed 1: {SHAPE['N']} NaN/Inf elements" in result.problems()[0]


def test_one_wrong_element_fails():
    result = check(off_by_one_element)
    assert not result.passed and all(s.mismatches == 1 and s.nonfinite == 0 for s in result.seeds)
    assert "1 elements outside rtol=atol=0.01" in result.problems()[0]


def test_a_kernel_without_relu_fails_the_relu_reference():
    assert not check(right, "matmul_relu").passed


def test_modified_inputs_fail_and_are_restored_for_the_next_kernel():
    results = check_numerics(
        {"f/bad": (scribbles_on_input, "matmul"), "f/good": (right, "matmul")}, SEEDS, SHAPE, device="cpu"
    )
    assert not results["f/bad"].passed and "modified its inputs" in results["f/bad"].problems()[0]
    assert results["f/good"].passed


def test_a_raising_kernel_fails_with_its_error():
    result = check(raises)
    assert not result.passed and "RuntimeError: launch failed" in result.problems()[0]


def test_report_data_records_seeds_and_tolerances():
    data = check(right).as_dict()
    assert data["rtol"] == data["atol"] == 1e-2
    assert [s["seed"] for s in data["seeds"]] == SEEDS


def test_fewer_than_three_distinct_seeds_are_refused():
    with pytest.raises(ValueError, match="at least 3 distinct seeds"):
        validate_seeds([1, 1, 2])
    assert len(set(fresh_seeds())) == 3


def test_unknown_reference_is_refused():
    a = torch.ones(2, 2)
    with pytest.raises(ValueError, match="unknown reference 'softmax'"):
        reference_output("softmax", a, a)
