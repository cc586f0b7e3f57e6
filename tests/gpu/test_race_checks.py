"""The stages that keep a race from passing by luck, through a whole run on the CPU: a variant whose output changes
between launches fails with why and is not timed, one declared nondeterministic passes with its note, and the
sanitizer pass runs each variant under each tool in a process of its own (a stand-in for compute-sanitizer here),
fails one with findings, and stops one that hangs. On a GPU: tests/gpu/test_planted.py."""

import os
import re
import stat
import sys

import gpu_fakes as fake
import pytest

from tilelang_golden.gpu import command, sanitize
from tilelang_golden.gpu.gate.repeat_gate import DEFAULT_LAUNCHES
from tilelang_golden.gpu.gate.sanitizer_gate import TOOLS
from tilelang_golden.gpu.kernel_session import Kernels
from tilelang_golden.gpu.sanitize import SanitizerPlan, sanitize_cases

ATOMICS = "float atomics add the slices in whatever order they land"


class LosesAfterTheNumerics:
    """C = A @ B, one element off on every second launch after the numeric check's: a race that the three seeds
    missed by luck."""

    def __init__(self):
        self.launches = 0

    def __call__(self, a, b, c):
        self.launches += 1
        fake.small_gemm_right(a, b, c)
        if self.launches > len(fake.RUN_SEEDS) and self.launches % 2:
            c[0, 0] += 1


def test_a_variant_whose_output_changes_between_launches_fails_and_is_not_timed(tmp_path, monkeypatch):
    monkeypatch.setitem(fake.BEHAVIOURS, "loses", LosesAfterTheNumerics())
    races = fake.gemm_family("races", [fake.variant("loses"), fake.variant("right")], shape=fake.SMALL)
    atomics = fake.gemm_family("atomics", [fake.variant("loses")], shape=fake.SMALL, nondeterministic=ATOMICS)
    cases = [fake.case(races, "loses"), fake.case(races, "right")]
    status, report, summary = fake.gpu_run(tmp_path, monkeypatch, cases, Kernels.in_process(fake.cpu_session()))
    found = fake.variants(report)
    assert status == 1 and found["races/loses"]["numerics"]["passed"], "the numeric check passed it by luck"
    (problem,) = found["races/loses"]["problems"]
    assert problem.startswith("repeated launches: output C is not bitwise identical on the same inputs (seed 1): ")
    assert found["races/loses"]["timing"] is None and found["races/right"]["timing"] is not None
    assert report["repeats"]["launches"] == DEFAULT_LAUNCHES and found["races/right"]["repeats"]["passed"]
    assert f"- races/loses: {problem}" in summary
    assert "- repeated launches: 2 variants launched 10 times each on seed 1's inputs" in summary
    assert "1 bitwise identical, 1 not (failures)" in summary

    monkeypatch.setitem(fake.BEHAVIOURS, "loses", LosesAfterTheNumerics())  # its launches counted afresh
    status, report, summary = fake.gpu_run(
        tmp_path, monkeypatch, [fake.case(atomics, "loses")], Kernels.in_process(fake.cpu_session())
    )
    assert status == 0 and fake.variants(report)["atomics/loses"]["status"] == "pass"
    notes = summary.split("### Not held to bitwise equality\n\n")[1]
    assert notes.startswith(
        f"- atomics/loses: output C not held to bitwise equality, declared nondeterministic: {ATOMICS}"
    )
    assert "1 output(s) declared nondeterministic, not held to it (below)" in summary


def test_one_launch_turns_the_repeated_launches_off_and_the_summary_says_so(tmp_path, monkeypatch):
    monkeypatch.setitem(fake.BEHAVIOURS, "loses", LosesAfterTheNumerics())
    races = fake.gemm_family("races", [fake.variant("loses")], shape=fake.SMALL)
    kernels = Kernels.in_process(fake.cpu_session())
    status, report, summary = fake.gpu_run(tmp_path, monkeypatch, [fake.case(races, "loses")], kernels, repeats=1)
    assert status == 0 and fake.variants(report)["races/loses"]["repeats"] is None
    assert "- repeated launches: off (`--repeats 1`); a race can pass the numeric check by luck" in summary


# -- the sanitizer pass, with a stand-in for compute-sanitizer --------------------------------------------------

