"""The upgrade preview's classification and report, on a real case against altered snapshots."""

from __future__ import annotations

import dataclasses
import json
import re
import shutil

import pytest
from conftest import GOLDEN_TEST, REPO, SMALL_CASE, classify_case

import tilelang_golden.catalog.loading
import tilelang_golden.family
import tilelang_golden.upgrade.preview as preview_module
from tilelang_golden.catalog.cases import Case, all_cases
from tilelang_golden.catalog.loading import Registry
from tilelang_golden.static.produce.lowering import LoweringError
from tilelang_golden.static.snapshots.case_files import case_files, source_file
from tilelang_golden.static.snapshots.changes import CaseOutcome, FileChange
from tilelang_golden.static.snapshots.diff import changed_fields
from tilelang_golden.static.snapshots.results import read_results
from tilelang_golden.static.snapshots.snapshot import SnapshotStore
from tilelang_golden.targets import TARGETS
from tilelang_golden.upgrade.preview import CaseRow, Preview, render_markdown, run_preview

CASE = next(c for c in all_cases(tilelang_golden.catalog.loading.load_families()) if c.id == SMALL_CASE)


@pytest.fixture
def golden(tmp_path):
    """A golden/ holding the pinned snapshots of one case, to alter."""
    root = tmp_path / "golden"
    for name in case_files(CASE):
        target = root / name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(REPO / "golden" / name, target)
    return root


@pytest.fixture
def preview(pytester, monkeypatch):
    """run_preview over one family, the static session it runs in this process (no workers) on that family alone."""

    def run(family, golden, output, version="9.9.9", pinned="0.1.15", previewed=preview_module.TILELANG):
        registry = Registry((family,), ())
        monkeypatch.setattr(tilelang_golden.catalog.loading, "load_families", lambda *packages, **options: registry)

        def session(arguments):
            return pytester.runpytest_inprocess("-p", "tilelang_golden.static.plugin", str(GOLDEN_TEST), *arguments).ret

        return run_preview(registry, version, pinned, golden, output, previewed, session)

    return run


def row_for(golden, tmp_path, lowerings):
    return classify_case(CASE, SnapshotStore(golden), SnapshotStore(tmp_path / "out" / "golden"), lowerings)


def test_an_unchanged_case_is_identical_and_its_files_are_written_beside_golden(golden, tmp_path, lowerings):
    row = row_for(golden, tmp_path, lowerings)
    assert (row.status, row.cuda, row.fields) == (CaseOutcome.PASSED, FileChange.UNCHANGED, [])
    assert (tmp_path / "out" / "golden" / f"{SMALL_CASE}.cu").read_text() == (golden / f"{SMALL_CASE}.cu").read_text()


def test_a_renamed_local_is_identifiers_renamed_only(golden, tmp_path, lowerings):
    cuda = golden / f"{SMALL_CASE}.cu"
    cuda.write_text(re.sub(r"\bC_l\b", "accumulator", cuda.read_text()))
    row = row_for(golden, tmp_path, lowerings)
    assert (row.status, row.renamed) == (FileChange.RENAMED, 1)


def test_a_changed_statement_is_a_cuda_change_and_a_changed_fact_names_its_field(golden, tmp_path, lowerings):
    cuda = golden / f"{SMALL_CASE}.cu"
    cuda.write_text(cuda.read_text().replace("__syncthreads();", "__syncwarp();", 1))
    assert row_for(golden, tmp_path, lowerings).status == FileChange.SOURCE
    facts = golden / f"{SMALL_CASE}.yaml"
    facts.write_text(facts.read_text().replace("dynamic_shared_memory_bytes: 8192", "dynamic_shared_memory_bytes: 1"))
    row = row_for(golden, tmp_path, lowerings)
    assert (row.status, row.cuda, row.fields) == (
        FileChange.FACTS,
        FileChange.SOURCE,
        ["dynamic_shared_memory_bytes"],
    )


