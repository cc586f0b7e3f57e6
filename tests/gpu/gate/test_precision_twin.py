"""The numeric gate beside the precision twin, on the CPU: a kernel's error against the float32 reference is held to
the error of the family's PyTorch op at the kernel's precision (here torch.matmul on fp16, the fake GEMM family's
speed reference), on the same inputs, by max and mean absolute error, bias and scale.

The fake kernels compute A @ B exactly in float32 and round once to fp16, as the twin does, then go wrong in one
way each, by less than the Tolerance (atol = rtol = 1e-2) can see."""

from __future__ import annotations

import dataclasses
import math

import gpu_fakes as fake
import pytest
import torch

from tilelang_golden.family import Family, FamilyError, Tolerance
from tilelang_golden.gpu.gate.numerics_gate import THRESHOLDS, ErrorStats, Output
from tilelang_golden.gpu.measure.numerics import check_numerics, error_stats, prepare

SHAPE = {"M": 64, "N": 48, "K": 32}
SEEDS = [1, 2, 3]
GEMM = fake.gemm_family("small_gemm", [fake.variant("v")], shape=SHAPE)
CACHE = fake.FakeCache()


def exact(a, b):
    return a.float() @ b.float()


def right(a, b, c):
    c.copy_(exact(a, b).half())


def scaled(a, b, c):
    c.copy_((exact(a, b) * 0.995).half())


def offset(a, b, c):
    """Every element 0.001 too large: an eighth of an fp16 step at |C| ~ 6, far inside atol."""
    c.copy_((exact(a, b) + 0.001).half())


def one_element_off(a, b, c):
    """The largest element 0.03 off: inside atol + rtol |C| there, but over twice the twin's largest error."""
    right(a, b, c)
    flat = c.view(-1)
    flat[flat.abs().argmax()] += 0.03


def one_element_off_by_a_unit(a, b, c):
    right(a, b, c)
    c[0, 0] += 1.0


def rounding_noise(a, b, c):
    """A different but as accurate arithmetic: each element moved by up to a quarter of an fp16 step before the
    rounding (relative 2^-12), independently, as another summation order would."""
    generator = torch.Generator().manual_seed(int(a[0, 0].float().item() * 1000))
    exact_c = exact(a, b)
    noise = (2 * torch.rand(exact_c.shape, generator=generator) - 1) * 2.0**-12
    c.copy_((exact_c * (1 + noise)).half())


def check(kernel, family: Family = GEMM, **options):
    case = fake.numerics_case(family, kernel, cache=CACHE, **options)
    (result,) = check_numerics([case], SEEDS, device="cpu", memory=CACHE).values()
    return result


def checks(result):
    return [output for seed in result.seeds for output in seed.outputs]


def without_twin(name: str = "no_twin") -> Family:
    return fake.gemm_family(name, [fake.variant("v")], shape=SHAPE, precision_twin=None)


# -- the decision --------------------------------------------------------------------------------------


def test_a_right_kernel_passes_with_both_errors_recorded():
    result = check(right)
    assert result.passed and result.precision_twin == "torch.matmul(A, B)"
    for output in checks(result):
        assert output.errors is not None and output.twin is not None
        assert output.errors.max_abs == output.max_abs_error > 0, "fp16 rounding is an error the twin has too"
        assert output.errors.magnitude == output.twin.magnitude, "both against the same reference"


def test_an_output_scaled_by_0_995_passes_the_tolerance_but_fails_by_its_scale():
    result = check(scaled)
    assert all(s.within_tolerance for s in result.seeds), "the Tolerance alone cannot see it"
    assert not result.passed and all("scale" in output.exceeded for output in checks(result))
    assert all(output.errors.scale == pytest.approx(-0.005, abs=2e-4) for output in checks(result))
    assert "error beyond the precision twin's: " in result.failures()[0] and "scale -0.00" in result.failures()[0]


def test_rounding_sized_noise_passes():
    result = check(rounding_noise)
    assert result.passed, result.failures()
    # not vacuous: the noise is there, and measured
    assert all(output.errors.mean_abs > output.twin.mean_abs for output in checks(result))


def test_a_constant_offset_fails_by_its_bias_where_the_scale_sees_nothing():
    result = check(offset)
    assert all(s.within_tolerance for s in result.seeds)
    for output in checks(result):
        assert "bias" in output.exceeded and "scale" not in output.exceeded
        assert output.errors.bias == pytest.approx(0.001, rel=0.2)