# What the stand-in does for each variant: the log it writes (a racecheck or initcheck finding in the kernel, or none),
# how it exits, or that its racecheck never finishes. As the real pass does, the first tool's process (racecheck)
# "compiles" the variant into the pass's cache folder and names its kernel; the others load it from there and name
# nothing, and one that finds nothing there says so and fails: the pass must wait for the first.
STAND_IN = """\
#!{python}
import json, os, pathlib, sys, time
args = sys.argv[1:]
tool, log, variant = args[args.index("--tool") + 1], args[args.index("--log-file") + 1], args[-3]
assert args[args.index("--target-processes") + 1] == "application-only"
if variant == "broken":
    print("BuildError: the variant does not lower", file=sys.stderr)
    sys.exit(3)
compiled = pathlib.Path(os.environ["TILELANG_CACHE_DIR"], variant)
if tool == "racecheck":
    compiled.parent.mkdir(parents=True, exist_ok=True)
    compiled.touch()
    print({mark!r} + json.dumps(["gemm_kernel"]), flush=True)
elif not compiled.exists():
    print("compiled again: not in the cache", file=sys.stderr)
    sys.exit(5)
if variant == "hangs" and tool == "racecheck":
    time.sleep(3600)
lines = ["========= COMPUTE-SANITIZER"]
if variant == "racy" and tool == "racecheck":
    lines += ["========= Error: Race reported between Write access at gemm_kernel+0x1b0",
              "=========     and Read access at gemm_kernel+0x1f0 [64 hazards]", "========="]
if variant == "uninit" and tool == "initcheck":
    lines += ["========= Uninitialized __global__ memory read of size 2 bytes",
              "=========     at gemm_kernel+0x2a0", "========="]
summary = "RACECHECK SUMMARY: {{n}} hazards displayed" if tool == "racecheck" else "ERROR SUMMARY: {{n}} errors"
lines.append("========= " + summary.format(n=int(len(lines) > 1)))
open(log, "w").write("\\n".join(lines) + "\\n")
if variant == "raises":
    print("RuntimeError: CUDA error: an illegal instruction was encountered", file=sys.stderr)
    sys.exit(1)
"""
# A net for a hang only: every honest stand-in process ends in well under a second, even on a busy machine.
HANG_LIMIT_S = 20


@pytest.fixture
def stand_in(tmp_path):
    path = tmp_path / "compute-sanitizer"
    path.write_text(STAND_IN.format(python=sys.executable, mark=sanitize.KERNELS_MARK))
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return str(path)


def test_each_variant_runs_under_each_tool_in_its_own_process_and_findings_fail_it(tmp_path, monkeypatch, stand_in):
    names = ("right", "racy", "uninit", "raises", "hangs", "broken")
    family = fake.gemm_family("sanitized", [fake.variant(n) for n in names], shape=fake.SMALL, sanitize_shape={"M": 16})
    plan = SanitizerPlan(stand_in, jobs=4, limit_s=HANG_LIMIT_S)
    said = []
    found = sanitize_cases([fake.case(family, n) for n in names], plan, seed=1, log=said.append)
    assert [r.tool for r in found["sanitized/right"].runs] == list(TOOLS) and found["sanitized/right"].passed
    racy = found["sanitized/racy"].failures()
    assert racy == [
        "compute-sanitizer --tool racecheck at M=16 N=48 K=32: 1 finding(s) in the variant's kernels; the first: "
        "Error: Race reported between Write access at gemm_kernel+0x1b0 | and Read access at gemm_kernel+0x1f0 "
        "[64 hazards]"
    ], "at the family's sanitize_shape"
    # initcheck loaded the variant from the cache and named no kernel: the first process's names tell its findings
    assert found["sanitized/uninit"].failures() == [
        "compute-sanitizer --tool initcheck at M=16 N=48 K=32: 1 finding(s) in the variant's kernels; the first: "
        "Uninitialized __global__ memory read of size 2 bytes | at gemm_kernel+0x2a0"
    ]
    raised = found["sanitized/raises"].failures()
    assert len(raised) == len(TOOLS) and "exit status 1" in raised[0] and "an illegal instruction" in raised[0]
    (hung,) = found["sanitized/hangs"].failures()
    stopped = rf"racecheck of sanitized/hangs stopped after \d+ s \(limit {HANG_LIMIT_S} s\)"
    assert re.fullmatch(rf"compute-sanitizer --tool racecheck at M=16 N=48 K=32: {stopped}", hung), hung
    (broken,) = found["sanitized/broken"].failures()  # its other tools would compile it in vain: not run
    assert "did not compile at this shape: BuildError: the variant does not lower" in broken
    assert any(re.fullmatch(f"sanitizer: {stopped}", line) for line in said), "named when it is stopped"
    lines = sorted(line for line in said if line.startswith("sanitize ["))
    assert [line.split("]")[0] for line in lines] == [f"sanitize [{n}/6" for n in range(1, 7)], "a line per variant"
    (right,) = [line for line in lines if "sanitized/right:" in line]
    assert re.fullmatch(
        r"sanitize \[\d/6\] sanitized/right: 3 tools, [\d.]+ s, findings so far: \d \(elapsed \d+ s\)", right
    )
    assert any(
        "sanitized/racy: 3 tools" in line and "failed under racecheck, findings so far:" in line for line in lines
    )
    assert any("sanitized/broken: 1 tool, " in line for line in lines)


