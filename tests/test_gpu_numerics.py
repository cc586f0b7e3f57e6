"""The numeric gate on the CPU: fake kernels that are right, partly unwritten, wrong, or touch their inputs,
and families whose declarations do not fit their kernels."""

from __future__ import annotations

import gpu_fakes as fake
import pytest
import torch

from harness.family import Family, Tolerance, Variant
from harness.gpu.compile import Argument
from harness.gpu.numerics import (
    NumericsCase,
    SeedCheck,
    check_numerics,
    fresh_seeds,
    make_inputs,
    poisoned_outputs,
    validate_seeds,
)
from kernels._gemm import float32_matmul, gemm_inputs

SHAPE = {"M": 64, "N": 48, "K": 32}
SEEDS = [1, 2, 3]
GEMM = fake.gemm_family("small_gemm", [fake.variant("v")], shape=SHAPE)
RELU = fake.gemm_family("small_gemm_relu", [fake.variant("v")], shape=SHAPE, relu=True)


def right(a, b, c):
    c.copy_((a.float() @ b.float()).half())


def right_relu(a, b, c):
    c.copy_(torch.relu(a.float() @ b.float()).half())


def last_row_unwritten(a, b, c):
    c[:-1].copy_((a.float() @ b.float()).half()[:-1])


def off_by_one_element(a, b, c):
    right(a, b, c)
    c[3, 5] += 1.0


def off_in(count: int):
    """A kernel wrong by a whole unit in `count` elements of its first row."""

    def kernel(a, b, c):
        right(a, b, c)
        c[0, :count] += 1.0

    return kernel


def scribbles_on_input(a, b, c):
    right(a, b, c)
    a[0, 0] = 0.0


def raises(a, b, c):
    raise RuntimeError("launch failed")


def numerics_case(kernel, family=GEMM, name="v", key=None, arguments=None):
    params = family.params(family.variant(name))
    arguments = fake.gemm_arguments(params) if arguments is None else arguments
    return NumericsCase(key or f"{family.name}/{name}", family, params, kernel, arguments)


def check(kernel, family=GEMM):
    (result,) = check_numerics([numerics_case(kernel, family)], SEEDS, device="cpu").values()
    return result


def test_a_right_kernel_passes_on_every_seed():
    result = check(right)
    assert result.passed and [s.seed for s in result.seeds] == SEEDS
    assert result.problems() == []
    assert check(right_relu, RELU).passed


def test_unwritten_output_stays_poisoned_and_fails():
    result = check(last_row_unwritten)
    assert not result.passed
    assert all(s.nonfinite == SHAPE["N"] for s in result.seeds)
    assert f"seed 1: {SHAPE['N']} NaN/Inf elements" in result.problems()[0]


def test_one_wrong_element_fails():
    result = check(off_by_one_element)
    assert not result.passed and all(s.mismatches == 1 and s.nonfinite == 0 for s in result.seeds)
    assert "1 elements outside atol=0.01, rtol=0.01 (0 allowed; max abs error" in result.problems()[0]


def test_a_kernel_without_relu_fails_the_relu_reference():
    assert not check(right, RELU).passed


def test_a_tolerance_allows_exactly_its_mismatches():
    lenient = fake.gemm_family(
        "lenient", [fake.variant("v")], shape=SHAPE, tolerance=Tolerance(atol=1e-2, rtol=1e-2, mismatches=2)
    )
    allowed = check(off_in(2), lenient)
    assert allowed.passed and all(s.mismatches == 2 and s.allowed_mismatches == 2 for s in allowed.seeds)
    one_more = check(off_in(3), lenient)
    assert not one_more.passed
    assert "3 elements outside atol=0.01, rtol=0.01 (2 allowed; max abs error" in one_more.problems()[0]
    assert not check(off_in(2)).passed, "the seed families' tolerance allows none"


def test_allowed_mismatches_do_not_excuse_an_unwritten_element():
    def one_unwritten(a, b, c):
        right(a, b, c)
        c[0, 0] = float("nan")

    lenient = fake.gemm_family(
        "lenient", [fake.variant("v")], shape=SHAPE, tolerance=Tolerance(atol=1e-2, rtol=1e-2, mismatches=5)
    )
    result = check(one_unwritten, lenient)
    assert not result.passed and all(s.nonfinite == 1 for s in result.seeds)


