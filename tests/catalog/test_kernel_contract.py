"""The contract between a family and its kernel, for every style TileLang's users write: the
outputs come from the kernel itself, every name a variant passes is one the kernel takes and
uses, autotuned kernels pin a configuration, and every refusal names the file, the variant and
what to do."""

import textwrap

import kernel_styles as styles
import pytest
import tilelang
import tilelang.language as T

import tilelang_golden.catalog.loading
import tilelang_golden.family
from tilelang_golden.catalog.build import KERNEL_KINDS, BuildError, build_kernel
from tilelang_golden.catalog.cases import Case
from tilelang_golden.family import FamilyError, Tolerance, Variant


def build(family):
    return build_kernel(family, family.variants[0])


@pytest.mark.parametrize(
    ("kernel", "params", "declared"),
    [
        pytest.param(styles.eager_scale, None, None, id="eager jit, T.empty output"),
        pytest.param(styles.lazy_scale, None, None, id="lazy jit, out_idx"),
        pytest.param(styles.autotuned_scale, {"block_rows": 4, "threads": 64}, None, id="autotuned, one config"),
        pytest.param(styles.scale_factory, None, [1], id="PrimFunc factory"),
        pytest.param(styles.ready_scale, {}, [1], id="ready prim_func"),
    ],
)
def test_every_style_builds_with_its_outputs_found(kernel, params, declared):
    built = build(styles.family(kernel, params, outputs=declared))
    assert tuple(built.outputs) == (1,)
    assert built.prim_func.params[1].name.startswith("Y")


def test_every_style_lowers_to_the_same_kernel_body(lowerings):
    """The styles write one computation; only the kernel's name differs in the CUDA."""
    cases = [
        styles.family(styles.eager_scale),
        styles.family(styles.lazy_scale),
        styles.family(styles.scale_factory, outputs=[1]),
    ]
    texts = {lowerings.produce(Case(f, f.variants[0], "sm_80")).cuda for f in cases}
    bodies = {text.replace("eager_scale_kernel", "K").replace("scale_kernel", "K") for text in texts}
    assert len(bodies) == 1


def test_an_eager_kernel_returns_several_outputs_in_order():
    family = styles.family(styles.eager_row_stats, {"block_rows": 4, "threads": 128}, tolerance=[Tolerance(0, 0)] * 2)
    built = build(family)
    assert tuple(built.outputs) == (1, 2)
    assert [p.name for p in built.prim_func.params][1:] == ["Sum_handle", "SumSquares_handle"]


# (kernel, params, Family overrides, what the refusal says); each names the file and the variant too.
REFUSALS = [
    pytest.param(
        styles.eager_scale, None, {"outputs": [0]}, r"its T.empty results are arguments \[1\]", id="outputs disagree"
    ),
    pytest.param(
        styles.scale_factory, None, {}, r"the kernel does not say which arguments it writes", id="no outputs anywhere"
    ),
    *[
        pytest.param(
            kernel,
            {"block_rows": 8, "thread": 256},
            {"outputs": [1]},
            r"the kernel does not take 'thread' \(did you mean 'threads'\?\)",
            id=f"misspelled ({style})",
        )
        for style, kernel in (
            ("eager", styles.eager_scale),
            ("lazy", styles.lazy_scale),
            ("factory", styles.scale_factory),
        )
    ],
    pytest.param(
        styles.eager_ignores_threads,
        {"block_rows": 8, "threads": 256},
        {},
        r"the kernel takes 'threads' but never reads it",
        id="taken and ignored",
    ),
    pytest.param(
        styles.eager_scale,
        {"block_rows": 8, "X": 1},
        {},
        r"'X' is a tensor argument of the kernel",
        id="tensor as param",
    ),
    pytest.param(
        styles.ready_scale,
        {"threads": 128},
        {"outputs": [1]},
        r"a ready @T.prim_func takes no parameters",
        id="ready prim_func with params",
    ),
    pytest.param(
        styles.autotuned_scale,
        {"block_rows": 16, "threads": 64},
        {},
        r"pins one of its 4 configurations.*sets none of them completely; "
        r"the closest:\n  {.block_rows.: 4, .threads.: 64}",
        id="autotune config not pinned",
    ),
    pytest.param(
        styles.eager_row_stats,
        {"block_rows": 4, "threads": 128},
        {},
        r"the kernel has 2 output\(s\) and the family gives 1 tolerance",
        id="one tolerance for two outputs",
    ),
]


@pytest.mark.parametrize(("kernel", "params", "overrides", "message"), REFUSALS)
def test_a_declaration_the_kernel_contradicts_is_refused_naming_file_and_variant(kernel, params, overrides, message):
    with pytest.raises(BuildError, match=message) as refused:
        build(styles.family(kernel, params, **overrides))
    assert str(refused.value).startswith("kernels/styles.py: ")
    assert "variant 'only'" in str(refused.value)


