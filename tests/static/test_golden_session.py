"""The static and regen sessions end to end, in-process, on a temporary golden/ folder."""

from __future__ import annotations

import dataclasses

import pytest
from conftest import SMALL_CASE, collected_cases, collected_items, num_stages_case

import tilelang_golden.catalog.loading
import tilelang_golden.family
import tilelang_golden.static.session
from tilelang_golden.catalog.cases import all_cases
from tilelang_golden.static.produce.lowering import LoweringError
from tilelang_golden.static.snapshots.case_files import case_files
from tilelang_golden.static.snapshots.snapshot import FORMAT_VERSION


def small_registry(monkeypatch, *ids: str) -> None:
    """Shrink the registry to the variants of these case ids, on the targets named, so an unfiltered
    session runs in seconds."""
    everything = tilelang_golden.catalog.loading.load_families()
    chosen = [c for c in all_cases(everything) if c.id in ids]
    assert len(chosen) == len(ids)
    families = []
    for family in everything.families:
        kept = [v for v in family.variants if any(c.family is family and c.variant is v for c in chosen)]
        if kept:
            targets = [c.target for c in chosen if c.family is family]
            families.append(dataclasses.replace(family, variants=kept, targets=targets))
    small = tilelang_golden.catalog.loading.Registry(tuple(families), ())
    monkeypatch.setattr(tilelang_golden.catalog.loading, "load_families", lambda *packages, **options: small)


# The files of SMALL_CASE (its CUDA, machine facts and facts), counted by the kinds that apply to it.
SMALL_CASE_FILES = len(case_files(num_stages_case(0, "sm_90", (64, 64, 32))))


def test_regen_then_static_passes(golden_session):
    assert num_stages_case(0, "sm_90", (64, 64, 32)).id == SMALL_CASE
    result = golden_session("--regen", "-k", SMALL_CASE)
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines([f"*golden files: {SMALL_CASE_FILES} created, 0 updated, 0 deleted, 0 unchanged*"])
    assert (golden_session.golden / f"{SMALL_CASE}.cu").is_file()
    golden_session("-k", SMALL_CASE).assert_outcomes(passed=1)
    assert (golden_session.pending / f"{SMALL_CASE}.yaml").is_file()
    rerun = golden_session("--regen", "-k", SMALL_CASE)
    rerun.stdout.fnmatch_lines([f"*golden files: 0 created, 0 updated, 0 deleted, {SMALL_CASE_FILES} unchanged*"])


def test_missing_snapshot_fails_with_regen_command(golden_session):
    result = golden_session("-k", SMALL_CASE)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [f"*golden/{SMALL_CASE}.cu: missing*", f'*to accept: nox -s regen-golden -- -k "{SMALL_CASE}"']
    )
    assert not (golden_session.golden / f"{SMALL_CASE}.cu").exists(), "static must never write golden/"


def test_yaml_mismatch_names_each_changed_field(golden_session):
    golden_session("--regen", "-k", SMALL_CASE).assert_outcomes(passed=1)
    facts = golden_session.golden / f"{SMALL_CASE}.yaml"
    text = facts.read_text()
    facts.write_text(text.replace("dynamic_shared_memory_bytes: 8192", "dynamic_shared_memory_bytes: 1234"))
    assert facts.read_text() != text
    result = golden_session("-k", SMALL_CASE)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*1 field(s) changed*", "*dynamic_shared_memory_bytes: 1234 -> 8192*"])
    # the last lines, where a terminal user looks: what changed in words, and the command
    assert "shared memory (dynamic_shared_memory_bytes 1234 -> 8192) changed" in "\n".join(result.outlines[-5:])
    assert f'nox -s regen-golden -- -k "{SMALL_CASE}"' in result.outlines[-3]


