"""Adding a family is writing one file: a family defined in a temporary module runs through the
real static session and the GPU numerics; bad declarations fail alone, with a clear message."""

from __future__ import annotations

import textwrap

import pytest
from conftest import SMALL_CASE, collected_cases

import kernels
import tilelang_golden.catalog.loading
import tilelang_golden.family
from tilelang_golden.family import FamilyError, Variant
from tilelang_golden.targets import TARGETS

# A complete family file, as the README's recipe writes one: an elementwise kernel.
TINY_FAMILY = '''
"""Y = 2 X in fp16: the smallest kernel family."""

import tilelang.language as T

from tilelang_golden.family import Family, Tolerance, Variant, Work


def scale(rows, cols, block_rows, threads):
    @T.prim_func
    def double(X: T.Tensor((rows, cols), "float16"), Y: T.Tensor((rows, cols), "float16")):
        with T.Kernel(T.ceildiv(rows, block_rows), threads=threads) as bx:
            tile = T.alloc_fragment((block_rows, cols), "float16")
            T.copy(X[bx * block_rows, 0], tile)
            for i, j in T.Parallel(block_rows, cols):
                tile[i, j] = tile[i, j] * T.float16(2)
            T.copy(tile, Y[bx * block_rows, 0])

    return double


def inputs(p, generator, device):
    import torch

    return [torch.randn(p["rows"], p["cols"], generator=generator, device=device, dtype=torch.float16)]


FAMILY = Family(
    name="{name}",
    shape={{"rows": 256, "cols": 128}},
    variants=[
        Variant("threads128", scale, {{"block_rows": 8, "threads": 128}}),
        Variant("threads64", scale, {{"block_rows": 8, "threads": 64}}, compare_with="threads128"){extra},
    ],
    inputs=inputs,
    outputs=[1],
    reference=lambda p, x: 2 * x.float(),
    tolerance=Tolerance(atol=0, rtol=0),  # doubling is exact in fp16
    speed_reference=lambda p, x: 2 * x,
    speed_reference_label="2 * x",
    work=lambda p: Work(flops=p["rows"] * p["cols"], bytes=4 * p["rows"] * p["cols"]),
)
'''


@pytest.fixture
def kernels_dir(tmp_path, monkeypatch):
    """A second folder of family files, searched like kernels/ itself (the same package)."""
    folder = tmp_path / "more_kernels"
    folder.mkdir()
    monkeypatch.setattr(kernels, "__path__", [*kernels.__path__, str(folder)])
    return folder


def write_family(folder, name: str, extra: str = "", text: str | None = None) -> None:
    source = text if text is not None else TINY_FAMILY.format(name=name, extra=extra)
    (folder / f"{name}.py").write_text(textwrap.dedent(source))


def test_a_family_in_one_new_file_is_lowered_snapshotted_and_compared(kernels_dir, golden_session):
    write_family(kernels_dir, "tiny_scale")
    regen = golden_session("--regen", "-k", "tiny_scale")
    # 2 variants on every target, the declaration and the summary of the annotation pair
    cases = 2 * len(TARGETS)
    regen.assert_outcomes(passed=cases + 2)
    # per case its source and facts, and on a CUDA target its machine facts; the summary
    files = 2 * cases + 2 * sum(target.backend == "cuda" for target in TARGETS.values()) + 1
    regen.stdout.fnmatch_lines([f"*golden files: {files} created, 0 updated, 0 deleted, 0 unchanged*"])
    facts = (golden_session.golden / "tiny_scale/threads64/sm_90.yaml").read_text()
    assert "params:\n  rows: 256\n  cols: 128\n  block_rows: 8\n  threads: 64\n" in facts
    assert "threads: [64, 1, 1]" in facts
    summary = (golden_session.golden / "tiny_scale/SUMMARY.md").read_text()
    assert "| threads64 | threads128 | threads: 128 -> 64 | yes |" in summary
    golden_session("-k", "tiny_scale").assert_outcomes(passed=cases + 2)


