"""Job summary and annotations from the static session's results (tilelang_golden/static/report/job_summary.py)."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from conftest import SMALL_CASE

from tilelang_golden.github import MAX_ANNOTATIONS, escape_data, escape_property
from tilelang_golden.static.report import job_summary as ci_summary
from tilelang_golden.static.report.job_summary import StaticReport, error_annotations, render_job_summary, static_report
from tilelang_golden.static.snapshots.changes import FactChange, FileChange, Mismatch
from tilelang_golden.static.snapshots.results import RESULTS, CheckResult, Status, append_result, read_results

main = ci_summary.main


def write_results(folder: Path, *results: CheckResult) -> Path:
    """A pending folder whose run recorded `results`, as the session writes them."""
    for result in results:
        append_result(folder, result)
    return folder


def failed(case_id: str, *mismatches: Mismatch, text: str = "(the session's text)") -> CheckResult:
    """A failed check without a case (its title is its id), accepted by an unfiltered regen where it has records."""
    return CheckResult(case_id, Status.FAILED, mismatches=mismatches, accept="" if mismatches else None, text=text)


def test_real_static_failure_becomes_annotations_and_summary(golden_session, tmp_path):
    """The harness's own records, as the static session writes them into its results."""
    golden_session("--regen", "-k", SMALL_CASE).assert_outcomes(passed=1)
    facts = golden_session.golden / f"{SMALL_CASE}.yaml"
    changed = facts.read_text().replace("dynamic_shared_memory_bytes: 8192", "dynamic_shared_memory_bytes: 1234")
    assert changed != facts.read_text()
    facts.write_text(changed)
    cuda = golden_session.golden / f"{SMALL_CASE}.cu"
    cuda.write_text(cuda.read_text().replace("__syncthreads();", "__syncwarp();", 1))
    orphan = golden_session.golden / "gemm_num_stages" / "retired" / "sm_80.yaml"
    orphan.parent.mkdir(parents=True)
    orphan.write_text("format: 1\n")
    result = golden_session("-k", f"{SMALL_CASE} or no_orphans")
    result.assert_outcomes(failed=2)

    report = static_report(read_results(golden_session.pending))
    assert (report.checks, len(report.failed)) == (2, 2)
    case, orphans = sorted(report.failed, key=lambda check: check.check)
    assert case.check == SMALL_CASE and orphans.check == "test_no_orphans"
    assert (case.accept, orphans.accept) == (SMALL_CASE, "no_orphans"), "the regen that accepts each, by -k"
    by_path = {mismatch.path: mismatch for mismatch in case.mismatches}
    assert set(by_path) == {f"golden/{SMALL_CASE}.cu", f"golden/{SMALL_CASE}.yaml"}
    facts_change = by_path[f"golden/{SMALL_CASE}.yaml"]
    assert facts_change.kind is FileChange.FACTS
    assert facts_change.fields == ("dynamic_shared_memory_bytes: 1234 -> 8192",)
    cuda_change = by_path[f"golden/{SMALL_CASE}.cu"]
    assert cuda_change.kind is FileChange.SOURCE
    assert any(line.startswith("-") and "__syncwarp();" in line for line in cuda_change.diff)
    assert orphans.mismatches == (Mismatch("golden/gemm_num_stages/retired/sm_80.yaml", FileChange.ORPHAN),)
    assert case.case == tuple(SMALL_CASE.split("/")), "the case's family, variant and target, as recorded"

    lines = error_annotations(report)
    assert len(lines) == 2, "one annotation per change, not one per file"
    case_line = next(line for line in lines if SMALL_CASE.rsplit("/", 1)[0] in line)
    assert case_line.startswith(f"::error file=golden/{SMALL_CASE}.")
    assert "shared memory (dynamic_shared_memory_bytes 1234 -> 8192) changed%0Ato accept: nox -s regen-golden" in (
        case_line
    )

    summary = render_job_summary(report, "Golden snapshots", "golden-pending-shard-1")
    assert summary.startswith("## Golden snapshots: 2 of 2 checks failed")
    assert "Every failing snapshot file: 1 CUDA changed, 1 facts changed, 1 orphan" in summary
    assert f"| `{SMALL_CASE}` | `golden/{SMALL_CASE}.yaml` | 1 field(s) changed |" in summary
    assert "dynamic_shared_memory_bytes: 1234 -> 8192" in summary
    assert "`golden-pending-shard-1`" in summary
    top = "\n".join(summary.splitlines()[:15])
    assert "nox -s regen-golden" in top and "dynamic_shared_memory_bytes 1234 -> 8192" in top, "what and how, first"


