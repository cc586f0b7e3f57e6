"""A regen lowers every case twice, to prove the lowering deterministic, and compiles its machine code once: machine
code is compiled once per distinct module (its arch, options and CUDA text) in a run, so the second lowering takes
the first's where it emits the same CUDA, and compiles only CUDA of its own (which the regen then refuses as
nondeterministic anyway). Across runs the machine code cache keeps what each module compiled to, and a regen reads it
too."""

from __future__ import annotations

import dataclasses
from types import SimpleNamespace

import pytest
from conftest import REPO, SMALL_CASE, num_stages_case

import tilelang_golden.static.session
from tilelang_golden.catalog.cases import family_cases
from tilelang_golden.catalog.loading import load_families
from tilelang_golden.static.produce import machine_code
from tilelang_golden.static.produce.lowering_cache import CorruptEntry, LoweringCache
from tilelang_golden.static.produce.machine_code import PackedCode, compile_together
from tilelang_golden.static.session import LoweringSession
from tilelang_golden.static.snapshots.case_files import machine_file


@pytest.fixture
def tools(monkeypatch) -> list[str]:
    """The compilers' runs (nvcc, nvdisasm) from here on, in order."""
    runs: list[str] = []
    run = machine_code._run
    monkeypatch.setattr(machine_code, "_run", lambda *a, **k: runs.append(a[2]) or run(*a, **k))
    return runs


def lowered(case, body: str) -> SimpleNamespace:
    cuda = f'extern "C" __global__ void __launch_bounds__(32, 1) main_kernel(float* x) {{ {body} }}\n'
    return SimpleNamespace(case=case, kernels=[SimpleNamespace(cuda=cuda, pass_configs={})])


def test_modules_alike_are_compiled_once_in_a_unit(tools, monkeypatch):
    """Two cases' modules with the same CUDA and a third of its own: one nvcc of two modules, the two alike sharing
    one machine code."""
    units: list[int] = []
    unit = machine_code._compile_unit
    monkeypatch.setattr(machine_code, "_compile_unit", lambda members: units.append(len(members)) or unit(members))
    one, two = num_stages_case(2, "sm_80"), num_stages_case(3, "sm_80")
    first, alike, other = compile_together(
        [lowered(one, "x[threadIdx.x] = 1.0f;"), lowered(two, "x[threadIdx.x] = 1.0f;"), lowered(two, "x[0] = 2.0f;")]
    )
    assert units == [2] and tools == ["nvcc", "nvdisasm"]
    assert first == alike and first != other


def test_kept_machine_code_reads_back_as_compiled():
    code = machine_code.MachineCode("sm_80", ("--use_fast_math",), {"k": "ptxas"}, {"k": "  /*0000*/ NOP ;\n" * 100})
    packed = PackedCode.of(code)
    assert packed.unpacked() == code and len(packed.listings["k"]) < len(code.listings["k"]) / 10


def test_the_second_lowering_of_a_case_compiles_nothing(tools):
    """What the regen's check of a case asks for: its files, then a fresh lowering's; nvcc runs once, and the two
    machine facts are the committed ones."""
    case = num_stages_case(0, "sm_90", (64, 64, 32))
    assert case.id == SMALL_CASE
    session = LoweringSession()
    first, second = session.files(case), session.files(case, fresh=True)
    assert tools == ["nvcc", "nvdisasm"]
    machine = machine_file(case)
    assert first == second and first[machine] == (REPO / "golden" / machine).read_text()


def test_a_second_lowering_that_emits_other_cuda_is_compiled_alone(tools, monkeypatch):
    """The memo is the CUDA's, not the case's: CUDA the first lowering did not emit is compiled, so its machine facts
    are its own."""
    case = num_stages_case(0, "sm_90", (64, 64, 32))
    lowerings = iter(range(1000))
    real = tilelang_golden.static.session.lower

    def drifting(case, built):
        lowering = real(case, built)
        return dataclasses.replace(lowering, cuda=lowering.cuda + f"// lowering {next(lowerings)}\n")

    monkeypatch.setattr(tilelang_golden.static.session, "lower", drifting)
    session = LoweringSession()
    session.files(case)
    session.files(case, fresh=True)
    assert tools == ["nvcc", "nvdisasm", "nvcc", "nvdisasm"]


