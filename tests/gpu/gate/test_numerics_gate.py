"""The numeric gate on the CPU: fake kernels that are right, wrong, touch their inputs or return what their
signature does not, and families whose declarations do not fit their kernels (the poisoning of unwritten
output: tests/gpu/run/test_poison.py).

The kernels are called as TileLang's are, `kernel(*inputs)` returning the outputs, which they take from a
stand-in for PyTorch's caching allocator (`gpu_fakes.FakeCache`)."""

from __future__ import annotations

import gpu_fakes as fake
import pytest
import torch

from kernels._gemm import float32_matmul, gemm_inputs
from tilelang_golden.family import Family, Tolerance, Variant
from tilelang_golden.gpu.gate.numerics_gate import Output, OutputCheck, SeedCheck, validate_seeds
from tilelang_golden.gpu.measure.numerics import check_numerics, fresh_seeds, make_inputs
from tilelang_golden.gpu.run.compile import Argument

SHAPE = {"M": 64, "N": 48, "K": 32}
SEEDS = [1, 2, 3]
GEMM = fake.gemm_family("small_gemm", [fake.variant("v")], shape=SHAPE)
RELU = fake.gemm_family("small_gemm_relu", [fake.variant("v")], shape=SHAPE, relu=True)
CACHE = fake.FakeCache()  # where every kernel here allocates its outputs, and the check poisons them


def right(a, b, c):
    c.copy_((a.float() @ b.float()).half())


def right_relu(a, b, c):
    c.copy_(torch.relu(a.float() @ b.float()).half())


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


def numerics_case(write, family=GEMM, **options):
    return fake.numerics_case(family, write, cache=CACHE, **options)


def check_all(cases):
    return check_numerics(cases, SEEDS, device="cpu", memory=CACHE)


def check(kernel, family=GEMM):
    (result,) = check_all([numerics_case(kernel, family)]).values()
    return result


def test_a_right_kernel_passes_on_every_seed():
    result = check(right)
    assert result.passed and [s.seed for s in result.seeds] == SEEDS
    assert result.failures() == []
    assert check(right_relu, RELU).passed


def test_a_kernel_returning_other_than_its_signature_says_fails_saying_both():
    def wrong_shape(a, b):
        return CACHE.take((SHAPE["M"], 1), torch.float16)

    def two(a, b):
        return [CACHE.take((SHAPE["M"], SHAPE["N"]), torch.float16)] * 2

    results = check_all(
        [numerics_case(None, key="f/shape", run=wrong_shape), numerics_case(None, key="f/two", run=two)]
    )
    assert not results["f/shape"].passed and not results["f/two"].passed
    assert results["f/shape"].failures()[0] == (
        "seed 1: the kernel returned torch.float16 (64, 1); its signature's returned outputs are torch.float16 (64, 48)"
    )
    assert "the kernel returned list;" in results["f/two"].failures()[0]


def test_one_wrong_element_fails():
    result = check(off_by_one_element)
    assert not result.passed and all(s.mismatches == 1 and s.nonfinite == 0 for s in result.seeds)
    assert "1 elements outside atol=0.01, rtol=0.01 (0 allowed; max abs error" in result.failures()[0]


def test_a_kernel_without_relu_fails_the_relu_reference():
    assert not check(right, RELU).passed


def lenient(mismatches: int) -> Family:
    """A family allowing `mismatches` elements outside its tolerance, judged by the Tolerance alone: two elements a
    whole unit off move the mean error of this small output far more than a precision twin admits."""
    return fake.gemm_family(
        "lenient",
        [fake.variant("v")],
        shape=SHAPE,
        tolerance=Tolerance(atol=1e-2, rtol=1e-2, mismatches=mismatches),
        precision_twin=None,
    )


def test_a_tolerance_allows_exactly_its_mismatches():
    lenient_family = lenient(2)
    allowed = check(off_in(2), lenient_family)
    assert allowed.passed and all(s.mismatches == 2 for s in allowed.seeds)
    one_more = check(off_in(3), lenient_family)
    assert not one_more.passed
    assert "3 elements outside atol=0.01, rtol=0.01 (2 allowed; max abs error" in one_more.failures()[0]
    assert not check(off_in(2)).passed, "the seed families' tolerance allows none"


def test_allowed_mismatches_do_not_excuse_an_unwritten_element():
    def one_unwritten(a, b, c):
        right(a, b, c)
        c[0, 0] = float("nan")

    result = check(one_unwritten, lenient(5))
    assert not result.passed and all(s.nonfinite == 1 for s in result.seeds)


