"""The GPU check's entry and its pieces that need no GPU: device mapping, snapshot agreement, timing rounds."""

from __future__ import annotations

import os
import subprocess
import sys
from types import SimpleNamespace

import gpu_fakes as fake
import pytest
from conftest import REPO

from harness.gpu_check import _with_snapshot, run_gpu_check
from harness.gpu_device import UnknownTarget, target_for_capability
from harness.jit import CompiledVariant
from harness.snapshot import SnapshotStore
from harness.timing import Timing, measure_interleaved, tflops

V0 = fake.variant("gemm_relu_schedules", "v0_baseline", "matmul_relu")


def run_entry(*args: str, **env: str) -> subprocess.CompletedProcess:
    environ = {**os.environ, "CUDA_VISIBLE_DEVICES": "", **env}
    return subprocess.run(
        [sys.executable, str(REPO / "scripts" / "gpu_check.py"), *args],
        cwd=REPO,
        env=environ,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_without_a_cuda_device_the_entry_stops_at_once_with_status_2():
    result = run_entry()
    assert result.returncode == 2
    assert "gpu check stopped, nothing was checked" in result.stderr
    assert "Parallel Compiling" not in result.stderr + result.stdout, "it must stop before compiling"


def test_too_few_seeds_are_a_usage_error():
    result = run_entry("--seeds", "1", "2")
    assert result.returncode == 2 and "at least 3 distinct seeds" in result.stderr


def test_recording_under_ci_is_refused_before_any_gpu_work(tmp_path):
    logged: list[str] = []
    status = run_gpu_check(
        [V0], output=tmp_path, timing_dir=tmp_path, record=True, environ={"CI": "true"}, log=logged.append
    )
    assert status == 2 and "refusing to record a timing baseline while CI='true'" in logged[0]
    assert not list(tmp_path.iterdir())


def test_recording_from_a_selection_is_refused(tmp_path):
    logged: list[str] = []
    status = run_gpu_check(
        [V0], output=tmp_path, timing_dir=tmp_path, record=True, complete_selection=False, environ={}, log=logged.append
    )
    assert status == 2 and "from a selection of variants" in logged[0]


def test_compute_capability_maps_to_a_snapshot_target():
    assert target_for_capability(9, 0) == "sm_90"
    assert target_for_capability(8, 0) == "sm_80"
    with pytest.raises(UnknownTarget, match="compute capability 8.6 \\(sm_86\\).*add 'sm_86' to TARGETS"):
        target_for_capability(8, 6)


# -- agreement with the static snapshot --------------------------------------------------------

FACTS = """format: 1
case: {{family: gemm_relu_schedules, variant: v0_baseline, target: sm_90}}
params: {{}}
pipelines: []
warp_specialized: true
shared_buffers: {{}}
dynamic_shared_memory_bytes: {shared}
launch: {{grid: [1, 1, 1], threads: [1, 1, 1]}}
sync: {{}}
mma: {{}}
"""


def snapshot_result(tmp_path, launched: int, snapshot: int | None, cuda: str = "__global__ void k() {}\n"):
    store = SnapshotStore(tmp_path / "golden")
    if snapshot is not None:
        store.write(f"{V0.key}/sm_90.yaml", FACTS.format(shared=snapshot))
        store.write(f"{V0.key}/sm_90.cu", "__global__ void k() {}\n")
    compiled = CompiledVariant(V0, SimpleNamespace(kernel_source=cuda), dynamic_shared_memory_bytes=launched)
    return _with_snapshot(compiled, fake.device(), store)


def test_shared_memory_equal_to_the_snapshot_passes(tmp_path):
    result = snapshot_result(tmp_path, 49152, 49152)
    assert result.problems == [] and result.snapshot_shared_memory_bytes == 49152
    assert result.cuda_matches_snapshot is True
    assert result.compiled.resources_note.startswith("registers not available")


def test_shared_memory_different_from_the_snapshot_fails_naming_file_and_command(tmp_path):
    result = snapshot_result(tmp_path, 65536, 49152, cuda="__global__ void other() {}\n")
    (problem,) = result.problems
    path = f"{(tmp_path / 'golden').as_posix()}/{V0.key}/sm_90.yaml"
    assert problem.startswith(f"{path}: dynamic_shared_memory_bytes is 49152 in the snapshot")
    assert "launches with 65536" in problem and f'nox -s regen-golden -- -k "{V0.key}/sm_90"' in problem
    assert result.cuda_matches_snapshot is False


def test_a_missing_snapshot_fails(tmp_path):
    (problem,) = snapshot_result(tmp_path, 49152, None).problems
    assert "no static snapshot for this variant and target" in problem


def test_a_compile_error_is_the_variants_failure(tmp_path):
    compiled = CompiledVariant(V0, None, error="TileLang could not compile it: boom")
    result = _with_snapshot(compiled, fake.device(), SnapshotStore(tmp_path))
    assert result.status == "fail" and result.problems == [f"{V0.key}: TileLang could not compile it: boom"]


# -- timing rounds -----------------------------------------------------------------------------


def test_rounds_interleave_candidates_and_take_the_median():
    calls: list[str] = []
    times = {"a": iter([3.0, 1.0, 2.0]), "b": iter([5.0, 5.0, 5.5])}

    def bench(fn):
        name = fn()
        calls.append(name)
        return next(times[name])

    timings = measure_interleaved({"a": lambda: "a", "b": lambda: "b"}, rounds=3, bench=bench)
    assert calls == ["a", "b", "a", "b", "a", "b"]
    assert timings["a"].median_ms == 2.0 and timings["a"].spread == pytest.approx(1.0)
    assert timings["b"] == Timing((5.0, 5.0, 5.5)) and timings["b"].spread == pytest.approx(0.1)


def test_one_round_cannot_measure_noise():
    with pytest.raises(ValueError, match="at least 2 rounds"):
        measure_interleaved({"a": lambda: None}, rounds=1, bench=lambda fn: 1.0)


def test_tflops_of_an_8192_cube_in_one_millisecond():
    assert tflops({"M": 8192, "N": 8192, "K": 8192}, 1.0) == pytest.approx(1099.5, rel=1e-4)