def test_the_new_familys_numerics_run_through_the_gpu_check(kernels_dir):
    """The GPU gate on CPU tensors with Python stand-ins for the compiled kernel (CI has no GPU): each
    returns its output, as TileLang's kernels do, from memory the gate poisoned first."""
    import gpu_fakes

    from tilelang_golden.gpu.measure.numerics import check_numerics
    from tilelang_golden.gpu.run.compile import Argument

    write_family(kernels_dir, "tiny_scale")
    (family,) = [f for f in tilelang_golden.catalog.loading.load_families().families if f.name == "tiny_scale"]
    arguments = [Argument((256, 128), "float16", "X"), Argument((256, 128), "float16", "Y")]

    def right(x, y):
        y.copy_(2 * x)

    def wrong(x, y):
        y.copy_(2 * x)
        y[3, 5] += 1

    cache = gpu_fakes.FakeCache()
    cases = [
        gpu_fakes.numerics_case(
            family, write, cache=cache, arguments=arguments, outputs=(1,), name="threads128", key=key
        )
        for key, write in (("right", right), ("wrong", wrong))
    ]
    results = check_numerics(cases, [1, 2, 3], device="cpu", memory=cache)
    assert results["right"].passed
    assert not results["wrong"].passed and "1 elements outside atol=0, rtol=0" in results["wrong"].failures()[0]


@pytest.mark.parametrize(
    "extra, message",
    [
        (',\n        Variant("threads64", scale, {"block_rows": 8, "threads": 32})', "these repeat: ['threads64']"),
        (
            ',\n        Variant("wide", scale, {"block_rows": 8, "threads": 64}, shape={"colums": 256})',
            "variant 'wide' overrides dimensions ['colums'] that the family does not declare",
        ),
        (
            ',\n        Variant("odd", scale, {"block_rows": 8, "threads": 64}, compare_with="nope")',
            "variant 'odd' compares with 'nope', which is not a variant",
        ),
    ],
)
def test_a_bad_declaration_fails_alone_naming_file_and_fix(kernels_dir, golden_session, extra, message):
    write_family(kernels_dir, "tiny_bad", extra)
    result = golden_session("-k", f"tiny_bad or {SMALL_CASE}", "--regen")
    result.assert_outcomes(passed=1, failed=1)  # the other family's case still runs
    pattern = message.replace("[", "?").replace("]", "?")  # fnmatch reads brackets as a character class
    result.stdout.fnmatch_lines([f"*kernels/tiny_bad.py: *{pattern}*", "*nothing under golden/ was written for it*"])
    assert not (golden_session.golden / "tiny_bad").exists()


@pytest.mark.parametrize("selection", ["tiny_bad and sm_90", "tiny_bad/threads64/sm_90"])
def test_a_selection_naming_a_family_that_does_not_load_shows_why(kernels_dir, golden_session, selection):
    """The load failure's id has no target or variant, so -k alone would deselect it and say nothing matched."""
    write_family(kernels_dir, "tiny_bad", ',\n        Variant("threads64", scale, {"block_rows": 8, "threads": 32})')
    result = golden_session("-k", selection)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*kernels/tiny_bad.py: *these repeat: ?'threads64'?*"])
    assert "tiny_bad.py" not in golden_session("-k", f"{SMALL_CASE} and not tiny_bad").stdout.str()


def test_a_family_file_that_does_not_import_fails_alone(kernels_dir, golden_session):
    write_family(kernels_dir, "tiny_typo", text="import tilelang.language as T\n\nFAMILY = Famly(name='tiny_typo')\n")
    result = golden_session("-k", f"tiny_typo or {SMALL_CASE}")
    result.assert_outcomes(passed=0, failed=2)  # the case has no snapshot in the temporary golden/
    result.stdout.fnmatch_lines(["*kernels/tiny_typo.py: importing it raised NameError: name 'Famly' is not defined*"])


def test_a_module_without_a_family_or_with_another_name_is_refused(kernels_dir):
    write_family(kernels_dir, "tiny_plain", text="VALUE = 1\n")
    write_family(kernels_dir, "tiny_named", text=TINY_FAMILY.format(name="other_name", extra=""))
    broken = {b.name: b.error for b in tilelang_golden.catalog.loading.load_families().broken}
    assert "must define FAMILY = Family(...)" in broken["tiny_plain"]
    assert "FAMILY.name is 'other_name'; it must be the module's name, 'tiny_named'" in broken["tiny_named"]


def test_a_kernel_that_does_not_build_fails_its_family_once_and_its_cases_only(kernels_dir, golden_session):
    write_family(
        kernels_dir,
        "tiny_raise",
        text=TINY_FAMILY.format(name="tiny_raise", extra="").replace(
            "    @T.prim_func", "    assert threads != 64, 'threads=64 is not supported'\n\n    @T.prim_func", 1
        ),
    )
    result = golden_session("--regen", "-k", "tiny_raise")
    # its cases on every target are skipped, as is the summary comparing it; the declaration item fails, once
    result.assert_outcomes(passed=len(TARGETS), failed=1, skipped=len(TARGETS) + 1)
    result.stdout.fnmatch_lines(
        ["*kernels/tiny_raise.py: variant 'threads64' did not build with*AssertionError: threads=64 is not supported*"]
    )
    # once where it fails, once in the one summary line folding every item it stops, whatever -k selected
    assert result.stdout.str().count("did not build with") == 2
    result.stdout.fnmatch_lines(
        [f"SKIPPED [[]{len(TARGETS) + 1}[]] *not run, because variant 'threads64' does not build*"]
    )
    assert "Traceback" not in result.stdout.str()
    assert not (golden_session.golden / "tiny_raise/threads64").exists()
    assert (golden_session.golden / "tiny_raise/threads128/sm_80.cu").exists()