def test_modified_inputs_fail_and_the_next_kernel_sees_the_seeds_inputs():
    bad, good = numerics_case(scribbles_on_input, key="f/bad"), numerics_case(right, key="f/good")
    results = check_all([bad, good])
    assert not results["f/bad"].passed and "modified its inputs" in results["f/bad"].failures()[0]
    assert results["f/good"].passed


def test_a_raising_kernel_fails_with_its_error():
    result = check(raises)
    assert not result.passed and "the kernel raised RuntimeError: launch failed" in result.failures()[0]


def test_each_case_gets_inputs_of_its_own_problem():
    variants = [Variant("full", kernel=lambda **_: None), Variant("half", kernel=lambda **_: None, shape={"M": 32})]
    family = fake.gemm_family("two_shapes", variants, shape=SHAPE)
    seen: dict[str, tuple[int, ...]] = {}

    def recording(name):
        def kernel(a, b, c):
            seen[name] = tuple(a.shape)
            right(a, b, c)

        return kernel

    cases = [numerics_case(recording(name), family, name=name) for name in ("full", "half")]
    results = check_all(cases)
    assert all(r.passed for r in results.values())
    assert seen == {"full": (64, 32), "half": (32, 32)}


def test_the_same_seed_makes_the_same_inputs():
    first, again, other = (make_inputs(GEMM, SHAPE, seed, "cpu") for seed in (7, 7, 8))
    assert all(torch.equal(x, y) for x, y in zip(first, again, strict=True))
    assert not torch.equal(first[0], other[0])
    assert [tuple(t.shape) for t in first] == [(64, 32), (32, 48)]