def test_a_machine_code_change_alone_is_a_facts_change_naming_its_fields(golden, tmp_path, lowerings):
    machine = golden / f"{SMALL_CASE}.machine.yaml"
    text = machine.read_text()
    registers = re.search(r"registers: (\d+)", text)
    machine.write_text(text.replace(registers[0], f"registers: {int(registers[1]) + 8}", 1))
    row = row_for(golden, tmp_path, lowerings)
    assert (row.status, row.cuda, row.fields) == (FileChange.FACTS, FileChange.UNCHANGED, ["registers"])


def test_a_comment_only_edit_is_classified_alike_by_the_static_check_and_the_preview(
    golden_session, tmp_path, lowerings
):
    """One engine (tilelang_golden.static.engine.check_case): the static session's result and the preview's row name one
    class."""
    golden_session("--regen", "-k", SMALL_CASE).assert_outcomes(passed=1)
    source = golden_session.golden / f"{SMALL_CASE}.cu"
    source.write_text(source.read_text().replace("{\n", "{\n  // a reviewer's note\n", 1))
    golden_session("-k", SMALL_CASE).assert_outcomes(failed=1)
    (check,) = read_results(golden_session.pending)
    (static,) = (m.kind for m in check.mismatches)
    row = row_for(golden_session.golden, tmp_path, lowerings)
    assert static is FileChange.COMMENTS
    assert (row.status, row.cuda, row.renamed) == (static, static, 0)


def test_a_case_without_snapshot_is_new_and_one_that_fails_names_its_error(golden, tmp_path, monkeypatch, lowerings):
    (golden / f"{SMALL_CASE}.cu").unlink()
    assert row_for(golden, tmp_path, lowerings).status == CaseOutcome.NEW

    def failing(case, fresh=False):
        raise LoweringError(case.id, "TileLang could not lower this variant (boom)")

    monkeypatch.setattr(lowerings, "files", failing)
    row = row_for(golden, tmp_path, lowerings)
    assert row.status == CaseOutcome.FAILED and "boom" in row.error


def test_the_report_counts_per_family_and_target_and_lists_fields_and_checks(golden, tmp_path, lowerings):
    facts = golden / f"{SMALL_CASE}.yaml"
    facts.write_text(facts.read_text().replace("dynamic_shared_memory_bytes: 8192", "dynamic_shared_memory_bytes: 1"))
    preview = Preview(
        "9.9.9", "0.1.15", [row_for(golden, tmp_path, lowerings)], ["g: 2. something: recorded holds, now fails"]
    )
    text = render_markdown(preview)
    assert text.startswith("<!-- Written by `nox -s upgrade-preview -- 9.9.9`")
    columns = [preview_module._column(status) for status in preview_module.STATUSES]
    assert columns[3:7] == ["identifiers renamed only", "declarations moved only", "CUDA/HIP changed", "facts changed"]
    counts = ["1" if status is FileChange.FACTS else "0" for status in preview_module.STATUSES]
    assert f"| gemm_num_stages/sm_90 | {' | '.join(counts)} |" in text
    assert "- `dynamic_shared_memory_bytes` in 1 case(s)" in text
    assert "- g: 2. something: recorded holds, now fails" in text
    assert "| sm_90 | CUDA | 1 | 0 | 0 | - |\n\n- none\n" in text  # its CUDA did not change
    data = json.loads(json.dumps(preview.as_dict()))
    assert data["totals"] == {"facts changed": 1} and data["fields"] == {"dynamic_shared_memory_bytes": 1}
    assert data["counts"] == {"gemm_num_stages/sm_90": {"facts changed": 1}}
    assert (data["cases"][0]["status"], data["cases"][0]["cuda"]) == ("facts changed", "identical")