def test_one_element_off_fails_by_its_max_only():
    result = check(one_element_off)
    assert all(s.within_tolerance for s in result.seeds)
    assert all(output.exceeded == ["max_abs"] for output in checks(result))


def test_a_tolerances_allowed_mismatches_are_left_out_of_the_max_too():
    allowing_one = fake.gemm_family(
        "allowing_one", [fake.variant("v")], shape=SHAPE, tolerance=Tolerance(atol=1e-2, rtol=1e-2, mismatches=1)
    )
    assert check(one_element_off, allowing_one).passed
    assert not check(one_element_off).passed


def below(a, b):
    """Scaled by 1 - 5e-5 and 2e-4 low before the rounding: a bias and a scale below zero, each about a quarter of
    the fp16 rounding error, so a bound that took them with their sign would fall below them."""
    return (exact(a, b) * (1 - 5e-5) - 2e-4).half()


def test_a_kernel_identical_to_a_twin_below_the_reference_passes():
    family = fake.gemm_family("low_twin", [fake.variant("v")], shape=SHAPE, precision_twin=lambda p, a, b: below(a, b))
    result = check(lambda a, b, c: c.copy_(below(a, b)), family)
    assert result.passed, result.failures()
    for output in checks(result):
        assert output.errors == output.twin
        assert output.twin.bias < 0 and output.twin.scale < 0, "not vacuous: both signs negative on every seed"


def test_a_family_without_a_twin_is_judged_by_its_tolerance_alone():
    result = check(scaled, without_twin())
    assert result.passed and result.precision_twin is None
    assert all(output.twin is None and output.used == {} for output in checks(result))
    data = result.as_dict()
    assert data["precision_twin"] is None and data["thresholds"] is None
    assert data["seeds"][0]["outputs"][0]["precision_twin"] is None
    assert not check(one_element_off_by_a_unit, without_twin()).passed, "the Tolerance still applies"


def test_the_tolerance_still_applies_beside_a_twin():
    result = check(one_element_off_by_a_unit)
    assert not result.passed and not any(s.within_tolerance for s in result.seeds)


def test_the_report_data_holds_both_sides_and_the_thresholds():
    data = check(right).as_dict()
    assert data["precision_twin"] == "torch.matmul(A, B)"
    assert data["thresholds"] == dataclasses.asdict(THRESHOLDS)
    output = data["seeds"][0]["outputs"][0]
    statistics = {"max_abs", "mean_abs", "bias", "scale"}
    assert set(output["kernel"]) == set(output["precision_twin"]) == statistics | {"magnitude"}
    assert set(output["fraction_of_bound"]) == statistics


# -- the statistics and thresholds ---------------------------------------------------------------------

TWIN = ErrorStats(max_abs=0.01, mean_abs=0.002, bias=1e-5, scale=-1e-6, magnitude=1.0)


def test_each_bound_grows_with_the_twins_error_and_a_floor():
    floor = THRESHOLDS.floor * TWIN.magnitude
    assert THRESHOLDS.bounds(TWIN) == pytest.approx(
        {
            "max_abs": THRESHOLDS.max_factor * 0.01 + floor,
            "mean_abs": THRESHOLDS.mean_factor * 0.002 + floor,
            "bias": 1e-5 + THRESHOLDS.bias_fraction * 0.002 + floor,
            "scale": 1e-6 + THRESHOLDS.scale_fraction * 0.002 + THRESHOLDS.floor,
        }
    )
    assert THRESHOLDS.used(TWIN, TWIN) == pytest.approx(
        {name: TWIN.value(name) / bound for name, bound in THRESHOLDS.bounds(TWIN).items()}
    )


def test_a_twin_below_the_reference_is_held_to_its_errors_size_not_its_sign():
    """A twin whose bias and scale are negative: each bound grows with their size, so a kernel identical to its
    twin passes (taking the signed values would shrink the bounds below the twin's own error)."""
    low = dataclasses.replace(TWIN, bias=-3e-4, scale=-3e-4)
    high = dataclasses.replace(low, bias=3e-4, scale=3e-4)
    assert THRESHOLDS.bounds(low) == THRESHOLDS.bounds(high)
    assert max(THRESHOLDS.used(low, low).values()) <= 1


