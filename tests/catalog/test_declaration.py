"""What a family declares about its outputs and its callables, checked on the CPU: the three kinds of output
beside what the kernel says itself, the refusals of a declaration the kernel contradicts, and inputs(),
reference and precision twin against each variant's signature on the meta device (`nox -s static`'s
test_family_declaration item), one message per family."""

import kernel_styles as styles
import pytest
import torch

from tilelang_golden.catalog.build import BuildError, build_kernel
from tilelang_golden.catalog.declaration import MAX_LINES, family_problems, from_inputs
from tilelang_golden.family import (
    FROM_INPUTS,
    RETURNED,
    Accumulated,
    FamilyError,
    PrecisionBudget,
    Tolerance,
    Variant,
    Written,
)
from tilelang_golden.gpu.run.compile import out_idx

TWO = [Tolerance(atol=0, rtol=0)] * 2  # Acc += X and Y = 2 X are exact in fp16 at these magnitudes


def accumulating(kernel=styles.lazy_accumulate, outputs=None, **overrides):
    """The in-place kernel of kernel_styles as a family: Acc accumulated from inputs(), Y returned."""

    def inputs(p, generator, device):
        return [
            torch.randn(p["rows"], p["cols"], generator=generator, device=device, dtype=torch.float16) for _ in range(2)
        ]

    declaration = dict(
        inputs=inputs,
        outputs={1: Accumulated(initial=FROM_INPUTS)} if outputs is None else outputs,
        reference=lambda p, x, o: (o.float() + x.float(), 2 * x.float()),
        tolerance=TWO,
        speed_reference=lambda p, x, o: (o + x, 2 * x),
    )
    return styles.family(kernel, **{**declaration, **overrides})


# -- the kinds, beside the kernel's own word ---------------------------------------------------------------


def test_an_accumulated_argument_stands_beside_the_out_idx_the_kernel_returns():
    built = build_kernel(family := accumulating(), family.variants[0])
    assert built.outputs == {1: Accumulated(initial=FROM_INPUTS), 2: RETURNED}
    assert out_idx(built) == [2], "only the returned output is allocated by TileLang"
    assert from_inputs(3, built.outputs) == [0, 1], "inputs() makes X and O's initial value"


def test_a_factory_declares_every_kind_itself():
    family = accumulating(
        styles.accumulate_factory,
        outputs={1: Accumulated(), 2: Written()},
        inputs=lambda p, generator, device: [
            torch.randn(p["rows"], p["cols"], generator=generator, device=device, dtype=torch.float16)
        ],
        reference=lambda p, x: (x.float(), 2 * x.float()),
        speed_reference=lambda p, x: (x, 2 * x),
    )
    built = build_kernel(family, family.variants[0])
    assert built.outputs == {1: Accumulated(), 2: Written()} and out_idx(built) == []
    assert from_inputs(3, built.outputs) == [0]
    assert family_problems(family) == []


def test_a_plain_list_still_names_returned_outputs():
    family = styles.family(styles.scale_factory, outputs=[1])
    assert build_kernel(family, family.variants[0]).outputs == {1: RETURNED}


def test_an_argument_the_kernel_returns_cannot_be_declared_written_in_place():
    family = accumulating(outputs={1: Accumulated(initial=FROM_INPUTS), 2: Written()})
    with pytest.raises(BuildError, match=r"variant 'only': .*out_idx=\[2\]: arguments \[2\] \(Y\), which the kernel "):
        build_kernel(family, family.variants[0])


@pytest.mark.parametrize(
    "outputs, message",
    [
        ({1: "written"}, r"outputs maps each written argument's position to Returned\(\), Written\(\) or"),
        (
            {1: Accumulated(initial="ones")},
            r"outputs maps .*Accumulated\(initial=ZEROS or FROM_INPUTS\), each with an optional to_logical=callable; "
            r"got",
        ),
        ([1, 1], r"outputs must list each written argument's position once"),
    ],
)
def test_an_output_kind_that_is_not_one_of_the_three_is_a_family_error(outputs, message):
    with pytest.raises(FamilyError, match=r"^kernels/styles.py: " + message):
        styles.family(styles.scale_factory, outputs=outputs)


@pytest.mark.parametrize(
    "budget, message",
    [
        (PrecisionBudget(why="", mean_factor=2.0), "says why in words"),
        (PrecisionBudget(why="fp16 products"), "changes at least one bound"),
        (PrecisionBudget(why="fp16 products", max_factor=-1.0), r"sets \['max_factor'\] below 0"),
    ],
)
def test_a_precision_budget_needs_a_reason_and_a_bound_it_changes(budget, message):
    with pytest.raises(FamilyError, match=r"^kernels/styles.py: tolerance 0's precision_budget .*" + message):
        styles.family(styles.eager_scale, tolerance=Tolerance(atol=0, rtol=0, precision_budget=budget))


# -- the declaration against the signature, on the meta device ---------------------------------------------