def test_a_real_cuda_change_that_no_fact_explains_is_counted_per_family_and_target_and_listed(
    golden, tmp_path, lowerings
):
    cuda = golden / f"{SMALL_CASE}.cu"
    pinned = cuda.read_text()
    cuda.write_text(pinned.replace("__syncthreads();", "__syncwarp();", 1))
    unexplained = row_for(golden, tmp_path, lowerings)
    facts = golden / f"{SMALL_CASE}.yaml"
    facts.write_text(facts.read_text().replace("dynamic_shared_memory_bytes: 8192", "dynamic_shared_memory_bytes: 1"))
    explained = row_for(golden, tmp_path, lowerings)
    cuda.write_text(re.sub(r"\bC_l\b", "accumulator", pinned))
    renamed = row_for(golden, tmp_path, lowerings)
    assert renamed.cuda == FileChange.RENAMED  # renaming only is no real change, with or without a fact change
    preview = Preview("9.9.9", "0.1.15", [unexplained, explained, renamed], [])
    expected = {"cuda_changed": 2, "unexplained": 1, "share": 0.5, "cases": [SMALL_CASE]}
    assert preview.unexplained() == {"gemm_num_stages/sm_90": expected, "all": expected}
    text = render_markdown(preview)
    assert "| gemm_num_stages/sm_90 | 2 | 1 | 50% |" in text and "| all | 2 | 1 | 50% |" in text
    assert f"\n- {SMALL_CASE}\n" in text
    assert json.loads(json.dumps(preview.as_dict()))["unexplained_cuda_changes"]["all"] == expected


def test_a_family_check_whose_outcome_changed_is_listed(monkeypatch, golden, tmp_path, preview):
    import kernels.gemm_num_stages as family_module
    from tilelang_golden.family import Claim

    family = dataclasses.replace(family_module.FAMILY, variants=[CASE.variant], targets=[CASE.target])
    assert preview(family, golden, tmp_path / "same").checks == [], "the pinned TileLang gives what the family records"
    forged = [Claim(family_module.CRITERIA[2], False, "N=0: [0, 0, 1]")]
    monkeypatch.setattr(family_module, "num_stages_criteria", lambda facts: forged)
    (text,) = preview(family, golden, tmp_path / "forged").checks
    assert text.startswith("gemm_num_stages/64x64x32/sm_90: the family's checks differ")
    assert "3. N = 0: no pipeline annotation (fails: N=0: [0, 0, 1])" in text


def test_changed_fields_keep_keys_with_colons_whole_and_drop_numeric_keys():
    extern = "tirx.call_extern tl::AllReduce<4>::run"
    old = {"instructions": {extern: 2, "tl.tma_load": 1}, "loops": {"unrolled": {2: 1}}}
    new = {"instructions": {extern: 1, "tl.tma_load": 1}, "loops": {"unrolled": {2: 2}}}
    assert changed_fields(old, new) == [f"instructions.{extern}", "loops.unrolled"]


# -- the facts' coverage per target ----------------------------------------------------------------


def fake_row(target: str, cuda: FileChange | None, fields=(), family: str = "f") -> CaseRow:
    """A classified case as classify_case leaves it (its change: facts changed wins over the source's)."""
    change = None if cuda is None else FileChange.FACTS if fields else cuda
    outcome = (
        CaseOutcome.NEW
        if change is None
        else CaseOutcome.PASSED
        if change is FileChange.UNCHANGED
        else CaseOutcome.CHANGED
    )
    return CaseRow(f"{family}/v/{target}", family, target, outcome, change, cuda, list(fields))