def test_the_units_the_bench_prints_are_those_of_the_thresholds():
    kernel = dataclasses.replace(TWIN, max_abs=0.03, mean_abs=0.003, bias=-0.00051, scale=0.000501)
    assert kernel.against(TWIN) == pytest.approx({"max_abs": 3.0, "mean_abs": 1.5, "bias": 0.25, "scale": 0.25})


def test_an_exact_twin_leaves_the_floor_alone():
    exact_twin = ErrorStats(0.0, 0.0, 0.0, 0.0, magnitude=0.5)
    within = ErrorStats(4e-6, 4e-6, 4e-6, 4e-6, magnitude=0.5)
    beyond = ErrorStats(6e-6, 1e-6, 1e-6, 1e-6, magnitude=0.5)
    assert max(THRESHOLDS.used(within, exact_twin).values()) <= 1
    assert THRESHOLDS.used(beyond, exact_twin)["max_abs"] > 1


def test_a_nan_statistic_fails_rather_than_passing_unseen():
    broken_twin = dataclasses.replace(TWIN, mean_abs=math.nan)
    output = fake.output_check(Output("C", fake.TOLERANCE), TWIN)
    output = dataclasses.replace(output, twin=broken_twin)
    assert set(output.exceeded) >= {"mean_abs"} and not output.passed


def test_the_scale_is_the_least_squares_factor_less_one():
    reference = torch.tensor([1.0, -2.0, 3.0, -2.0], dtype=torch.float64)  # zero mean: a scaled copy has no bias
    stats = error_stats(reference * 0.995, reference)
    assert stats.scale == pytest.approx(-0.005) and stats.bias == pytest.approx(0.0, abs=1e-15)
    assert stats.max_abs == pytest.approx(0.015) and stats.magnitude == pytest.approx(2.0)


# -- what the family declares --------------------------------------------------------------------------


def test_a_twin_output_of_the_outputs_element_count_is_reshaped():
    """torch.native_layer_norm returns Mean as (rows, 1) where a kernel writes (rows,)."""
    flat = fake.gemm_family(
        "flat_twin", [fake.variant("v")], shape=SHAPE, precision_twin=lambda p, a, b: torch.matmul(a, b).reshape(-1, 1)
    )
    case = fake.numerics_case(flat, right, cache=CACHE)
    assert [tuple(t.shape) for t in prepare(case, 1, "cpu", checking=True).twin] == [(64, 48)]
    result = check(right, flat)
    assert result.passed and all(output.twin is not None for output in checks(result))


def refused(precision_twin) -> str:
    calls = []
    family = fake.gemm_family("bad_twin", [fake.variant("v")], shape=SHAPE, precision_twin=precision_twin)
    result = check(lambda *args: calls.append(args), family)
    assert not result.passed and calls == [], "the kernel is not run against a twin it cannot be compared with"
    problem = result.failures()[0]
    assert problem.startswith("seed 1: kernels/bad_twin.py: ")
    return problem


def test_a_twin_returning_another_number_of_outputs_is_refused_naming_the_family_file():
    problem = refused(lambda p, a, b: (torch.matmul(a, b), torch.matmul(a, b)))
    assert "the precision twin returned 2 tensor(s) for 1 output(s) (C); declare Family(precision_twin=...)" in problem


def test_a_twin_output_of_another_element_count_is_refused():
    problem = refused(lambda p, a, b: torch.matmul(a, b)[:-1])
    assert "precision twin output 0 is torch.float16 (63, 48), the kernel returns torch.float16 (64, 48)" in problem


def test_a_twin_at_another_precision_is_refused():
    """A float32 op is no twin of an fp16 kernel: its error would be far below any fp16 kernel's."""
    problem = refused(lambda p, a, b: exact(a, b))
    assert "precision twin output 0 is torch.float32 (64, 48), the kernel returns torch.float16" in problem
    assert "or precision_twin=None where no PyTorch op computes at the kernel's precision" in problem


def test_a_raising_twin_is_refused_with_its_error():
    def raising(p, a, b):
        raise RuntimeError("no such op")

    assert "the precision twin raised RuntimeError: no such op" in refused(raising)


def test_a_declaration_that_is_no_twin_is_refused_naming_the_file():
    with pytest.raises(FamilyError, match=r"^kernels/odd\.py: precision_twin must be a callable"):
        fake.gemm_family("odd", [fake.variant("v")], precision_twin="cuBLAS")