def test_the_summary_reads_the_records_not_the_wording(golden_session, tmp_path, monkeypatch):
    """The same failures printed in other words give the same summary and annotations."""
    golden_session("--regen", "-k", SMALL_CASE).assert_outcomes(passed=1)
    facts = golden_session.golden / f"{SMALL_CASE}.yaml"
    facts.write_text(facts.read_text().replace("dynamic_shared_memory_bytes: 8192", "dynamic_shared_memory_bytes: 1"))
    (golden_session.golden / f"{SMALL_CASE}.cu").unlink()
    (golden_session.golden / "gemm_num_stages" / "retired").mkdir()
    (golden_session.golden / "gemm_num_stages" / "retired" / "sm_80.cu").write_text("old\n")

    def reports(name: str, headline: str | None = None) -> tuple[str, list[str], str]:
        """Summary, annotations and results text of a session that words every headline as `headline`."""
        with monkeypatch.context() as session_only:  # the summary below is rendered by the real wording
            if headline:
                session_only.setattr(Mismatch, "headline", property(lambda self: headline))
            golden_session("-k", f"{SMALL_CASE} or no_orphans").assert_outcomes(failed=2)
        report = static_report(read_results(golden_session.pending))
        text = (golden_session.pending / RESULTS).read_text()
        return render_job_summary(report, "Golden snapshots"), error_annotations(report), text

    as_printed = reports("as-printed")
    reworded = reports("reworded", "snapshots disagree")
    assert "snapshots disagree" in reworded[2] and "snapshots disagree" not in as_printed[2]
    assert "field(s) changed" in as_printed[0] and "no snapshot yet" in as_printed[0]
    assert reworded[:2] == as_printed[:2]


def test_a_failure_without_records_is_shown_by_its_text_and_annotated_without_a_file():
    check = failed("64x64x32/sm_80", text="seed 01 criteria differ:\n2. N = 1 ...")
    report = StaticReport(checks=3, skipped=0, failed=(check,))
    (line,) = error_annotations(report)
    assert line == "::error title=64x64x32/sm_80::seed 01 criteria differ:"
    summary = render_job_summary(report, "Golden snapshots")
    assert "### 1. 64x64x32/sm_80" in summary and "seed 01 criteria differ:\n2. N = 1 ..." in summary
    assert "Every failing snapshot file" not in summary


def test_escaping_follows_the_workflow_command_rules():
    assert escape_data("50% done\r\nnext") == "50%25 done%0D%0Anext"
    assert escape_property("a: b, c%") == "a%3A b%2C c%25"
    corrupt = Mismatch("golden/f/v/sm_80.yaml", FileChange.CORRUPT, reason="not valid YAML (line 2, column 1)")
    check = CheckResult("f/v/sm_80", Status.FAILED, mismatches=(corrupt,))
    (line,) = error_annotations(StaticReport(1, 0, (check,)))
    assert line == (
        "::error file=golden/f/v/sm_80.yaml,line=1,title=f/v/sm_80::"
        "not valid YAML (line 2, column 1): golden/f/v/sm_80.yaml"
    )
    percent = CheckResult("f/v/sm_80", Status.FAILED, text="50% done")
    assert error_annotations(StaticReport(1, 0, (percent,))) == ["::error title=f/v/sm_80::50%25 done"]


def test_annotations_stop_at_githubs_limit_and_count_the_rest():
    checks = tuple(failed(f"f/v{i}/sm_80", Mismatch(f"golden/f/v{i}/sm_80.md", FileChange.TEXT)) for i in range(13))
    lines = error_annotations(StaticReport(13, 0, checks))
    assert len(lines) == MAX_ANNOTATIONS + 1
    assert lines[-1].startswith("::notice ") and "3 more changes not annotated" in lines[-1]


