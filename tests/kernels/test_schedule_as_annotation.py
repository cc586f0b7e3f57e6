"""seeds/schedule_as_annotation.py (seed 03) without a GPU: table, API checklist, CUDA effects, swizzle."""

from __future__ import annotations

import pytest
from hidden_tilelang import HOW, run_without_tilelang
from script_runner import run_script

from kernels import gemm_relu_schedules
from kernels.gemm_relu_schedules import FAMILY
from seeds import schedule_as_annotation as script
from tilelang_golden.analysis import changed_source, source_lines_changed
from tilelang_golden.static.variant_effects import VariantEffect, variant_effects
from tilelang_golden.targets import TARGETS

SHAPE = FAMILY.shape


def run_main(*argv: str) -> tuple[int, str, str]:
    return run_script(script.main, *argv)


@pytest.fixture(scope="module")
def seed_family():
    """The seed's family, one object for the module: `lowerings` memoizes by variant, so the tests that compare with
    the static run read its lowerings instead of lowering all four schedules on every target again."""
    return script.seed_schedules()


@pytest.fixture(scope="module")
def static_run(lowerings, seed_family) -> tuple[int, str, str]:
    """What `--static-only` prints, its lowerings kept for the tests to compare with."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(script, "seed_schedules", lambda: seed_family)
        return run_script(lambda argv: script.static_report(lowerings))


# -- the table ---------------------------------------------------------------------------------


def test_table_counts_lines_from_the_source_and_shows_them():
    table = script.schedule_table()
    baseline = gemm_relu_schedules.SCHEDULES[gemm_relu_schedules.BASELINE][0]
    for name, (build, dimension, seed_lines) in gemm_relu_schedules.SCHEDULES.items():
        (row,) = [line for line in table if line.startswith(name)]
        counted = source_lines_changed(baseline, build)
        assert f" {dimension or '-'} " in row
        assert f" {counted} ({seed_lines}) " in row
        changed = changed_source(baseline, build)
        assert row.endswith(changed[0] if changed else "-")
        for more in changed[1:]:
            assert any(line.strip() == more for line in table)
    text = "\n".join(table)
    assert "policy=T.GemmWarpPolicy.FullRow" in text
    assert "B_s: tilelang.layout.make_swizzled_layout(B_s)" in text
    assert "stage=[0, 0, 1], order=[0, 1, 2]" in text
    assert "differs from the seed" not in text


def test_table_flags_a_count_that_disagrees_with_the_seed(monkeypatch):
    schedules = dict(gemm_relu_schedules.SCHEDULES)
    build, dimension, _ = schedules["v1_warp_policy"]
    schedules["v1_warp_policy"] = (build, dimension, 2)
    monkeypatch.setattr(gemm_relu_schedules, "SCHEDULES", schedules)
    (row,) = [line for line in script.schedule_table() if line.startswith("v1_warp_policy")]
    assert "1 (2)  <- differs from the seed" in row


def test_changed_source_shows_changed_and_removed_lines():
    def before():
        print(1)
        print(2)
        return 3

    def after():
        print(1)
        return 4

    def shorter():
        print(1)
        print(2)

    assert changed_source(before, after) == ["return 4"]
    assert changed_source(after, before) == ["print(2)", "return 3"]
    assert changed_source(before, shorter) == ["- return 3"]


# -- the API checklist -------------------------------------------------------------------------


@pytest.mark.parametrize("api", script.API_CHECKLIST, ids=lambda api: api.name)
def test_every_api_the_variants_use_is_found_with_its_signature(api):
    check = script.check_api(api)
    assert check.present, check.missing
    for used in api.uses:
        assert used in check.found


def test_a_missing_api_and_a_missing_parameter_are_named():
    gone = script.check_api(script.Api("T.NoSuchThing", "tilelang.language", "NoSuchThing", (), "nobody"))
    assert not gone.present and gone.missing == ("tilelang.language.NoSuchThing",)
    lacking = script.check_api(script.Api("T.Pipelined", "tilelang.language", "Pipelined", ("depth",), "nobody"))
    assert not lacking.present and lacking.missing == ("parameter 'depth'",)
    member = script.check_api(script.Api("T.GemmWarpPolicy", "tilelang.language", "GemmWarpPolicy", ("Diag",), "x"))
    assert member.missing == ("Diag",) and "enum {Square, FullRow, FullCol}" in member.found


def test_static_run_stops_with_status_one_naming_missing_apis(monkeypatch, capsys, lowerings):
    missing = script.Api("T.NoSuchThing", "tilelang.language", "NoSuchThing", (), "nobody")
    monkeypatch.setattr(script, "API_CHECKLIST", (*script.API_CHECKLIST, missing))
    assert script.static_report(lowerings) == script.EXIT_FAILED
    output = capsys.readouterr().out
    assert "MISSING T.NoSuchThing" in output
    assert output.rstrip().endswith(
        "missing from the installed TileLang: T.NoSuchThing; the variants using them cannot be built"
    )


# -- what each annotation does to the CUDA -------------------------------------------------------


def test_static_run_marks_variants_identical_to_the_baseline(static_run, lowerings, seed_family):
    status, output, _ = static_run
    assert status == 0
    family = seed_family
    effects = variant_effects(family, lowerings.produce, lowerings.build)
    lines = output.splitlines()
    headings = [line for line in lines if "lines changed against v0_baseline" in line]
    assert [line.split(":")[0] for line in headings] == list(family.target_names), "every target, in order"
    for target in family.target_names:
        language = {"cuda": "CUDA", "hip": "HIP"}[TARGETS[target].backend]
        start = lines.index(
            f"{target}: {language} lines changed against v0_baseline (normalized text, lines added + removed)"
        )
        for offset, effect in enumerate(effects, start=1):
            line = lines[start + offset]
            changed = effect.cuda_lines_changed[target]
            assert line.split()[:2] == [effect.variant, str(changed)]
            assert ("IDENTICAL to v0_baseline" in line) == (changed == 0)
    assert "same dataflow as v0_baseline: v1_warp_policy yes, v2_swizzled_layout yes, v3_manual_pipeline yes" in lines


def test_render_effects_marks_no_effect_and_a_different_dataflow():
    def effect(name: str, changed: int, same: bool = True) -> VariantEffect:
        return VariantEffect(
            name, "v0", "1 source line(s)", same, {"sm_80": changed}, {"sm_80": ["launch.threads"] if changed else []}
        )

    lines = script.render_effects([effect("v1", 0), effect("v2", 12, same=False)])
    assert lines[1].split() == [
        "v1",
        "0",
        "IDENTICAL",
        "to",
        "v0:",
        "this",
        "annotation",
        "has",
        "no",
        "effect",
        "on",
        "sm_80",
    ]
    assert lines[2].split()[:2] == ["v2", "12"] and lines[2].endswith("facts that differ: launch.threads")
    assert lines[-1] == "same dataflow as v0: v1 yes, v2 NO"


def test_render_effects_names_each_targets_language_and_a_target_not_compared():
    def effect(name: str, not_lowering: dict[str, str] | None = None) -> VariantEffect:
        compared = [t for t in ("sm_80", "gfx942") if t not in (not_lowering or {})]
        return VariantEffect(
            name, "v0", "1 source line(s)", True, dict.fromkeys(compared, 4), dict.fromkeys(compared, []),
            not_lowering or {},
        )  # fmt: skip

    reason = "v2 does not lower on gfx942: no MFMA layout for it"
    lines = script.render_effects([effect("v1"), effect("v2", {"gfx942": reason})])
    assert lines[0] == "sm_80: CUDA lines changed against v0 (normalized text, lines added + removed)"
    assert lines[3] == "gfx942: HIP lines changed against v0 (normalized text, lines added + removed)"
    assert lines[4].split()[:2] == ["v1", "4"] and lines[4].endswith("facts that differ: none")
    assert lines[5].split()[:2] == ["v2", "-"] and lines[5].endswith(f"not compared: {reason}")
    assert lines[-1] == "same dataflow as v0: v1 yes, v2 yes"


def test_the_static_run_compares_on_the_targets_the_family_declares(monkeypatch, capsys, lowerings):
    import dataclasses

    narrowed = dataclasses.replace(FAMILY, targets=["gfx942", "sm_80"])
    monkeypatch.setattr(gemm_relu_schedules, "FAMILY", narrowed)
    assert script.static_report(lowerings) == 0
    headings = [line for line in capsys.readouterr().out.splitlines() if "lines changed against" in line]
    assert [line.split(":")[0] for line in headings] == ["sm_80", "gfx942"]


# -- the swizzle criterion -------------------------------------------------------------------------


def test_swizzle_criterion_is_computed_for_the_annotated_tiles():
    v2 = gemm_relu_schedules.v2_swizzled_layout(**SHAPE)
    layouts = {layout.buffer: layout for layout in script.explicit_layouts(v2)}
    assert sorted(layouts) == ["A_s", "B_s"]
    for layout in layouts.values():
        assert layout.dtype == "float16"
        assert layout.last_dim_bytes == layout.shape[-1] * 2
        assert layout.meets_swizzle_criterion == (layout.shape[-1] * 16 == script.SWIZZLE_CRITERION_BITS)
    assert layouts["A_s"].shape == [128, 32] and layouts["A_s"].meets_swizzle_criterion  # 64-byte rows
    assert layouts["B_s"].shape == [32, 128] and not layouts["B_s"].meets_swizzle_criterion  # 256-byte rows
    # Observed in TileLang 0.1.15: make_swizzled_layout permutes both tiles, B_s despite the criterion.
    assert all(0 < layout.elements_moved < layout.elements for layout in layouts.values())
    assert script.explicit_layouts(gemm_relu_schedules.v0_baseline(**SHAPE)) == []


def test_render_swizzle_says_where_the_criterion_mispredicts():
    agree = script.ExplicitLayout("A_s", [128, 32], "float16", 64, True, 3072, 4096)
    identity = script.ExplicitLayout("C_s", [64, 32], "float16", 64, True, 0, 2048)
    lines = script.render_swizzle([agree, identity])
    assert "A_s float16 128x32: last dimension 64 bytes, criterion met" in lines[1]
    assert lines[2].endswith("moves 0 of 2048 elements (the identity)")
    assert lines[-1].startswith("  the criterion mispredicts tilelang.layout.make_swizzled_layout for C_s")
    assert "mispredicts" not in "\n".join(script.render_swizzle([agree]))


def test_static_run_prints_the_swizzle_check(static_run):
    output = static_run[1]
    assert "A_s float16 128x32: last dimension 64 bytes, criterion met" in output
    assert "B_s float16 32x128: last dimension 256 bytes, criterion NOT met" in output


# -- environment failures ----------------------------------------------------------------------------


@pytest.mark.parametrize("how", HOW)
def test_without_tilelang_it_says_so_and_exits_nonzero(how):
    result = run_without_tilelang("seeds.schedule_as_annotation", "--static-only", how=how)
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
    status, output, error = run_main("--static-only")
    assert status == script.EXIT_CANNOT_RUN and output == ""
    assert "tilelang.cuda._ffi_api.AnnotateDeviceBoundTmaCopies" in error


def test_gpu_mode_without_a_cuda_device_stops_with_a_message():
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("a CUDA device is present: the GPU mode would run")
    status, output, error = run_main()
    assert status == script.EXIT_CANNOT_RUN and output == ""
    assert "CUDA" in error and "--static-only" in error


def test_help_documents_the_options(capsys):
    with pytest.raises(SystemExit) as exit_info:
        script.parse_args(["--help"])
    assert exit_info.value.code == 0
    text = capsys.readouterr().out
    assert "--static-only" in text and "--seeds" in text and "exit status" in text


def test_fewer_than_three_seeds_is_a_usage_error(capsys):
    with pytest.raises(SystemExit) as exit_info:
        script.parse_args(["--seeds", "1", "2", "2"])
    assert exit_info.value.code == 2
    assert "at least 3 distinct seeds" in capsys.readouterr().err


# -- the GPU mode's wiring, on fake compilation and numerics (the real run needs a GPU) -----------


@pytest.fixture
def fake_gpu(monkeypatch):
    """A GPU where v2 fails to compile and v3 mismatches; returns what check_numerics was given."""
    import gpu_fakes

    from tilelang_golden.gpu.gate import numerics_gate
    from tilelang_golden.gpu.measure import numerics
    from tilelang_golden.gpu.run import compile as jit
    from tilelang_golden.gpu.run import device as gpu_device

    given = {}

    def compile_cases(cases):
        return [
            jit.CompiledCase(c, None, error="boom")
            if c.variant.name == "v2_swizzled_layout"
            else jit.CompiledCase(
                c,
                object(),
                arguments=gpu_fakes.gemm_arguments(c.params),
                outputs=gpu_fakes.GEMM_OUTPUTS,
                tolerances=(c.family.tolerance,),
            )
            for c in cases
        ]

    def check_numerics(runs, seeds):
        given.update(runs=runs, seeds=list(seeds))
        results = {}
        for run in runs:
            (output,) = run.checked_outputs()
            checks = [
                numerics_gate.SeedCheck(s, [numerics_gate.OutputCheck(output, max_abs_error=0.004)]) for s in seeds
            ]
            if run.key == "v3_manual_pipeline":
                checks[1].outputs[0] = numerics_gate.OutputCheck(output, mismatches=7, max_abs_error=3.5)
            results[run.key] = numerics_gate.NumericsResult(run.family.label(run.params), run.checked_outputs(), checks)
        return results

    monkeypatch.setattr(gpu_device, "require_cuda", gpu_fakes.device)
    monkeypatch.setattr(jit, "compile_cases", compile_cases)
    monkeypatch.setattr(numerics, "check_numerics", check_numerics)
    return given


def test_gpu_mode_prints_one_line_per_variant_and_fails_on_a_mismatch(fake_gpu):
    status, output, _ = run_main("--seeds", "11", "22", "33")
    assert status == script.EXIT_FAILED
    lines = output.splitlines()
    assert lines[0] == "NVIDIA H200 (sm_90); C = relu(A @ B), fp16 8192x8192x8192, seeds [11, 22, 33]"
    assert lines[1] == "PASS  v0_baseline          max abs error 0.004 against torch.relu(A @ B) (rtol=0.01, atol=0.01)"
    assert lines[2].startswith("PASS  v1_warp_policy ")
    assert lines[3] == "FAIL  v2_swizzled_layout   did not compile: boom"
    assert lines[4].startswith("FAIL  v3_manual_pipeline   max abs error 3.5 against torch.relu(A @ B)")
    assert "seed 22: 7 elements outside atol=0.01, rtol=0.01 (0 allowed" in lines[4]
    assert len(lines) == 5  # no timing, no other numbers
    assert [run.key for run in fake_gpu["runs"]] == ["v0_baseline", "v1_warp_policy", "v3_manual_pipeline"]
    assert {run.family.name for run in fake_gpu["runs"]} == {"gemm_relu_schedules"}
    assert fake_gpu["seeds"] == [11, 22, 33]