def test_a_name_only_the_autotuners_configurations_carry_is_accepted_and_recorded_where_the_kernel_ignores_it():
    """Pinning a configuration whole is no dead end when the kernel ignores one of its names; outside autotuning the
    same kernel's ignored parameter is still refused (REFUSALS: taken and ignored)."""
    family = styles.family(styles.autotuned_ignores_threads, {"block_rows": 8, "threads": 64})
    assert tuple(build(family).outputs) == (1,)
    assert Case(family, family.variants[0], "sm_90").params["threads"] == 64  # what the snapshot records
    with pytest.raises(BuildError, match="pins one of its 4 configurations"):
        build(styles.family(styles.autotuned_ignores_threads, {"block_rows": 8}))


def test_a_none_parameter_is_passed_as_none_and_recorded_as_null(lowerings):
    """`factor=None` is the kernel's own default, given explicitly: built with it, and a snapshot that says so."""
    family = styles.family(styles.eager_scale_by, {"block_rows": 8, "threads": 128, "factor": None})
    case = Case(family, family.variants[0], "sm_80")
    assert "factor: null" in lowerings.files(case)["styles/only/sm_80.yaml"]
    doubled = styles.family(styles.eager_scale, {"block_rows": 8, "threads": 128})
    body = lowerings.produce(case).cuda.replace("eager_scale_by_kernel", "K")
    assert body == lowerings.produce(Case(doubled, doubled.variants[0], "sm_80")).cuda.replace(
        "eager_scale_kernel", "K"
    )


def test_declared_outputs_that_agree_with_t_empty_are_accepted():
    assert tuple(build(styles.family(styles.eager_scale, outputs=[-1])).outputs) == (1,)


def test_a_dimension_named_differently_from_the_kernels_t_const_is_refused_then_mapped():
    shape = {"tokens": styles.ROWS, "cols": styles.COLS}
    unmapped = styles.family(styles.eager_scale, shape=shape)
    with pytest.raises(BuildError, match=r"does not take 'tokens'.*dimension_names"):
        build(unmapped)
    variant = Variant("only", styles.eager_scale, {"block_rows": 8, "threads": 128}, dimension_names={"tokens": "rows"})
    mapped = styles.family(styles.eager_scale, shape=shape, variants=[variant])
    assert tuple(build(mapped).outputs) == (1,)
    assert mapped.params(variant)["tokens"] == styles.ROWS  # the snapshot records the family's name


def test_a_rename_of_an_undeclared_dimension_is_a_family_error():
    with pytest.raises(FamilyError, match=r"variant 'only' renames dimensions \['M'\]"):
        styles.family(styles.eager_scale, variants=[Variant("only", styles.eager_scale, dimension_names={"M": "rows"})])


def test_an_autotuned_kernel_lowers_as_its_pinned_configuration(lowerings):
    tuned = styles.family(styles.autotuned_scale, {"block_rows": 4, "threads": 64})
    plain = styles.family(styles.eager_scale, {"block_rows": 4, "threads": 64})
    assert (
        lowerings.produce(Case(tuned, tuned.variants[0], "sm_90")).cuda
        == lowerings.produce(Case(plain, plain.variants[0], "sm_90")).cuda
    )


@pytest.mark.parametrize("kernel", [object(), "gemm", 3])
def test_a_kernel_of_an_unknown_kind_is_refused_with_the_kinds_accepted(kernel):
    family = styles.family(kernel, {}, outputs=[1])
    with pytest.raises(BuildError) as refused:
        build(family)
    assert "variant 'only'" in str(refused.value)
    assert all(kind in str(refused.value) for kind in KERNEL_KINDS)


def test_a_kernel_error_names_the_line_of_the_kernel_that_raised():
    @tilelang.jit
    def mismatched(X, block_rows: int = 8):
        rows, cols = T.const("rows, cols")
        X: T.Tensor((rows, cols), T.float16)
        Y = T.empty((rows, cols), T.float16)
        with T.Kernel(T.ceildiv(rows, block_rows), threads=128) as bx:
            tile = T.alloc_fragment((block_rows, cols), T.float16)
            narrow = T.alloc_fragment((block_rows, 7), T.float16)
            T.copy(X[bx * block_rows, 0], tile)
            T.copy(tile, narrow)
            T.copy(narrow, Y[bx * block_rows, 0])
        return Y

    family = styles.family(mismatched, {"block_rows": 8})
    with pytest.raises(
        BuildError,
        match=r"variant 'only' did not build with .* at tests/catalog/test_kernel_contract.py:\d+ "
        r"\(`T.copy\(tile, narrow\)`\)",
    ):
        build(family)


def test_a_family_file_with_postponed_annotations_is_refused_with_the_reason(tmp_path, monkeypatch):
    package = tmp_path / "postponed_kernels"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "scaled.py").write_text(
        textwrap.dedent(
            """
            from __future__ import annotations

            FAMILY = None
            """
        )
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    registry = tilelang_golden.catalog.loading.load_families("postponed_kernels")
    assert [b.name for b in registry.broken] == ["scaled"]
    assert "remove `from __future__ import annotations`" in registry.broken[0].error
    assert "postponed_kernels/scaled.py" in registry.broken[0].error


def test_no_family_under_kernels_postpones_its_annotations():
    assert not tilelang_golden.catalog.loading.load_families().broken