def test_a_run_with_sanitize_reports_the_pass_and_fails_the_variant_with_findings(tmp_path, monkeypatch, stand_in):
    family = fake.gemm_family("sanitized", [fake.variant("right"), fake.variant("racy")], shape=fake.SMALL)
    cases = [fake.case(family, "right"), fake.case(family, "racy")]
    status, report, summary = fake.gpu_run(
        tmp_path, monkeypatch, cases, Kernels.in_process(fake.cpu_session()), sanitizer=SanitizerPlan(stand_in, jobs=2)
    )
    found = fake.variants(report)
    assert status == 1 and found["sanitized/right"]["status"] == "pass" and found["sanitized/racy"]["status"] == "fail"
    assert found["sanitized/racy"]["sanitizer"]["runs"][0]["findings"][0][0].startswith("Error: Race reported")
    assert report["sanitizer"]["tools"] == list(TOOLS) and report["sanitizer"]["jobs"] == 2
    assert "- sanitizer: racecheck, synccheck, initcheck on 2 variants at their sanitize shapes" in summary
    assert "1 clean, 1 with findings (failures)" in summary


def test_sanitize_without_compute_sanitizer_stops_saying_so(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(command, "gpu_unavailable", lambda: None)
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setenv("CUDA_HOME", str(tmp_path / "toolkit"))
    monkeypatch.delenv("CUDA_PATH", raising=False)
    monkeypatch.setattr(sanitize, "DEFAULT_TOOLKIT", tmp_path / "cuda")
    assert command.main(["--sanitize"]) == 2
    err = capsys.readouterr().err
    assert "gpu check stopped, nothing was checked: --sanitize runs every variant under compute-sanitizer, which" in err
    assert "install the CUDA toolkit's compute-sanitizer or put it on PATH, or drop --sanitize" in err


def test_compute_sanitizer_is_found_on_path_else_in_the_toolkit(tmp_path, stand_in):
    toolkit = tmp_path / "toolkit" / "bin"
    toolkit.mkdir(parents=True)
    (toolkit / "compute-sanitizer").write_text("")
    assert sanitize.find_sanitizer({"PATH": str(tmp_path)}) == stand_in
    environ = {"PATH": os.devnull, "CUDA_HOME": str(tmp_path / "toolkit")}
    assert sanitize.find_sanitizer(environ) == str(toolkit / "compute-sanitizer")


@pytest.mark.parametrize(
    "options, said",
    [
        (["--repeats", "0"], "--repeats must be at least 1"),
        (["--sanitize-jobs", "4"], "--sanitize-jobs needs --sanitize"),
        (["--sanitize", "--sanitize-jobs", "0"], "--sanitize-jobs needs --sanitize and at least 1"),
        (["--sanitize-limit", "60"], "--sanitize-limit needs --sanitize"),
        (["--sanitize", "--sanitize-limit", "0"], "--sanitize-limit needs --sanitize and more than 0 seconds"),
    ],
)
def test_options_that_cannot_be_used_are_refused(options, said, capsys):
    with pytest.raises(SystemExit):
        command.parse_args(options)
    assert said in capsys.readouterr().err


def test_the_options_reach_the_plan():
    options = command.parse_args(["--repeats", "4", "--sanitize", "--sanitize-jobs", "3", "--sanitize-limit", "90"])
    options.sanitizer_executable = "/opt/cuda/bin/compute-sanitizer"
    plan = command.check_plan(options, [])
    assert plan.repeats == 4 and plan.sanitizer == SanitizerPlan("/opt/cuda/bin/compute-sanitizer", jobs=3, limit_s=90)
    assert command.check_plan(command.parse_args([]), []).sanitizer is None
