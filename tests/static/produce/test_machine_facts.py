"""Machine facts: what ptxas and nvdisasm report, read per kernel; occupancy by the CUDA occupancy rules; a compile
failure named with what to do; the verdict's words for a machine change; real compiles of the seed GEMM whose
machine code changes the way the issue's planted changes do."""

from __future__ import annotations

import logging
import re
import subprocess
from collections import Counter
from pathlib import Path
from types import SimpleNamespace

import pytest
from conftest import REPO, num_stages_case

from tilelang_golden.static.kinds import compare_case, kind_of
from tilelang_golden.static.produce import machine_code, toolchain
from tilelang_golden.static.produce.machine_code import (
    CompileError,
    code_options,
    compile_lowering,
    compile_together,
    disassemble,
    entry_reports,
    modules,
    nvcc_command,
)
from tilelang_golden.static.produce.machine_facts import (
    instruction_classes,
    kernel_resources,
    machine_facts,
    occupancy,
)
from tilelang_golden.static.report.topics import facts_headline
from tilelang_golden.static.report.verdict import case_headline
from tilelang_golden.static.snapshots.case_files import case_files
from tilelang_golden.static.snapshots.diff import fact_changes
from tilelang_golden.static.snapshots.snapshot import SnapshotStore, load_yaml, render_facts
from tilelang_golden.targets import TARGETS

PTXAS_REPORT = """ptxas info    : 0 bytes gmem
ptxas info    : Compiling entry function 'small' for 'sm_90a'
ptxas info    : Function properties for small
    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 8 registers, used 0 barriers
ptxas info    : Compiling entry function 'big' for 'sm_90a'
ptxas info    : Function properties for big
    24 bytes stack frame, 96 bytes spill stores, 88 bytes spill loads
ptxas info    : Used 255 registers, used 1 barriers, 1024 bytes smem, 400 bytes cmem[0]
"""

# nvdisasm's listing of two kernels (its raw-instruction mode: the instructions alone).
FIRST = """
        /*0000*/                   LDGSTS.E.BYPASS.LTC128B.128 [R1], desc[UR4][R2.64] ;
        /*0010*/                   LDGSTS.E.BYPASS.LTC128B.128 [R1+0x800], desc[UR4][R4.64] ;
        /*0020*/                   LDGDEPBAR ;
        /*0030*/              @!P0 HMMA.16816.F32 R8, R12, R16, R8 ;
        /*0040*/                   HFMA2.MMA R5, -RZ, RZ, 1.875, 0 ;
        /*0050*/                   STL [R1], R5 ;
        /*0060*/                   BAR.SYNC.DEFER_BLOCKING 0x0 ;
"""
SECOND = """
        /*0070*/                   UTMALDG.2D [UR8], [UR4] ;
        /*0080*/                   HGMMA.64x128x16.F32 R24, gdesc[UR4], R24 ;
        /*0090*/              @P1  SYNCS.ARRIVE.TRANS64.RED.A1T0 RZ, [UR4], RZ ;
        /*00a0*/                   LDSM.16.M88.4 R4, [R2] ;
"""


def parse_resources(report: str) -> dict[str, dict[str, int]]:
    return {name: kernel_resources(name, lines) for name, lines in entry_reports(report).items()}


def test_ptxas_report_is_read_per_entry_function():
    found = parse_resources(PTXAS_REPORT)
    assert found["small"] == {
        "registers": 8,
        "spill_store_bytes": 0,
        "spill_load_bytes": 0,
        "stack_frame_bytes": 0,
        "static_shared_memory_bytes": 0,
        "barriers": 0,
    }
    assert found["big"]["registers"] == 255
    assert (found["big"]["spill_store_bytes"], found["big"]["spill_load_bytes"]) == (96, 88)
    assert (found["big"]["stack_frame_bytes"], found["big"]["static_shared_memory_bytes"]) == (24, 1024)


def test_a_report_without_resource_lines_is_an_error_naming_the_kernel():
    with pytest.raises(ValueError, match="ptxas's report on broken"):
        parse_resources("ptxas info    : Compiling entry function 'broken' for 'sm_80'\n")