def test_a_filtered_regen_that_selects_a_case_of_a_family_that_does_not_build_fails(kernels_dir, golden_session):
    """`-k "family and sm_80"` deselects the declaration check (its id names no target), which says why a variant
    does not build; its cases then fail with the reason instead of ending the run green, skipped, nothing written."""
    write_family(
        kernels_dir,
        "tiny_raise",
        text=TINY_FAMILY.format(name="tiny_raise", extra="").replace(
            "    @T.prim_func", "    assert threads != 64, 'threads=64 is not supported'\n\n    @T.prim_func", 1
        ),
    )
    result = golden_session("--regen", "-k", "tiny_raise and (sm_80 or sm_90)")
    result.assert_outcomes(passed=2, failed=2)  # threads64 on both targets fails, threads128 is written
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(["*kernels/tiny_raise.py: variant 'threads64' did not build with*"])
    assert not (golden_session.golden / "tiny_raise/threads64").exists()


def test_variant_names_are_checked_when_the_family_is_declared():
    from kernels.gemm_num_stages import FAMILY

    with pytest.raises(FamilyError, match="these repeat"):
        tilelang_golden.family.Family(**{**vars(FAMILY), "variants": [FAMILY.variants[0], FAMILY.variants[0]]})
    with pytest.raises(FamilyError, match="declares no variant"):
        tilelang_golden.family.Family(**{**vars(FAMILY), "variants": []})
    with pytest.raises(FamilyError, match="are problem dimensions"):
        tilelang_golden.family.Family(**{**vars(FAMILY), "variants": [Variant("x", None, {"M": 1})]})


@pytest.mark.parametrize(
    "field, value",
    [("inputs", None), ("reference", 0), ("speed_reference", "torch.mm"), ("work", None), ("group", "x")],
)
def test_what_the_harness_calls_is_refused_at_declaration_when_it_is_not_callable(field, value):
    """Not first on a GPU runner: the static check imports the family and says which field and what it takes."""
    from kernels.gemm_num_stages import FAMILY

    with pytest.raises(FamilyError, match=rf"^kernels/gemm_num_stages\.py: {field} must be a callable \("):
        tilelang_golden.family.Family(**{**vars(FAMILY), field: value})
    tilelang_golden.family.Family(
        **{**vars(FAMILY), "group": None, "checks": None}
    )  # the optional ones may be left out


def readme_example() -> str:
    """The family file the README's recipe shows in full."""
    from conftest import REPO

    readme = (REPO / "README.md").read_text()
    section = readme[readme.index("### A complete example") :]
    return section[section.index("```python\n") + len("```python\n") : section.index("\n```\n")] + "\n"


def test_the_readme_example_is_a_working_family(kernels_dir, golden_session):
    write_family(kernels_dir, "scale_fp16", text=readme_example())
    cases_and_summary = 2 * len(TARGETS) + 2  # and the declaration
    golden_session("--regen", "-k", "scale_fp16").assert_outcomes(passed=cases_and_summary)
    golden_session("-k", "scale_fp16").assert_outcomes(passed=cases_and_summary)
    assert (
        "params:\n  rows: 8192\n  cols: 4096\n  block_rows: 8\n  threads: 256\n"
        in (golden_session.golden / "scale_fp16/threads256/sm_80.yaml").read_text()
    )


def test_a_twin_must_name_a_variant_and_a_dimension_of_its_family():
    from kernels.gemm_num_stages import FAMILY
    from tilelang_golden.family import TimingTwin

    declared = {
        f.name: (f.timing_twin.variant, f.timing_twin.dimension)
        for f in tilelang_golden.catalog.loading.load_families().families
        if f.timing_twin
    }
    assert declared == {
        "gemm_relu_schedules": ("v0_baseline", "K"),
        "linear_bf16": ("swizzle", "K"),
        "rms_norm": ("threads256", "rows"),
    }
    with pytest.raises(FamilyError, match="the timing twin names variant 'nope'"):
        tilelang_golden.family.Family(**{**vars(FAMILY), "timing_twin": TimingTwin("nope", "K", 8608)})
    with pytest.raises(FamilyError, match="and dimension 'rows'"):
        tilelang_golden.family.Family(
            **{**vars(FAMILY), "timing_twin": TimingTwin(FAMILY.variants[0].name, "rows", 8608)}
        )


