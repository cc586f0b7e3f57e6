"""The gate and the reports of a GPU run, built from fake results (no GPU)."""

from __future__ import annotations

import dataclasses
import json
import sys
from pathlib import Path

import gpu_fakes as fake
import pytest

from tilelang_golden.family import Sweep, Variant, Work
from tilelang_golden.gpu.baseline_use import compare_with_baseline
from tilelang_golden.gpu.gate.baseline_file import baseline_key, baseline_path, render_baseline
from tilelang_golden.gpu.gate.gate import DOES_NOT_FIT, PASS
from tilelang_golden.gpu.gate.numerics_gate import THRESHOLDS, NumericsResult, Output, OutputCheck, SeedCheck
from tilelang_golden.gpu.gate.timing_gate import FAIL, FAIL_SLOWER, WARN_SLOWER, compare_ratios
from tilelang_golden.gpu.measure.sweep import conclusions
from tilelang_golden.gpu.report.report import (
    MARKDOWN_HEADER,
    NOT_RUN,
    REPORT,
    REPORT_FORMAT,
    SUMMARY,
    plot_name,
    render_markdown,
    report_data,
    workflow_commands,
    write_reports,
)
from tilelang_golden.gpu.report.results import VariantFailure, reference_name
from tilelang_golden.gpu.run.worker import RAISED

V0 = fake.V0
TOO_BIG = fake.sweep_case(6, (128, 256, 64))
MATMUL = reference_name(fake.sweep_case(0, (128, 128, 32)))
MATMUL_RELU = reference_name(V0)
PLOT = plot_name("gemm_num_stages")
FAILED_SEED = "seed 22: 7 elements outside atol=0.01, rtol=0.01 (0 allowed; max abs error 3.5)"


def sweep_results(gpu=None):
    curve = {0: 4.6, 1: 7.5, 2: 3.9, 3: 3.2, 4: 2.6, 6: 2.6}
    return [
        fake.result(fake.sweep_case(n, (128, 128, 32)), 16384 * max(n, 1), (ms, ms, ms), gpu=gpu)
        for n, ms in curve.items()
    ]


def full_run(gpu=None, **fields):
    results = [fake.result(V0, 49152, reference_ms=1.7, gpu=gpu), *sweep_results(gpu), fake.result(TOO_BIG, 294912)]
    return fake.run(results, {MATMUL: 1.0, MATMUL_RELU: 1.7}, gpu, **fields)


def block_k_run():
    """A second family with a sweep (along block_K, a series per block_M), beside seed 01's."""
    variants = [fake.variant(f"m{m}_k{k}", block_M=m, block_K=k) for m in (64, 128) for k in (32, 64)]
    family = fake.gemm_family(
        "gemm_block_k", variants, sweep=Sweep(axis="block_K", series=lambda p: f"BM={p['block_M']}")
    )
    timed = [fake.result(fake.case(family, v.name), 512 * v.params["block_K"], (1.5, 1.5, 1.5)) for v in variants]
    return fake.run([*sweep_results(), *timed])


def test_reference_name_is_the_op_and_its_problem():
    assert MATMUL_RELU == "gemm_relu_schedules: torch.relu(torch.matmul(A, B)) [M=8192 N=8192 K=8192]"
    assert MATMUL == "gemm_num_stages: torch.matmul(A, B) [M=8192 N=8192 K=8192]"
    labelled = fake.gemm_family("g", [fake.variant("v", block_M=64)], speed_reference_label="mm(tile={block_M})")
    assert reference_name(fake.case(labelled, "v")) == "g: mm(tile=64) [M=8192 N=8192 K=8192]"
    smaller = fake.gemm_family("g", [Variant("half", kernel=lambda **_: None, shape={"K": 4096})])
    assert reference_name(fake.case(smaller, "half")) == "g: torch.matmul(A, B) [M=8192 N=8192 K=4096]"


def test_a_variant_that_does_not_fit_is_listed_not_passed_and_not_failed():
    run = full_run()
    too_big = run.variants[-1]
    assert run.verdict(too_big).status == DOES_NOT_FIT and too_big.numerics is None and too_big.timing is None
    assert run.passed, "not fitting does not fail the gate"
    note = "does not fit on this GPU (needs 294912 bytes of shared memory per block, device allows 232448)"
    assert f"**{TOO_BIG.key} {note}**" in render_markdown(run)
    data = report_data(run)
    assert data["does_not_fit"] == {TOO_BIG.key: note}
    assert data["counts"] == {PASS: 7, FAIL: 0, DOES_NOT_FIT: 1, NOT_RUN: 0}
    assert any(note in w for w in run.warnings())


