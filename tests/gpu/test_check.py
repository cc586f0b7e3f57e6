"""The GPU check's entry and its pieces that need no GPU: case selection, device mapping, snapshot agreement,
timing rounds and throughput."""

from __future__ import annotations

import os
import subprocess
import sys
from types import SimpleNamespace

import gpu_fakes as fake
import pytest
import torch
from conftest import REPO, SUBPROCESS_LIMIT_S
from gpu_fakes import FACTS

from kernels._gemm import gemm_work
from tilelang_golden.family import Work
from tilelang_golden.gpu.baseline_use import BaselineUse
from tilelang_golden.gpu.check import CheckPlan, run_gpu_check
from tilelang_golden.gpu.measure.timing import (
    Pair,
    PairedTiming,
    Throughput,
    Timing,
    abba,
    interleaved_bench,
    make_bench,
    measure_pairs,
    one_after_the_other,
    throughput,
)
from tilelang_golden.gpu.report.results import VariantResult
from tilelang_golden.gpu.run.compile import CompiledCase, read_driver_resources
from tilelang_golden.gpu.run.device import PEAKS, Peak, UnknownTarget, target_for_capability
from tilelang_golden.gpu.selection import device_cases, not_runnable
from tilelang_golden.gpu.snapshot_agreement import snapshot_agreement
from tilelang_golden.static.snapshots.snapshot import FORMAT_VERSION, SnapshotStore, cuda_header

V0 = fake.V0


def run_entry(*args: str, **env: str) -> subprocess.CompletedProcess:
    environ = {**os.environ, "CUDA_VISIBLE_DEVICES": "", **env}
    return subprocess.run(
        [sys.executable, "-m", "tilelang_golden", "gpu", *args],
        cwd=REPO,
        env=environ,
        capture_output=True,
        text=True,
        timeout=SUBPROCESS_LIMIT_S,
    )


def test_without_a_cuda_device_the_entry_stops_at_once_with_status_2():
    result = run_entry()
    assert result.returncode == 2
    assert "gpu check stopped, nothing was checked" in result.stderr
    assert "Parallel Compiling" not in result.stderr + result.stdout, "it must stop before compiling"


def test_too_few_seeds_are_a_usage_error():
    result = run_entry("--seeds", "1", "2")
    assert result.returncode == 2 and "at least 3 distinct seeds" in result.stderr


def test_the_shape_option_is_gone():
    result = run_entry("--shape", "M=64")
    assert result.returncode == 2 and "unrecognized arguments: --shape" in result.stderr


class Selection:
    """A `select(device)` that records whether the check got as far as asking it."""

    def __init__(self):
        self.asked = []

    def __call__(self, device):
        self.asked.append(device)
        return [V0]


def test_recording_under_ci_is_refused_before_any_gpu_work(tmp_path):
    logged: list[str] = []
    select = Selection()
    status = run_gpu_check(
        CheckPlan(select),
        output=tmp_path,
        baseline=BaselineUse(tmp_path, record=True),
        environ={"CI": "true"},
        log=logged.append,
    )
    assert status == 2 and "refusing to record a timing baseline while CI='true'" in logged[0]
    assert not list(tmp_path.iterdir()) and select.asked == []


def test_recording_from_a_selection_is_refused(tmp_path):
    logged: list[str] = []
    select = Selection()
    status = run_gpu_check(
        CheckPlan(select),
        output=tmp_path,
        baseline=BaselineUse(tmp_path, record=True, complete_selection=False),
        environ={},
        log=logged.append,
    )
    assert status == 2 and "from a selection of variants" in logged[0] and select.asked == []


def test_device_cases_are_every_variant_of_the_families_for_the_devices_target():
    cases = device_cases([fake.GEMM_RELU, fake.GEMM_NUM_STAGES], "sm_80")
    expected = ["gemm_relu_schedules/v0_baseline/sm_80"] + [
        f"gemm_num_stages/{v.name}/sm_80" for v in fake.GEMM_NUM_STAGES.variants
    ]
    assert [c.id for c in cases] == expected
    assert cases[1].family is fake.GEMM_NUM_STAGES and cases[1].params == {**fake.SHAPE, **cases[1].variant.params}
    assert device_cases([], "sm_90") == []


def test_compute_capability_maps_to_a_snapshot_target():
    assert target_for_capability(9, 0) == "sm_90"
    assert target_for_capability(8, 0) == "sm_80"
    with pytest.raises(UnknownTarget, match="compute capability 8.6 \\(sm_86\\).*add 'sm_86' to TARGETS"):
        target_for_capability(8, 6)


# -- agreement with the static snapshot --------------------------------------------------------