def test_summary_fence_survives_backticks_and_size_is_capped():
    check = failed("f/v/sm_80", Mismatch("golden/f/v/sm_80.md", FileChange.TEXT, diff=("+```` in the text",)))
    summary = render_job_summary(StaticReport(1, 0, (check,)), "Golden snapshots")
    assert "`````text\n+```` in the text\n`````" in summary
    many = tuple(
        failed(f"f{i}/v/sm_80", Mismatch(f"golden/f{i}/v/sm_80.md", FileChange.TEXT, diff=("y",) * 20))
        for i in range(60)
    )
    whole = render_job_summary(StaticReport(60, 0, many), "Golden snapshots", "golden-pending")
    capped = render_job_summary(StaticReport(60, 0, many), "Golden snapshots", "golden-pending", limit=8_000)
    assert len(whole.encode()) > 8_000 >= len(capped.encode())
    assert capped.startswith(whole[: whole.index("What this run produced")])  # the overview and command, whole
    shown = capped.count("\n### ")
    assert 0 < shown < 60 and f"{60 - shown} more changes did not fit here (f{shown}/v/sm_80" in capped
    assert "the job log and the `golden-pending` artifact of this run hold them" in capped
    assert "more files did not fit here; the `golden-pending` artifact of this run holds them all" in capped


def test_main_appends_summary_and_prints_error_annotations(tmp_path):
    missing = failed("f/v/sm_80", Mismatch("golden/f/v/sm_80.cu", FileChange.MISSING))
    pending = write_results(tmp_path / "pending", missing, CheckResult("test_ok"))
    step_summary = tmp_path / "summary.md"
    step_summary.write_text("earlier step\n")
    out = io.StringIO()
    environ = {"GITHUB_STEP_SUMMARY": str(step_summary)}
    assert main([str(pending), "--artifact", "golden-pending-shard-2"], environ, out) == 0
    assert out.getvalue() == (
        "::error file=golden/f/v/sm_80.cu,line=1,title=f/v/sm_80::missing (no snapshot committed for this case): "
        "golden/f/v/sm_80.cu%0Ato accept: nox -s regen-golden\n"
    )
    text = step_summary.read_text()
    assert text.startswith("earlier step\n## Golden snapshots: 1 of 2 checks failed")
    assert "| `f/v/sm_80` | `golden/f/v/sm_80.cu` | missing (no snapshot committed for this case) |" in text


def test_all_passed_summary_counts_the_checks(tmp_path):
    pending = write_results(tmp_path / "pending", CheckResult("test_a"), CheckResult("test_b"))
    out = io.StringIO()
    # no snapshot in the pending folder, so no identity section (test_target_identity.py covers that one)
    assert main([str(pending)], {}, out) == 0
    assert out.getvalue().strip() == "## Golden snapshots: all 2 checks passed"


@pytest.mark.parametrize(
    "content, problem",
    [
        (None, "no results; the static session stopped before running its checks"),
        ("", "holds no check; a run that checks nothing cannot pass"),
        ('{"check": "t", "status": "failed"}\n', "RESULTS.jsonl:1: not a check's result (KeyError('case'))"),
        (CheckResult("t").to_json().replace('"passed"', '"lost"') + "\n", "RESULTS.jsonl:1: not a check's result"),
    ],
)
def test_missing_broken_or_empty_results_fail(tmp_path, content, problem):
    if content is not None:
        (tmp_path / RESULTS).write_text(content)
    out = io.StringIO()
    assert main([str(tmp_path)], {}, out) == 1
    assert out.getvalue().startswith("::error title=Golden snapshots::") and problem in out.getvalue()


def test_a_summary_without_produced_files_does_not_promise_them():
    check = failed("test_no_orphans", Mismatch("golden/f/gone/sm_80.cu", FileChange.ORPHAN))
    report = StaticReport(1, 0, (check,))
    assert "What this run produced" in render_job_summary(report, "Golden snapshots")
    orphans = render_job_summary(report, "Orphan snapshots", produced=False)
    assert "produced" not in orphans.split("|")[0].replace("produce no snapshot", "")
    assert "they produce no snapshot" in orphans