TINY_AUTOTUNED = '''
"""Y = 2 X, autotuned over block rows and threads, with a variant that misspells `threads`."""

import tilelang
import tilelang.language as T

from tilelang_golden.family import Family, Tolerance, Variant, Work


@tilelang.autotune(configs=[{"block_rows": b, "threads": t} for b in (4, 8) for t in (64, 128)])
@tilelang.jit
def scale(X, block_rows: int = 8, threads: int = 128):
    rows, cols = T.const("rows, cols")
    X: T.Tensor((rows, cols), T.float16)
    Y = T.empty((rows, cols), T.float16)
    with T.Kernel(T.ceildiv(rows, block_rows), threads=threads) as bx:
        tile = T.alloc_fragment((block_rows, cols), T.float16)
        T.copy(X[bx * block_rows, 0], tile)
        for i, j in T.Parallel(block_rows, cols):
            tile[i, j] = tile[i, j] * T.float16(2)
        T.copy(tile, Y[bx * block_rows, 0])
    return Y


def inputs(p, generator, device):
    import torch

    return [torch.randn(p["rows"], p["cols"], generator=generator, device=device, dtype=torch.float16)]


FAMILY = Family(
    name="tiny_tuned",
    shape={"rows": 256, "cols": 128},
    variants=[Variant("misspelled", scale, {"block_rows": 8, "thread": 128})],
    inputs=inputs,
    reference=lambda p, x: 2 * x.float(),
    tolerance=Tolerance(atol=0, rtol=0),  # doubling is exact in fp16
    speed_reference=lambda p, x: 2 * x,
    speed_reference_label="2 * x",
    work=lambda p: Work(flops=p["rows"] * p["cols"], bytes=4 * p["rows"] * p["cols"]),
)
'''


def test_a_misspelled_autotune_parameter_is_one_did_you_mean_for_the_family(kernels_dir, golden_session):
    write_family(kernels_dir, "tiny_tuned", text=TINY_AUTOTUNED)
    result = golden_session("-k", "tiny_tuned")
    result.assert_outcomes(failed=1, skipped=len(TARGETS))  # the declaration fails; its cases say where to look
    output = result.stdout.str()
    assert output.count("did you mean 'threads'?") == 2 and "Traceback" not in output  # its failure, its folded skips
    result.stdout.fnmatch_lines(
        ["*kernels/tiny_tuned.py: variant 'misspelled': the kernel does not take 'thread' (did you mean 'threads'?)*"]
    )
    result.stdout.fnmatch_lines(
        ["SKIPPED [[]7[]] *not run, because variant 'misspelled' does not build*did you mean 'threads'?*"]
    )


def test_a_declaration_that_does_not_fit_the_kernel_fails_on_the_cpu_once(kernels_dir, golden_session):
    """An inputs() that also makes the output: found by `nox -s static`, not first on a GPU."""
    text = TINY_FAMILY.format(name="tiny_inputs", extra="").replace(
        "    return [torch.randn(", "    return 2 * [torch.randn(", 1
    )
    write_family(kernels_dir, "tiny_inputs", text=text)
    result = golden_session("-k", "tiny_inputs and declaration")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "*kernels/tiny_inputs.py: variants 'threads128', 'threads64': inputs() made 2 tensors, but the kernel "
            "takes 1 from it (X); Y (returned by the kernel) it does not make*"
        ]
    )
    assert "Traceback" not in result.stdout.str()


def test_the_static_check_takes_its_families_from_the_packages_it_is_given(golden_session):
    """`--families PACKAGE`: the items are those of that package's families, and nothing of kernels/."""
    result = golden_session("--collect-only", "-q", "--families", "tests.mutant_families")
    collected = result.stdout.lines
    cases = {case.split("/", 1)[0] for case in collected_cases(collected)}
    assert cases == {f.name for f in tilelang_golden.catalog.loading.load_families("tests.mutant_families").families}
    assert not [line for line in collected if "gemm_num_stages" in line]


def test_a_family_name_two_packages_share_is_refused_in_the_later_one():
    both = tilelang_golden.catalog.loading.load_families("kernels", "tests.mutant_families")
    assert {f.file.split("/")[0] for f in both.families} == {"kernels"}
    refused = {b.name: b.error for b in both.broken}
    assert "inplace_update" in refused
    assert refused["inplace_update"].startswith(
        "tests/mutant_families/inplace_update.py: family 'inplace_update' is also kernels/inplace_update.py"
    )