def test_a_regen_runs_nvcc_once_per_case(golden_session, tools, tmp_path):
    golden_session("--regen", f"--machine-code-cache={tmp_path / 'machine-code'}", "-k", SMALL_CASE).assert_outcomes(
        passed=1
    )
    assert tools == ["nvcc", "nvdisasm"]
    machine = machine_file(num_stages_case(0, "sm_90", (64, 64, 32)))
    assert (golden_session.golden / machine).read_text() == (REPO / "golden" / machine).read_text()


def test_a_regen_stores_its_compile_mates_under_the_keys_a_static_run_reads(tmp_path):
    """A regen reads no cache, so it lowers a case's compile mates before it has computed their keys; each key is still
    the kernel's as traced before any lowering (TileLang rewrites a jit kernel's PrimFunc in place), so the static run
    after it lowers nothing."""
    (family,) = [family for family in load_families().families if family.name == "gemm_splitk"]  # jit kernels
    first, mate = family_cases(family, ["sm_80"])
    regen = LoweringSession(LoweringCache(tmp_path, read=False), planned={first.id, mate.id})
    regen.files(first)  # compiles the mate with it, lowering the mate first
    regen.files(mate)
    static = LoweringSession(LoweringCache(tmp_path))
    assert static.files(first) == regen.files(first) and static.files(mate) == regen.files(mate)
    assert static.sources == {first.id: "cache", mate.id: "cache"}


def test_a_regen_takes_the_machine_code_an_earlier_run_compiled_and_writes_its_files(golden_session, tools, tmp_path):
    own = f"--machine-code-cache={tmp_path / 'machine-code'}"
    golden_session(own, "-k", SMALL_CASE).assert_outcomes(failed=1)  # no snapshot yet; it compiles the case
    assert tools == ["nvcc", "nvdisasm"]
    tools.clear()
    golden_session("--regen", own, "-k", SMALL_CASE).assert_outcomes(passed=1)
    assert tools == [], "lowered twice, compiled by no one"
    machine = machine_file(num_stages_case(0, "sm_90", (64, 64, 32)))
    assert (golden_session.golden / machine).read_text() == (REPO / "golden" / machine).read_text()


@pytest.mark.parametrize("damage", ["truncated", "other key"])
def test_a_corrupt_machine_code_entry_is_a_miss_with_a_warning(tools, tmp_path, damage):
    case = num_stages_case(0, "sm_90", (64, 64, 32))
    cache = LoweringCache(tmp_path, read=False)
    first = LoweringSession(cache).files(case)
    (entry,) = (tmp_path / "machine-code").glob("??/*.json")
    text = entry.read_text()
    entry.write_text(text[: len(text) // 2] if damage == "truncated" else text.replace('"key": "', '"key": "0', 1))
    tools.clear()
    with pytest.warns(CorruptEntry, match="machine code cache entry ignored"):
        assert LoweringSession(cache).files(case) == first
    assert tools == ["nvcc", "nvdisasm"]


def test_machine_code_is_kept_per_installed_code_and_not_at_all_without_a_cache(tools, tmp_path, monkeypatch):
    """Other compilers, TileLang headers or harness code make other machine code: an entry is theirs alone."""
    case = num_stages_case(0, "sm_90", (64, 64, 32))
    LoweringSession(LoweringCache(tmp_path, read=False)).files(case)
    code = tilelang_golden.static.session.installed_code()
    monkeypatch.setattr(tilelang_golden.static.session, "installed_code", lambda: {**code, "toolchain": "other"})
    tools.clear()
    LoweringSession(LoweringCache(tmp_path, read=False)).files(case)
    assert tools == ["nvcc", "nvdisasm"] and len(list((tmp_path / "machine-code").glob("??/*.json"))) == 2
    tools.clear()
    LoweringSession().files(case)
    assert tools == ["nvcc", "nvdisasm"], "no cache: compiled"