def test_static_shared_memory_counts_towards_fitting():
    assert fake.result(fake.single_case("edge"), fake.LIMIT).fits
    over = fake.result(fake.single_case("edge"), fake.LIMIT, static_shared_memory_bytes=1024)
    assert not over.fits and "needs 233472 bytes" in over.fit_note()


def test_a_numeric_failure_fails_the_gate_and_is_reported():
    run = fake.run([fake.result(V0, 49152), fake.result(fake.single_case("bad"), 1024, numerics_ok=False)])
    assert not run.passed and [v.key for v in run.failures] == ["f/bad"]
    summary = render_markdown(run)
    assert "### Failures" in summary and f"- f/bad: {FAILED_SEED}" in summary
    assert report_data(run)["failures"] == {"f/bad": [FAILED_SEED]}


def test_nothing_checked_never_passes():
    assert not fake.run([fake.result(TOO_BIG, 294912)]).passed
    assert not fake.run([]).passed


def test_a_fitting_variant_that_was_never_checked_fails():
    unchecked = dataclasses.replace(fake.result(V0, 49152, rounds_ms=None), numerics=None)
    run = fake.run([unchecked])
    assert run.verdict(unchecked).status == FAIL and not run.passed


def test_markdown_opens_with_its_header_then_the_verdict():
    lines = render_markdown(full_run()).splitlines()
    assert lines[0] == MARKDOWN_HEADER and lines[0].startswith("<!-- Written by ") and lines[0].endswith("-->")
    assert lines[1] == "## GPU check passed on NVIDIA H200 (sm_90)"


def test_summary_tables_and_sweep():
    summary = render_markdown(full_run(), [PLOT])
    # 2 x 8192^3 flops and 3 x 8192^2 fp16 elements moved in 2 ms: 549.8 TFLOP/s, 201 GB/s, 56 % of 989 TFLOP/s.
    v0_row = "| gemm_relu_schedules/v0_baseline | pass | 2.000 | 2.0% | 549.8 | 201 | 56% (compute) | 0.85 |  | 49152 |"
    assert f"{v0_row} 168 |" in summary
    # The same work in 1.7 ms.
    assert f"| {MATMUL_RELU} | 1.700 | 2.0% | 646.8 | 237 | 65% (compute) |" in summary
    assert "Fraction of peak: of 989 TFLOP/s (dense fp16/bf16) for compute-bound work, of 4.8 TB/s" in summary
    assert "### gemm_num_stages: latency and shared memory against num_stages" in summary
    assert "| 128x128x32 | 4 | 2.600 | 0.0% | 64 | knee |" in summary
    assert "| 128x256x64 | 6 | — | — | 288 | does not fit |" in summary
    assert "- gemm_num_stages 128x128x32: latency stops improving after num_stages=4 (2.600 ms)" in summary
    assert f"- fastest: gemm_relu_schedules/v0_baseline, 0.85x the speed of its reference ({MATMUL_RELU})" in summary
    assert f"]({PLOT})" in summary
    assert "### gemm_relu_schedules" not in summary, "a family without a sweep has no sweep section"


def test_no_plot_link_without_the_plot():
    run = full_run()
    assert f"]({PLOT})" not in render_markdown(run)
    assert f"]({PLOT})" not in render_markdown(run, [plot_name("another_family")])


def test_a_memory_bound_family_is_judged_against_bandwidth():
    elementwise = fake.single_case(
        "relu", "elementwise", work=lambda p: Work(flops=p["M"] * p["N"], bytes=4 * p["M"] * p["N"])
    )
    summary = render_markdown(fake.run([fake.result(elementwise, 0)]))
    # 4 x 8192^2 bytes in 2 ms: 134 GB/s, 3 % of 4800 GB/s.
    assert "| elementwise/relu | pass | 2.000 | 2.0% | 0.0 | 134 | 3% (memory) |" in summary