def test_every_registered_family_fits_its_kernels():
    from tilelang_golden.catalog.loading import load_families

    assert {f.name: family_problems(f) for f in load_families().families} == {
        f.name: [] for f in load_families().families
    }


def only_problem(family) -> str:
    (problem,) = family_problems(family)
    assert problem.startswith("kernels/styles.py: variant 'only': "), problem
    return problem


def test_a_twin_returning_one_tensor_for_two_outputs_is_found_on_the_cpu():
    family = styles.family(
        styles.eager_row_stats,
        {"block_rows": 4, "threads": 128},
        inputs=lambda p, generator, device: [torch.randn(p["rows"], p["cols"], generator=generator, device=device)],
        reference=lambda p, x: (x.sum(1), (x * x).sum(1)),
        tolerance=TWO,
        precision_twin=lambda p, x: x.sum(1),
    )
    assert "the precision twin returned 1 tensor(s) for 2 output(s) (Sum, SumSquares); declare" in only_problem(family)


@pytest.mark.parametrize(
    "kernel, params, tolerance, outputs",
    [
        (styles.eager_scale, None, TWO, 1),  # the GPU check would stop at its strict zip of outputs and tolerances
        (styles.eager_row_stats, {"block_rows": 4, "threads": 128}, TWO[:1], 2),
    ],
    ids=["two-for-one", "one-for-two"],
)
def test_a_tolerance_count_other_than_the_outputs_is_found_on_the_cpu(kernel, params, tolerance, outputs):
    assert family_problems(styles.family(kernel, params, tolerance=tolerance)) == [
        f"kernels/styles.py: the kernel has {outputs} output(s) and the family gives {len(tolerance)} tolerance(s); "
        "give one Tolerance per output, in order, each with its reason (variant 'only')"
    ]


def test_inputs_that_also_make_the_output_argument_are_found_on_the_cpu():
    def with_output(p, generator, device):
        return [torch.randn(p["rows"], p["cols"], generator=generator, device=device, dtype=torch.float16)] * 2

    problem = only_problem(styles.family(styles.eager_scale, inputs=with_output))
    assert "inputs() made 2 tensors, but the kernel takes 1 from it (X); Y (returned by the kernel) it does not " in (
        problem
    )


def test_inputs_that_leave_out_an_accumulated_initial_value_are_found():
    family = accumulating(
        inputs=lambda p, generator, device: [torch.randn(p["rows"], p["cols"], generator=generator, device=device)]
    )
    assert "inputs() made 1 tensors, but the kernel takes 2 from it (X, Acc)" in only_problem(family)


@pytest.mark.parametrize(
    "make, message",
    [
        (lambda p, g, d: torch.randn(p["rows"], p["cols"], generator=g, device=d), "made torch.float32 (256, 512)"),
        (
            lambda p, g, d: torch.randn(p["cols"], p["rows"], generator=g, device=d, dtype=torch.float16),
            "made torch.float16 (512, 256)",
        ),
    ],
)
def test_an_input_of_another_dtype_or_shape_is_found(make, message):
    problem = only_problem(styles.family(styles.eager_scale, inputs=lambda p, g, d: [make(p, g, d)]))
    assert f"inputs() {message} for argument 0 (X), the kernel takes torch.float16 (256, 512)" in problem


def test_a_reference_of_another_shape_is_found():
    problem = only_problem(styles.family(styles.eager_scale, reference=lambda p, x: x.float().t()))
    assert "reference output 0 is torch.float32 (512, 256), the kernel returns torch.float16 (256, 512)" in problem


def test_a_reference_that_needs_data_says_it_ran_without_any():
    problem = only_problem(styles.family(styles.eager_scale, reference=lambda p, x: x * float(x.max())))
    assert "on the meta device (shapes and dtypes, no data) raised" in problem


def test_one_mistake_of_many_variants_is_one_message_naming_them():
    variants = [Variant(f"threads{t}", styles.eager_scale, {"block_rows": 8, "threads": t}) for t in (32, 64, 128, 256)]
    family = styles.family(styles.eager_scale, variants=variants, precision_twin=lambda p, x: (x, x))
    (problem,) = family_problems(family)
    assert problem.startswith("kernels/styles.py: variants 'threads32', 'threads64', 'threads128' and 1 more: ")


def test_a_misspelled_parameter_of_an_autotuned_kernel_gets_the_closest_name():
    family = styles.family(styles.autotuned_scale, {"block_rows": 8, "thread": 128})
    (problem,) = family_problems(family)
    assert "the kernel does not take 'thread' (did you mean 'threads'?)" in problem


def test_many_mistakes_are_cut_at_the_line_limit():
    variants = [Variant(f"v{n}", styles.autotuned_scale, {"block_rows": 16, "threads": n}) for n in range(10)]
    problems = family_problems(styles.family(styles.autotuned_scale, variants=variants))
    assert len(problems) == MAX_LINES and problems[-1].startswith("... and ")
