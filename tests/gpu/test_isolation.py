"""One variant's failure never hides another's verdict: an exception in each stage, a kernel that never finishes
and one that kills its worker each fail their variant alone, and the report and exit status say so.

On the CPU: the check's stages (tilelang_golden.gpu.kernel_session) run fake kernels, in process, or in a real worker
process (tilelang_golden.gpu.run.worker) whose kernels sleep or abort."""

from __future__ import annotations

import subprocess
import sys
import time

import gpu_fakes as fake
import pytest
import torch
from conftest import SUBPROCESS_LIMIT_S

import tilelang_golden.catalog.loading
import tilelang_golden.family
from tilelang_golden.catalog.cases import Case
from tilelang_golden.family import Family
from tilelang_golden.gpu import kernel_session
from tilelang_golden.gpu.gate.repeat_gate import DEFAULT_LAUNCHES
from tilelang_golden.gpu.kernel_session import Kernels, KernelSession
from tilelang_golden.gpu.measure import numerics
from tilelang_golden.gpu.run.worker import CRASHED, DID_NOT_FINISH, RAISED, TimeLimits, WorkerProcess

SEEDS = fake.RUN_SEEDS


# -- an exception in each stage, in process -------------------------------------------------------


def raising_inputs(p, generator, device):
    raise ValueError("inputs are broken")


def raises_once_timed(a, b, c):
    """Right on the numeric gate's seeds and in the repeated launches, raising once timed."""
    raises_once_timed.calls += 1
    if raises_once_timed.calls > len(SEEDS) + DEFAULT_LAUNCHES:
        raise RuntimeError("launch failed while timed")
    fake.small_gemm_right(a, b, c)


raises_once_timed.calls = 0
STAGES = fake.gemm_family(
    "stages",
    [fake.variant(name) for name in ("right", "compile", "call", "comparison", "timing")],
    shape=fake.SMALL,
)
INPUTS = fake.gemm_family("inputs", [fake.variant("v")], shape=fake.SMALL, inputs=raising_inputs)


def test_an_exception_in_each_stage_fails_its_variant_alone(tmp_path, monkeypatch):
    def calls(a, b, c):
        raise RuntimeError("the launch failed")

    monkeypatch.setitem(fake.BEHAVIOURS, "call", calls)
    monkeypatch.setitem(fake.BEHAVIOURS, "timing", raises_once_timed)

    def resources(compiled):
        if compiled.case.variant.name == "compile":
            raise OSError("no driver library")

    original_check = numerics.check_output

    def check_output(output, tensor, expected, twin=None):
        if check_output.case == "stages/comparison":
            raise NotImplementedError('"isfinite" not implemented for this dtype')
        return original_check(output, tensor, expected, twin)

    check_output.case = None
    original_numerics = KernelSession.numerics

    def numerics_of(self, key, seeds):
        check_output.case = key
        return original_numerics(self, key, seeds)

    monkeypatch.setattr(kernel_session, "read_driver_resources", resources)
    monkeypatch.setattr(numerics, "check_output", check_output)
    monkeypatch.setattr(KernelSession, "numerics", numerics_of)
    cases = [fake.case(STAGES, v.name) for v in STAGES.variants] + [fake.case(INPUTS, "v")]
    status, report, summary = fake.gpu_run(tmp_path, monkeypatch, cases, Kernels.in_process(fake.cpu_session()))

    found = fake.variants(report)
    assert status == 1 and report["counts"]["pass"] == 1 and found["stages/right"]["status"] == "pass"
    assert found["stages/right"]["ratio_to_reference"] == 1.0, "the others still timed"
    failure = {key: v["failure"] for key, v in found.items()}
    assert failure["stages/compile"]["stage"] == "compile" and failure["stages/compile"]["kind"] == RAISED
    assert (
        "kernels/stages.py: variant 'compile': compile raised OSError: no driver library"
        in (failure["stages/compile"]["message"])
    )
    inputs = failure["inputs/v"]["message"]
    assert failure["inputs/v"]["stage"] == "reference" and "kernels/inputs.py: variant 'v'" in inputs
    assert "ValueError: inputs are broken" in inputs and "in raising_inputs" in inputs, "the family's own frame"
    assert failure["stages/call"] is None and not found["stages/call"]["numerics"]["passed"]
    assert "the kernel raised RuntimeError: the launch failed" in " ".join(found["stages/call"]["problems"])
    assert failure["stages/comparison"]["stage"] == "numerics"
    assert "isfinite" in failure["stages/comparison"]["message"]
    assert failure["stages/timing"]["stage"] == "timing" and found["stages/timing"]["numerics"]["passed"]
    assert "launch failed while timed" in failure["stages/timing"]["message"]
    assert set(report["failures"]) == set(found) - {"stages/right"}
    assert "### Failures" in summary


