"""Chains of kernels, dtype values and annotation-only parameters, per-variant tolerances and outputs in a
storage layout: what a family of TileLang's own examples declares, built and checked on the CPU."""

import kernel_styles as styles
import pytest
import tilelang.language as T

from tilelang_golden.catalog.build import BuildError, build_kernel, signature
from tilelang_golden.catalog.cases import Case
from tilelang_golden.catalog.declaration import FamilyCallError, check_declaration, logical_outputs
from tilelang_golden.family import Chain, FamilyError, Returned, Tolerance, Variant, Written, snapshot_params


def chain_family(function=styles.scale_twice, params=None, **overrides):
    variant = Variant("only", Chain(function), {"block_rows": 8} if params is None else params)
    declaration = {"variants": [variant], "reference": lambda p, x: 4 * x.float(), **overrides}
    return styles.family(function, **declaration)


def test_a_chain_is_traced_into_its_kernels_in_launch_order_and_its_signature():
    family = chain_family()
    built = build_kernel(family, family.variants[0])
    assert [launch.name for launch in built.launches] == ["eager_scale", "scale"]
    arguments = signature(built)
    assert [(a.shape, a.dtype) for a in arguments] == [((styles.ROWS, styles.COLS), "float16")] * 2
    assert [a.name for a in arguments] == ["x", "scale_twice[0]"]
    assert list(built.outputs) == [1] and isinstance(built.outputs[1], Returned)
    check_declaration(family, family.params(family.variants[0]), arguments, built.outputs)


def test_each_kernel_of_a_chain_is_snapshotted_under_a_line_naming_it(lowerings):
    family = chain_family()
    produced = lowerings.produce(Case(family, family.variants[0], "sm_80"))
    assert produced.cuda.count("// launch ") == 2
    assert produced.cuda.startswith("// launch 1 of 2: eager_scale\n")
    assert "// launch 2 of 2: scale\n" in produced.cuda
    assert [kernel["name"] for kernel in produced.facts["kernels"]] == ["eager_scale_kernel", "scale_kernel"]


