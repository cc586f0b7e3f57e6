"""seeds/lower_num_stages.py (seed 01) without a GPU: output, criteria, dump files, failure paths."""

from __future__ import annotations

import copy
import difflib
import os
import re
import subprocess
import sys

import pytest
from conftest import REPO, SUBPROCESS_LIMIT_S, num_stages_case
from hidden_tilelang import HOW, run_without_tilelang
from script_runner import run_script

from kernels.gemm_num_stages import CRITERIA as NUM_STAGES_CRITERIA
from kernels.gemm_num_stages import FAMILY, variant
from seeds import lower_num_stages as script
from tilelang_golden.static.produce.facts import extract_facts
from tilelang_golden.static.snapshots.normalize import normalize_cuda
from tilelang_golden.targets import TARGETS

# The seed's tile on sm_80; test_facts.py lowers the same cases, so a worker often has them cached.
NS = ("0", "1", "2", "3")


def run_main(*argv: str) -> tuple[int, str, str]:
    return run_script(script.main, *argv)


@pytest.fixture(scope="module")
def sm80_run() -> tuple[int, str, str]:
    return run_main("--num-stages", *NS)


def block_of(output: str, n: int) -> list[str]:
    """The lines printed for one N, header excluded."""
    lines = output.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(f"== num_stages = {n} "))
    end = lines.index("", start)
    return lines[start + 1 : end]


def test_annotation_lines_have_the_seed_form(sm80_run):
    status, output, _ = sm80_run
    assert status == 0
    # num_stages=3 is what upstream's pipeline-planning test asserts, in exactly the seed's form.
    assert block_of(output, 3)[:3] == [
        "software_pipeline_stage = [0, 0, 2]",
        "software_pipeline_order = [0, 1, 2]",
        "tl_pipelined_num_stages = 3",
    ]
    for n in (1, 2):
        for line, key in zip(block_of(output, n), script.PIPELINE_LINES, strict=False):
            assert re.fullmatch(rf"{key} = (\[\d+(, \d+)*\]|\d+)", line)
    assert block_of(output, 0)[0] == "no loop carries a software pipeline annotation after tl.PipelinePlanning"


@pytest.mark.parametrize("n", [int(n) for n in NS])
def test_each_block_reports_the_extracted_facts(sm80_run, n, lowerings):
    (facts,) = extract_facts(lowerings.lower(num_stages_case(n, "sm_80")))["kernels"]
    block = "\n".join(block_of(sm80_run[1], n))
    sync = facts["sync"]
    assert f"dynamic shared memory = {facts['dynamic_shared_memory_bytes']} bytes" in block
    assert f"cp_async_wait arguments = {sync['cp_async_wait']}" in block
    assert (
        f"__syncthreads() = {sync['syncthreads_main_loop']} in the steady-state loop, "
        f"{sync['syncthreads_elsewhere']} elsewhere"
    ) in block
    a_shape = facts["shared_buffers"]["A_s"]["shape"]
    versions = str(a_shape[0]) if len(a_shape) == 3 else "none"
    assert f"version dimension = A_s {versions} (float16{a_shape})" in block


def test_every_criterion_is_reported_with_its_values(sm80_run):
    lines = sm80_run[1].splitlines()
    for name in NUM_STAGES_CRITERIA:
        (line,) = [line for line in lines if name in line]
        assert line.startswith("PASS  ")
        assert "N=" in line  # the observed values behind the verdict
    assert lines[-1] == f"{len(NUM_STAGES_CRITERIA)} of {len(NUM_STAGES_CRITERIA)} evaluated criteria hold"


@pytest.fixture(scope="module")
def sweep_facts(lowerings) -> dict[int, dict]:
    return {n: extract_facts(lowerings.lower(num_stages_case(n, "sm_80"))) for n in (1, 2, 3)}


def test_altered_facts_make_a_criterion_fail_and_the_exit_status_one(sweep_facts, capsys):
    assert script.report(sweep_facts) == 0
    altered = copy.deepcopy(sweep_facts)
    altered[3]["kernels"][0]["sync"]["syncthreads_main_loop"] += 1  # a barrier added to the steady-state loop
    assert script.report(altered) == script.EXIT_CRITERION_FAILED
    lines = capsys.readouterr().out.splitlines()
    (failed,) = [line for line in lines if line.startswith("FAIL")]
    assert NUM_STAGES_CRITERIA[5] in failed
    assert "N=1: 2, N=2: 2, N=3: 3" in failed
    assert lines[-1].startswith("4 of 5 evaluated criteria hold; failed: 5b.")


