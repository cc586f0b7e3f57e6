"""The gate and the reports of a GPU run, built from fake results (no GPU)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import gpu_fakes as fake
import pytest

from harness.baseline import render_baseline
from harness.gpu_check import compare_with_baseline
from harness.gpu_report import PLOT, REPORT, SUMMARY, annotations, render_summary, report_data, write_reports
from harness.gpu_results import DOES_NOT_FIT, FAIL, PASS

V0 = fake.variant("gemm_relu_schedules", "v0_baseline", "matmul_relu")
TOO_BIG = fake.sweep_variant(6, (128, 256, 64))


def sweep_results():
    curve = {0: 4.6, 1: 7.5, 2: 3.9, 3: 3.2, 4: 2.6, 6: 2.6}
    return [
        fake.result(fake.sweep_variant(n, (128, 128, 32)), 16384 * max(n, 1), (ms, ms, ms)) for n, ms in curve.items()
    ]


def full_run():
    results = [fake.result(V0, 49152, reference_ms=1.7), *sweep_results(), fake.result(TOO_BIG, 294912)]
    return fake.run(results, {"matmul": 1.0, "matmul_relu": 1.7})


def test_a_variant_that_does_not_fit_is_listed_not_passed_and_not_failed():
    run = full_run()
    too_big = run.variants[-1]
    assert too_big.status == DOES_NOT_FIT and too_big.numerics is None and too_big.timing is None
    assert run.passed, "not fitting does not fail the gate"
    note = "does not fit on this GPU (needs 294912 bytes of shared memory per block, device allows 232448)"
    assert f"**{TOO_BIG.key} {note}**" in render_summary(run)
    data = report_data(run)
    assert data["does_not_fit"] == {TOO_BIG.key: note}
    assert data["counts"] == {PASS: 7, FAIL: 0, DOES_NOT_FIT: 1}
    assert any(note in w for w in run.warnings())


def test_static_shared_memory_counts_towards_fitting():
    almost = fake.result(fake.variant("f", "edge"), fake.LIMIT)
    assert almost.fits
    almost.compiled.static_shared_memory_bytes = 1024
    assert not almost.fits and "needs 233472 bytes" in almost.fit_note()


def test_a_numeric_failure_fails_the_gate_and_is_reported():
    run = fake.run([fake.result(V0, 49152), fake.result(fake.variant("f", "bad"), 1024, numerics_ok=False)])
    assert not run.passed and [v.key for v in run.failures] == ["f/bad"]
    summary = render_summary(run)
    assert (
        "### Failures" in summary
        and "- f/bad: seed 22: 7 elements outside rtol=atol=0.01 (max abs error 3.5)" in summary
    )
    assert report_data(run)["failures"] == {"f/bad": ["seed 22: 7 elements outside rtol=atol=0.01 (max abs error 3.5)"]}


def test_nothing_checked_never_passes():
    assert not fake.run([fake.result(TOO_BIG, 294912)]).passed
    assert not fake.run([]).passed


def test_a_fitting_variant_that_was_never_checked_fails():
    unchecked = fake.result(V0, 49152)
    unchecked.numerics = None
    assert unchecked.status == FAIL


def test_summary_tables_and_sweep():
    summary = render_summary(full_run())
    assert "| gemm_relu_schedules/v0_baseline | pass | 2.000 | 2.0% | 550 | 0.85 |  | 49152 | 168 |" in summary
    assert "| torch.relu(torch.matmul(A, B)) | 1.700 | 2.0% | 647 |" in summary
    assert "| 128x128x32 | 4 | 2.600 | 0.0% | 64 | knee |" in summary
    assert "| 128x256x64 | 6 | — | — | 288 | does not fit |" in summary
    assert "- 128x128x32: latency stops improving after num_stages=4 (2.600 ms)" in summary
    assert "- fastest: gemm_relu_schedules/v0_baseline, 0.85x the speed of its reference (matmul_relu)" in summary
    assert f"]({PLOT})" in summary and f"]({PLOT})" not in render_summary(full_run(), plot_name=None)


def test_baseline_verdicts_reach_variants_and_summary(tmp_path):
    run = full_run()
    recorded = {v.key: v.ratio for v in run.variants if v.ratio is not None}
    recorded[V0.key] = recorded[V0.key] * 2  # this run is 50 % worse than the baseline for v0
    recorded["gemm_num_stages/ns2_128x128x32"] *= 1.15  # and 13 % worse here
    from harness.baseline import baseline_key, baseline_path

    key = baseline_key(run.device.name, run.device.versions, run.shape)
    baseline_path(run.device.name, tmp_path).write_text(render_baseline(key, recorded, run.timer))
    asked = []
    run.remeasure = lambda keys: asked.append(list(keys)) or {k: recorded[k] * 0.5 for k in keys}
    comparison = compare_with_baseline(run, tmp_path)
    assert asked == [[V0.key]]
    assert comparison.status == "compared"
    v0, ns2 = run.variants[0], run.variants[3]
    assert v0.status == FAIL and ns2.status == PASS and not run.passed
    summary = render_summary(run)
    assert "| fail (-50%) |" in summary and "| warn (-13%) |" in summary
    assert "### Timing warnings" in summary and "gemm_num_stages/ns2_128x128x32: 13% worse" in summary


def test_other_key_in_baseline_is_reported_not_compared(tmp_path):
    run = full_run()
    from harness.baseline import baseline_key, baseline_path

    key = {**baseline_key(run.device.name, run.device.versions, run.shape), "torch": "2.9.0"}
    baseline_path(run.device.name, tmp_path).write_text(render_baseline(key, {V0.key: 100.0}, run.timer))
    comparison = compare_with_baseline(run, tmp_path)
    assert comparison.status == "key mismatch" and run.passed
    assert all(v.verdict is None for v in run.variants)
    assert "timings are reported only" in render_summary(run)


def test_write_reports_fills_the_folder_the_step_summary_and_annotations(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # as in `nox -s tests`, which has no matplotlib
    run = full_run()
    step_summary = tmp_path / "step_summary.md"
    step_summary.write_text("earlier step\n")
    logged: list[str] = []
    environ = {"GITHUB_STEP_SUMMARY": str(step_summary), "GITHUB_ACTIONS": "true"}
    written = write_reports(run, tmp_path / "out", environ, logged.append)
    assert [p.name for p in written] == [REPORT, SUMMARY]
    assert any(line.startswith("no plot:") for line in logged)
    assert json.loads((tmp_path / "out" / REPORT).read_text())["passed"] is True
    assert f"]({PLOT})" not in (tmp_path / "out" / SUMMARY).read_text(), "no link to a plot that was not drawn"
    appended = step_summary.read_text()
    assert appended.startswith("earlier step\n## GPU check passed on NVIDIA H200 (sm_90)")
    assert f"]({PLOT})" not in appended
    assert f"::warning title=gpu check::{TOO_BIG.key}: does not fit on this GPU" in "\n".join(logged)


def test_the_plot_is_a_png_linked_from_the_summary(tmp_path):
    pytest.importorskip("matplotlib", reason="the plot needs requirements-gpu.txt")
    written = write_reports(full_run(), tmp_path, {}, lambda line: None)
    assert [p.name for p in written] == [REPORT, SUMMARY, PLOT]
    assert (tmp_path / PLOT).read_bytes().startswith(b"\x89PNG")
    assert f"]({PLOT})" in (tmp_path / SUMMARY).read_text()


def test_no_annotations_outside_actions(tmp_path):
    logged: list[str] = []
    write_reports(full_run(), tmp_path, {}, logged.append)
    assert not any(line.startswith("::") for line in logged)


def test_annotations_for_failures_and_missing_baseline():
    run = fake.run([fake.result(fake.variant("f", "bad"), 1024, numerics_ok=False)])
    from harness.baseline import compare

    run.comparison = compare(None, Path("golden/timing/nvidia-h200.yaml"), {"gpu": "NVIDIA H200"}, {}, lambda k: {})
    lines = annotations(run)
    assert lines[0].startswith("::error title=gpu check f/bad::seed 22: 7 elements")
    assert lines[-1].startswith("::notice title=gpu timing baseline::no timing baseline for NVIDIA H200")


def test_a_corrupt_baseline_fails_the_run_naming_the_file(tmp_path):
    run = full_run()
    from harness.baseline import baseline_path

    path = baseline_path(run.device.name, tmp_path)
    path.write_text("format: [")
    comparison = compare_with_baseline(run, tmp_path)
    assert comparison.status == "corrupt" and str(path) in comparison.message
    assert not run.passed
    assert any(line.startswith("::error title=gpu timing baseline::") for line in annotations(run))
