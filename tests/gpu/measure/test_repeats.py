"""Repeated launches on the CPU with the fake caching allocator: an output that changes between launches on the same
inputs fails, naming it and by how much; one its family declares nondeterministic passes with the reason; every
launch of a kernel that writes in place starts from the same state; the bits, not the values, are compared."""

import gpu_fakes as fake
import pytest
import torch

from tilelang_golden.family import FROM_INPUTS, Accumulated, Tolerance, Written
from tilelang_golden.gpu.gate.repeat_gate import DEFAULT_LAUNCHES
from tilelang_golden.gpu.measure.repeats import bit_difference, check_repeats

SHAPE = {"M": 64, "N": 48, "K": 32}
SEED = 7
CACHE = fake.FakeCache()
ATOMICS = "float atomics add the slices in whatever order they land"


def product(a, b):
    return (a.float() @ b.float()).half()


class Flaky:
    """C = A @ B, but on the launches `wrong(launch)` picks, `elements` elements of its first row one larger: a race
    that loses now and then. Counts its launches from 1."""

    def __init__(self, elements=5, wrong=lambda launch: launch % 3 == 0):
        self.elements, self.wrong, self.launches = elements, wrong, 0

    def __call__(self, a, b, c):
        self.launches += 1
        c.copy_(product(a, b))
        if self.wrong(self.launches):
            c[0, : self.elements] += 1

    def differing(self, launches):
        """How many launches after the first differ from it."""
        return sum(self.wrong(n) != self.wrong(1) for n in range(2, launches + 1))


def repeats(write, outputs=fake.GEMM_OUTPUTS, launches=DEFAULT_LAUNCHES, **declared):
    family = fake.gemm_family("repeats", [fake.variant("v")], shape=SHAPE, **declared)
    case = fake.numerics_case(family, write, cache=CACHE, outputs=outputs)
    return check_repeats(case, SEED, launches, device="cpu")


def test_an_output_that_changes_between_launches_on_the_same_inputs_fails_naming_it_and_by_how_much():
    flaky = Flaky()
    check = repeats(flaky)
    assert not check.passed and flaky.launches == DEFAULT_LAUNCHES
    (failure,) = check.failures()
    assert failure.startswith(f"repeated launches: output C is not bitwise identical on the same inputs (seed {SEED})")
    elements = SHAPE["M"] * SHAPE["N"]
    assert (
        f"{flaky.differing(DEFAULT_LAUNCHES)} of {DEFAULT_LAUNCHES - 1} repeats differed from the first launch, "
        f"in up to {flaky.elements} of {elements} elements, max abs difference 1"
    ) in failure
    assert "a race or a read of memory nothing wrote" in failure and "Family(nondeterministic=...)" in failure
    assert check.as_dict()["outputs"][0]["differing_repeats"] == flaky.differing(DEFAULT_LAUNCHES)


def test_an_output_declared_nondeterministic_passes_with_its_reason_and_what_was_measured():
    flaky = Flaky()
    check = repeats(flaky, nondeterministic=ATOMICS)
    assert check.passed and check.failures() == []
    (note,) = check.notes()
    assert note.startswith(f"output C not held to bitwise equality, declared nondeterministic: {ATOMICS}; ")
    assert f"{flaky.differing(DEFAULT_LAUNCHES)} of {DEFAULT_LAUNCHES - 1} repeats differed" in note
    steady = repeats(lambda a, b, c: c.copy_(product(a, b)), nondeterministic={2: ATOMICS})
    assert steady.notes() == [
        f"output C not held to bitwise equality, declared nondeterministic: {ATOMICS}; identical in all "
        f"{DEFAULT_LAUNCHES} launches anyway"
    ]


def test_a_deterministic_kernel_passes_and_one_launch_checks_nothing():
    check = repeats(lambda a, b, c: c.copy_(product(a, b)))
    assert check.passed and check.outputs[0].identical and check.repeats == DEFAULT_LAUNCHES - 1
    assert repeats(Flaky(wrong=lambda launch: True), launches=1).passed


@pytest.mark.parametrize(
    "outputs, declared",
    [
        ({2: Accumulated()}, {}),
        ({2: Written()}, {}),
        (
            {2: Accumulated(initial=FROM_INPUTS)},
            {
                "inputs": lambda p, generator, device: [
                    *fake.gemm_inputs(p, generator, device),
                    torch.randn(p["M"], p["N"], generator=generator, device=device, dtype=torch.float16),
                ],
                "reference": lambda p, a, b, c: c.float() + a.float() @ b.float(),
                "tolerance": Tolerance(atol=2e-2, rtol=2e-2),
            },
        ),
    ],
    ids=["accumulated from zeros", "written", "accumulated from inputs"],
)
def test_every_launch_of_a_kernel_writing_in_place_starts_from_the_same_state(outputs, declared):
    """C += A @ B into the argument passed in: identical every launch only if each starts from C's first value."""
    check = repeats(lambda a, b, c: c.add_(product(a, b)), outputs=outputs, **declared)
    assert check.passed, check.failures()


def test_a_launch_that_raises_is_the_failure_it_says():
    flaky = Flaky()

    def raises_on_the_third(a, b, c):
        if flaky.launches == 2:
            raise RuntimeError("unspecified launch failure")
        flaky(a, b, c)

    (failure,) = repeats(raises_on_the_third).failures()
    assert failure == (
        f"repeated launches on seed {SEED}: launch 3 of {DEFAULT_LAUNCHES} raised RuntimeError: unspecified launch "
        "failure"
    )


def test_bits_are_compared_not_values():
    nan = torch.tensor([float("nan"), 1.0, 0.0])
    assert bit_difference(nan, nan.clone()) == (0, 0.0), "an unwritten (NaN) element is the same bits every launch"
    assert bit_difference(nan, torch.tensor([float("nan"), 1.0, -0.0])) == (1, 0.0), "-0.0 is other bits than 0.0"
    assert bit_difference(nan, torch.tensor([2.0, 1.5, 0.0])) == (2, float("inf")), "NaN against a value"
    counts = torch.tensor([3, -(2**63), 5])
    assert bit_difference(counts, torch.tensor([3, 2**63 - 1, 4])) == (2, float(2**64 - 1))
    for dtype in (torch.bool, torch.float8_e4m3fn, torch.bfloat16, torch.float64):
        ones = torch.ones(4).to(dtype)
        assert bit_difference(ones, ones.clone())[0] == 0 and bit_difference(ones, torch.zeros(4).to(dtype))[0] == 4