def test_modified_inputs_fail_and_the_next_kernel_sees_the_seeds_inputs():
    bad, good = numerics_case(scribbles_on_input, key="f/bad"), numerics_case(right, key="f/good")
    results = check_numerics([bad, good], SEEDS, device="cpu")
    assert not results["f/bad"].passed and "modified its inputs" in results["f/bad"].problems()[0]
    assert results["f/good"].passed


def test_a_raising_kernel_fails_with_its_error():
    result = check(raises)
    assert not result.passed and "the kernel raised RuntimeError: launch failed" in result.problems()[0]


def test_each_case_gets_inputs_of_its_own_problem():
    variants = [Variant("full", kernel=lambda **_: None), Variant("half", kernel=lambda **_: None, shape={"M": 32})]
    family = fake.gemm_family("two_shapes", variants, shape=SHAPE)
    seen: dict[str, tuple[int, ...]] = {}

    def recording(name):
        def kernel(a, b, c):
            seen[name] = tuple(a.shape)
            right(a, b, c)

        return kernel

    cases = [numerics_case(recording(name), family, name) for name in ("full", "half")]
    results = check_numerics(cases, SEEDS, device="cpu")
    assert all(r.passed for r in results.values())
    assert seen == {"full": (64, 32), "half": (32, 32)}


def test_the_same_seed_makes_the_same_inputs():
    first, again, other = (make_inputs(GEMM, SHAPE, seed, "cpu") for seed in (7, 7, 8))
    assert all(torch.equal(x, y) for x, y in zip(first, again, strict=True))
    assert not torch.equal(first[0], other[0])
    assert [tuple(t.shape) for t in first] == [(64, 32), (32, 48)]


def test_outputs_are_allocated_from_the_signature_and_poisoned():
    arguments = [Argument((4,), "float16"), Argument((2, 3), "float32"), Argument((5,), "int32")]
    floats = fake.gemm_family("sig", [fake.variant("v")], outputs=[1])
    (output,) = poisoned_outputs(floats, arguments, "cpu")
    assert output.shape == (2, 3) and output.dtype == torch.float32 and bool(output.isnan().all())
    integers = fake.gemm_family("sig", [fake.variant("v")], outputs=[-1])
    (output,) = poisoned_outputs(integers, arguments, "cpu")
    assert output.dtype == torch.int32 and bool((output == torch.iinfo(torch.int32).min).all())


