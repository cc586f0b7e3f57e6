"""Parsing the steps of benchmarks/steps.py (the timing itself needs a GPU)."""

from __future__ import annotations

import importlib

import pytest
import torch
from script_runner import run_script

from tilelang_golden.catalog.loading import load_families
from tilelang_golden.gpu.schedule_steps import BadStep, parse_step


def first_variant():
    family = load_families().families[0]
    return family, family.variants[0]


def test_a_problem_dimension_in_a_step_changes_the_problem_not_the_parameters():
    family, variant = first_variant()
    dimension = next(iter(family.shape))
    step = parse_step(f"{family.name}/{variant.name}:{dimension}=1024", load_families().families, "sm_90")
    assert step.case.params[dimension] == 1024 and dimension not in step.case.variant.params
    assert family.dimensions(step.case.variant)[dimension] == 1024


def test_a_step_is_the_variant_with_the_named_parameters_replaced():
    family, variant = first_variant()
    step = parse_step(f"{family.name}/{variant.name}:threads=256,note='x'", load_families().families, "sm_90")
    assert step.case.params["threads"] == 256 and step.case.params["note"] == "x"
    assert step.case.variant.kernel is variant.kernel and step.case.target == "sm_90"
    assert step.case.key == f"{family.name}/{variant.name}:threads=256,note='x'", "each step is timed under its spec"
    assert dict(variant.params) == dict(
        parse_step(f"{family.name}/{variant.name}", load_families().families, "sm_90").case.variant.params
    )


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("no_family/v0", "no registered variant 'no_family/v0'"),
        ("{family}/no_variant", "no registered variant"),
        ("{family}/{variant}:threads", "'threads' is not name=value"),
        ("{family}/{variant}:threads=lots", "'lots' is not a Python literal"),
    ],
)
def test_a_bad_step_says_what_is_wrong(spec, message):
    family, variant = first_variant()
    with pytest.raises(BadStep, match=message):
        parse_step(spec.format(family=family.name, variant=variant.name), load_families().families, "sm_90")


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the refusal on a machine without a GPU")
@pytest.mark.parametrize("script", ["benchmarks.steps", "benchmarks.timing", "tilelang_golden.upgrade.timing_worker"])
def test_without_a_gpu_each_gpu_script_stops_with_status_2_and_says_why(script):
    module = importlib.import_module(script)
    argv = {"benchmarks.steps": ["some_family/some_variant"], "benchmarks.timing": ["ab"]}.get(script, [])
    status, out, err = run_script(module.main, *argv)
    from tilelang_golden.gpu.run.device import gpu_unavailable

    assert status == 2 and out == ""
    assert err.endswith(f": {gpu_unavailable()}\n"), err