def snapshot_result(tmp_path, launched: int, snapshot: int | None, cuda: str = "__global__ void k() {}\n"):
    store = SnapshotStore(tmp_path / "golden")
    if snapshot is not None:
        store.write(f"{V0.id}.yaml", FACTS.format(format=FORMAT_VERSION, shared=snapshot))
        store.write(f"{V0.id}.cu", cuda_header(V0.id, "sm_90") + "__global__ void k() {}\n")
    compiled = CompiledCase(V0, SimpleNamespace(kernel_source=cuda), launches={"main_kernel": launched})
    return snapshot_agreement(compiled, cuda, store)


def test_shared_memory_equal_to_the_snapshot_passes(tmp_path):
    result = snapshot_result(tmp_path, 49152, 49152)
    assert result.failures == () and result.shared_memory_bytes == 49152
    assert result.cuda_matches is True


def test_without_the_kernels_binary_registers_are_not_available():
    compiled = CompiledCase(V0, SimpleNamespace(kernel_source=""))
    read_driver_resources(compiled)
    assert compiled.resources_note.startswith("registers not available") and compiled.registers_per_thread is None


def test_shared_memory_different_from_the_snapshot_fails_naming_file_and_command(tmp_path):
    result = snapshot_result(tmp_path, 65536, 49152, cuda="__global__ void other() {}\n")
    (problem,) = result.failures
    path = f"{(tmp_path / 'golden').as_posix()}/gemm_relu_schedules/v0_baseline/sm_90.yaml"
    snapshot = "the snapshot's kernels launch with dynamic shared memory {'main_kernel': 49152}"
    assert problem.startswith(f"{path}: {snapshot}")
    assert "compiled here launch with {'main_kernel': 65536}" in problem
    assert 'nox -s regen-golden -- -k "gemm_relu_schedules/v0_baseline/sm_90"' in problem
    assert result.cuda_matches is False


def test_a_missing_snapshot_fails(tmp_path):
    (problem,) = snapshot_result(tmp_path, 49152, None).failures
    path = f"{(tmp_path / 'golden').as_posix()}/{V0.id}.yaml"
    assert problem.startswith(f"{path}: no static snapshot for this variant and target")
    assert f'nox -s regen-golden -- -k "{V0.id}"' in problem


def test_the_snapshot_of_the_devices_target_is_the_one_read(tmp_path):
    store = SnapshotStore(tmp_path)
    sm80 = fake.case(fake.GEMM_RELU, "v0_baseline", "sm_80")
    store.write(f"{sm80.id}.yaml", FACTS.format(format=FORMAT_VERSION, shared=49152))
    compiled = CompiledCase(sm80, SimpleNamespace(kernel_source=""), launches={"main_kernel": 49152})
    result = snapshot_agreement(compiled, "", store)
    assert result.failures == () and result.path == f"{tmp_path.as_posix()}/{sm80.id}.yaml"


def test_a_compile_error_is_the_variants_failure(tmp_path):
    compiled = CompiledCase(V0, None, error="TileLang could not compile it: boom")
    result = VariantResult(compiled, fake.device(), snapshot_agreement(compiled, None, SnapshotStore(tmp_path)))
    assert result.failures == [f"{V0.id}: TileLang could not compile it: boom"]
    assert fake.run([result]).verdict(result).status == "fail"


def test_a_variant_runs_only_compiled_agreeing_with_its_snapshot_and_fitting(tmp_path):
    limit = fake.device().shared_memory_per_block_bytes
    agreeing = snapshot_result(tmp_path / "a", 49152, 49152)
    compiled = CompiledCase(V0, SimpleNamespace(kernel_source=""), launches={"main_kernel": 49152})
    assert not_runnable(compiled, agreeing, limit) is None
    broken = CompiledCase(V0, None, error="TileLang could not compile it: boom")
    assert not_runnable(broken, agreeing, limit) == "did not compile: TileLang could not compile it: boom"
    missing = snapshot_result(tmp_path / "m", 49152, None)
    assert not_runnable(compiled, missing, limit) == missing.failures[0]
    too_big = CompiledCase(V0, SimpleNamespace(kernel_source=""), launches={"main_kernel": limit + 1})
    assert not_runnable(too_big, snapshot_result(tmp_path / "b", limit + 1, limit + 1), limit) == (
        "does not fit in this GPU's shared memory"
    )


# -- timing rounds -----------------------------------------------------------------------------