def test_criteria_the_given_n_cannot_decide_are_shown_as_skipped(sweep_facts):
    from kernels.gemm_num_stages import num_stages_criteria

    only_three = {3: sweep_facts[3]["kernels"][0]}
    lines, passed = script.report_criteria(num_stages_criteria(only_three), [3])
    assert passed
    assert lines[1].startswith(f"PASS  {NUM_STAGES_CRITERIA[0]}")
    assert [line.split("  ")[0] for line in lines[2:-1]] == ["SKIP"] * 5
    assert "(needs N = 0 among --num-stages)" in lines[3]
    assert lines[-1] == "1 of 1 evaluated criteria hold"


def without(facts_by_n: dict[int, dict], *paths: tuple[str, str], target: str = "gfx942") -> dict[int, dict]:
    """The facts as a target without these facts would have them: the keys absent, not 0."""
    altered = copy.deepcopy(facts_by_n)
    for facts in altered.values():
        facts["case"]["target"] = target
        for group, key in paths:
            del facts["kernels"][0][group][key]
    return altered


NO_WAITS = "its facts have no sync.cp_async_wait or sync.vmcnt_waits"


def test_a_fact_the_target_does_not_have_makes_its_criterion_not_applicable_not_failed(sweep_facts, capsys):
    hip = without(sweep_facts, ("sync", "cp_async_wait"))  # sm_80's facts: no TMA keys to begin with
    assert script.report(hip) == 0
    lines = capsys.readouterr().out.splitlines()
    assert f"N/A   {NUM_STAGES_CRITERIA[4]}  (not applicable on gfx942: {NO_WAITS})" in lines
    assert not [line for line in lines if line.startswith("FAIL")]
    assert lines[-1] == "4 of 4 evaluated criteria hold, 1 not applicable on gfx942"
    block = block_of("\n".join(lines), 2)
    assert not [line for line in block if "cp_async_wait" in line], "an absent fact is left out, not shown as 0"
    assert block[-1].startswith("warp specialized = no, threads = 128, MMA = ")


def test_a_criterion_not_applicable_still_lets_another_fail(sweep_facts, capsys):
    hip = without(sweep_facts, ("sync", "cp_async_wait"))
    hip[3]["kernels"][0]["pipelines"] = []  # and the deepest N lost its annotation
    assert script.report(hip) == script.EXIT_CRITERION_FAILED
    lines = capsys.readouterr().out.splitlines()
    assert f"N/A   {NUM_STAGES_CRITERIA[4]}  (not applicable on gfx942: {NO_WAITS})" in lines
    assert lines[-1] == (
        f"3 of 4 evaluated criteria hold, 1 not applicable on gfx942; failed: {NUM_STAGES_CRITERIA[0]}"
    )


def test_the_in_flight_criterion_reads_the_vmcnt_waits_of_a_hip_target(sweep_facts):
    from kernels.gemm_num_stages import num_stages_criteria

    hip = {n: facts["kernels"][0] for n, facts in without(sweep_facts, ("sync", "cp_async_wait")).items()}
    for n, facts in hip.items():
        facts["sync"]["vmcnt_waits"] = sweep_facts[n]["kernels"][0]["sync"]["cp_async_wait"]
    claims = {claim.name: claim for claim in num_stages_criteria(hip)}
    assert claims[NUM_STAGES_CRITERIA[4]].holds
    for facts in hip.values():
        facts["sync"]["vmcnt_waits"] = []  # a target that does not pipeline: no waits at all
    assert not {claim.name: claim for claim in num_stages_criteria(hip)}[NUM_STAGES_CRITERIA[4]].holds


def test_a_hip_target_lowers_and_dumps_hip_source(tmp_path, lowerings):
    status, output, _ = run_main(
        "--arch", "gfx942", "--tile", "64x64x32", "--num-stages", "2", "--dump-dir", str(tmp_path)
    )
    assert "(gemm_num_stages/ns2_64x64x32/gfx942) ==" in output
    assert status in (0, script.EXIT_CRITERION_FAILED)  # what TileLang does on HIP is observed, not assumed
    (dumped,) = tmp_path.iterdir()
    assert dumped.name == "gemm_num_stages_2.hip"
    assert dumped.read_text() == normalize_cuda(lowerings.lower(num_stages_case(2, "gfx942", (64, 64, 32))).cuda)


