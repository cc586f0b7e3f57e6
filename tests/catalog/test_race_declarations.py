"""What a family declares for the checks that keep races from passing by luck: the outputs that differ between
launches by design (`Family.nondeterministic`, with its reason) and the small shape the sanitizer runs at
(`Family.sanitize_shape`), refused when they cannot be used."""

import kernel_styles as styles
import pytest

from tilelang_golden.catalog.build import BuildError, build_kernel
from tilelang_golden.catalog.loading import load_families
from tilelang_golden.family import FROM_INPUTS, Accumulated, FamilyError
from tilelang_golden.gpu.measure.repeats import declared_nondeterminism
from tilelang_golden.gpu.sanitize import at_sanitize_shape

REFUSED = "^kernels/styles.py: "


@pytest.mark.parametrize(
    "declared, message",
    [
        ("", r"nondeterministic is ''; say in words why the outputs differ"),
        ("TODO: say why", r"nondeterministic is 'TODO: say why'; say in words"),
        ("<why it is right>", r"nondeterministic is '<why it is right>'"),
        ({}, r"nondeterministic must be a reason in words \(every output\) or \{output position: reason\}"),
        ({1: None}, r"nondeterministic must be a reason in words"),
        ({-1: "float atomics"}, r"nondeterministic must be a reason in words"),
        (["float atomics"], r"nondeterministic must be a reason in words"),
        ({1: " "}, r"nondeterministic names positions \[1\] without saying why"),
    ],
)
def test_a_nondeterministic_output_needs_its_reason_in_words(declared, message):
    with pytest.raises(FamilyError, match=REFUSED + message):
        styles.family(styles.eager_scale, nondeterministic=declared)


def test_a_nondeterministic_position_must_be_a_declared_output():
    with pytest.raises(
        FamilyError, match=REFUSED + r"nondeterministic names positions \[0\], which are not its outputs"
    ):
        styles.family(styles.scale_factory, outputs={1: Accumulated(initial=FROM_INPUTS)}, nondeterministic={0: "why"})


def test_a_nondeterministic_position_the_kernel_does_not_write_is_refused_when_it_is_built():
    """Where the kernel says its outputs itself (`T.empty`), the position is checked against them."""
    family = styles.family(styles.eager_scale, nondeterministic={0: "float atomics add in any order"})
    with pytest.raises(
        BuildError, match=r"declares positions \[0\] nondeterministic, but the kernel's outputs are \[1\]"
    ):
        build_kernel(family, family.variants[0])
    declared = styles.family(styles.eager_scale, nondeterministic={1: "float atomics add in any order"})
    outputs = build_kernel(declared, declared.variants[0]).outputs
    assert declared_nondeterminism(declared, outputs) == {1: "float atomics add in any order"}
    every = styles.family(styles.eager_scale, nondeterministic="float atomics add in any order")
    assert declared_nondeterminism(every, outputs) == dict.fromkeys(outputs, "float atomics add in any order")


@pytest.mark.parametrize(
    "small, message",
    [
        ({"depth": 4}, r"sanitize_shape \{'depth': 4\} names dimensions \['depth'\] the family does not declare"),
        ({"rows": 0}, r"sanitize_shape \{'rows': 0\} sizes \['rows'\] wrong; give .* each a positive int"),
        ({"rows": 8.0}, r"sanitize_shape \{'rows': 8.0\} sizes \['rows'\] wrong"),
        ({}, r"sanitize_shape must map some of its dimensions to sizes"),
    ],
)
def test_a_sanitize_shape_overrides_some_of_the_dimensions_with_positive_ints(small, message):
    with pytest.raises(FamilyError, match=REFUSED + message):
        styles.family(styles.eager_scale, sanitize_shape=small)


def test_the_sanitizer_runs_a_case_at_the_family_sanitize_shape_else_its_own():
    from tilelang_golden.catalog.cases import Case

    family = styles.family(styles.eager_scale, sanitize_shape={"rows": 16})
    small = at_sanitize_shape(Case(family, family.variants[0], "sm_90"))
    assert small.params == {**family.params(family.variants[0]), "rows": 16}
    assert small.variant.name == "only" and small.family.file == family.file, "still the family's file and variant"
    plain = Case(styles.family(styles.eager_scale), family.variants[0], "sm_90")
    assert at_sanitize_shape(plain) is plain


def test_every_registered_family_has_a_small_shape_for_the_sanitizer_or_says_why_not():
    """The sanitizer makes a kernel orders of magnitude slower: a family runs at a small shape, or its file says why
    it cannot (a stream-K schedule computed from its shape when it loads)."""
    from conftest import REPO

    missing = [
        f.file
        for f in load_families().families
        if f.sanitize_shape is None and "No sanitize_shape" not in (REPO / f.file).read_text()
    ]
    assert not missing, f"give these Family(sanitize_shape=...) or say why not: {missing}"
