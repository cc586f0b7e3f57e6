"""Job summary and annotations from the static session's JUnit XML (harness/ci/job_summary.py)."""

from __future__ import annotations

import io
import xml.etree.ElementTree as ElementTree
from pathlib import Path

import pytest
from conftest import SMALL_CASE
from script_runner import load_script

from harness.ci import job_summary as ci_summary
from harness.ci.job_summary import (
    MAX_ERROR_ANNOTATIONS,
    error_annotations,
    escape_data,
    escape_property,
    parse_failure,
    read_junit,
    render_job_summary,
)

main = load_script("ci_summary").main


def write_junit(path: Path, cases: dict[str, str | None], traceback: bool = False) -> Path:
    """A report shaped like pytest's: name -> failure text (None: passed)."""
    root = ElementTree.Element("testsuites")
    suite = ElementTree.SubElement(root, "testsuite", name="pytest")
    for name, failure in cases.items():
        case = ElementTree.SubElement(suite, "testcase", classname="scripts.golden_test", name=name)
        if failure is not None:
            short = failure if not traceback else f"AssertionError: {failure}"
            text = failure if not traceback else "\n".join(["> ???"] + [f"E   {line}" for line in short.splitlines()])
            ElementTree.SubElement(case, "failure", message=short).text = text
    ElementTree.ElementTree(root).write(path)
    return path


def test_real_static_failure_becomes_annotations_and_summary(golden_session, tmp_path):
    """The harness's own messages, as the static session writes them into JUnit XML."""
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
    junit = tmp_path / "static-junit.xml"
    result = golden_session("-k", f"{SMALL_CASE} or no_orphans", f"--junitxml={junit}")
    result.assert_outcomes(failed=2)

    report = read_junit(junit)
    assert (report.checks, len(report.failed)) == (2, 2)
    case, orphans = sorted(report.failed, key=lambda check: check.name)
    assert case.label == SMALL_CASE
    assert case.accept_command == f'nox -s regen-golden -- -k "{SMALL_CASE}"'
    by_path = {problem.path: problem for problem in case.problems}
    assert set(by_path) == {f"golden/{SMALL_CASE}.cu", f"golden/{SMALL_CASE}.yaml"}
    assert by_path[f"golden/{SMALL_CASE}.yaml"].headline == "1 field(s) changed"
    assert by_path[f"golden/{SMALL_CASE}.yaml"].details == ("dynamic_shared_memory_bytes: 1234 -> 8192",)
    headline = by_path[f"golden/{SMALL_CASE}.cu"].headline
    assert headline == "CUDA changed (first with local names canonicalized, then as is)"
    assert any(line.startswith("-") and "__syncwarp();" in line for line in by_path[f"golden/{SMALL_CASE}.cu"].details)
    assert [problem.path for problem in orphans.problems] == ["golden/gemm_num_stages/retired/sm_80.yaml"]
    assert orphans.problems[0].headline.startswith("snapshots that no registered variant produces")

    lines = error_annotations(report)
    assert len(lines) == 3 and all(line.startswith("::error file=golden/") for line in lines)
    yaml_line = next(line for line in lines if f"{SMALL_CASE}.yaml" in line)
    assert "dynamic_shared_memory_bytes: 1234 -> 8192%0Ato accept these changes: nox -s regen-golden" in yaml_line

    summary = render_job_summary(report, "Golden snapshots", "golden-pending-shard-1")
    assert summary.startswith("## Golden snapshots: 2 of 2 checks failed")
    assert f"| `{SMALL_CASE}` | `golden/{SMALL_CASE}.yaml` | 1 field(s) changed |" in summary
    assert "  dynamic_shared_memory_bytes: 1234 -> 8192" in summary
    assert "`golden-pending-shard-1`" in summary


def test_traceback_failures_are_read_without_pytest_markers(tmp_path):
    failure = "snapshots that no registered variant produces:\n    golden/f/v/sm_80.yaml\n    golden/f/v/sm_90.cu"
    report = read_junit(write_junit(tmp_path / "j.xml", {"test_no_orphans": failure}, traceback=True))
    (check,) = report.failed
    assert [p.path for p in check.problems] == ["golden/f/v/sm_80.yaml", "golden/f/v/sm_90.cu"]
    assert {p.headline for p in check.problems} == {"snapshots that no registered variant produces"}


def test_failure_without_a_snapshot_file_is_annotated_without_one():
    check = parse_failure("test_num_stages_criteria[64x64x32/sm_80]", "seed 01 criteria differ:\n2. N = 1 ...")
    assert check.problems == () and check.accept_command is None
    report = ci_summary.StaticReport(checks=3, skipped=0, failed=(check,))
    (line,) = error_annotations(report)
    assert line == "::error title=64x64x32/sm_80::seed 01 criteria differ:%0A2. N = 1 ..."
    assert "| `64x64x32/sm_80` |  | see below |" in render_job_summary(report, "Golden snapshots")