# -- a worker that stops answering, or dies: a real worker process on the CPU ------------------------

# Every request's limit: minutes, which no load reaches. A healthy variant is never stopped for being slow.
LIMITS = TimeLimits(floor_s=600, cap_s=600, start_s=600, compile_s=600)
# The hanging variant's own limit. Its kernel sleeps an hour: any limit stops it, and a short one keeps the test
# short; the healthy variants' limits are not its.
HANG_S = 3


class ShortLimitForTheHang(Kernels):
    """The stages in a real worker process, each request within the limit the check gives it, but the hanging
    variant's numerics within HANG_S."""

    def numerics(self, case, seeds, limit_s):
        return super().numerics(case, seeds, min(limit_s, HANG_S) if case.variant.name == "hangs" else limit_s)


def isolated_kernels(log=lambda line: None):
    return ShortLimitForTheHang.in_worker("gpu_fakes:CpuWorker", LIMITS, log)


def test_a_hanging_and_a_dying_kernel_fail_alone_and_the_others_get_their_verdicts(tmp_path, monkeypatch):
    cases = [fake.case(fake.ISOLATED, name) for name in ("right", "hangs", "dies", "right_too")]
    started = time.perf_counter()
    status, report, summary = fake.gpu_run(tmp_path, monkeypatch, cases, isolated_kernels())
    found = fake.variants(report)
    assert status == 1 and report["counts"] == {"pass": 2, "fail": 2, "does not fit": 0, "not_run": 0}
    assert found["isolated/right"]["ratio_to_reference"] == found["isolated/right_too"]["ratio_to_reference"] == 1.0
    hang, death = found["isolated/hangs"]["failure"], found["isolated/dies"]["failure"]
    assert hang["kind"] == DID_NOT_FINISH and hang["stage"] == "numerics"
    assert hang["message"] == (
        f"kernels/isolated.py: variant 'hangs': numerics did not finish after {HANG_S} s; the worker was stopped"
    )
    assert death["kind"] == CRASHED and "killed by SIGABRT" in death["message"]
    assert "CUDA error: an illegal memory access was encountered" in death["message"], "its standard error's tail"
    assert list(report["failures"]) == ["isolated/hangs", "isolated/dies"]
    lines = summary.splitlines()
    assert "- **2 did not finish or crashed** (isolated/hangs: did not finish, isolated/dies: crashed)" in summary
    failures = lines[lines.index("### Failures") + 2 :]
    assert failures[0].startswith("- isolated/hangs: kernels/isolated.py: variant 'hangs': numerics did not finish")
    assert time.perf_counter() - started < 600, "the hang costs its limit, not its hour of sleep"


def test_a_worker_answers_within_its_limit_or_is_stopped():
    worker = WorkerProcess("gpu_fakes:CpuWorker", LIMITS)
    ref = ("kernels", "isolated", "hangs", fake.TARGET)
    found, unusable = worker.ask("compile", [ref], limit=lambda key: LIMITS.compile_limit(1))
    assert unusable is None and "isolated/hangs" in found
    with pytest.raises(Exception) as stopped:
        worker.ask("numerics", "isolated/hangs", SEEDS, limit=lambda key: 1)
    assert stopped.value.kind == DID_NOT_FINISH and "did not finish after 1 s" in stopped.value.message
    assert worker.process.poll() is not None, "the stuck worker was killed"