def test_cuda_mismatch_shows_unified_diff(golden_session):
    golden_session("--regen", "-k", SMALL_CASE).assert_outcomes(passed=1)
    cuda = golden_session.golden / f"{SMALL_CASE}.cu"
    cuda.write_text(cuda.read_text().replace("__syncthreads();", "__syncwarp();", 1))
    result = golden_session("-k", SMALL_CASE)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([f"*--- golden/{SMALL_CASE}.cu*", "*-*__syncwarp();*", "*+*__syncthreads();*"])


@pytest.mark.parametrize(
    "content, problem",
    [
        ("format: 1\ncase: [unclosed\n", "not valid YAML"),
        ("- just\n- a list\n", "expected a mapping of facts"),
        ("format: 0\n", "snapshot format 0*run `nox -s regen-golden`"),
        (None, "kernel *: dynamic_shared_memory_bytes is str, expected int"),
    ],
)
def test_corrupt_snapshot_names_file_and_problem(golden_session, content, problem):
    golden_session("--regen", "-k", SMALL_CASE).assert_outcomes(passed=1)
    facts = golden_session.golden / f"{SMALL_CASE}.yaml"
    if content is None:
        content = facts.read_text().replace("dynamic_shared_memory_bytes: 8192", "dynamic_shared_memory_bytes: lots")
    facts.write_text(content)
    result = golden_session("-k", SMALL_CASE)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([f"*golden/{SMALL_CASE}.yaml: {problem}*"])
    assert "Traceback" not in result.stdout.str()


def test_orphans_are_named_by_a_run_of_their_family_and_deleted_by_a_regen_that_lowers_nothing(golden_session):
    orphan = golden_session.golden / "gemm_num_stages/renamed_variant/sm_80.cu"
    orphan.parent.mkdir(parents=True)
    orphan.write_text("old\n")
    result = golden_session("-k", "no_orphans")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "*golden/gemm_num_stages/renamed_variant/sm_80.cu: orphan*",
            '*lowering nothing: `nox -s regen-golden -- -k "no_orphans"`*',
        ]
    )
    # a run filtered to a case of the family brings the check back for that family; one of another family does not
    golden_session("-k", "rms_norm and threads128 and sm_80").assert_outcomes(failed=1)  # the case: no snapshot yet
    named = golden_session("-k", SMALL_CASE)
    named.assert_outcomes(failed=2)
    named.stdout.fnmatch_lines(["*golden/gemm_num_stages/renamed_variant/sm_80.cu: orphan*"])
    assert orphan.exists()
    pruned = golden_session("--regen", "-k", "no_orphans")
    pruned.assert_outcomes(passed=1)
    pruned.stdout.fnmatch_lines(["*golden files: 0 created, 0 updated, 1 deleted, 0 unchanged*"])
    assert not orphan.parent.exists()
    assert not list(golden_session.pending.rglob("*.cu"))  # nothing was lowered


def test_unfiltered_regen_deletes_orphans(golden_session, monkeypatch):
    small_registry(monkeypatch, SMALL_CASE)
    orphan = golden_session.golden / "gemm_num_stages/renamed_variant/sm_80.cu"
    orphan.parent.mkdir(parents=True)
    orphan.write_text("old\n")
    result = golden_session("--regen")
    # case, family declaration, family checks, manifest, orphans; no item for the broken families and variant pairs
    # to summarize that there are none of
    result.assert_outcomes(passed=5)
    # the case's files and the manifest
    result.stdout.fnmatch_lines([f"*golden files: {SMALL_CASE_FILES + 1} created, 0 updated, 1 deleted, 0 unchanged*"])
    assert not orphan.parent.exists()
    golden_session().assert_outcomes(passed=5)