def test_an_arch_the_family_does_not_declare_is_refused(monkeypatch):
    import dataclasses

    import kernels.gemm_num_stages

    monkeypatch.setattr(kernels.gemm_num_stages, "FAMILY", dataclasses.replace(FAMILY, targets=["sm_90"]))
    status, output, error = run_main("--arch", "sm_80", "--num-stages", "1")
    assert (status, output) == (2, "")
    assert error == "--arch sm_80: kernels/gemm_num_stages.py declares only targets ['sm_90']\n"


def test_sm90_prints_what_it_observes_and_fails_the_sm80_criteria(lowerings):
    status, output, _ = run_main("--arch", "sm_90", "--tile", "64x64x32", "--num-stages", "2")
    assert status == script.EXIT_CRITERION_FAILED
    block = block_of(output, 2)
    (facts,) = extract_facts(lowerings.lower(num_stages_case(2, "sm_90", (64, 64, 32))))["kernels"]
    assert facts["warp_specialized"] and facts["pipelines"] == []
    assert block[0] == (
        "no loop carries a software pipeline annotation after tl.PipelinePlanning "
        "(the loop was warp-specialized before it)"
    )
    assert f"mbarriers = {facts['sync']['mbarriers']}" in block[-1]
    assert f"FAIL  {NUM_STAGES_CRITERIA[0]}  [N=2: None]" in output


def test_dump_dir_writes_normalized_cuda_per_n(tmp_path, lowerings):
    status, output, _ = run_main("--num-stages", "2", "3", "--dump-dir", str(tmp_path / "tl22"))
    assert status == 0
    files = sorted(p.name for p in (tmp_path / "tl22").iterdir())
    assert files == ["gemm_num_stages_2.cu", "gemm_num_stages_3.cu"]
    texts = {}
    for n in (2, 3):
        path = tmp_path / "tl22" / f"gemm_num_stages_{n}.cu"
        texts[n] = path.read_text()
        assert texts[n] == normalize_cuda(lowerings.lower(num_stages_case(n, "sm_80")).cuda)
        assert f"wrote {path}" in output
        assert "#line" not in texts[n] and str(tmp_path) not in texts[n]
    diff = list(difflib.unified_diff(texts[2].splitlines(), texts[3].splitlines(), lineterm=""))
    assert "-    tl::cp_async_wait<1>();" in diff and "+    tl::cp_async_wait<2>();" in diff


def test_help_documents_every_option_and_the_trace(capsys):
    with pytest.raises(SystemExit) as exit_info:
        script.parse_args(["--help"])
    assert exit_info.value.code == 0
    text = capsys.readouterr().out
    for option in ("--num-stages", "--arch", "--tile", "--dump-dir", "--bench", "TL_LOWER_TRACE=terminal"):
        assert option in text
    assert "{" + ",".join(TARGETS) + "}" in text, "every target of the project, in its order"
    assert "report.html" in text and "exit status" in text


@pytest.mark.parametrize("argv", [["--tile", "128x128"], ["--num-stages", "-1"], ["--arch", "sm_70"]])
def test_bad_arguments_are_usage_errors(argv, capsys):
    with pytest.raises(SystemExit) as exit_info:
        script.parse_args(argv)
    assert exit_info.value.code == 2
    assert "error:" in capsys.readouterr().err


def test_unregistered_n_is_lowered_on_the_fly():
    assert variant(5, 64, 64, 32).name not in {v.name for v in FAMILY.variants}
    status, output, _ = run_main("--tile", "64x64x32", "--num-stages", "5")
    assert status == 0
    assert "software_pipeline_stage = [0, 0, 4]" in block_of(output, 5)


def test_bench_refuses_unregistered_variants_before_lowering():
    status, output, error = run_main("--bench", "--tile", "64x64x64", "--num-stages", "2")
    assert status == script.EXIT_CANNOT_RUN
    assert output == ""
    assert "not registered: ns2_64x64x64" in error


def test_bench_without_a_cuda_device_stops_with_a_message():
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("a CUDA device is present: --bench would run")
    status, output, error = run_main("--bench", "--num-stages", "2")
    assert status == script.EXIT_CANNOT_RUN
    assert output == ""
    assert error.startswith("--bench: ") and "CUDA" in error


