"""On a GPU: a planted race is caught by the repeated launches and by racecheck, a planted read of memory nothing
wrote by initcheck, and the right kernels beside them pass both (tests/gpu_families/planted_race.py,
planted_uninit.py). One `tilelang-golden gpu --sanitize` run over those families serves every test here; without
compute-sanitizer the run leaves `--sanitize` out and the sanitizer's tests are skipped."""

import json
import subprocess
import sys

import pytest
import torch
from conftest import REPO

from tilelang_golden.gpu.run.device import find_nvcc
from tilelang_golden.gpu.sanitize import find_sanitizer

pytestmark = pytest.mark.skipif(
    not torch.cuda.is_available() or find_nvcc() is None, reason="needs a CUDA GPU and nvcc to compile for it"
)
RUN_LIMIT_S = 1200  # compiling five kernels twice (the check's and the sanitizer's shape) and racecheck's slowdown


@pytest.fixture(scope="module")
def planted(tmp_path_factory):
    """The planted families checked on this GPU: report.json's variants by key, and whether they were sanitized."""
    output = tmp_path_factory.mktemp("planted")
    sanitizing = find_sanitizer() is not None
    command = [sys.executable, "-m", "tilelang_golden", "gpu", "--families", "tests.gpu_families"]
    command += ["--select", "planted_*", "--rounds", "2", "--warmup-ms", "1", "--repeat-ms", "5", "--output"]
    command += [str(output), *(["--sanitize"] if sanitizing else [])]
    result = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=RUN_LIMIT_S)
    assert result.returncode == 1, f"the planted variants fail the run:\n{result.stdout[-4000:]}{result.stderr[-4000:]}"
    report = json.loads((output / "report.json").read_text())
    return {v["variant"]: v for v in report["variants"]}, sanitizing


def problems(found, key, start):
    return [p for p in found[key]["problems"] if p.startswith(start)]


def test_a_missing_barrier_is_caught_by_the_repeated_launches(planted):
    found, _ = planted
    (differs,) = problems(found, "planted_race/missing_barrier", "repeated launches: output Y is not bitwise identical")
    assert found["planted_race/missing_barrier"]["repeats"]["outputs"][0]["differing_repeats"] > 0, differs


def test_the_right_kernels_pass_the_numerics_the_repeated_launches_and_the_sanitizer(planted):
    found, sanitizing = planted
    for key in ("planted_race/barrier", "planted_uninit/all_staged"):
        assert found[key]["status"] == "pass", found[key]["problems"]
        assert found[key]["repeats"]["passed"]
        assert (found[key]["sanitizer"] is not None) == sanitizing


def test_a_missing_barrier_is_caught_by_racecheck(planted):
    found, sanitizing = planted
    if not sanitizing:
        pytest.skip("no compute-sanitizer here")
    assert problems(found, "planted_race/missing_barrier", "compute-sanitizer --tool racecheck at rows=8 cols=256: ")


@pytest.mark.parametrize("variant", ["unset_output", "half_staged"])
def test_a_read_of_memory_nothing_wrote_is_caught_by_initcheck(planted, variant):
    found, sanitizing = planted
    if not sanitizing:
        pytest.skip("no compute-sanitizer here")
    assert problems(found, f"planted_uninit/{variant}", "compute-sanitizer --tool initcheck at rows=8 cols=256: ")
