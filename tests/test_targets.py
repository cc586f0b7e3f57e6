"""Targets a family narrows to, and variants declared not to lower on a target: refusals, snapshots, reports."""

from __future__ import annotations

import dataclasses
import re
from types import SimpleNamespace

import gpu_fakes as fake
import pytest
from conftest import SMALL_CASE, classify_case

import tilelang_golden.catalog.loading
import tilelang_golden.family
import tilelang_golden.static.session
from tilelang_golden.catalog.build import build_kernel
from tilelang_golden.catalog.cases import all_cases, check_groups, family_cases
from tilelang_golden.family import Claim, Family, FamilyError
from tilelang_golden.gpu.report.report import render_markdown, report_data
from tilelang_golden.gpu.selection import device_cases, not_run_on
from tilelang_golden.static.produce.lowering import LoweringError
from tilelang_golden.static.session import LoweringSession
from tilelang_golden.static.snapshots.case_files import case_files
from tilelang_golden.static.snapshots.changes import CaseOutcome
from tilelang_golden.static.snapshots.normalize import normalize_error
from tilelang_golden.static.snapshots.snapshot import SnapshotStore
from tilelang_golden.static.variant_effects import no_effect, render_effects, variant_effects
from tilelang_golden.targets import TARGETS

REASON = "a reason in words"
# What TileLang raises, as it reaches the harness: a machine path and an object address in it.
TILELANG_ERROR = TypeError("Downcast failed at 0x7f3a2b1c for /tmp/build/lower.cc:12\nframe 2\nframe 3\nframe 4")
SMALL = next(c for c in all_cases(tilelang_golden.catalog.loading.load_families()) if c.id == SMALL_CASE)


def small_family(variants=None, **declared) -> Family:
    """SMALL_CASE's family: its variant (or these), on SMALL_CASE's target unless `declared` says otherwise."""
    fields = {"variants": variants or [SMALL.variant], "targets": [SMALL.target], **declared}
    return dataclasses.replace(SMALL.family, **fields)


def declared(variant=SMALL.variant, reason: str = REASON):
    return dataclasses.replace(variant, does_not_lower={SMALL.target: reason})


def use(monkeypatch, family: Family) -> None:
    monkeypatch.setattr(
        tilelang_golden.catalog.loading,
        "load_families",
        lambda *packages, **options: tilelang_golden.catalog.loading.Registry((family,), ()),
    )


def fail_lowering(monkeypatch, case_id: str, error: Exception = TILELANG_ERROR) -> None:
    """Lowering `case_id` raises `error` as TileLang would; every other case lowers for real."""
    real = tilelang_golden.static.session.lower

    def lower(case, built):
        if case.id == case_id:
            raise LoweringError(case.id, "TileLang could not lower this variant") from error
        return real(case, built)

    monkeypatch.setattr(tilelang_golden.static.session, "lower", lower)


# -- declarations -----------------------------------------------------------------------------------


def test_a_family_narrows_its_targets():
    family = small_family(targets=["sm_90"])
    assert family.target_names == ("sm_90",)
    assert [c.target for c in family_cases(family)] == ["sm_90"]
    assert family_cases(family, ["sm_80"]) == ()
    assert dataclasses.replace(family, targets=None).target_names == tuple(TARGETS)


def test_all_cases_and_check_groups_respect_the_narrowing(monkeypatch):
    use(monkeypatch, small_family(checks=lambda seen: []))
    assert [c.id for c in all_cases(tilelang_golden.catalog.loading.load_families())] == [SMALL_CASE]
    assert [
        c.id for _, cases in check_groups(tilelang_golden.catalog.loading.load_families()).values() for c in cases
    ] == [SMALL_CASE]


def test_an_unknown_target_name_is_refused_naming_the_file_and_the_known_targets():
    known = re.escape(str(list(TARGETS)))  # in the project's order
    with pytest.raises(FamilyError, match=rf"kernels/gemm_num_stages\.py: targets must name some.*{known}.*"
                       r"unknown: \['sm_100'\]"):  # fmt: skip
        small_family(targets=["sm_90", "sm_100"])
    with pytest.raises(FamilyError, match="targets must name some"):
        small_family(targets=[])


def test_does_not_lower_must_name_a_target_of_the_family_and_a_reason():
    with pytest.raises(FamilyError, match=r"does not lower on \['sm_80'\], which are not targets of this family"):
        small_family([dataclasses.replace(SMALL.variant, does_not_lower={"sm_80": REASON})])
    with pytest.raises(FamilyError, match="without saying why"):
        small_family([declared(reason=" ")])


def test_a_declared_case_is_snapshotted_as_its_error_and_left_out_of_the_checks(monkeypatch):
    use(monkeypatch, small_family([declared()], checks=lambda seen: []))
    (case,) = all_cases(tilelang_golden.catalog.loading.load_families())
    assert case.does_not_lower == REASON and case_files(case) == (f"{SMALL_CASE}.error",)
    assert check_groups(tilelang_golden.catalog.loading.load_families()) == {}