def test_the_summary_counts_snapshot_files_per_kind():
    renamed = failed("f/a/sm_80", Mismatch("golden/f/a/sm_80.cu", FileChange.RENAMED, renaming=(("i_1", "i"),)))
    changed = failed(
        "f/b/sm_80",
        Mismatch("golden/f/b/sm_80.yaml", FileChange.FACTS, facts=(FactChange(("sync", "tma_loads"), "2", "1"),)),
        Mismatch("golden/f/b/sm_80.cu", FileChange.SOURCE, "CUDA", diff=("@@ -1 +1 @@",)),
    )
    summary = render_job_summary(StaticReport(2, 0, (renamed, changed)), "Golden snapshots")
    assert "Every failing snapshot file: 1 CUDA changed, 1 facts changed, 1 identifiers renamed only" in summary
    assert "| `f/a/sm_80` | `golden/f/a/sm_80.cu` | identifiers renamed only (1: i_1 -> i) |" in summary
    hip = failed("f/b/gfx942", Mismatch("golden/f/b/gfx942.hip", FileChange.SOURCE, "HIP", diff=("@@ -1 +1 @@",)))
    summary = render_job_summary(StaticReport(1, 0, (hip,)), "Golden snapshots")
    assert "Every failing snapshot file: 1 HIP changed" in summary and "CUDA changed" not in summary


def test_a_result_survives_the_results_file_as_json():
    mismatch = Mismatch("golden/f/v/sm_80.cu", FileChange.RENAMED, diff=("-a", "+b"), renaming=(("i", "i_1"),))
    facts = Mismatch("golden/f/v/sm_80.yaml", FileChange.FACTS, facts=(FactChange(("sync", 0), "1", "2", "k"),))
    result = CheckResult(
        "f/v/sm_80", Status.FAILED, ("f", "v", "sm_80"), mismatches=(mismatch, facts), accept="f/v", text="x"
    )
    assert CheckResult.from_json(result.to_json()) == result


@pytest.mark.parametrize(
    "mismatch, headline",
    [
        (
            Mismatch("golden/f/v/sm_80.yaml", FileChange.CORRUPT, reason="not valid YAML (line 2, column 1)"),
            "not valid YAML (line 2, column 1)",
        ),
        (
            Mismatch("golden/f/v/sm_80.error", FileChange.NOW_LOWERS, reason="does not lower on sm_80: a loop"),
            "now lowers, though declared not to (does not lower on sm_80: a loop)",
        ),
    ],
    ids=["corrupt", "now-lowers"],
)
def test_a_mismatchs_reason_reaches_the_summary_through_the_report(tmp_path, mismatch, headline):
    """A corrupt snapshot's headline is its reason alone, and a "now lowers" one names what was declared."""
    report = static_report(read_results(write_results(tmp_path, failed("f/v/sm_80", mismatch))))
    assert report.failed[0].mismatches == (mismatch,)
    summary = render_job_summary(report, "Golden snapshots")
    assert f"| `f/v/sm_80` | `{mismatch.path}` | {headline} |" in summary
    (annotation,) = error_annotations(report)
    assert f"::{headline}: {mismatch.path}" in annotation


def test_a_corrupt_snapshots_reason_reaches_the_summary_from_a_real_session(golden_session, tmp_path):
    golden_session("--regen", "-k", SMALL_CASE).assert_outcomes(passed=1)
    (golden_session.golden / f"{SMALL_CASE}.yaml").write_text("format: [\n")
    golden_session("-k", SMALL_CASE).assert_outcomes(failed=1)
    report = static_report(read_results(golden_session.pending))
    (check,) = report.failed
    (corrupt,) = (m for m in check.mismatches if m.kind is FileChange.CORRUPT)
    assert corrupt.reason.startswith("not valid YAML") and corrupt.headline == corrupt.reason
    summary = render_job_summary(report, "Golden snapshots")
    (entry,) = (line for line in summary.splitlines() if line.startswith("1. "))
    assert entry.endswith(f"**: {corrupt.reason}"), "the verdict's headline for the case"
    assert f"| `{SMALL_CASE}` | `golden/{SMALL_CASE}.yaml` | {corrupt.reason} |" in summary


def test_the_summary_counts_lowered_and_cached_cases_from_a_real_session(golden_session, tmp_path):
    cache = f"--lowering-cache={tmp_path / 'cache'}"
    golden_session("--regen", "-k", SMALL_CASE, cache).assert_outcomes(passed=1)
    golden_session("-k", SMALL_CASE, cache).assert_outcomes(passed=1)
    out = io.StringIO()
    assert main([str(golden_session.pending), "--no-produced-files"], {}, out) == 0
    assert "0 cases lowered, 1 from the lowering cache." in out.getvalue()