def test_escaping_follows_the_workflow_command_rules():
    assert escape_data("50% done\r\nnext") == "50%25 done%0D%0Anext"
    assert escape_property("a: b, c%") == "a%3A b%2C c%25"
    check = parse_failure("test_case[f/v/sm_80]", "golden/f/v/sm_80.yaml: not valid YAML (line 2, column 1)\n  50%")
    (line,) = error_annotations(ci_summary.StaticReport(1, 0, (check,)))
    assert (
        line
        == "::error file=golden/f/v/sm_80.yaml,line=1,title=f/v/sm_80%3A not valid YAML (line 2%2C column 1)::50%25"
    )


def test_annotations_stop_at_githubs_limit_and_count_the_rest():
    failures = {f"test_case[f/v{i}/sm_80]": f"golden/f/v{i}/sm_80.cu: text differs" for i in range(13)}
    checks = tuple(parse_failure(name, text) for name, text in failures.items())
    lines = error_annotations(ci_summary.StaticReport(13, 0, checks))
    assert len(lines) == MAX_ERROR_ANNOTATIONS + 1
    assert lines[-1].startswith("::notice ") and "3 more failing snapshot(s)" in lines[-1]


def test_summary_fence_survives_backticks_and_size_is_capped(monkeypatch):
    check = parse_failure("test_case[f/v/sm_80]", "golden/f/v/sm_80.cu: text differs\n  +```` in the code")
    summary = render_job_summary(ci_summary.StaticReport(1, 0, (check,)), "Golden snapshots")
    assert "`````text\n" in summary and summary.rstrip().endswith("`````")
    monkeypatch.setattr(ci_summary, "MAX_SUMMARY_BYTES", 600)
    many = tuple(
        parse_failure(f"test_case[f/v{i}/sm_80]", "golden/x.cu: text differs\n" + "  y\n" * 20) for i in range(5)
    )
    capped = render_job_summary(ci_summary.StaticReport(5, 0, many), "Golden snapshots")
    assert len(capped.encode()) < 1200 and "did not fit in the summary" in capped and "f/v4/sm_80" in capped


def test_main_appends_summary_and_prints_error_annotations(tmp_path):
    junit = write_junit(tmp_path / "j.xml", {"test_case[f/v/sm_80]": "golden/f/v/sm_80.cu: missing", "test_ok": None})
    step_summary = tmp_path / "summary.md"
    step_summary.write_text("earlier step\n")
    out = io.StringIO()
    assert (
        main([str(junit), "--artifact", "golden-pending-shard-2"], {"GITHUB_STEP_SUMMARY": str(step_summary)}, out) == 0
    )
    assert (
        out.getvalue()
        == "::error file=golden/f/v/sm_80.cu,line=1,title=f/v/sm_80%3A missing::golden/f/v/sm_80.cu: missing\n"
    )
    text = step_summary.read_text()
    assert text.startswith("earlier step\n## Golden snapshots: 1 of 2 checks failed")


def test_all_passed_summary_counts_the_checks(tmp_path):
    junit = write_junit(tmp_path / "j.xml", {"test_a": None, "test_b": None})
    out = io.StringIO()
    assert main([str(junit)], {}, out) == 0
    assert out.getvalue().strip() == "## Golden snapshots: all 2 checks passed"


@pytest.mark.parametrize(
    "content, problem",
    [
        (None, "no JUnit report"),
        ("<testsuites><testsuite", "not valid JUnit XML"),
        ("<testsuites><testsuite name='pytest'/></testsuites>", "holds no test case"),
    ],
)
def test_missing_broken_or_empty_report_fails(tmp_path, content, problem):
    junit = tmp_path / "j.xml"
    if content is not None:
        junit.write_text(content)
    out = io.StringIO()
    assert main([str(junit)], {}, out) == 1
    assert out.getvalue().startswith("::error title=Golden snapshots::") and problem in out.getvalue()


def test_a_summary_without_produced_files_does_not_promise_them():
    check = parse_failure(
        "test_no_orphans", "golden/f/gone/sm_80.cu\nto delete them: an unfiltered `nox -s regen-golden`"
    )
    report = ci_summary.StaticReport(1, 0, (check,))
    assert "What this run produced" in render_job_summary(report, "Golden snapshots")
    orphans = render_job_summary(report, "Orphan snapshots", produced=False)
    assert "produced" not in orphans.split("|")[0].replace("produce no snapshot", "")
    assert "they produce no snapshot" in orphans


def test_the_summary_counts_snapshot_files_per_class():
    renamed = parse_failure("test_case[f/a/sm_80]", "golden/f/a/sm_80.cu: identifiers renamed only (1: i_1 -> i)")
    changed = parse_failure(
        "test_case[f/b/sm_80]",
        "golden/f/b/sm_80.yaml: 1 field(s) changed\n  sync.tma_loads: 2 -> 1\n"
        "golden/f/b/sm_80.cu: CUDA changed (first with local names canonicalized, then as is)\n  @@ -1 +1 @@",
    )
    summary = render_job_summary(ci_summary.StaticReport(2, 0, (renamed, changed)), "Golden snapshots")
    assert "Snapshot files by class: 1 CUDA changed, 1 facts changed, 1 identifiers renamed only." in summary