def test_the_error_is_normalized_to_its_first_lines_without_paths_or_addresses():
    text = normalize_error(str(TILELANG_ERROR))
    assert text == "Downcast failed at 0x<hex> for <path>:12\nframe 2\nframe 3\n"


# -- the static session ----------------------------------------------------------------------------


def test_a_declared_failure_is_snapshotted_and_then_checked(golden_session, monkeypatch):
    use(monkeypatch, small_family([declared()]))
    fail_lowering(monkeypatch, SMALL_CASE)
    assert golden_session("--regen").ret == 0
    error = (golden_session.golden / f"{SMALL_CASE}.error").read_text()
    lines = error.splitlines()
    assert lines[0].startswith("# Generated by `nox -s regen-golden`") and "Never edit" in lines[0]
    assert f"does not lower on {SMALL.target}, because: {REASON}" in error
    assert "TypeError: Downcast failed at 0x<hex> for <path>" in error and "frame 3" in error
    assert "frame 4" not in error and "/tmp" not in error
    assert not (golden_session.golden / f"{SMALL_CASE}.cu").exists()
    assert golden_session().ret == 0


def test_a_declared_case_that_lowers_fails_saying_it_now_lowers(golden_session, monkeypatch):
    use(monkeypatch, small_family([declared()]))
    for regen in ([], ["--regen"]):
        result = golden_session("-k", SMALL_CASE, *regen)
        result.assert_outcomes(failed=1)
        result.stdout.fnmatch_lines(
            [
                f"*golden/{SMALL_CASE}.error: now lowers, though declared not to "
                f"(does not lower on {SMALL.target}: {REASON})*",
                f"*now lowers on {SMALL.target}: remove the declaration in kernels/gemm_num_stages.py and run "
                f'`nox -s regen-golden -- -k "{SMALL_CASE}"`*',
            ]
        )
    assert not golden_session.golden.exists() or not any(golden_session.golden.rglob("*.error"))


def test_a_changed_error_shows_as_a_diff(golden_session, monkeypatch):
    use(monkeypatch, small_family([declared()]))
    fail_lowering(monkeypatch, SMALL_CASE)
    golden_session("--regen", "-k", SMALL_CASE).assert_outcomes(passed=1)
    fail_lowering(monkeypatch, SMALL_CASE, ValueError("another message"))
    result = golden_session("-k", SMALL_CASE, "--no-cache")  # the lowering's failure is patched, past the cache's key
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            f"*golden/{SMALL_CASE}.error: text differs*",
            "*-TypeError: Downcast failed*",
            "*+ValueError: another message*",
        ]
    )


def test_declaring_a_failure_makes_the_cases_files_orphans_of_an_unfiltered_regen(golden_session, monkeypatch):
    use(monkeypatch, small_family())
    assert golden_session("--regen").ret == 0
    assert (golden_session.golden / f"{SMALL_CASE}.cu").is_file()
    use(monkeypatch, small_family([declared()]))
    fail_lowering(monkeypatch, SMALL_CASE)
    result = golden_session("-k", "no_orphans")
    result.assert_outcomes(failed=1)
    produced = [f"{SMALL_CASE}.cu", f"{SMALL_CASE}.machine.yaml", f"{SMALL_CASE}.yaml"]
    result.stdout.fnmatch_lines([f"*golden/{name}: orphan*" for name in produced])
    regen = golden_session("--regen")
    regen.stdout.fnmatch_lines([f"*golden files: 1 created, 0 updated, {len(produced)} deleted, 1 unchanged*"])
    assert sorted(p.name for p in golden_session.golden.rglob("*") if p.is_file()) == [
        "COSTS.yaml",
        "MANIFEST.yaml",
        f"{SMALL.target}.error",
    ]


def test_family_checks_skip_a_declared_case_and_say_so(golden_session, monkeypatch):
    other = next(v for v in SMALL.family.variants if v.name != SMALL.variant.name and "64x64x32" in v.name)
    seen_by_checks = []

    def checks(seen):
        seen_by_checks.append([c.variant.name for c in seen])
        return [Claim("sees the cases that lower", True, str(len(seen)))]

    use(monkeypatch, small_family([SMALL.variant, declared(other)], checks=checks, group=None))
    fail_lowering(monkeypatch, f"{SMALL.family.name}/{other.name}/{SMALL.target}")
    result = golden_session("-k", "family_checks")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(
        [
            f"*{SMALL.family.name}: family checks skip {SMALL.family.name}/{other.name}/{SMALL.target}: "
            f"does not lower on {SMALL.target}: {REASON}*"
        ]
    )


# -- the summary, the upgrade preview, the GPU session ---------------------------------------------------------