def test_the_facts_coverage_is_reported_for_every_target_previewed():
    rows = [
        fake_row("sm_80", FileChange.SOURCE, ["sync.cp_async_wait"]),  # explained
        fake_row("sm_80", FileChange.SOURCE, family="g"),  # not explained
        fake_row("sm_90", FileChange.UNCHANGED),  # compared, nothing changed: no share
        fake_row("gfx942", FileChange.SOURCE),  # a HIP source change no fact explains
        fake_row("gfx942", FileChange.RENAMED),  # renaming only is no real change
        fake_row("sm_120", None),  # no snapshot yet: nothing compared
    ]
    preview = Preview("9.9.9", "0.1.15", rows, [])
    by_target = preview.unexplained_by_target()
    assert list(by_target) == ["sm_80", "sm_90", "sm_120", "gfx942"], "the project's order, every target seen"
    assert by_target["sm_80"] == {
        "source": "CUDA",
        "compared": 2,
        "cuda_changed": 2,
        "unexplained": 1,
        "share": 0.5,
        "cases": ["g/v/sm_80"],
    }
    assert by_target["gfx942"] == {
        "source": "HIP",
        "compared": 2,
        "cuda_changed": 1,
        "unexplained": 1,
        "share": 1.0,
        "cases": ["f/v/gfx942"],
    }
    assert (by_target["sm_90"]["compared"], by_target["sm_90"]["share"]) == (1, None)
    assert (by_target["sm_120"]["compared"], by_target["sm_120"]["share"]) == (0, None)
    assert preview.unexplained()["all"]["share"] == round(2 / 3, 3), "the overall share is still given"
    text = render_markdown(preview)
    section = text[text.index("## Real source changes that no fact explains") : text.index("## Family checks")]
    table = [line for line in section.splitlines() if line.startswith("| ") and "/" not in line.split("|")[1]]
    assert table == [
        "| target | source | compared | CUDA/HIP changed | no fact changed | share |",
        "| sm_80 | CUDA | 2 | 2 | 1 | 50% |",
        "| sm_90 | CUDA | 1 | 0 | 0 | - |",
        "| sm_120 | CUDA | 0 | 0 | 0 | - |",
        "| gfx942 | HIP | 2 | 1 | 1 | 100% |",
        "| all | 3 | 2 | 67% |",
    ]
    assert "| f/sm_80 | 1 | 0 | 0% |" in section and "| g/sm_80 | 1 | 1 | 100% |" in section
    assert "\n- g/v/sm_80\n- f/v/gfx942\n" in section
    data = json.loads(json.dumps(preview.as_dict()))
    assert data["unexplained_by_target"]["gfx942"]["share"] == 1.0
    assert data["unexplained_by_target"]["sm_90"]["share"] is None


def test_a_hip_target_is_compared_through_its_hip_snapshot(tmp_path, lowerings):
    case = Case(CASE.family, CASE.variant, "gfx942")
    assert source_file(case).endswith("/gfx942.hip")
    produced = lowerings.files(case)
    golden = SnapshotStore(tmp_path / "golden")
    for path, text in produced.items():
        golden.write(path, text)
    row = classify_case(case, golden, SnapshotStore(tmp_path / "out" / "golden"), lowerings)
    assert (row.target, row.status, row.cuda) == ("gfx942", CaseOutcome.PASSED, FileChange.UNCHANGED)
    source = produced[source_file(case)]
    assert "__syncthreads();" in source
    golden.write(source_file(case), source.replace("__syncthreads();", "__builtin_amdgcn_s_barrier();", 1))
    row = classify_case(case, golden, SnapshotStore(tmp_path / "out" / "golden"), lowerings)
    assert (row.status, row.cuda, row.fields) == (FileChange.SOURCE, FileChange.SOURCE, [])
    preview = Preview("9.9.9", "0.1.15", [row], [])
    assert preview.unexplained_by_target()["gfx942"]["share"] == 1.0
    data = json.loads(json.dumps(preview.as_dict()))
    assert (data["cases"][0]["status"], data["cases"][0]["cuda"]) == ("HIP changed", "HIP changed")
    assert data["totals"] == {"HIP changed": 1} and data["counts"] == {"gemm_num_stages/gfx942": {"HIP changed": 1}}
    text = render_markdown(preview)
    assert "1 cases: 1 HIP changed." in text and f"| {case.id} | HIP changed | HIP changed |" in text
    assert "CUDA changed" not in text.replace("CUDA/HIP changed", ""), "a HIP source's change is named HIP everywhere"