def test_a_worker_has_imported_pytorch_before_it_says_it_is_ready():
    """So its start-up limit pays for the import (seconds on a busy machine), not its first variant's limit."""
    made = (
        "from tilelang_golden.gpu.kernel_session import KernelSession; before = 'torch' in sys.modules; "
        "KernelSession(print)"
    )
    check = f"import sys; {made}; print(before, 'torch' in sys.modules)"
    result = subprocess.run([sys.executable, "-c", check], capture_output=True, text=True, timeout=SUBPROCESS_LIMIT_S)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["False", "True"], "importing the stages leaves PyTorch out; making one imports it"


# -- every dtype a kernel emits is compared ---------------------------------------------------------

DTYPES = [
    torch.float8_e4m3fn, torch.float8_e5m2, torch.bfloat16, torch.float16, torch.float32, torch.float64,
    torch.int8, torch.uint8, torch.int32, torch.int64, torch.bool,
]  # fmt: skip


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_every_dtype_is_compared_and_a_wrong_element_is_seen(dtype):
    from tilelang_golden.family import Tolerance
    from tilelang_golden.gpu.gate.numerics_gate import Output
    from tilelang_golden.gpu.measure.numerics import check_output

    exact = not dtype.is_floating_point
    values = torch.arange(-8, 8, dtype=torch.float32) / (1 if exact else 4)
    right = values.to(dtype)
    reference = right.clone() if exact else values
    output = Output("y", Tolerance(atol=0, rtol=0) if exact else Tolerance(atol=1e-3, rtol=0.07))
    assert check_output(output, right, reference, right).passed
    wrong = values.clone()
    wrong[8] = 2  # it was 0 (False)
    checked = check_output(output, wrong.to(dtype), reference)
    assert checked.mismatches == 1 and not checked.passed
    if exact:
        assert checked.max_abs_error == (1 if dtype == torch.bool else 2) and isinstance(checked.max_abs_error, int)


def test_an_integer_difference_beyond_int64_does_not_wrap():
    from tilelang_golden.family import Tolerance
    from tilelang_golden.gpu.gate.numerics_gate import Output
    from tilelang_golden.gpu.measure.numerics import check_output

    reference = torch.tensor([2**63 - 1, 0])
    unwritten = torch.tensor([-(2**63), 0])  # the poison: int64's minimum
    assert check_output(Output("i", Tolerance(0, 0)), unwritten, reference).mismatches == 1


# -- the test-only families are never snapshotted -----------------------------------------------------


def test_the_test_only_families_load_and_are_never_snapshotted():
    from conftest import REPO

    from tilelang_golden.catalog.cases import all_cases
    from tilelang_golden.catalog.loading import load_families

    loaded = load_families("tests.gpu_families")
    assert not loaded.broken
    names = {f.name for f in loaded.families}
    assert names == {"never_finishes", "illegal_address", "inputs_raise", "planted_race", "planted_uninit"}
    assert all(f.file.startswith("tests/gpu_families/") for f in loaded.families)
    assert not names & {f.name for f in load_families().families}
    assert not names & {c.family.name for c in all_cases(tilelang_golden.catalog.loading.load_families())}
    assert not any((REPO / "golden" / name).exists() for name in names)


def test_a_family_raising_in_its_own_file_is_located_there():
    from tilelang_golden.catalog.loading import load_families

    family: Family = next(f for f in load_families("tests.gpu_families").families if f.name == "inputs_raise")
    try:
        family.inputs(family.params(family.variants[0]), None, "cpu")
    except ValueError as error:
        where = kernel_session.where(error, family)
    assert where.startswith("at tests/gpu_families/inputs_raise.py:") and where.endswith("in broken_inputs")


def test_a_family_call_error_names_its_file_once():
    from tilelang_golden.catalog.declaration import FamilyCallError
    from tilelang_golden.catalog.loading import load_families

    family: Family = next(f for f in load_families("tests.gpu_families").families if f.name == "inputs_raise")
    case = Case(family, family.variants[0], "sm_90")
    try:
        family.inputs(family.params(family.variants[0]), None, "cpu")
    except ValueError as cause:
        error = FamilyCallError(f"{family.file}: making the inputs raised ValueError: {cause}")
        error.__cause__ = cause
    message = kernel_session.raised("reference", case, error).message
    assert message.count(family.file) == 2, message  # once as the variant's file, once in the frame that raised
    assert message.startswith(f"{family.file}: variant 'copy': reference: making the inputs raised ValueError")