def test_a_chain_that_calls_a_kernel_with_the_wrong_shape_is_refused_naming_the_kernel():
    def mismatched(x, block_rows=8):
        doubled = styles.eager_scale(x, block_rows=block_rows)
        return styles.lazy_scale(x.shape[0] // 2, x.shape[1], block_rows=block_rows)(doubled)

    family = chain_family(mismatched)
    with pytest.raises(
        BuildError, match=r"variant 'only': its chain .*mismatched did not trace.*kernel scale was called"
    ):
        build_kernel(family, family.variants[0])


def test_a_chain_that_calls_no_kernel_and_an_unread_parameter_are_refused():
    def no_kernel(x, block_rows=8):
        return 4 * x * block_rows

    with pytest.raises(BuildError, match="called no @tilelang.jit kernel"):
        family = chain_family(no_kernel)
        build_kernel(family, family.variants[0])

    def ignores(x, block_rows=8):
        return styles.eager_scale(x)

    family = chain_family(ignores)
    with pytest.raises(BuildError, match="takes 'block_rows' but never reads it"):
        build_kernel(family, family.variants[0])


def test_a_parameter_read_only_in_a_tensor_annotation_counts_as_read_and_a_dtype_value_is_written_by_name():
    params = {"block_rows": 8, "dtype": T.float32}
    family = styles.family(styles.eager_annotated_dtype, params, outputs={1: Written()})
    built = build_kernel(family, family.variants[0])
    assert [a.dtype for a in signature(built)] == ["float32", "float32"]
    assert snapshot_params(family.params(family.variants[0]))["dtype"] == "float32"
    assert type(snapshot_params({"policy": T.GemmWarpPolicy.FullRow})["policy"]) is str


def test_a_parameter_value_with_no_written_form_is_refused_by_the_declaration_with_the_forms():
    with pytest.raises(FamilyError, match=r"variant 'only' passes block_rows=<object .*TileLang dtype"):
        styles.family(styles.eager_scale, {"block_rows": object()})


def test_a_variant_tolerance_replaces_the_familys_and_must_say_why():
    own = Tolerance(1e-3, 0, why="its reduction is longer")
    family = styles.family(styles.eager_scale, variants=[Variant("only", styles.eager_scale, tolerance=own)])
    assert build_kernel(family, family.variants[0]).tolerances == (own,)
    with pytest.raises(FamilyError, match=r"variant 'only''s tolerance replaces the family's without saying why"):
        styles.family(styles.eager_scale, variants=[Variant("only", styles.eager_scale, tolerance=Tolerance(1, 0))])


def reversed_rows(p, stored):
    return stored.flip(0)


def test_an_output_in_a_storage_layout_is_mapped_to_its_logical_shape_before_the_reference_is_held_to_it():
    def transposed(p, stored):
        return stored.reshape(p["cols"], p["rows"]).t()

    family = styles.family(
        styles.eager_scale, outputs={1: Returned(to_logical=transposed)}, reference=lambda p, x: 2 * x.float()
    )
    built = build_kernel(family, family.variants[0])
    (logical,) = logical_outputs(family, family.params(family.variants[0]), signature(built), built.outputs)
    assert logical.shape == (styles.ROWS, styles.COLS)

    def dropped(p, stored):
        return stored[:1]

    broken = styles.family(styles.eager_scale, outputs={1: Returned(to_logical=dropped)})
    with pytest.raises(FamilyCallError, match="to_logical of output Y.* it must return the same elements"):
        built = build_kernel(broken, broken.variants[0])
        check_declaration(broken, broken.params(broken.variants[0]), signature(built), built.outputs)


def test_a_case_that_does_not_lower_is_told_the_declaration_line_to_add(monkeypatch):
    import tilelang

    from tilelang_golden.static.produce.lowering import LoweringError, lower

    declared = {"gfx942": "LDS too small"}
    variant = Variant("only", styles.eager_scale, {"block_rows": 8, "threads": 128}, does_not_lower=declared)
    family = styles.family(styles.eager_scale, variants=[variant])
    built = build_kernel(family, variant)

    def refuses(*args, **kwargs):
        raise TypeError("no such intrinsic")

    monkeypatch.setattr(tilelang, "lower", refuses)
    with pytest.raises(LoweringError) as refused:
        lower(Case(family, variant, "sm_90"), built)
    message = str(refused.value)
    assert "(TypeError: no such intrinsic)" in message and "Fix the kernel in kernels/styles.py" in message
    assert 'Variant("only", ..., does_not_lower={"gfx942": "LDS too small", "sm_90": "<why, in words>"})' in message
    assert 'nox -s regen-golden -- -k "styles/only/sm_90"' in message


def test_a_kernel_that_sizes_its_tensors_from_module_constants_is_refused_at_a_variants_own_shape():
    import tilelang

    from tilelang_golden.catalog.declaration import family_problems

    @tilelang.jit(out_idx=[1])
    def fixed(rows: int, cols: int, block_rows: int = 8):
        @T.prim_func
        def scale(X: T.Tensor((styles.ROWS, cols), "float16"), Y: T.Tensor((styles.ROWS, cols), "float16")):
            with T.Kernel(T.ceildiv(rows, block_rows), threads=128) as bx:
                T.copy(X[bx * block_rows, 0], Y[bx * block_rows, 0])

        return scale

    variants = [
        Variant("family_shape", fixed, {"block_rows": 8}),
        Variant("half", fixed, {"block_rows": 8}, shape={"rows": 128}),
    ]
    problems = "\n".join(family_problems(styles.family(fixed, variants=variants)))
    assert "variant 'half'" in problems and "variant 'family_shape'" not in problems
    assert "inputs() made torch.float16 (128, 512)" in problems and "the kernel ignores them" in problems