def test_an_unwritten_integer_output_is_a_mismatch():
    def half_written(x, out):
        out[: out.shape[0] // 2] = 2 * x[: out.shape[0] // 2]

    doubled = fake.gemm_family(
        "doubled",
        [fake.variant("v")],
        shape={"n": 10},
        inputs=lambda p, generator, device: [torch.randint(-9, 9, (p["n"],), generator=generator, device=device)],
        outputs=[1],
        reference=lambda p, x: 2 * x,
        tolerance=Tolerance(atol=0, rtol=0),
    )
    arguments = [Argument((10,), "int64"), Argument((10,), "int64")]
    case = numerics_case(half_written, doubled, arguments=arguments)
    (result,) = check_numerics([case], SEEDS, device="cpu").values()
    assert not result.passed and all(s.mismatches == 5 and s.nonfinite == 0 for s in result.seeds)


def test_outputs_go_to_their_declared_positions_and_each_meets_its_reference():
    """kernel(C, A, B, R) with C = A @ B and R = relu(A @ B): outputs first and last."""

    def both(c, a, b, r):
        right(a, b, c)
        right_relu(a, b, r)

    def swapped(c, a, b, r):
        both(r, a, b, c)

    family = fake.gemm_family(
        "two_outputs",
        [fake.variant("v")],
        shape=SHAPE,
        outputs=[0, 3],
        reference=lambda p, a, b: (fake.matmul_reference(p, a, b), fake.relu_reference(p, a, b)),
    )
    a, b, c = fake.gemm_arguments(SHAPE)
    arguments = [c, a, b, c]
    right_result, swapped_result = (
        check_numerics([numerics_case(kernel, family, arguments=arguments)], SEEDS, device="cpu")["two_outputs/v"]
        for kernel in (both, swapped)
    )
    assert right_result.passed
    assert not swapped_result.passed and all(s.mismatches > 0 for s in swapped_result.seeds)


# -- a family whose reference or inputs do not fit its kernel ---------------------------------------


def broken(name: str, **declared) -> Family:
    return fake.gemm_family(name, [fake.variant("v")], shape=SHAPE, **declared)


@pytest.mark.parametrize(
    "reference, message",
    [
        (
            lambda p, a, b: float32_matmul(a, b)[:-1],
            "reference output 0 is torch.float32 (63, 48), the kernel writes torch.float16 (64, 48)",
        ),
        (lambda p, a, b: float32_matmul(a, b).to(torch.int32), "reference output 0 is torch.int32 (64, 48)"),
        (
            lambda p, a, b: (float32_matmul(a, b), float32_matmul(a, b)),
            "the reference returned 2 tensor(s) for 1 output(s)",
        ),
        (lambda p, a, b: [[0.0]], "reference output 0 is list ()"),
    ],
    ids=["wrong shape", "wrong kind", "too many", "not a tensor"],
)
def test_a_reference_that_does_not_fit_the_outputs_fails_that_case_only(reference, message):
    calls = []
    family = broken("bad_reference", reference=reference)
    bad = numerics_case(lambda *args: calls.append(args), family)
    good = numerics_case(right)
    results = check_numerics([bad, good], SEEDS, device="cpu")
    assert results["small_gemm/v"].passed
    failed = results["bad_reference/v"]
    assert not failed.passed and len(failed.problems()) == len(SEEDS)
    assert failed.problems()[0].startswith("seed 1: kernels/bad_reference.py: ")
    assert message in failed.problems()[0]
    assert calls == [], "the kernel is not run against a reference it cannot be compared with"


def test_a_wider_float_reference_is_fine():
    assert check(right, broken("wide", reference=lambda p, a, b: a.double() @ b.double())).passed


def test_inputs_that_do_not_fill_the_kernels_arguments_fail_that_case_naming_the_family_file():
    # A reference taking the inputs as they come, so only the argument count is wrong.
    family = broken(
        "few_inputs",
        inputs=lambda p, generator, device: gemm_inputs(p, generator, device)[:1],
        reference=lambda p, *inputs: torch.zeros(p["M"], p["N"]),
    )
    results = check_numerics([numerics_case(right, family), numerics_case(right)], SEEDS, device="cpu")
    assert results["small_gemm/v"].passed
    problem = results["few_inputs/v"].problems()[0]
    assert problem.startswith("seed 1: kernels/few_inputs.py: inputs() made 1 tensors and outputs lists 1")
    assert "the kernel takes 3 arguments" in problem


def test_too_few_inputs_for_a_reference_of_fixed_arity_fail_that_case_only():
    family = broken("few_inputs", inputs=lambda p, generator, device: gemm_inputs(p, generator, device)[:1])
    results = check_numerics([numerics_case(right, family), numerics_case(right)], SEEDS, device="cpu")
    assert results["small_gemm/v"].passed
    assert "kernels/few_inputs.py: inputs() made 1 tensors" in results["few_inputs/v"].problems()[0]


def test_a_raising_reference_fails_that_case_only_naming_the_file():
    def raising(p, a, b):
        raise RuntimeError("no such op")

    family = broken("raising", reference=raising)
    results = check_numerics([numerics_case(right, family), numerics_case(right)], SEEDS, device="cpu")
    assert results["small_gemm/v"].passed
    problem = results["raising/v"].problems()[0]
    assert "kernels/raising.py: making the inputs or the reference raised RuntimeError: no such op" in problem


# -- report data and seeds ----------------------------------------------------------------------------


def test_report_data_records_reference_seeds_and_tolerance():
    data = check(right).as_dict()
    assert data["reference"] == "torch.matmul(A, B)"
    assert data["rtol"] == data["atol"] == 1e-2 and data["allowed_mismatches"] == 0
    assert [s["seed"] for s in data["seeds"]] == SEEDS


def test_a_seeds_problem_names_the_tolerance_it_broke():
    check_ = SeedCheck(5, mismatches=3, max_abs_error=1.25, allowed_mismatches=1)
    assert check_.problem(Tolerance(atol=0.5, rtol=0.001, mismatches=1)) == (
        "seed 5: 3 elements outside atol=0.5, rtol=0.001 (1 allowed; max abs error 1.25)"
    )
    assert SeedCheck(5, mismatches=1, allowed_mismatches=1).problem(Tolerance(0.5, 0.001, 1)) is None


def test_fewer_than_three_distinct_seeds_are_refused():
    with pytest.raises(ValueError, match="at least 3 distinct seeds"):
        validate_seeds([1, 1, 2])
    assert len(set(fresh_seeds())) == 3