def test_every_variant_is_timed_next_to_its_reference_in_a_seeded_random_order():
    calls: list[str] = []

    def bench(fn):
        name = fn()
        calls.append(name)
        return {"a": 2.0, "b": 4.0, "ref": 1.0}[name]

    pairs = [Pair("a", lambda: "a", "ref", lambda: "ref"), Pair("b", lambda: "b", "ref", lambda: "ref")]
    timings = measure_pairs(pairs, rounds=6, bench=one_after_the_other(bench), seed=7)
    assert len(calls) == 2 * 2 * 6
    measured_pairs = [sorted(calls[i : i + 2]) for i in range(0, len(calls), 2)]
    assert all(pair in (["a", "ref"], ["b", "ref"]) for pair in measured_pairs), "a variant and its reference adjoin"
    firsts = [calls[i] for i in range(0, len(calls), 4)]
    assert len(set(firsts)) > 1, "the order changes between rounds"
    assert "ref" in calls[::2] and {"a", "b"} & set(calls[::2]), "either side of a pair may go first"
    assert timings["a"].ratio == 0.5 and timings["b"].ratio == 0.25 and timings["a"].ratio_spread == 0
    again: list[str] = []
    measure_pairs(pairs, rounds=6, bench=one_after_the_other(lambda fn: again.append(fn()) or 1.0), seed=7)
    assert again == calls, "the same seed gives the same order"


def test_interleaved_launches_take_turns_so_neither_side_always_goes_first():
    order = abba(4)
    assert order == [0, 1, 1, 0, 0, 1, 1, 0]
    firsts = order[::2]
    assert firsts.count(0) == firsts.count(1), "each side leads half the pairs"
    follows = list(zip(order, order[1:], strict=False))
    assert abs(follows.count((0, 0)) - follows.count((1, 1))) <= 1, "each side follows itself about equally often"


def test_the_interleaved_timer_gives_each_side_its_own_launches_medians():
    """On a fake clock: a variant of 2 ms and a reference of 1 ms come back as (2, 1), whichever goes first,
    the timed launches taking turns ABBA after a short estimate and a warm-up sized from it."""
    clock = fake.FakeClock()
    variant, reference = clock.launch("v", 2.0), clock.launch("r", 1.0)
    bench = interleaved_bench(clock.timer, warmup_ms=9, repeat_ms=30)
    assert bench(variant, reference) == (2.0, 1.0)
    # 3 ms a pair: 3 pairs to estimate, 9 / 3 pairs of warm-up, then 30 / 3 pairs timed in ABBA order
    assert clock.launched == ["v", "r"] * 3 + ["v", "r"] * 3 + [("v", "r")[side] for side in abba(10)]
    assert bench(reference, variant) == (1.0, 2.0)


def test_the_interleaved_timer_keeps_each_sides_rounds_through_measure_pairs():
    """Variant and reference figures stay on their sides whoever goes first in a round (the order is random)."""
    clock = fake.FakeClock()
    pairs = [
        Pair("a", clock.launch("a", 2.0), "ref", clock.launch("ref", 1.0)),
        Pair("b", clock.launch("b", 4.0), "ref", clock.launch("ref", 1.0)),
    ]
    timed = measure_pairs(pairs, rounds=6, bench=interleaved_bench(clock.timer, warmup_ms=5, repeat_ms=20), seed=3)
    assert timed["a"].variant.rounds_ms == (2.0,) * 6 and timed["b"].variant.rounds_ms == (4.0,) * 6
    assert timed["a"].reference.rounds_ms == timed["b"].reference.rounds_ms == (1.0,) * 6
    assert timed["a"].ratio == 0.5 and timed["b"].ratio == 0.25
    firsts = {clock.launched[i] for i in range(0, len(clock.launched), 2)}
    assert {"a", "b", "ref"} <= firsts, "both orders of a pair were measured"


def test_an_unknown_timer_is_refused_with_the_choices():
    with pytest.raises(ValueError, match="interleaved"):
        make_bench("wallclock")


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_interleaved_timing_tells_identical_work_from_double_work():
    a, b = (
        torch.randn(4096, 4096, device="cuda", dtype=torch.float16),
        torch.randn(4096, 4096, device="cuda", dtype=torch.float16),
    )
    once = lambda: a @ b  # noqa: E731
    twice = lambda: (a @ b, b @ a)  # noqa: E731
    bench = make_bench("interleaved", warmup_ms=10, repeat_ms=50)
    same = bench(once, lambda: a @ b)
    assert same[0] / same[1] == pytest.approx(1.0, abs=0.03)
    double = bench(twice, once)
    assert double[0] / double[1] == pytest.approx(2.0, rel=0.1)


def test_the_ratio_is_the_median_of_the_rounds_ratios():
    paired = PairedTiming(Timing((2.0, 4.0, 2.0)), Timing((1.0, 1.0, 1.2)))
    assert paired.ratios == (0.5, 0.25, 0.6)
    assert paired.ratio == 0.5 and paired.ratio_spread == pytest.approx(0.7)


def test_one_round_cannot_measure_noise():
    with pytest.raises(ValueError, match="at least 2 rounds"):
        measure_pairs([Pair("a", lambda: None, "r", lambda: None)], rounds=1, bench=lambda a, b: (1.0, 1.0))