def test_a_gpu_without_known_peaks_gets_rates_without_fractions():
    run = full_run(gpu=fake.device("Some Future GPU"))
    summary = render_markdown(run)
    assert "No datasheet peaks known for Some Future GPU: rates without fractions of peak." in summary
    assert "| gemm_relu_schedules/v0_baseline | pass | 2.000 | 2.0% | 549.8 | 201 | — | 0.85 |" in summary
    assert f"| {MATMUL_RELU} | 1.700 | 2.0% | 646.8 | 237 | — |" in summary
    v0 = report_data(run)["variants"][0]["throughput"]
    assert v0["bound"] is None and v0["fraction_of_peak"] is None and v0["tflops"] == pytest.approx(549.76, abs=0.01)


def test_report_data_holds_throughputs_references_and_the_sweeps_of_every_family():
    run = block_k_run()
    data = report_data(run)
    assert data["format"] == REPORT_FORMAT == 8 and "num_stages_sweep" not in data
    assert [(c["family"], c["series"]) for c in data["sweeps"]["curves"]] == [
        ("gemm_num_stages", "128x128x32"),
        ("gemm_block_k", "BM=64"),
        ("gemm_block_k", "BM=128"),
    ]
    assert data["sweeps"]["conclusions"] == conclusions(run.sweeps)
    assert "gemm_block_k: same knee for every series: yes (BM=64: 32, BM=128: 32)" in data["sweeps"]["conclusions"]
    # one timed reference per family: two families' equally labelled ops are not assumed to be one
    assert sorted(data["references"]) == sorted({v["reference"] for v in data["variants"] if v["timing"]})
    assert MATMUL in data["references"] and data["references"][MATMUL]["throughput"]["bound"] == "compute"
    variant = data["variants"][0]
    assert variant["reference"] == MATMUL and variant["throughput"]["bound"] == "compute"
    numerics = variant["numerics"]
    assert numerics["tolerances"] == [
        {"output": "C", "atol": 0.01, "rtol": 0.01, "allowed_mismatches": 0, "why": None, "precision_budget": None}
    ]
    assert numerics["precision_twin"] == "torch.matmul(A, B)"
    assert numerics["thresholds"] == dataclasses.asdict(THRESHOLDS)
    (first,) = numerics["seeds"][0]["outputs"]
    assert first["kernel"] == dataclasses.asdict(fake.KERNEL_ERRORS[0])
    assert first["precision_twin"] == dataclasses.asdict(fake.TWIN_ERRORS)
    assert first["fraction_of_bound"] == THRESHOLDS.used(fake.KERNEL_ERRORS[0], fake.TWIN_ERRORS)
    assert data["device"]["peak"] == {"tflops": 989, "gbps": 4800}
    json.dumps(data)  # what write_reports writes


def test_the_summary_shows_each_outputs_error_beside_its_precision_twins_on_the_seed_closest_to_a_bound():
    summary = render_markdown(full_run())
    numerics = summary[summary.index("### Numerics") :]
    assert "| variant | output | seed | max abs error | mean abs error | bias | scale | of bound |" in numerics
    # seed 22 takes 62 % of its mean abs error bound (1.5 x 0.0039 + 1e-5 x 72), more than seeds 11 and 33
    assert (
        "| gemm_relu_schedules/v0_baseline | C | 22 | 0.0625 / 0.0625 | 0.0041 / 0.0039 | 3e-05 / 1e-05 "
        "| -7.4e-06 / 2e-06 | 62% (mean abs error) |"
    ) in numerics
    assert "max abs error 2x the twin's, mean abs error 1.5x" in numerics, "the bounds come from THRESHOLDS"
    assert "gemm_num_stages/ns6_128x256x64" not in numerics, "a variant that does not fit has no numerics"


def test_without_a_precision_twin_the_summary_says_the_tolerance_alone_judged():
    output = Output("C", fake.TOLERANCE)
    alone = dataclasses.replace(
        fake.result(V0, 49152),
        numerics=NumericsResult(
            "torch.matmul(A, B)",
            [output],
            [SeedCheck(s, [OutputCheck(output, max_abs_error=e.max_abs, errors=e)]) for s, e in
             zip(fake.SEEDS, fake.KERNEL_ERRORS, strict=True)],
        ),
    )  # fmt: skip
    summary = render_markdown(fake.run([alone]))
    assert (
        "| gemm_relu_schedules/v0_baseline | C | 11 | 0.0625 | 0.004 | -2e-05 | 3e-06 | no twin: Tolerance only |"
        in (summary)
    )
    assert report_data(fake.run([alone]))["variants"][0]["numerics"]["thresholds"] is None