@pytest.mark.parametrize("how", HOW)
def test_without_tilelang_it_says_so_and_exits_nonzero(how):
    result = run_without_tilelang("seeds.lower_num_stages", "--num-stages", "1", how=how)
    assert result.returncode == script.EXIT_CANNOT_RUN
    expected = {  # with -S nothing installed is found, this project included
        "hidden": "cannot import TileLang (No module named 'tilelang')\n",
        "no site-packages": "cannot import the harness (No module named 'tilelang_golden'): pip install ",
    }[how]
    assert result.stderr.startswith(expected)
    assert result.stdout == ""


def test_a_wheel_without_cuda_codegen_is_named(monkeypatch):
    import tilelang.tools.compile_only

    monkeypatch.setattr(tilelang.tools.compile_only, "cuda_codegen_available", lambda: False)
    status, output, error = run_main("--num-stages", "1")
    assert status == script.EXIT_CANNOT_RUN
    assert output == ""
    assert "tilelang.cuda._ffi_api.AnnotateDeviceBoundTmaCopies" in error
    assert "cannot lower CUDA" in error


def root_on_the_path() -> dict[str, str]:
    """This environment with the repository root first on PYTHONPATH: `python -m seeds.lower_num_stages` run from
    another directory finds the module as from the root."""
    return {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}


@pytest.mark.parametrize("mode", ["terminal", "html"])
def test_tilelang_lower_trace_hooks_into_the_lowering(mode, tmp_path):
    env = {**root_on_the_path(), "TL_LOWER_TRACE": mode, "TL_LOWER_TRACE_DIR": str(tmp_path / "trace")}
    result = subprocess.run(
        [sys.executable, "-m", "seeds.lower_num_stages", "--tile", "64x64x32", "--num-stages", "2"],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=SUBPROCESS_LIMIT_S,
    )
    assert result.returncode == 0, result.stderr
    assert "[lower_trace]" in result.stdout and "PipelinePlanning" in result.stdout
    report = tmp_path / "trace" / "lower_num_stages" / "report.html"
    if mode == "html":
        assert report.is_file() and "InjectSoftwarePipeline" in report.read_text(errors="replace")
    else:
        assert not report.exists()
    assert "software_pipeline_stage = [0, 0, 1]" in result.stdout  # the script's own output is intact


def test_repository_paths_work_from_any_directory(tmp_path):
    """The module finds the repository's files by its own place, not the working directory: with the root on the
    path it runs from any directory."""
    result = subprocess.run(
        [sys.executable, "-m", "seeds.lower_num_stages", "--help"],
        capture_output=True,
        text=True,
        env=root_on_the_path(),
        cwd=tmp_path,
        timeout=SUBPROCESS_LIMIT_S,
    )
    assert result.returncode == 0 and "--num-stages" in result.stdout


def test_bench_runs_the_gpu_check_for_the_given_n_and_prints_its_summary(monkeypatch):
    """The wiring of --bench, on a fake GPU run (the real one needs a GPU)."""
    import gpu_fakes

    from tilelang_golden.gpu import check as gpu_check
    from tilelang_golden.gpu.run import device as gpu_device

    asked = {}

    def check_cases(plan):
        cases = plan.select(gpu_fakes.device())
        asked.update(cases=[c.id for c in cases], golden=plan.golden)
        tile = (128, 128, 32)
        return gpu_fakes.run(
            [gpu_fakes.result(gpu_fakes.sweep_case(n, tile), 16384 * n, (ms, ms, ms)) for n, ms in ((1, 4.0), (2, 3.0))]
        )

    monkeypatch.setattr(gpu_device, "require_cuda", gpu_fakes.device)
    monkeypatch.setattr(gpu_check, "check_cases", check_cases)
    status, output, _ = run_main("--bench", "--num-stages", "1", "2")
    assert status == 0
    assert asked == {
        "cases": ["gemm_num_stages/ns1_128x128x32/sm_90", "gemm_num_stages/ns2_128x128x32/sm_90"],
        "golden": script.REPO / "golden",
    }
    summary = output[output.index("## GPU check") :]
    assert "| 128x128x32 | 2 | 3.000 |" in summary and "gemm_num_stages: latency and shared memory" in summary