def test_every_measured_pair_records_the_gpu_state():
    states = iter(range(100))
    timed = measure_pairs(
        [Pair("a", lambda: None, "r", lambda: None)],
        rounds=3,
        bench=lambda a, b: (1.0, 1.0),
        sample=lambda: {"n": next(states)},
    )
    assert timed["a"].states == ({"n": 0}, {"n": 1}, {"n": 2})


# -- throughput against the device's peaks -----------------------------------------------------


def test_rates_of_an_8192_cube_in_one_millisecond_without_a_peak():
    work = gemm_work({"M": 8192, "N": 8192, "K": 8192})
    rates = throughput(work, 1.0, None)
    assert rates.tflops == pytest.approx(2 * 8192**3 / 1e-3 / 1e12) == pytest.approx(1099.5, rel=1e-4)
    assert rates.gbps == pytest.approx(2 * 3 * 8192**2 / 1e-3 / 1e9)
    assert rates.bound is None and rates.fraction_of_peak is None, "no peak: no side of the roofline, no fraction"


def test_a_gemm_is_compute_bound_and_judged_against_the_tensor_core_peak():
    rates = throughput(gemm_work({"M": 8192, "N": 8192, "K": 8192}), 2.0, PEAKS["NVIDIA H200"])
    assert rates.bound == "compute"
    assert rates.fraction_of_peak == pytest.approx(rates.tflops / 989) == pytest.approx(0.5559, abs=1e-4)


def test_low_arithmetic_intensity_is_memory_bound_and_judged_against_bandwidth():
    copy_like = Work(flops=1e9, bytes=4e9)  # a quarter of a flop per byte
    rates = throughput(copy_like, 1.0, Peak(tflops=989, gbps=4800))
    assert rates == Throughput(
        tflops=pytest.approx(1.0), gbps=pytest.approx(4000), bound="memory", fraction_of_peak=pytest.approx(4000 / 4800)
    )


def test_the_bound_is_the_side_of_the_ridge_the_work_falls_on():
    peak = Peak(tflops=100, gbps=1000)  # ridge: 100 flops per byte
    assert throughput(Work(flops=100e9, bytes=1e9), 1.0, peak).bound == "compute"
    below = throughput(Work(flops=99e9, bytes=1e9), 1.0, peak)
    assert below.bound == "memory" and below.fraction_of_peak == pytest.approx(1.0)
    # The same work on a GPU with less bandwidth per flop crosses to the other side.
    work = Work(flops=300e9, bytes=1e9)
    assert throughput(work, 1.0, Peak(tflops=989, gbps=4800)).bound == "compute"
    assert throughput(work, 1.0, Peak(tflops=989, gbps=2000)).bound == "memory"


def test_a_device_knows_its_peak_by_name():
    assert fake.device().peak == PEAKS["NVIDIA H200"] == Peak(tflops=989, gbps=4800)
    assert fake.device("NVIDIA H200").as_dict()["peak"] == {"tflops": 989, "gbps": 4800}
    unknown = fake.device("Some Future GPU")
    assert unknown.peak is None and unknown.as_dict()["peak"] is None


# -- the CUDA compiler ---------------------------------------------------------------------------


def test_nvcc_is_found_where_tilelang_looks(tmp_path):
    from tilelang_golden.gpu.run.device import find_nvcc

    toolkit = tmp_path / "cuda"
    (toolkit / "bin").mkdir(parents=True)
    (toolkit / "bin" / "nvcc").write_text("#!/bin/sh\n")
    (toolkit / "bin" / "nvcc").chmod(0o755)
    assert find_nvcc({"CUDA_HOME": str(toolkit)}) == str(toolkit / "bin" / "nvcc")
    assert find_nvcc({"CUDA_PATH": str(toolkit)}) == str(toolkit / "bin" / "nvcc")
    assert find_nvcc({"CUDA_HOME": str(tmp_path / "empty")}) is None, "a CUDA_HOME without nvcc is not rescued"
    assert find_nvcc({"PATH": str(toolkit / "bin")}) == str(toolkit / "bin" / "nvcc")


def test_without_nvcc_the_entry_stops_before_compiling_with_status_2(monkeypatch, capsys, tmp_path):
    from tilelang_golden.gpu import command as entry
    from tilelang_golden.gpu.run import device

    monkeypatch.setattr(device, "require_cuda", fake.device)
    monkeypatch.setenv("CUDA_HOME", str(tmp_path / "no-toolkit"))
    assert entry.main([]) == 2
    err = capsys.readouterr().err
    assert "gpu check stopped, nothing was checked: no CUDA compiler: looked for $CUDA_HOME/bin/nvcc" in err
    assert "install a CUDA toolkit matching the driver and point CUDA_HOME at it" in err