def test_each_family_with_a_sweep_has_its_own_section_and_plot_link():
    run = block_k_run()
    plots = [plot_name("gemm_num_stages"), plot_name("gemm_block_k")]
    assert plots == ["sweep_gemm_num_stages.png", "sweep_gemm_block_k.png"]
    summary = render_markdown(run, plots)
    first = summary.index("### gemm_num_stages: latency and shared memory against num_stages")
    second = summary.index("### gemm_block_k: latency and shared memory against block_K")
    assert first < second
    assert summary.index("](sweep_gemm_num_stages.png)") in range(first, second)
    assert summary.index("](sweep_gemm_block_k.png)") > second
    assert "| series | block_K | ms | spread | dynamic shared memory (KiB) | |" in summary[second:]
    assert "| BM=128 | 64 | 1.500 | 0.0% | 32 |  |" in summary[second:]
    assert "- gemm_block_k: same knee for every series: yes (BM=64: 32, BM=128: 32)" in summary[second:]
    assert "gemm_block_k" not in summary[first:second], "each family's conclusions stay in its section"
    only_one = render_markdown(run, plots[1:])
    assert "](sweep_gemm_num_stages.png)" not in only_one and "](sweep_gemm_block_k.png)" in only_one


def test_baseline_verdicts_reach_variants_and_summary(tmp_path):
    run = full_run()
    recorded = {v.key: v.ratio for v in run.variants if v.ratio is not None}
    recorded[V0.key] = recorded[V0.key] * 2  # this run takes twice the baseline's time per reference ms for v0
    between = (WARN_SLOWER + FAIL_SLOWER) / 2
    recorded["gemm_num_stages/ns2_128x128x32"] *= 1 + between  # and a warning's worth here
    key = baseline_key(run.device.name, run.device.versions)
    baseline_path(run.device.name, tmp_path).write_text(
        render_baseline(key, recorded, {k: "M=8192 N=8192 K=8192" for k in recorded}, run.timer)
    )
    asked = []
    run = dataclasses.replace(
        run, remeasure=lambda keys: asked.append(list(keys)) or {k: recorded[k] * 0.5 for k in keys}
    )
    comparison = compare_with_baseline(run, tmp_path)
    assert asked == [[V0.key]]
    assert comparison.status == "compared"
    run = dataclasses.replace(run, comparison=comparison)
    v0, ns2 = run.variants[0], run.variants[3]
    assert run.verdict(v0).status == FAIL and run.verdict(ns2).status == PASS and not run.passed
    summary = render_markdown(run)
    assert "| fail (+100.0% time) |" in summary and f"| warn (+{between:.1%} time) |" in summary
    assert "### Warnings" in summary and f"gemm_num_stages/ns2_128x128x32: {between:.1%} slower" in summary


def test_a_baseline_under_another_key_fails_the_run_and_says_so_first(tmp_path):
    """A key that no longer matches (another torch, CUDA, TileLang or GPU) compares nothing: reported only, as it was,
    a rekeyed baseline switched the timing gate off while the run stayed green."""
    run = full_run()
    assert run.passed, "every variant passes on its own"
    key = {**baseline_key(run.device.name, run.device.versions), "torch": "2.9.0"}
    baseline_path(run.device.name, tmp_path).write_text(
        render_baseline(key, {V0.key: 100.0}, {V0.key: "M=8192 N=8192 K=8192"}, run.timer)
    )
    comparison = compare_with_baseline(run, tmp_path)
    run = dataclasses.replace(run, comparison=comparison)
    assert comparison.status == "key mismatch" and not run.passed
    assert all(run.verdict(v).timing is None for v in run.variants)
    lines = render_markdown(run).splitlines()
    assert lines[1] == f"## GPU check FAILED on {run.device.name} ({run.device.target})"
    assert lines[3].startswith("**The timing baseline fails the run: ") and "recorded under another key" in lines[3]
    assert f"torch: baseline '2.9.0', now {run.device.versions['torch']!r}" in lines[3]
    commands = workflow_commands(run)
    assert commands[0].startswith("::error title=gpu timing baseline::") and "another key" in commands[0]
    assert not any(line.startswith("::notice") for line in commands)
    assert report_data(run)["passed"] is False