def test_an_unwritten_integer_output_is_a_mismatch():
    def half_written(x, out):
        out[: out.shape[0] // 2] = 2 * x[: out.shape[0] // 2]

    doubled = fake.gemm_family(
        "doubled",
        [fake.variant("v")],
        shape={"n": 10},
        inputs=lambda p, generator, device: [torch.randint(-9, 9, (p["n"],), generator=generator, device=device)],
        reference=lambda p, x: 2 * x,
        tolerance=Tolerance(atol=0, rtol=0),
        precision_twin=lambda p, x: 2 * x,
    )
    arguments = [Argument((10,), "int64"), Argument((10,), "int64")]
    case = numerics_case(half_written, doubled, arguments=arguments, outputs=(1,))
    (result,) = check_all([case]).values()
    assert not result.passed and all(s.mismatches == 5 and s.nonfinite == 0 for s in result.seeds)


def both_at_fp16(p, a, b):
    """The two outputs as PyTorch computes them at the kernel's precision: its precision twin."""
    c = torch.matmul(a, b)
    return c, torch.relu(c)


def two_outputs(tolerance=(fake.TOLERANCE, fake.TOLERANCE), precision_twin=both_at_fp16):
    """kernel(C, A, B, R) returning [C, R], C = A @ B and R = relu(A @ B): outputs first and last."""
    family = fake.gemm_family(
        "two_outputs",
        [fake.variant("v")],
        shape=SHAPE,
        reference=lambda p, a, b: (fake.matmul_reference(p, a, b), fake.relu_reference(p, a, b)),
        tolerance=list(tolerance),
        precision_twin=precision_twin,
    )
    a, b, c = fake.gemm_arguments(SHAPE)
    return family, [c, a, b, Argument(c.shape, c.dtype, "R")]


def both(a, b, c, r):
    right(a, b, c)
    right_relu(a, b, r)


def test_each_returned_output_meets_its_own_reference():
    def swapped(a, b, c, r):
        both(a, b, r, c)

    family, arguments = two_outputs()
    right_result, swapped_result = (
        check_all([numerics_case(kernel, family, arguments=arguments, outputs=(0, 3))])["two_outputs/v"]
        for kernel in (both, swapped)
    )
    assert right_result.passed
    assert not swapped_result.passed and all(s.mismatches > 0 for s in swapped_result.seeds)
    assert [o.output.name for o in right_result.seeds[0].outputs] == ["C", "R"]


def test_each_output_is_held_to_its_own_tolerance():
    """An error of 0.25 in R: within the first output's loose tolerance, outside R's own."""

    def off_in_r(a, b, c, r):
        both(a, b, c, r)
        r[0, 0] += 0.25

    loose, tight = Tolerance(atol=0.5, rtol=0), Tolerance(atol=1e-2, rtol=1e-2)
    results = {
        name: check_all([numerics_case(off_in_r, family, arguments=arguments, outputs=(0, 3))])["two_outputs/v"]
        for name, (family, arguments) in {
            "R tight": two_outputs((loose, tight), precision_twin=None),
            "R loose": two_outputs((tight, loose), precision_twin=None),
        }.items()
    }
    failed = results["R tight"]
    assert not failed.passed and [o.mismatches for o in failed.seeds[0].outputs] == [0, 1]
    assert failed.failures()[0].startswith("seed 1: output R: 1 elements outside atol=0.01, rtol=0.01 (0 allowed")
    assert results["R loose"].passed
    data = failed.as_dict()
    assert data["tolerances"] == [
        {"output": "C", "atol": 0.5, "rtol": 0, "allowed_mismatches": 0, "why": None, "precision_budget": None},
        {"output": "R", "atol": 0.01, "rtol": 0.01, "allowed_mismatches": 0, "why": None, "precision_budget": None},
    ]
    assert data["seeds"][0]["outputs"][1]["mismatches"] == 1 and data["seeds"][0]["mismatches"] == 1


# -- a family whose reference or inputs do not fit its kernel ---------------------------------------


def broken(name: str, **declared) -> Family:
    return fake.gemm_family(name, [fake.variant("v")], shape=SHAPE, **declared)


@pytest.mark.parametrize(
    "reference, message",
    [
        (
            lambda p, a, b: float32_matmul(a, b)[:-1],
            "reference output 0 is torch.float32 (63, 48), the kernel returns torch.float16 (64, 48)",
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
    results = check_all([bad, good])
    assert results["small_gemm/v"].passed
    failed = results["bad_reference/v"]
    assert not failed.passed and len(failed.failures()) == len(SEEDS)
    assert failed.failures()[0].startswith("seed 1: kernels/bad_reference.py: ")
    assert message in failed.failures()[0]
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
    results = check_all([numerics_case(right, family), numerics_case(right)])
    assert results["small_gemm/v"].passed
    problem = results["few_inputs/v"].failures()[0]
    assert problem.startswith(
        "seed 1: kernels/few_inputs.py: inputs() made 1 tensors, but the kernel takes 2 from it (A, B); "
        "C (returned by the kernel) it does not make"
    )


def test_too_few_inputs_for_a_reference_of_fixed_arity_fail_that_case_only():
    family = broken("few_inputs", inputs=lambda p, generator, device: gemm_inputs(p, generator, device)[:1])
    results = check_all([numerics_case(right, family), numerics_case(right)])
    assert results["small_gemm/v"].passed
    assert "kernels/few_inputs.py: inputs() made 1 tensors" in results["few_inputs/v"].failures()[0]


def test_a_raising_reference_fails_that_case_only_naming_the_file():
    def raising(p, a, b):
        raise RuntimeError("no such op")

    family = broken("raising", reference=raising)
    results = check_all([numerics_case(right, family), numerics_case(right)])
    assert results["small_gemm/v"].passed
    problem = results["raising/v"].failures()[0]
    assert "kernels/raising.py: making the inputs or the reference raised RuntimeError: no such op" in problem


# -- report data and seeds ----------------------------------------------------------------------------


def test_report_data_records_reference_seeds_and_tolerance():
    data = check(right).as_dict()
    assert data["reference"] == "torch.matmul(A, B)"
    assert data["tolerances"] == [
        {"output": "C", "atol": 1e-2, "rtol": 1e-2, "allowed_mismatches": 0, "why": None, "precision_budget": None}
    ]
    assert [s["seed"] for s in data["seeds"]] == SEEDS
    assert data["seeds"][0]["outputs"][0]["output"] == "C" and data["seeds"][0]["error"] is None


def test_a_seeds_problem_names_the_tolerance_it_broke():
    output = Output("C", Tolerance(atol=0.5, rtol=0.001, mismatches=1))
    assert SeedCheck(5, [OutputCheck(output, mismatches=3, max_abs_error=1.25)]).failure() == (
        "seed 5: 3 elements outside atol=0.5, rtol=0.001 (1 allowed; max abs error 1.25)"
    )
    assert SeedCheck(5, [OutputCheck(output, mismatches=1)]).failure() is None


def test_a_seed_without_a_compared_output_never_passes():
    assert not SeedCheck(5).passed


def test_fewer_than_three_distinct_seeds_are_refused():
    with pytest.raises(ValueError, match="at least 3 distinct seeds"):
        validate_seeds([1, 1, 2])
    assert len(set(fresh_seeds())) == 3