def test_the_summary_does_not_compare_a_declared_case_and_says_why():
    family = small_family(targets=None)
    other = next(v for v in SMALL.family.variants if v.name != SMALL.variant.name)
    pair = dataclasses.replace(other, compare_with=SMALL.variant.name, does_not_lower={"sm_80": REASON})
    family = dataclasses.replace(family, variants=[SMALL.variant, pair])
    produced = []

    def produce(case):
        produced.append(case.id)
        return SimpleNamespace(cuda="same\n", facts={})

    (effect,) = variant_effects(family, produce, build_kernel)
    assert not any(case.endswith("/sm_80") for case in produced), "a declared case must not be lowered"
    others = [t for t in TARGETS if t != "sm_80"]
    assert effect.targets == list(TARGETS) and list(effect.cuda_lines_changed) == others
    assert no_effect([effect]) == {"sm_80": [], **{t: [pair.name] for t in others}}
    text = render_effects(family, [effect])
    assert f"| {pair.name} | not compared: {pair.name} does not lower on sm_80: {REASON} | none |" in text
    assert text.count(f"| {pair.name} | **identical (no effect)** |") == len(others)


def test_the_summary_has_a_section_per_target_the_family_declares_naming_its_source_language():
    family = small_family(targets=None)
    pair = dataclasses.replace(SMALL.variant, name="pair", compare_with=SMALL.variant.name)
    family = dataclasses.replace(family, variants=[SMALL.variant, pair])
    text = render_effects(
        family, variant_effects(family, lambda case: SimpleNamespace(cuda="same\n", facts={}), build_kernel)
    )
    sections = [line.removeprefix("## ") for line in text.splitlines() if line.startswith("## ")]
    assert sections == list(TARGETS)
    hip = [t for t in TARGETS if TARGETS[t].backend == "hip"]
    assert hip, "the project has HIP targets"
    for target in TARGETS:
        section = text.split(f"## {target}\n", 1)[1].split("\n## ", 1)[0]
        language = "HIP" if target in hip else "CUDA"
        assert f"| variant | {language} vs comparison | facts that differ |" in section
        assert "| pair | **identical (no effect)** | none |" in section
    narrowed = dataclasses.replace(family, targets=[hip[0], "sm_90"])
    text = render_effects(
        narrowed, variant_effects(narrowed, lambda case: SimpleNamespace(cuda="x\n", facts={}), build_kernel)
    )
    assert [line for line in text.splitlines() if line.startswith("## ")] == ["## sm_90", f"## {hip[0]}"]


def test_the_upgrade_preview_classifies_a_declared_case(monkeypatch, tmp_path):
    golden, pending = SnapshotStore(tmp_path / "golden"), SnapshotStore(tmp_path / "pending")
    (case,) = family_cases(small_family([declared()]))

    def classified():  # each a preview of its own, as TileLang's behaviour changes between them
        return classify_case(case, golden, pending, LoweringSession())

    fail_lowering(monkeypatch, SMALL_CASE)
    assert classified().status is CaseOutcome.NEW
    golden.write(f"{SMALL_CASE}.error", pending.read(f"{SMALL_CASE}.error"))
    assert classified().status is CaseOutcome.STILL_FAILS
    fail_lowering(monkeypatch, SMALL_CASE, ValueError("another message"))
    row = classified()
    assert row.status is CaseOutcome.FAILED and "another error" in row.error
    monkeypatch.undo()
    row = classified()
    assert row.status is CaseOutcome.NOW_LOWERS and "remove the declaration" in row.error


def test_the_gpu_session_leaves_out_what_the_devices_target_does_not_run_and_reports_it():
    narrowed = fake.gemm_family("narrow", [fake.variant("v")], targets=["sm_90"])
    failing = fake.gemm_family(
        "failing", [fake.variant("ok"), dataclasses.replace(fake.variant("no"), does_not_lower={"sm_80": REASON})]
    )
    assert [c.id for c in device_cases([narrowed, failing], "sm_80")] == ["failing/ok/sm_80"]
    assert [c.id for c in device_cases([narrowed, failing], "sm_90")] == [
        "narrow/v/sm_90",
        "failing/ok/sm_90",
        "failing/no/sm_90",
    ]
    left_out = not_run_on([narrowed, failing], "sm_80")
    assert left_out == {
        "narrow/v": "kernels/narrow.py declares targets ['sm_90'] and this device is sm_80",
        "failing/no": f"does not lower on sm_80: {REASON}, as kernels/failing.py declares",
    }
    assert not_run_on([narrowed, failing], "sm_90") == {}
    run = fake.run([], not_run=left_out)
    assert report_data(run)["not_run"] == left_out and report_data(run)["counts"]["pass"] == 0
    assert (
        "- **narrow/v**: not run: kernels/narrow.py declares targets ['sm_90'] and this device is sm_80; "
        "not counted as a pass" in render_markdown(run)
    )