def test_a_preview_writes_its_reports_and_the_static_runs_results_and_groups_changes_as_the_verdict(
    golden, tmp_path, preview
):
    """run_preview over one case whose facts were altered: its row, the grouped change read from its result, and
    that result in the output's RESULTS.jsonl as a static run writes it."""
    facts = golden / f"{SMALL_CASE}.yaml"
    facts.write_text(facts.read_text().replace("dynamic_shared_memory_bytes: 8192", "dynamic_shared_memory_bytes: 1"))
    family = dataclasses.replace(CASE.family, variants=[CASE.variant], targets=[CASE.target])
    object.__setattr__(family, "file", CASE.family.file)
    output = tmp_path / "preview"
    (row,) = preview(family, golden, output).rows
    assert (row.status, row.fields) == (FileChange.FACTS, ["dynamic_shared_memory_bytes"])
    result = next(r for r in read_results(output) if r.check == SMALL_CASE)  # with the session's other checks'
    assert result.mismatches == row.result.mismatches
    assert (output / "golden" / f"{SMALL_CASE}.yaml").is_file() and not (output / "golden" / "RESULTS.jsonl").exists()
    assert "shared memory (dynamic_shared_memory_bytes 1 -> 8192" in (output / "report.md").read_text()
    assert json.loads((output / "report.json").read_text())["cases"][0]["status"] == "facts changed"


def test_a_preview_lists_the_regressions_first_by_class_and_target(golden, tmp_path, preview):
    """The snapshot claims more resident warps per SM than this TileLang's kernel reaches: the preview's report opens
    with that regression, counted on its target and listed with its case, and report.json holds it."""
    machine = golden / f"{SMALL_CASE}.machine.yaml"
    text = machine.read_text()
    warps, blocks, threads = (
        int(re.search(rf"{field}: (\d+)", text)[1]) for field in ("warps_per_sm", "blocks_per_sm", "threads")
    )
    machine.write_text(text.replace(f"warps_per_sm: {warps}", f"warps_per_sm: {warps + 4}", 1))
    family = dataclasses.replace(CASE.family, variants=[CASE.variant], targets=[CASE.target])
    output = tmp_path / "preview"
    preview(family, golden, output)
    report = (output / "report.md").read_text()
    assert report.index("## Regressions: 1 case(s)") < report.index("| family / target |")
    row = next(line for line in report.splitlines() if line.startswith("| occupancy: "))
    assert row.strip("| ").split(" | ")[1:] == ["1" if target == CASE.target else "0" for target in TARGETS]
    occupancy = f"({blocks} blocks of {threads})"
    change = f"gemm_kernel: {warps + 4} warps/SM {occupancy} -> {warps} warps/SM {occupancy}"
    assert f"  - {SMALL_CASE}: {change}" in report
    listed = json.loads((output / "report.json").read_text())["regressions"]
    assert list(listed) == ["occupancy"] and listed["occupancy"]["targets"] == {CASE.target: {SMALL_CASE: [change]}}


def test_a_preview_without_regressions_says_so(golden, tmp_path, preview):
    family = dataclasses.replace(CASE.family, variants=[CASE.variant], targets=[CASE.target])
    preview(family, golden, tmp_path)
    assert "No regression: no change makes a kernel worse" in (tmp_path / "report.md").read_text()


def test_a_cuda_preview_names_the_two_releases_and_reports_the_machine_facts_the_compiler_changes(
    golden, tmp_path, preview
):
    """`--cuda`: the snapshots' release is read from their machine facts; a snapshot whose registers another
    compiler made shows as a machine-facts change of the case, and the report says how to make it again."""
    machine = golden / f"{SMALL_CASE}.machine.yaml"
    old = machine.read_text()
    registers = re.search(r"registers: (\d+)", old)
    assert registers and "cuda: 13.0.88" in old
    machine.write_text(old.replace("cuda: 13.0.88", "cuda: 12.9.41").replace(registers[0], "registers: 1", 1))
    release = preview_module.snapshot_cuda_release(SnapshotStore(golden))
    assert release == "12.9.41"
    family = dataclasses.replace(CASE.family, variants=[CASE.variant], targets=[CASE.target])
    object.__setattr__(family, "file", CASE.family.file)
    output = tmp_path / "preview"
    (row,) = preview(family, golden, output, "13.0.88", release, "CUDA").rows
    assert row.status == FileChange.FACTS and "registers" in row.fields and "toolchain.cuda" in row.fields
    text = (output / "report.md").read_text()
    assert "`nox -s upgrade-preview -- --cuda 13.0.88`" in text.splitlines()[0]
    assert text.splitlines()[1] == "# CUDA 13.0.88 against the snapshots of 12.9.41"