def test_sass_is_counted_per_kernel_by_class_and_predicates_do_not_hide_an_opcode():
    first = instruction_classes(FIRST)
    assert first["async_copies"] == {"LDGDEPBAR": 1, "LDGSTS": 2}
    assert first["mma"] == {"HMMA": 1}, "HFMA2.MMA is a half-precision FMA, not a tensor-core MMA"
    assert first["local_memory"] == {"STL": 1}
    assert first["barriers"] == {"BAR": 1}
    assert first["tma"] == {} and first["matrix_load_store"] == {}
    second = instruction_classes(SECOND)
    assert second["tma"] == {"UTMALDG": 1}
    assert second["mma"] == {"HGMMA": 1}
    assert second["barriers"] == {"SYNCS": 1}
    assert second["matrix_load_store"] == {"LDSM": 1}


SM90 = TARGETS["sm_90"].multiprocessor


def expected_blocks(registers: int, threads: int, shared: int) -> int:
    """The occupancy rules written out once more, the plain way, for the cases below."""
    warps = -(-threads // 32)
    per_warp = -(-registers * 32 // 256) * 256
    by_registers = (65536 // 4 // per_warp) * 4 // warps
    by_shared = (228 * 1024) // (-(-shared // 128) * 128 + 1024)
    return min(by_registers, by_shared, 2048 // (warps * 32), 32)


@pytest.mark.parametrize(
    "registers, threads, shared, limit",
    [
        (240, 256, 49152, "registers"),  # the seed GEMM on sm_90: 240 x 256 fills half the register file
        (32, 128, 100 * 1024, "shared memory"),
        (16, 1024, 0, "threads"),
        (16, 32, 0, "block slots"),
    ],
)
def test_occupancy_follows_the_occupancy_rules_and_names_what_limits_it(registers, threads, shared, limit):
    found = occupancy(registers, threads, shared, SM90)
    assert found["blocks_per_sm"] == expected_blocks(registers, threads, shared)
    assert found["limited_by"] == [limit]
    assert found["warps_per_sm"] == found["blocks_per_sm"] * threads // 32


def test_a_block_over_the_register_file_runs_nowhere():
    assert occupancy(255, 512, 0, SM90)["blocks_per_sm"] == 0


def test_pass_configs_that_change_the_compile_become_its_options():
    assert code_options({}) == ()
    configs = {"tl.enable_fast_math": True, "tl.ptxas_register_usage_level": 7, "tl.device_compile_flags": ["-DX=1 -G"]}
    assert code_options(configs) == (
        "--use_fast_math",
        "--ptxas-options=--register-usage-level=7",
        "-DX=1",
        "-G",
    )


def test_the_toolchain_is_the_locked_one_and_its_cuda_release_is_the_gpu_images():
    pins = dict(
        re.findall(r"^(nvidia-nvvm|nvidia-cuda-nvcc)==(\S+)", (REPO / "requirements-common.in").read_text(), re.M)
    )
    assert pins["nvidia-nvvm"] == pins["nvidia-cuda-nvcc"], "nvcc's front end (cicc) and ptxas are of one release"
    image = re.search(r"^FROM nvidia/cuda:(\d+\.\d+)\.", (REPO / "deploy/arc/image/Dockerfile").read_text(), re.M)
    assert image, "the GPU runner image names its CUDA release in its FROM line"
    assert pins["nvidia-cuda-nvcc"].startswith(image[1] + "."), "the static check's compilers are the runner image's"
    assert toolchain.find_toolchain().release == pins["nvidia-cuda-nvcc"]


def test_a_missing_toolchain_says_what_is_missing_and_how_to_install_it(monkeypatch):
    monkeypatch.setattr(toolchain, "_version", lambda name: None if name == "nvidia-cuda-nvdisasm" else "13.0.88")
    toolchain.find_toolchain.cache_clear()
    try:
        with pytest.raises(toolchain.ToolchainMissing, match="nvidia-cuda-nvdisasm not installed.*nox -s static"):
            toolchain.find_toolchain()
    finally:
        toolchain.find_toolchain.cache_clear()


def test_cuda_the_compiler_rejects_fails_the_case_with_its_message_and_the_declaration():
    case = num_stages_case(2, "sm_80")
    lowering = SimpleNamespace(case=case, kernels=[SimpleNamespace(cuda="int broken(", pass_configs={})])
    with pytest.raises(CompileError) as raised:
        compile_lowering(lowering)
    message = str(raised.value)
    assert message.startswith(case.id) and "nvcc failed" in message and "kernel.cu" in message
    assert "does_not_lower=" in message and "nox -s regen-golden" in message
    assert "error" in raised.value.compiler_message


def test_modules_compiled_together_keep_their_kernel_names_and_a_broken_one_fails_alone():
    """Two modules naming their kernel alike compile in one unit, each named back; a module that does not compile
    sends its unit's modules to compile alone, and only its case has no machine code."""
    case = num_stages_case(2, "sm_80")

    def lowered(body: str) -> SimpleNamespace:
        cuda = f'extern "C" __global__ void __launch_bounds__(32, 1) main_kernel(float* x) {{ {body} }}\n'
        return SimpleNamespace(case=case, kernels=[SimpleNamespace(cuda=cuda, pass_configs={})])

    def code(codes) -> list[str]:
        """The kernel's instructions, without the padding and with branch targets left out (they are addresses in
        nvdisasm's listing of every kernel compiled together)."""
        listing = re.sub(r"BRA 0x[0-9a-f]+", "BRA", codes[0].listings["main_kernel"])
        return [i for i in re.findall(r"/\*[0-9a-f]{4}\*/\s+([^;]*;)", listing) if i != "NOP;"]

    one, two, broken = lowered("x[threadIdx.x] = 1.0f;"), lowered("x[threadIdx.x] *= x[0];"), lowered("x[ = 1;")
    first, second = compile_together([one, two])
    assert list(first[0].reports) == list(second[0].reports) == ["main_kernel"]
    assert code(first) != code(second), "each module's own machine code"
    alone = compile_together([one, broken, two])
    assert alone[1] is None and (code(alone[0]), code(alone[2])) == (code(first), code(second))
    with pytest.raises(CompileError):
        compile_lowering(broken)


def cuda_module(case, header: str, body: str) -> SimpleNamespace:
    cuda = f'{header}extern "C" __global__ void __launch_bounds__(128, 1) main_kernel(float* x, int n) {{ {body} }}\n'
    return SimpleNamespace(case=case, kernels=[SimpleNamespace(cuda=cuda, pass_configs={})])


def test_the_kernels_of_every_unit_are_listed_by_one_nvdisasm_as_it_lists_each_cubin(monkeypatch, tmp_path):
    """Two units (other headers) of two cases, a chain's two kernels in one: one nvdisasm lists them all, each
    kernel's instructions those `nvdisasm -c` lists from its own cubin."""
    case = num_stages_case(2, "sm_90")
    loop = "for (int i = threadIdx.x; i < n; i += 128) { x[i] = x[i] * x[i] + 1.0f; }"
    first = cuda_module(case, "// one\n", loop)
    second = cuda_module(case, "// two\n", "if (threadIdx.x < n) { x[threadIdx.x] = __expf(x[threadIdx.x]); }")
    second.kernels.append(first.kernels[0])  # and a second kernel of its own
    runs, run = [], machine_code._run
    monkeypatch.setattr(machine_code, "_run", lambda *a, **k: runs.append(a[2]) or run(*a, **k))
    listed = compile_together([first, second])
    assert runs == ["nvcc", "nvcc", "nvdisasm"]

    def instructions(listing: str) -> list[str]:
        return re.findall(r"^\s*/\*[0-9a-f]+\*/\s+(?:@!?U?P[T0-9]+\s+)?([A-Z][A-Z0-9_.]*)", listing, re.M)

    for lowering, codes in zip([first, second], listed, strict=True):
        for module, code in zip(modules(lowering), codes, strict=True):
            (tmp_path / "kernel.cu").write_text(module.cuda)
            compile = [*nvcc_command(toolchain.find_toolchain(), module.arch, ()), "-o", "kernel.cubin", "kernel.cu"]
            subprocess.run(compile, cwd=tmp_path, check=True, capture_output=True)
            alone = subprocess.run(
                [toolchain.find_toolchain().nvdisasm, "-c", "kernel.cubin"],
                cwd=tmp_path,
                capture_output=True,
                text=True,
            ).stdout
            assert instructions(code.listings["main_kernel"]) == instructions(alone)
            assert len(instructions(alone)) > 10


def test_a_cubin_is_read_as_a_64_bit_elf():
    with pytest.raises(ValueError, match="not a 64-bit ELF"):
        disassemble(num_stages_case(2, "sm_90"), "sm_90a", [b"nvcc wrote nothing"])


def test_machine_changes_are_said_in_words_first():
    old = {"kernels": [{"name": "k", "registers": 168, "spill_store_bytes": 0, "occupancy": {"blocks_per_sm": 2}}]}
    new = {"kernels": [{"name": "k", "registers": 232, "spill_store_bytes": 96, "occupancy": {"blocks_per_sm": 1}}]}
    assert facts_headline(fact_changes(old, new)) == (
        "registers 168 -> 232, occupancy 2 -> 1 blocks/SM, spill stores 0 -> 96 B changed"
    )


# -- real compiles of the seed GEMM (nvcc, ptxas, nvdisasm from the lock) ----------------------------------------


def machine(lowerings, case) -> dict:
    files = lowerings.files(case)
    return load_yaml(next(text for path, text in files.items() if path.endswith(".machine.yaml")))


def headline_between(lowerings, old_case, new_case, tmp_path: Path) -> str:
    """The verdict's headline when `new_case`'s machine facts replace `old_case`'s snapshot."""
    old_files, new_files = lowerings.files(old_case), lowerings.files(new_case)
    name = next(path for path in case_files(new_case) if path.endswith(".machine.yaml"))
    old_text = next(text for path, text in old_files.items() if path.endswith(".machine.yaml"))
    (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
    (tmp_path / name).write_text(old_text)
    comparison = compare_case({name: new_files[name]}, SnapshotStore(tmp_path))
    assert kind_of(name).subject == "machine code"
    return case_headline(comparison.mismatches)


def test_every_cuda_case_has_machine_facts_and_no_hip_case_does(lowerings):
    assert any(path.endswith(".machine.yaml") for path in case_files(num_stages_case(2, "sm_80")))
    assert not any(path.endswith(".machine.yaml") for path in case_files(num_stages_case(2, "gfx942")))


def test_a_schedule_without_stages_loses_its_async_copies(lowerings, tmp_path):
    assert machine(lowerings, num_stages_case(3, "sm_80"))["kernels"][0]["sass"]["async_copies"]
    headline = headline_between(lowerings, num_stages_case(3, "sm_80"), num_stages_case(0, "sm_80"), tmp_path)
    assert "async copies (SASS) (" in headline and "LDGSTS" in headline


def test_a_larger_tile_lowers_occupancy(lowerings, tmp_path):
    small, large = num_stages_case(3, "sm_80", (64, 64, 32)), num_stages_case(3, "sm_80")
    before = machine(lowerings, small)["kernels"][0]["occupancy"]["blocks_per_sm"]
    after = machine(lowerings, large)["kernels"][0]["occupancy"]["blocks_per_sm"]
    assert after < before
    assert f"occupancy {before} -> {after} blocks/SM" in headline_between(lowerings, small, large, tmp_path)


def test_an_oversized_tile_spills(lowerings, tmp_path):
    fits, spills = num_stages_case(3, "sm_90"), num_stages_case(3, "sm_90", (128, 256, 64))
    stored = machine(lowerings, spills)["kernels"][0]["spill_store_bytes"]
    assert machine(lowerings, fits)["kernels"][0]["spill_store_bytes"] == 0 < stored
    assert f"spill stores 0 -> {stored} B" in headline_between(lowerings, fits, spills, tmp_path)


def test_the_gpu_check_warns_where_its_compile_differs_from_the_machine_facts(tmp_path, monkeypatch):
    from tilelang_golden.gpu import snapshot_agreement as agreement
    from tilelang_golden.gpu.run.compile import CompiledCase

    case = num_stages_case(2, "sm_90")
    kernel = {"name": "gemm_kernel", "registers": 168, "stack_frame_bytes": 0, "static_shared_memory_bytes": 1024}
    snapshot = {"format": 1, "case": {}, "toolchain": {"cuda": "13.0.88", "arch": "sm_90a", "options": []}}
    kernel_facts = {**kernel, "spill_store_bytes": 0, "spill_load_bytes": 0, "barriers": 1, "occupancy": {}, "sass": {}}
    store = SnapshotStore(tmp_path)
    store.write(agreement.machine_file(case), render_facts({**snapshot, "kernels": [kernel_facts]}))
    monkeypatch.setattr(agreement, "runner_compiler", lambda: "TileLang's JIT, nvcc 13.0.88")
    resources = {field: value for field, value in kernel.items() if field != "name"}
    same = CompiledCase(case, kernel=object(), kernel_resources={"gemm_kernel": resources})
    assert agreement.compare_machine_facts(same, store)[:2] == (True, ())
    apart = CompiledCase(case, kernel=object(), kernel_resources={"gemm_kernel": {**resources, "registers": 162}})
    matches, differences, compilers = agreement.compare_machine_facts(apart, store)
    assert matches is False and differences == (f"{case.id} gemm_kernel: registers 168 -> 162",)
    assert compilers == "the snapshot's sm_90a by nvcc 13.0.88, here TileLang's JIT, nvcc 13.0.88"
    nothing = agreement.compare_machine_facts(CompiledCase(case, kernel=None), store)
    assert nothing == (None, (), ""), "nothing read from the driver, nothing compared"


def test_a_tile_too_small_for_wgmma_falls_back_to_mma_sync_on_sm_90(lowerings, tmp_path):
    wgmma, mma_sync = num_stages_case(2, "sm_90", (64, 64, 32)), num_stages_case(2, "sm_90", (32, 64, 32))
    assert set(machine(lowerings, wgmma)["kernels"][0]["sass"]["mma"]) == {"HGMMA"}
    assert set(machine(lowerings, mma_sync)["kernels"][0]["sass"]["mma"]) == {"HMMA"}
    headline = headline_between(lowerings, wgmma, mma_sync, tmp_path)
    mma = re.search(r"tensor-core MMA \(SASS\) \((.*?)\)(, |$)", headline)
    assert mma and "HGMMA" in mma[1] and "HMMA" in mma[1], headline


def test_a_kernel_with_a_stack_keeps_its_static_shared_memory():
    """ptxas names a kernel's cumulative stack size between its barriers and its shared memory: the 1024 bytes of
    `gemm_num_stages/ns1_128x256x64` on sm_90 (its mbarriers, padded to the dynamic buffer's alignment) were read as
    none, where the H200's driver reports them."""
    report = (
        "ptxas info    : Compiling entry function 'gemm_kernel' for 'sm_90a'\n"
        "ptxas info    : Function properties for gemm_kernel\n"
        "    1024 bytes stack frame, 3600 bytes spill stores, 3192 bytes spill loads\n"
        "ptxas info    : Used 240 registers, used 1 barriers, 1024 bytes cumulative stack size, 1024 bytes smem\n"
    )
    assert parse_resources(report)["gemm_kernel"] == {
        "registers": 240,
        "spill_store_bytes": 3600,
        "spill_load_bytes": 3192,
        "stack_frame_bytes": 1024,
        "static_shared_memory_bytes": 1024,
        "barriers": 1,
    }


def test_without_a_host_compiler_the_toolchain_says_how_to_get_one(monkeypatch):
    import tilelang.contrib.cc

    monkeypatch.setattr(tilelang.contrib.cc, "get_cplus_compiler", lambda: None)
    toolchain.find_toolchain.cache_clear()
    try:
        with pytest.raises(toolchain.ToolchainMissing, match="host's C.. compiler.*g\\+\\+"):
            toolchain.find_toolchain()
    finally:
        toolchain.find_toolchain.cache_clear()


# -- the machine facts are those of TileLang's own JIT compile ---------------------------------------------------

# Cases on every CUDA arch, among them kernels whose facts NVRTC's front end got wrong (registers, static shared
# memory with a stack, spills); the first two share their headers, so they compile in one unit.
JIT_CASES = (
    num_stages_case(2, "sm_90"),
    num_stages_case(3, "sm_90"),
    num_stages_case(0, "sm_90"),
    num_stages_case(2, "sm_90", (128, 256, 64)),
    num_stages_case(3, "sm_80"),
    num_stages_case(2, "sm_89", (64, 64, 32)),
    num_stages_case(2, "sm_100a"),
    num_stages_case(2, "sm_120"),
)
# What the GPU's driver reports of a kernel, and ptxas's spills besides.
COMPARED = ("registers", "spill_store_bytes", "spill_load_bytes", "stack_frame_bytes", "static_shared_memory_bytes")


def tilelang_jit_resources(module, monkeypatch, tmp_path) -> dict[str, dict[str, int]]:
    """What ptxas reports of a module compiled by TileLang's own JIT (its device-compile callback), with nvcc from
    the wheels and ptxas's report on, as TILELANG_VERBOSE asks for it; for the arch TileLang detects on such a GPU
    (`sm_90a` on an H200)."""
    import tilelang.contrib.nvcc
    from tilelang import logger
    from tilelang.cuda.backend import tilelang_callback_cuda_compile
    from tvm.target import Target

    monkeypatch.setattr(tilelang.contrib.nvcc, "CUDA_HOME", str(toolchain.find_toolchain().root))
    monkeypatch.setenv("TILELANG_VERBOSE", "1")
    monkeypatch.setenv("TILELANG_CACHE_DIR", str(tmp_path))  # compiled here, not taken from TileLang's cache
    said = []
    handler = logging.Handler()
    handler.emit = lambda record: said.append(record.getMessage())
    logger.addHandler(handler)
    level = logger.level
    logger.setLevel(logging.INFO)
    try:
        tilelang_callback_cuda_compile(
            module.cuda, Target({"kind": "cuda", "arch": module.arch}), dict(module.pass_configs)
        )
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)
    report = "\n".join(message for message in said if "PTXAS verbose output" in message)
    return parse_resources(report)


def test_the_machine_facts_are_what_tilelangs_jit_compiles_and_compiling_together_changes_nothing(
    lowerings, monkeypatch, tmp_path
):
    lowered = [lowerings.lower(case) for case in JIT_CASES]
    together = compile_together(lowered)
    sm_90 = [modules(lowering)[0] for lowering in lowered[:2]]
    assert len({module.headers for module in sm_90}) == 1, "the first two compile in one unit"
    # A case alone in its unit (its arch and headers) was compiled alone already: compiling it again proves nothing.
    units = Counter((modules(lowering)[0].arch, modules(lowering)[0].headers) for lowering in lowered)
    for lowering, codes in zip(lowered, together, strict=True):
        assert codes is not None, f"{lowering.case.id} compiles"
        facts = machine_facts(lowering, codes)
        if units[modules(lowering)[0].arch, modules(lowering)[0].headers] > 1:
            assert facts == machine_facts(lowering, compile_lowering(lowering)), f"{lowering.case.id}: compiled alone"
        jit = {}
        for module in modules(lowering):
            jit |= tilelang_jit_resources(module, monkeypatch, tmp_path)
        for kernel in facts["kernels"]:
            ours = {field: kernel[field] for field in COMPARED}
            assert ours == {field: jit[kernel["name"]][field] for field in COMPARED}, lowering.case.id