def test_tilelang_version_skew_compares_every_case_then_fails(golden_session, monkeypatch):
    small_registry(monkeypatch, SMALL_CASE)
    golden_session("--regen").assert_outcomes(passed=5)
    manifest = golden_session.golden / "MANIFEST.yaml"
    manifest.write_text(manifest.read_text().replace("tilelang: ", "tilelang: 0.0.1-was-"))
    result = golden_session()
    result.assert_outcomes(passed=4, failed=1)
    result.stdout.fnmatch_lines(["*golden/ was produced with TileLang 0.0.1-was-*this run uses TileLang 0.1.15*"])
    result.stdout.fnmatch_lines(["*nox -s regen-golden*"])


def test_empty_filter_is_an_error(golden_session):
    result = golden_session("-k", "no_such_variant")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*no golden case matches this selection*"])


@pytest.mark.parametrize("ci", ["true", "1", "TRUE"])
def test_regen_refused_under_ci_unless_forced(golden_session, monkeypatch, ci):
    monkeypatch.setenv("CI", ci)
    refused = golden_session("--regen", "-k", SMALL_CASE)
    assert refused.ret == pytest.ExitCode.USAGE_ERROR
    refused.stderr.fnmatch_lines(["*refusing to rewrite golden/ while CI=*--force-regen-under-ci*"])
    assert not golden_session.golden.exists()
    golden_session("--regen", "--force-regen-under-ci", "-k", SMALL_CASE).assert_outcomes(passed=1)


def test_regen_refuses_nondeterministic_lowering(golden_session, monkeypatch):
    lowerings = iter(range(1000))
    real = tilelang_golden.static.session.lower

    def drifting(case, built):
        lowering = real(case, built)
        return dataclasses.replace(lowering, cuda=lowering.cuda + f"// {next(lowerings)}\n")

    monkeypatch.setattr(tilelang_golden.static.session, "lower", drifting)
    result = golden_session("--regen", "-k", SMALL_CASE)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*two lowerings of the same case differ*"])
    assert not (golden_session.golden / f"{SMALL_CASE}.cu").exists()


def test_lowering_failure_fails_that_case_only(golden_session, monkeypatch):
    broken, fine = SMALL_CASE, SMALL_CASE.replace("sm_90", "sm_80")
    real = tilelang_golden.static.session.lower

    def failing(case, built):
        if case.id == broken:
            raise LoweringError(case.id, "TileLang could not lower this variant (boom)")
        return real(case, built)

    monkeypatch.setattr(tilelang_golden.static.session, "lower", failing)
    result = golden_session("--regen", "-k", f"{broken} or {fine}")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines([f"*{broken}: TileLang could not lower this variant (boom)*"])


def test_a_case_that_does_not_lower_is_reported_once(golden_session, monkeypatch):
    """The family checks and summaries that need the case say only that it stopped them."""
    broken = SMALL_CASE
    real = tilelang_golden.static.session.lower

    def failing(case, built):
        if case.id == broken:
            raise LoweringError(case.id, "TileLang could not lower this variant (boom)")
        return real(case, built)

    small_registry(monkeypatch, SMALL_CASE, SMALL_CASE.replace("ns0", "ns1"))
    monkeypatch.setattr(tilelang_golden.static.session, "lower", failing)
    result = golden_session("--regen", "-k", "64x64x32")
    assert result.ret != 0
    # its own failure, then one folded line for every check it stops, with the reason
    assert sum("(boom)" in line for line in result.stdout.lines) == 2
    result.stdout.fnmatch_lines([f"SKIPPED [[]*[]] *not run, because case {broken}: TileLang could not lower*(boom)*"])


def _collected(golden_session, *args: str) -> set[str]:
    result = golden_session("--collect-only", "-q", *args)
    return set(collected_items(result.stdout.lines))


def test_shards_cover_every_case_exactly_once(golden_session):
    everything = _collected(golden_session)
    shards = [_collected(golden_session, "--shard", f"{i}/3") for i in (1, 2, 3)]
    assert all(shards)
    combined = [item for shard in shards for item in shard]
    assert len(combined) == len(set(combined)), "an item is in two shards"
    orphan_check = {item for item in everything if item.endswith("::orphans")}
    assert set(combined) == everything - orphan_check, "sharded runs leave the orphan check to an unsharded job"
    cases = set(collected_cases(list(everything)))
    assert len(cases) == len(all_cases(tilelang_golden.catalog.loading.load_families())) > 0


