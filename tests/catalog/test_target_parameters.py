"""A variant's parameters may depend on the target (`ByTarget`): each case is built with its target's value, the
snapshot records it, and a declaration that names a target the family lacks, or a value with no written form, is
refused when the family is made."""

import kernel_styles as styles
import pytest

from tilelang_golden.catalog.cases import Case, family_cases
from tilelang_golden.catalog.declaration import family_problems
from tilelang_golden.family import ByTarget, FamilyError, Variant
from tilelang_golden.static.snapshots.case_files import facts_file
from tilelang_golden.static.snapshots.snapshot import load_yaml

BLOCK_ROWS = ByTarget(8, {"sm_90": 4, "gfx942": 16})


def tiered_family(**overrides):
    return styles.family(styles.scale_factory, {"block_rows": BLOCK_ROWS, "threads": 128}, outputs=[1], **overrides)


def test_each_target_builds_the_variant_with_its_own_value_and_the_rest_with_the_default():
    family = tiered_family()
    got = {case.target: case.params["block_rows"] for case in family_cases(family)}
    assert got["sm_90"] == 4 and got["gfx942"] == 16
    assert {got[t] for t in got if t not in ("sm_90", "gfx942")} == {8}
    # one variant object per target value, made once: what a run builds per variant it builds once per target
    assert Case(family, family.variants[0], "sm_90").variant is Case(family, family.variants[0], "sm_90").variant
    on_sm_90 = Case(family, family.variants[0], "sm_90")
    assert Case(family, on_sm_90.variant, "gfx942").params["block_rows"] == 16  # another target of a case's variant


def test_the_snapshot_records_what_its_target_got(lowerings):
    family = tiered_family()
    variant = family.variants[0]
    for target, rows in (("sm_90", 4), ("sm_80", 8)):
        case = Case(family, variant, target)
        facts = load_yaml(lowerings.files(case)[facts_file(case)])
        assert facts["params"]["block_rows"] == rows
        assert facts["kernels"][0]["launch"]["grid"][0] == styles.ROWS // rows  # the kernel was built with it


def test_the_declaration_check_builds_each_targets_parameters():
    assert family_problems(tiered_family()) == []


@pytest.mark.parametrize(
    ("value", "refusal"),
    [
        (
            ByTarget(8, {"sm_91": 4}),
            r"passes block_rows=ByTarget\(\.\.\.\) with values for \['sm_91'\], which are not targets",
        ),
        (ByTarget(8, {"sm_90": object()}), r"passes block_rows=<object.*no stable written form"),
        (
            ByTarget(8, [("sm_90", 4)]),
            r"passes block_rows=ByTarget\(\.\.\.\) with values \[\('sm_90', 4\)\]; give a map",
        ),
    ],
)
def test_a_target_the_family_lacks_or_a_value_without_written_form_is_refused(value, refusal):
    with pytest.raises(FamilyError, match=rf"kernels/styles\.py: variant 'only' {refusal}"):
        styles.family(styles.scale_factory, {"block_rows": value, "threads": 128}, outputs=[1])


def test_a_target_left_out_of_the_familys_targets_may_not_be_given_a_value():
    with pytest.raises(FamilyError, match=r"values for \['gfx942'\]"):
        tiered_family(targets=["sm_80", "sm_90"])
    family = tiered_family(
        variants=[Variant("only", styles.scale_factory, {"block_rows": ByTarget(8), "threads": 128})]
    )
    assert {case.params["block_rows"] for case in family_cases(family)} == {8}