def test_write_reports_fills_the_folder_the_step_summary_and_workflow_commands(tmp_path, monkeypatch):
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
    assert appended.startswith(f"earlier step\n{MARKDOWN_HEADER}\n## GPU check passed on NVIDIA H200 (sm_90)")
    assert f"]({PLOT})" not in appended and "The plots" not in appended
    assert f"::warning title=gpu check::{TOO_BIG.key}: does not fit on this GPU" in "\n".join(logged)


def test_a_plot_per_family_with_a_sweep_linked_from_the_summary(tmp_path):
    pytest.importorskip("matplotlib", reason="the plots need requirements-gpu.txt")
    step_summary = tmp_path / "step_summary.md"
    written = write_reports(block_k_run(), tmp_path / "out", {"GITHUB_STEP_SUMMARY": str(step_summary)}, lambda _: None)
    plots = [plot_name("gemm_num_stages"), plot_name("gemm_block_k")]
    assert [p.name for p in written] == [REPORT, SUMMARY, *plots]
    summary = (tmp_path / "out" / SUMMARY).read_text()
    for plot in plots:
        assert (tmp_path / "out" / plot).read_bytes().startswith(b"\x89PNG")
        assert f"]({plot})" in summary
    # The job page cannot show the run's files: it names them instead of linking them.
    appended = step_summary.read_text()
    assert f"]({plots[0]})" not in appended
    assert appended.endswith(f"\nThe plots ({', '.join(plots)}) are in the uploaded report folder.\n")


def test_no_plot_for_a_run_without_sweeps(tmp_path):
    pytest.importorskip("matplotlib", reason="the plots need requirements-gpu.txt")
    written = write_reports(fake.run([fake.result(V0, 49152)]), tmp_path, {}, lambda _: None)
    assert [p.name for p in written] == [REPORT, SUMMARY]
    assert "latency and shared memory against" not in (tmp_path / SUMMARY).read_text()


def test_no_workflow_commands_outside_actions(tmp_path):
    logged: list[str] = []
    write_reports(full_run(), tmp_path, {}, logged.append)
    assert not any(line.startswith("::") for line in logged)


def test_workflow_commands_for_failures_and_missing_baseline():
    missing = compare_ratios(None, Path("golden/timing/nvidia-h200.yaml"), {"gpu": "NVIDIA H200"}, {}, lambda k: {})
    run = fake.run([fake.result(fake.single_case("bad"), 1024, numerics_ok=False)], comparison=missing)
    lines = workflow_commands(run)
    assert lines[0] == f"::error title=gpu check f/bad::{FAILED_SEED}"
    assert lines[-1].startswith("::notice title=gpu timing baseline::no timing baseline for NVIDIA H200")


def test_a_corrupt_baseline_fails_the_run_naming_the_file(tmp_path):
    run = full_run()
    path = baseline_path(run.device.name, tmp_path)
    path.write_text("format: [")
    comparison = compare_with_baseline(run, tmp_path)
    run = dataclasses.replace(run, comparison=comparison)
    assert comparison.status == "corrupt" and str(path) in comparison.message
    assert not run.passed
    assert any(line.startswith("::error title=gpu timing baseline::") for line in workflow_commands(run))


def test_workflow_commands_are_escaped_and_capped_like_the_static_summarys():
    """A raw `%`, CR or LF would end or corrupt the command; GitHub shows 10 annotations of a kind per step."""
    results = [
        dataclasses.replace(
            fake.result(fake.single_case(f"bad{i}"), 1024),
            failure=VariantFailure("reference", RAISED, "100% off\r\nby 2, at x:1"),
        )
        for i in range(12)
    ]
    lines = workflow_commands(fake.run(results))
    errors = [line for line in lines if line.startswith("::error ")]
    assert len(errors) == 10 and all(line.endswith("::100%25 off%0D%0Aby 2, at x:1") for line in errors)
    assert errors[0].startswith("::error title=gpu check f/bad0::")
    assert lines[-1].startswith("::notice title=more errors::2 more GPU finding(s) not annotated")
    assert not any("\n" in line or "\r" in line for line in lines)