def test_bad_shard_is_a_usage_error(golden_session):
    result = golden_session("--shard", "4/3")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--shard '4/3'*"])


def test_recorded_deviations_are_printed_as_findings(golden_session, monkeypatch):
    small_registry(monkeypatch, SMALL_CASE, SMALL_CASE.replace("ns0", "ns1"))
    result = golden_session("--regen", "-k", "checks")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["*= findings =*", "*64x64x32/sm_90: 2. N = 1*: false (warp specialization*"])


def test_unrecorded_criterion_failure_fails_the_session(golden_session, monkeypatch):
    """A criterion false where no deviation is recorded (here: forged facts on sm_80) fails."""
    import kernels.gemm_num_stages as family_module
    from tilelang_golden.family import Claim

    small_registry(monkeypatch, SMALL_CASE.replace("sm_90", "sm_80"))
    forged = [Claim(family_module.CRITERIA[2], False, "N=0: [0, 0, 1]")]
    monkeypatch.setattr(family_module, "num_stages_criteria", lambda facts: forged)
    result = golden_session("-k", "checks")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*3. N = 0: no pipeline annotation (fails: N=0: ?0, 0, 1?)*"])


@pytest.mark.parametrize(
    "manifest, message",
    [
        ("format: 1\ntilelang: [\n", "*MANIFEST.yaml: not valid YAML*run `nox -s regen-golden`*"),
        (
            "format: 0\ntilelang: 0.1.15\n",
            f"*snapshot format 0, this harness writes format {FORMAT_VERSION}*nox -s regen-golden*",
        ),
        (None, "*MANIFEST.yaml is missing; run `nox -s regen-golden`*"),
    ],
)
def test_manifest_problems_are_reported_without_traceback(golden_session, manifest, message):
    golden_session("--regen", "-k", f"{SMALL_CASE} or manifest").assert_outcomes(passed=2)
    path = golden_session.golden / "MANIFEST.yaml"
    if manifest is None:
        path.unlink()
    else:
        path.write_text(manifest)
    result = golden_session("-k", f"{SMALL_CASE} or manifest")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines([message])
    assert "Traceback" not in result.stdout.str()


def test_lower_trace_is_refused(golden_session, monkeypatch):
    monkeypatch.setenv("TL_LOWER_TRACE", "html")
    result = golden_session("-k", SMALL_CASE)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*TL_LOWER_TRACE='html' is set*"])


def test_the_same_error_in_several_cases_is_printed_once_and_short(golden_session, monkeypatch):
    """A harness or declaration error that every case of a family hits: its text once, at most
    FAILURE_TEXT_LINES lines; the other cases name the first."""
    from tilelang_golden.static.report.verdict import FAILURE_TEXT_LINES

    second = SMALL_CASE.replace("ns0", "ns1")

    def failing(case, built):
        raise RuntimeError(f"{case.id}: a declaration the harness cannot use")

    small_registry(monkeypatch, SMALL_CASE, second)
    monkeypatch.setattr(tilelang_golden.static.session, "lower", failing)
    result = golden_session("-k", "64x64x32 and test_case")
    result.assert_outcomes(failed=2)
    text = result.stdout.str()
    assert text.count("RuntimeError: ") == 1, text
    result.stdout.fnmatch_lines([f"*the same error as {SMALL_CASE} (above)*"])
    lines = result.stdout.lines
    start = next(i for i, line in enumerate(lines) if line.startswith("_") and SMALL_CASE in line)
    end = next(i for i, line in enumerate(lines) if line.startswith("_") and second in line)
    assert end - start - 1 <= FAILURE_TEXT_LINES, "\n".join(lines[start:end])
