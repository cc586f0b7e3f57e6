"""compute-sanitizer's reports read as the sanitizer pass reads them: a finding in the variant's kernels fails it with
the tool's first lines, one in PyTorch's kernels does not, and a run without its summary line proves nothing."""

import pytest

from tilelang_golden.gpu.gate.sanitizer_gate import (
    DID_NOT_COMPILE,
    KERNELS_MARK,
    SHOWN_LINES,
    SanitizerResult,
    ToolRun,
    judge_run,
    named_kernels,
    parse_report,
)

# As racecheck (2025.3, its default `--racecheck-report analysis`) writes a planted missing barrier.
RACECHECK = """========= COMPUTE-SANITIZER
========= Error: Race reported between Write access at next_warp_kernel+0x1b0
=========     and Read access at next_warp_kernel+0x1f0 [448 hazards]
=========
========= RACECHECK SUMMARY: 1 hazard displayed (1 error, 0 warnings)
"""
# initcheck, with one finding in a PyTorch kernel that made the inputs and one in the variant's.
INITCHECK = """========= COMPUTE-SANITIZER
========= Uninitialized __global__ memory read of size 4 bytes
=========     at void at::native::reduce_kernel<512, 1>(at::native::ReduceOp<float>)+0x150
=========     by thread (0,0,0) in block (0,0,0)
=========     Address 0x7fc406200400
=========
========= Uninitialized __global__ memory read of size 4 bytes
=========     at add_into_output_kernel+0x90 in /tmp/tmpx8k2/kernel.cu:7
=========     by thread (3,0,0) in block (0,0,0)
=========     Address 0x7fc406300a0c
=========     Saved host backtrace up to driver entry point at kernel launch time
=========         Host Frame: [0x2e29d9] in /lib/x86_64-linux-gnu/libcuda.so.1
=========
========= ERROR SUMMARY: 2 errors
"""
CLEAN = "========= COMPUTE-SANITIZER\n========= ERROR SUMMARY: 0 errors\n"


def test_a_finding_in_the_variants_kernel_is_its_own_whole():
    findings, elsewhere, summarized = parse_report(RACECHECK, ["next_warp_kernel"])
    assert summarized and elsewhere == 0
    assert findings == [
        [
            "Error: Race reported between Write access at next_warp_kernel+0x1b0",
            "and Read access at next_warp_kernel+0x1f0 [448 hazards]",
        ]
    ]


def test_a_finding_in_another_kernel_is_counted_beside_and_fails_nothing():
    findings, elsewhere, summarized = parse_report(INITCHECK, ["add_into_output_kernel"])
    assert summarized and elsewhere == 1 and len(findings) == 1
    assert findings[0][:2] == [
        "Uninitialized __global__ memory read of size 4 bytes",
        "at add_into_output_kernel+0x90 in /tmp/tmpx8k2/kernel.cu:7",
    ]
    assert parse_report(INITCHECK, ["reduce"]) == ([], 2, True), "a kernel name matches whole, never a part of one"
    assert parse_report(CLEAN, ["gemm_kernel"]) == ([], 0, True)


def test_a_variant_with_findings_fails_showing_the_tools_first_lines():
    findings, elsewhere, _ = parse_report(RACECHECK, ["next_warp_kernel"])
    result = SanitizerResult(
        {"rows": 8, "cols": 256},
        (ToolRun("racecheck", tuple(map(tuple, findings)), elsewhere), ToolRun("synccheck"), ToolRun("initcheck")),
    )
    (failure,) = result.failures()
    assert failure == (
        "compute-sanitizer --tool racecheck at rows=8 cols=256: 1 finding(s) in the variant's kernels; the first: "
        "Error: Race reported between Write access at next_warp_kernel+0x1b0 | "
        "and Read access at next_warp_kernel+0x1f0 [448 hazards]"
    )
    assert not result.passed and result.as_dict()["runs"][0]["findings"] == findings
    long = ToolRun("initcheck", (tuple(f"line {i}" for i in range(SHOWN_LINES + 5)),))
    assert long.failures("n=1")[0].endswith(f"line {SHOWN_LINES - 1}"), "the first lines, the whole in report.json"


def judged(
    log: str | None, status: int = 0, out: str | None = None, err: str = "", kernels: list[str] | None = None
) -> ToolRun:
    out = f'{KERNELS_MARK}["next_warp_kernel"]\n' if out is None else out
    return judge_run("racecheck", status, (out, err, log or ""), 1.0, kernels)


def test_a_run_is_judged_by_its_exit_status_its_named_kernels_and_its_summary():
    found = judged(RACECHECK)
    assert found.error is None and len(found.findings) == 1
    assert judged(CLEAN).failures("n=1") == []
    unnamed = judged(RACECHECK, out="")
    assert unnamed.findings == () and unnamed.error.startswith("its process did not name the variant's kernels")
    # A process that loaded the variant from the pass's cache names nothing: the first process's names tell
    loaded = judged(RACECHECK, out="", kernels=["next_warp_kernel"])
    assert loaded.error is None and len(loaded.findings) == 1
    assert len(judged(RACECHECK, kernels=["another_kernel"]).findings) == 1, "its own names first"


def test_the_named_kernels_are_read_from_whole_lines_only():
    assert named_kernels(f'compiling\n{KERNELS_MARK}["a_kernel", "b_kernel"]\n') == ["a_kernel", "b_kernel"]
    assert named_kernels(f'{KERNELS_MARK}["a_kernel", "b_ke') is None, "still being written: read again later"
    assert named_kernels(f"{KERNELS_MARK}not json\n") is None and named_kernels("") is None


@pytest.mark.parametrize(
    "log, status, err, said",
    [
        (
            None,
            DID_NOT_COMPILE,
            "BuildError: block_M must divide M",
            "the variant did not compile at this shape: BuildError: block_M must divide M",
        ),
        (
            CLEAN,
            1,
            "Traceback (most recent call last):\nRuntimeError: CUDA error: unspecified launch failure",
            "its process ended with exit status 1; the last lines of its standard error: Traceback (most recent call "
            "last): | RuntimeError: CUDA error: unspecified launch failure",
        ),
        (CLEAN, -6, "", "its process ended with killed by SIGABRT; the last lines of its standard error: nothing"),
        (
            "========= COMPUTE-SANITIZER\n========= Error: Device not supported\n",
            0,
            "",
            "compute-sanitizer wrote no summary line, so nothing is proven; its log began: ========= COMPUTE-SANITIZER "
            "| ========= Error: Device not supported",
        ),
        (None, 0, "", "compute-sanitizer wrote no summary line, so nothing is proven; its log began: no log"),
    ],
    ids=["did not compile", "raised", "killed", "no summary", "no log"],
)
def test_a_run_that_proves_nothing_fails_saying_why(log, status, err, said):
    run = judged(log, status, err=err)
    assert run.failures("rows=8") == [f"compute-sanitizer --tool racecheck at rows=8: {said}"]
