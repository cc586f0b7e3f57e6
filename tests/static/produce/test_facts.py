"""Fact extraction against values measured independently (shared FACTS about TileLang 0.1.15)
and against the CUDA text the same lowering emitted."""

from __future__ import annotations

import dataclasses
import re
from collections import Counter

import kernel_styles
import pytest
from conftest import num_stages_case
from tvm import tirx

import tilelang_golden.catalog.loading
import tilelang_golden.family
from kernels.gemm_num_stages import FAMILY
from tilelang_golden.catalog.cases import Case, all_cases
from tilelang_golden.family import Variant
from tilelang_golden.static.produce.facts import extract_facts
from tilelang_golden.static.produce.ir import calls
from tilelang_golden.static.produce.layouts import canonical_form
from tilelang_golden.static.snapshots.snapshot import CorruptSnapshot, parse_facts, render_facts
from tilelang_golden.targets import TARGETS


def kernel_facts(lowering) -> dict:
    """The facts of the lowering's one device kernel."""
    (kernel,) = extract_facts(lowering)["kernels"]
    return kernel


# Measured by hand for the 128x128x32, 128-thread GEMM on sm_80 (stage, order, buffers, bytes,
# cp_async_wait arguments, __syncthreads() in the whole kernel).
SM80 = {
    1: ([0, 0, 1], [1, 2, 0], [128, 32], 16384, [0, 0], 3),
    2: ([0, 0, 1], [0, 1, 2], [2, 128, 32], 32768, [1, 0], 3),
    3: ([0, 0, 2], [0, 1, 2], [3, 128, 32], 49152, [2, 1, 0], 4),
    4: ([0, 0, 3], [0, 1, 2], [4, 128, 32], 65536, [3, 2, 1, 0], 5),
}


@pytest.mark.parametrize("n", sorted(SM80))
def test_sm80_facts_match_measured_values(n, lowerings):
    stage, order, a_shape, smem, waits, syncs = SM80[n]
    facts = kernel_facts(lowerings.lower(num_stages_case(n, "sm_80")))
    (loop,) = facts["pipelines"]
    assert loop["software_pipeline_stage"] == stage
    assert loop["software_pipeline_order"] == order
    assert loop["tl_pipelined_num_stages"] == n
    assert facts["shared_buffers"]["A_s"]["shape"] == a_shape
    assert facts["dynamic_shared_memory_bytes"] == smem
    assert facts["sync"]["cp_async_wait"] == waits
    assert facts["sync"]["syncthreads_main_loop"] + facts["sync"]["syncthreads_elsewhere"] == syncs
    assert facts["mma"]["families"] == ["mma.sync"]
    assert facts["launch"] == {"grid": [64, 64, 1], "threads": [128, 1, 1]}


def test_num_stages_zero_has_no_pipeline(lowerings):
    facts = kernel_facts(lowerings.lower(num_stages_case(0, "sm_80")))
    assert facts["pipelines"] == []
    assert facts["sync"]["cp_async_wait"] == []


@pytest.mark.parametrize("n", [2, 3])
def test_sm90_is_warp_specialized_with_tma_and_mbarriers(n, lowerings):
    facts = kernel_facts(lowerings.lower(num_stages_case(n, "sm_90")))
    assert facts["warp_specialized"] is True
    assert facts["launch"]["threads"] == [256, 1, 1]
    assert facts["sync"]["tma_loads"] > 0
    assert facts["sync"]["mbarriers"] == 2 * n
    assert facts["sync"]["cp_async_copies"] == 0
    assert facts["sync"]["syncthreads_main_loop"] + facts["sync"]["syncthreads_elsewhere"] == 1
    assert facts["mma"]["families"] == ["wgmma"]


def _cuda_counts(cuda: str) -> dict:
    return {
        "syncthreads": cuda.count("__syncthreads()"),
        "cp_async_wait": [int(x) for x in re.findall(r"cp_async_wait<(\d+)>", cuda)],
        "cp_async_commit_groups": cuda.count("cp_async_commit()"),
        "mbarriers": sum(int(x) for x in re.findall(r"uint64_t mbarrier_mem\[(\d+)\]", cuda)),
    }


@pytest.mark.parametrize("n, target", [(0, "sm_80"), (1, "sm_80"), (4, "sm_80"), (1, "sm_90"), (4, "sm_90")])
def test_ir_facts_agree_with_cuda_text(n, target, lowerings):
    lowering = lowerings.lower(num_stages_case(n, target, tile=(64, 64, 32)))
    facts, text = kernel_facts(lowering), _cuda_counts(lowering.cuda)
    sync = facts["sync"]
    assert sync["syncthreads_main_loop"] + sync["syncthreads_elsewhere"] == text["syncthreads"]
    assert sync["cp_async_wait"] == text["cp_async_wait"]
    assert sync["cp_async_commit_groups"] == text["cp_async_commit_groups"]
    if target == "sm_80":  # no mbarriers before sm_90: the fact is absent, not 0
        assert "mbarriers" not in sync and text["mbarriers"] == 0
    else:
        assert sync["mbarriers"] == text["mbarriers"]


def test_steady_state_loop_is_the_k_loop_in_cuda(lowerings):
    """The main-loop count equals the __syncthreads() inside the CUDA `for (int k` loop body."""
    cuda = lowerings.lower(num_stages_case(3, "sm_80")).cuda
    start = cuda.index("for (int k = 0;")
    depth, end = 0, None
    for i in range(cuda.index("{", start), len(cuda)):
        depth += {"{": 1, "}": -1}.get(cuda[i], 0)
        if depth == 0:
            end = i
            break
    facts = kernel_facts(lowerings.lower(num_stages_case(3, "sm_80")))
    assert cuda[start:end].count("__syncthreads()") == facts["sync"]["syncthreads_main_loop"] == 2


# -- facts that explain the CUDA, each checked against the text of the same lowering ---------------

CASES = {case.id: case for case in all_cases(tilelang_golden.catalog.loading.load_families())}
# One sm_80 case (cp.async, ldmatrix, mma.sync, vectorized ReLU), three sm_90 ones (TMA, wgmma,
# stmatrix, TMA stores, descriptor offsets).
EXPLAINED = (
    "gemm_relu_schedules/v0_baseline/sm_80",
    "gemm_relu_schedules/v3_manual_pipeline/sm_90",
    "linear_bf16/swizzle/sm_90",
    "flash_attention/causal_ns1/sm_90",
)


def lowered(lowerings, case_id: str) -> tuple[dict, str]:
    lowering = lowerings.lower(CASES[case_id])
    return kernel_facts(lowering), lowering.cuda


# Instruction (as the facts name it) -> how the CUDA text calls it.
CUDA_CALLS = {
    "tl.tma_load": "tl::tma_load(",
    "tl.tma_store": "tl::tma_store(",
    "tl.ptx_cp_async": "tl::cp_async_gs<",
    "tl.ptx_ldmatrix x4": "tl::ptx_ldmatrix_x4(",
    "tl.ptx_ldmatrix x4.trans": "tl::ptx_ldmatrix_x4_trans(",
    "tl.ptx_stmatrix x4": "tl::ptx_stmatrix_m8n8_x4(",
    "tl.initialize_wgmma_descriptor": "tl::initialize_wgmma_descriptor<",
    "tl.increase_descriptor_offset": "tl::increase_descriptor_offset<",
    "tirx.ptx_mma m16n8k16 row col fp16 fp16 fp32": "tl::mma_sync<tl::DataType::kFloat16, tl::DataType::kFloat16, "
    "tl::DataType::kFloat32, 16, 8, 16,",
    "tl.ptx_wgmma_ss m64n128k16 fp16 fp16 fp32": "tl::wgmma_ss<tl::DataType::kFloat16, tl::DataType::kFloat16, "
    "tl::DataType::kFloat32, 64, 128, 16,",
    "tl.ptx_wgmma_ss m64n128k16 bf16 bf16 fp32": "tl::wgmma_ss<tl::DataType::kBFloat16, tl::DataType::kBFloat16, "
    "tl::DataType::kFloat32, 64, 128, 16,",
}


@pytest.mark.parametrize("case_id", EXPLAINED)
def test_instruction_sites_are_the_calls_in_the_cuda(case_id, lowerings):
    facts, cuda = lowered(lowerings, case_id)
    checked = {name: sites for name, sites in facts["instructions"].items() if name in CUDA_CALLS}
    assert checked == {name: cuda.count(CUDA_CALLS[name]) for name in checked}
    assert {name for name, call in CUDA_CALLS.items() if call in cuda} <= set(checked), "an instruction was missed"


def _cuda_loops(cuda: str) -> dict:
    """Every `for` loop of the text by kind (`#pragma unroll` on the line before) and trip count."""
    loops: dict = {}
    lines = cuda.splitlines()
    for number, line in enumerate(lines):
        found = re.search(r"for \(int (\w+) = 0; \1 < (.+?); \+\+\1\)", line)
        if found:
            kind = "unrolled" if lines[number - 1].strip() == "#pragma unroll" else "serial"
            trips = int(found[2]) if found[2].isdigit() else "dynamic"
            loops.setdefault(kind, {}).setdefault(trips, 0)
            loops[kind][trips] += 1
    return loops


@pytest.mark.parametrize("case_id", EXPLAINED)
def test_loops_are_the_for_loops_in_the_cuda(case_id, lowerings):
    facts, cuda = lowered(lowerings, case_id)
    assert facts["loops"] == _cuda_loops(cuda)


# The widths of the CUDA vector types a store writes through, for the float buffers (for the others
# the width depends on the element type: half2 data goes through uint1).
FLOAT_VECTORS = {"float2": 2, "float4": 4}


def _cuda_vector_stores(cuda: str) -> dict:
    """Statements `*(<vector type>*)(<buffer> + ...) = ...;`, per buffer and vector type."""
    stores: dict = {}
    pattern = r"^\s*\*\((\w+)\*\)\((?:\(\(\w+\*\)(\w+)\)|(\w+)) \+ .*\) = .*;$"
    for vector, cast, plain in re.findall(pattern, cuda, flags=re.MULTILINE):
        stores.setdefault(cast or plain, []).append(vector)
    return stores


@pytest.mark.parametrize("case_id", EXPLAINED)
def test_vector_stores_are_the_vector_stores_in_the_cuda(case_id, lowerings):
    facts, cuda = lowered(lowerings, case_id)
    text = _cuda_vector_stores(cuda)
    assert {buffer: sum(widths.values()) for buffer, widths in facts["vector_stores"].items()} == {
        buffer: len(vectors) for buffer, vectors in text.items()
    }
    for buffer, vectors in text.items():
        for vector in set(vectors) & set(FLOAT_VECTORS):
            assert facts["vector_stores"][buffer][FLOAT_VECTORS[vector]] == vectors.count(vector)


def test_the_relu_is_a_4_wide_vector_store_on_both_targets(lowerings):
    """The 0.1.13 / 0.1.15 difference the facts must show: C_l cleared and ReLU'd four lanes at a time."""
    for target in ("sm_80", "sm_90"):
        facts, _ = lowered(lowerings, f"gemm_relu_schedules/v0_baseline/{target}")
        assert facts["vector_stores"]["C_l"] == {4: 2}


# wgmma descriptor layout types (tl::initialize_wgmma_descriptor<type, ...>) -> the swizzle they name.
WGMMA_LAYOUT_TYPES = {"0": "linear", "1": "swizzle 128B", "2": "swizzle 64B", "3": "swizzle 32B"}


@pytest.mark.parametrize("case_id", ["gemm_relu_schedules/v3_manual_pipeline/sm_90", "linear_bf16/swizzle/sm_90"])
def test_shared_layouts_are_the_swizzles_the_wgmma_descriptors_declare(case_id, lowerings):
    facts, cuda = lowered(lowerings, case_id)
    declared = re.findall(r"initialize_wgmma_descriptor<(\d+), [^>]*>\(\w+, [^;]*?\(\w+\*\)(\w+)\)", cuda)
    assert declared, "the kernel builds its wgmma descriptors"
    for layout_type, buffer in declared:
        assert facts["layouts"][buffer] == WGMMA_LAYOUT_TYPES[layout_type]


def test_sm80_layouts_name_tilelangs_swizzles_and_fragments_follow_the_warp_tiling(lowerings):
    v0, v1, v2 = (lowered(lowerings, f"gemm_relu_schedules/{v}/sm_80")[0]["layouts"] for v in RELU_VARIANTS)
    assert (v0["A_s"], v0["B_s"]) == ("swizzle 64B", "swizzle 128B")  # 32 and 128 fp16 per row
    assert v0["C_l"].startswith("fragment ") and v0 == v2  # v2 annotates the layout v0 already infers
    assert v1["C_l"] != v0["C_l"] and v1["B_s"] == v0["B_s"]  # FullRow: another warp tiling, same swizzle


RELU_VARIANTS = ("v0_baseline", "v1_warp_policy", "v2_swizzled_layout")


def _ldmatrix_addresses(cuda: str, buffer: str) -> list[str]:
    """The address arguments of the ldmatrix calls reading `buffer`, loop variables made anonymous."""
    calls = re.findall(rf"ptx_ldmatrix_x4(?:_trans)?\(\(&\(\(\(half_t\*\){buffer}\)\[(.*?)\]\)\), ", cuda)
    return [re.sub(r"\b(?:i|j|k|ki)(?:_\d+)?\b", "_", address) for address in calls]


def test_shared_addressing_changes_exactly_when_the_address_text_does(lowerings):
    """v2 emits v0's CUDA; v1 (FullRow) reads B_s through other addresses and A_s through the same."""
    v0, v1, v2 = (lowered(lowerings, f"gemm_relu_schedules/{v}/sm_80") for v in RELU_VARIANTS)
    differs = []
    for facts, cuda in (v1, v2):
        for buffer, op in (("A_s", "tl.ptx_ldmatrix x4"), ("B_s", "tl.ptx_ldmatrix x4.trans")):
            same_text = _ldmatrix_addresses(cuda, buffer) == _ldmatrix_addresses(v0[1], buffer)
            same_fact = facts["shared_addressing"][buffer][op] == v0[0]["shared_addressing"][buffer][op]
            assert same_fact == same_text, (buffer, op)
            differs.append(not same_text)
    assert any(differs), "the pair exercises a change"


def test_address_forms_ignore_names_but_not_structure():
    x, y, a, b = (tirx.Var(name, "int32") for name in ("x", "y", "a", "b"))
    assert canonical_form([x * 4 + y]) == canonical_form([a * 4 + b])  # the compiler renumbering its loop variables
    assert canonical_form([x * 4 + x]) != canonical_form([x * 4 + y])
    assert canonical_form([x * 4 + y]) != canonical_form([x * 8 + y])
    assert canonical_form([tirx.floormod(x, 8)]) != canonical_form([tirx.floordiv(x, 8)])


# -- facts reviewers look for: rasterization, warp partition, shuffles, conversions, shared memory --


# The argument each probe kernel writes (its last).
PROBE_OUTPUTS = {"swizzled_gemm": [2], "allreduce_gemv": [2], "cast_rows": [1], "staged_copy": [1]}


def probe_case(kernel, shape: dict, target: str, **params) -> Case:
    """`kernel` built with `shape` and `params` for `target`, named by all three (lowerings are cached by name)."""
    name = "_".join(f"{key}_{value}" for key, value in sorted(params.items())) or "defaults"
    variants = [Variant(name, kernel, params)]
    family = dataclasses.replace(
        FAMILY,
        name=kernel.__name__,
        shape=shape,
        variants=variants,
        checks=None,
        group=None,
        sweep=None,
        outputs=PROBE_OUTPUTS[kernel.__name__],
        sanitize_shape=None,  # the probe's own dimensions
    )
    return Case(family, variants[0], target)


def probe(lowerings, kernel, shape: dict, target: str, **params) -> tuple[dict, str]:
    """Facts and source of `kernel` built with `shape` and `params`, lowered for `target`."""
    lowering = lowerings.lower(probe_case(kernel, shape, target, **params))
    return kernel_facts(lowering), lowering.cuda


GEMM = {"M": 256, "N": 256, "K": 256}


@pytest.mark.parametrize("target", ["sm_80", "gfx942"])
def test_rasterization_is_the_use_swizzle_line_and_goes_when_it_does(target, lowerings):
    row, source = probe(lowerings, kernel_styles.swizzled_gemm, GEMM, target, panel_size=4)
    assert row["rasterization"] == {"order": "row", "panel_size": 4}
    assert "tl::rasterization2DRow<4>()" in source
    column, _ = probe(lowerings, kernel_styles.swizzled_gemm, GEMM, target, panel_size=4, order="column")
    assert column["rasterization"] == {"order": "column", "panel_size": 4}
    removed, source = probe(lowerings, kernel_styles.swizzled_gemm, GEMM, target, panel_size=0)
    assert removed["rasterization"] == {} and "rasterization2D" not in source


def tilelang_warp_partition(lowerings, target: str, threads: int, policy: str) -> tuple[int, int]:
    """TileLang's own answer for the probe GEMM: its op built from the call in the IR, then
    GemmWarpPolicy::ComputeWarpPartition for the instruction it selects (src/op/gemm.cc)."""
    import tvm
    import tvm_ffi
    from tvm.target import Target

    case = probe_case(kernel_styles.swizzled_gemm, GEMM, target, threads=threads, policy=policy)
    inferred = lowerings.lower(case).ir_after["tl.LayoutInference"]
    (func,) = inferred.functions.values()
    (call, *_) = calls(func.body, "tl.tileop.gemm")
    gemm = tvm.ir.Op.get("tl.tileop.gemm").get_attr("TLOpBuilder")(call.args, call.annotations)
    target_object = Target(TARGETS[target].description)
    instruction = tvm_ffi.get_global_func("tl.GemmGetGemmInstructionKey")(gemm, threads, target_object)
    tvm_ffi.get_global_func("tl.GemmWarpPolicyComputeWarpPartition")(
        gemm.policy, gemm.m, gemm.n, threads, target_object, instruction
    )
    return gemm.policy.m_warp, gemm.policy.n_warp


@pytest.mark.parametrize("target, threads", [("sm_80", 128), ("sm_80", 256), ("sm_90", 256), ("gfx942", 256)])
@pytest.mark.parametrize("policy", ["Square", "FullRow", "FullCol"])
def test_warp_partition_is_the_one_tilelang_computes_for_the_policy(target, threads, policy, lowerings):
    facts, _ = probe(lowerings, kernel_styles.swizzled_gemm, GEMM, target, threads=threads, policy=policy)
    (gemm,) = facts["gemms"]
    along_m, along_n = tilelang_warp_partition(lowerings, target, threads, policy)
    assert gemm["warps"] == f"{along_m} x {along_n}"
    assert gemm["warp_tile"] == f"{64 // along_m} x {128 // along_n}"  # the probe's 64 x 128 block tile
    assert gemm["operands"] == "A_s, B_s -> C_l" and gemm["tile"] == "64 x 128 x 32" and gemm["policy"] == policy


def test_full_row_and_full_col_give_other_warp_partitions(lowerings):
    row, col = (
        probe(lowerings, kernel_styles.swizzled_gemm, GEMM, "sm_80", policy=p)[0]["gemms"]
        for p in ("FullRow", "FullCol")
    )
    expected = {"operands": "A_s, B_s -> C_l", "tile": "64 x 128 x 32", "policy": "FullRow"}
    assert row == [{**expected, "warps": "4 x 1", "warp_tile": "16 x 128"}]
    assert col[0]["warps"] == "1 x 4" and col[0]["warp_tile"] == "64 x 32"


def test_a_pipelined_gemm_is_one_gemm_and_a_tensor_memory_accumulator_has_no_warp_grid(lowerings):
    from test_backend_facts import TCGEN05_PROBE

    facts = kernel_facts(
        lowerings.lower(num_stages_case(3, "sm_80"))
    )  # its tile GEMM copied into prologue, loop, epilogue
    assert [g["operands"] for g in facts["gemms"]] == ["A_s, B_s -> C_l"]
    tcgen05 = kernel_facts(lowerings.lower(Case(TCGEN05_PROBE, TCGEN05_PROBE.variants[0], "sm_100a")))
    (gemm,) = tcgen05["gemms"]
    assert gemm["operands"] == "A_s, B_s -> C_tmem" and "warps" not in gemm


@pytest.mark.parametrize("target", ["sm_80", "sm_90"])
def test_warp_shuffles_are_the_shuffles_in_the_cuda(target, lowerings):
    """The reduction of upstream's GEMV: five shuffles down the warp and one broadcast (no `instructions`)."""
    facts, cuda = probe(lowerings, kernel_styles.allreduce_gemv, {"N": 1024, "K": 1024}, target)
    assert facts["warp_shuffles"] == {"tirx.tvm_warp_shuffle": 1, "tirx.tvm_warp_shuffle_down": 5}
    assert cuda.count("__shfl_down_sync(") == 5 and cuda.count("__shfl_sync(") == 1
    wider, _ = probe(lowerings, kernel_styles.allreduce_gemv, {"N": 1024, "K": 1024}, target, reduce_threads=16)
    assert wider["warp_shuffles"] == {"tirx.tvm_warp_shuffle": 1, "tirx.tvm_warp_shuffle_down": 4}


def test_block_reductions_count_as_the_all_reduce_they_call(lowerings):
    facts, cuda = lowered(lowerings, "flash_attention/causal_ns1/sm_90")
    calls = re.findall(r"(tl::AllReduce<[^(]*>)::run\(", cuda)
    assert facts["warp_shuffles"] == dict(Counter(calls)) and calls
    plain, _ = lowered(lowerings, "gemm_relu_schedules/v0_baseline/sm_80")
    assert plain["warp_shuffles"] == {}


@pytest.mark.parametrize("target", ["sm_90", "gfx950"])
def test_conversions_name_the_cast_and_a_changed_fp8_format_changes_them(target, lowerings):
    e4m3, cuda = probe(lowerings, kernel_styles.cast_rows, {"M": 256, "N": 512}, target, dtype="float8_e4m3fn")
    e5m2, _ = probe(lowerings, kernel_styles.cast_rows, {"M": 256, "N": 512}, target, dtype="float8_e5m2")
    assert e4m3["conversions"] and e4m3["conversions"] != e5m2["conversions"]
    assert all(k.startswith("float32") and "float8_e4m3fn" in k.split(" -> ")[1] for k in e4m3["conversions"])
    assert all("float8_e5m2" in k.split(" -> ")[1] for k in e5m2["conversions"])


def test_conversions_leave_index_casts_out(lowerings):
    facts, _ = lowered(lowerings, "gemm_relu_schedules/v0_baseline/sm_80")
    assert set(facts["conversions"]) == {"float32x2 -> float16x2"}  # the fp32 accumulator stored as fp16


def test_shared_memory_over_the_limit_of_sm89_fits_sm90(lowerings):
    """128 KiB of shared memory: over the 99 KB a block may use on sm_89, under the 227 KB of sm_90."""
    over, _ = probe(lowerings, kernel_styles.staged_copy, {"M": 256, "N": 512}, "sm_89", block_M=64)
    assert over["shared_memory"] == {"bytes": 131072, "limit": 99 * 1024, "fits": False}
    under, _ = probe(lowerings, kernel_styles.staged_copy, {"M": 256, "N": 512}, "sm_90", block_M=64)
    assert under["shared_memory"]["fits"] is True and under["shared_memory"]["limit"] == 227 * 1024
    halved, _ = probe(lowerings, kernel_styles.staged_copy, {"M": 256, "N": 512}, "sm_89", block_M=32)
    assert halved["shared_memory"]["fits"] is True


@pytest.mark.parametrize("case_id", ["linear_bf16/swizzle/sm_90", "gemm_relu_schedules/v0_baseline/sm_80"])
def test_shared_memory_is_the_dynamic_buffer_and_the_mbarriers(case_id, lowerings):
    facts, cuda = lowered(lowerings, case_id)
    mbarriers = sum(int(n) for n in re.findall(r"uint64_t \w+_mem\[(\d+)\]", cuda))
    assert facts["shared_memory"]["bytes"] == facts["dynamic_shared_memory_bytes"] + 8 * mbarriers


def test_review_facts_are_part_of_the_snapshot_schema(lowerings):
    facts = extract_facts(lowerings.lower(CASES["linear_bf16/swizzle/sm_90"]))
    assert parse_facts(render_facts(facts), "x.yaml") == facts
    (kernel,) = facts["kernels"]
    with pytest.raises(CorruptSnapshot, match=f"kernel {kernel['name']}: gemms is dict, expected list"):
        parse_facts(render_facts({**facts, "kernels": [{**kernel, "gemms": {}}]}), "x.yaml")


# -- several device kernels in one module -----------------------------------------------------------


def split_sum_case(target: str) -> Case:
    """Two T.Kernel scopes in one PrimFunc (tests/kernel_styles.py): a pipelined split kernel, then a combine."""
    import kernel_styles as styles

    family = styles.family(styles.split_sum_factory, {"splits": 2, "threads": 128}, name="split", outputs=[1])
    return Case(family, family.variants[0], target)


def _kernel_sources(source: str) -> dict[str, str]:
    """Each `__global__` kernel's definition in the emitted text, by name."""
    starts = [m for m in re.finditer(r"__global__ void (?:__launch_bounds__\([^)]*\) )?(\w+)\([^;{]*\{", source)]
    return {m[1]: source[m.start() : (starts + [None])[i + 1].start() if i + 1 < len(starts) else len(source)]
            for i, m in enumerate(starts)}  # fmt: skip


@pytest.mark.parametrize("target", ["sm_80", "gfx942"])
def test_each_kernel_of_a_module_has_its_own_facts_in_launch_order(target, lowerings):
    lowering = lowerings.lower(split_sum_case(target))
    facts = extract_facts(lowering)
    split, combine = facts["kernels"]
    assert [split["name"], combine["name"]] == ["split_sum_kernel", "split_sum_kernel_1"]
    assert lowering.cuda.index(f"void {combine['name']}(") > 0  # one source holds both kernels
    assert split["launch"] == {"grid": [2, 256, 1], "threads": [128, 1, 1]}  # T.Kernel(splits, rows, threads=128)
    assert combine["launch"] == {"grid": [256, 1, 1], "threads": [32, 1, 1]}  # T.Kernel(rows, threads=32)
    # What each scope allocates is its own: shared memory and layouts are read per launch scope.
    assert set(split["shared_buffers"]) == {"tile"} and combine["shared_buffers"] == {}
    assert set(split["layouts"]) - {"tile"} == {"acc", "total"}  # the shared tile's layout, where one is inferred
    assert set(combine["layouts"]) == {"partials", "total"}
    assert split["layouts"]["total"] != combine["layouts"]["total"]  # two buffers of one name, one per kernel
    assert split["dynamic_shared_memory_bytes"] > 0 and combine["dynamic_shared_memory_bytes"] == 0
    # Each kernel's instructions are the calls of its own definition in the text.
    sources = _kernel_sources(lowering.cuda)
    for kernel in (split, combine):
        (reduction,) = [name for name in kernel["instructions"] if "AllReduce" in name]
        threads = kernel["launch"]["threads"][0] if kernel is split else 2  # the combine reduces 2 partials
        assert f"tl::SumOp, {threads}, 1, 0" in reduction
        assert sources[kernel["name"]].count("tl::AllReduce<") == kernel["instructions"][reduction]
    assert parse_facts(render_facts(facts), "split.yaml") == facts


def test_the_split_kernels_pipeline_is_its_own(lowerings):
    split, combine = extract_facts(lowerings.lower(split_sum_case("sm_80")))["kernels"]
    (loop,) = split["pipelines"]
    assert loop["loop_var"] == "k" and loop["tl_pipelined_num_stages"] == 2 and loop["extent"] == 2
    assert split["shared_buffers"]["tile"]["shape"] == [2, 128]  # two versions of the tile
    assert split["sync"]["cp_async_copies"] > 0 and combine["sync"]["cp_async_copies"] == 0
    assert combine["pipelines"] == []


def test_a_family_check_reading_the_only_kernel_of_two_is_told_to_read_each(lowerings):
    from tilelang_golden.family import CaseFacts, FamilyError

    case = split_sum_case("sm_80")
    seen = CaseFacts(case.variant, case.target, case.params, extract_facts(lowerings.lower(case)), "")
    assert [kernel["name"] for kernel in seen.kernels] == ["split_sum_kernel", "split_sum_kernel_1"]
    with pytest.raises(FamilyError, match=r"only/sm_80: the module launches 2 device kernels .*CaseFacts.kernels"):
        _ = seen.kernel


def test_a_changed_field_names_its_kernel_where_the_module_launches_several(lowerings):
    import copy

    from tilelang_golden.static.snapshots.diff import changed_fields

    facts = extract_facts(lowerings.lower(split_sum_case("sm_80")))
    changed = copy.deepcopy(facts)
    changed["kernels"][1]["launch"]["threads"] = [64, 1, 1]
    assert changed_fields(facts, changed) == ["kernels.split_sum_kernel_1.launch.threads"]
    one, changed_one = ({**side, "kernels": side["kernels"][1:]} for side in (facts, changed))
    assert changed_fields(one, changed_one) == ["launch.threads"]  # one kernel: named as it always was


def test_kernels_that_cannot_be_paired_with_their_launch_scopes_are_refused(lowerings):
    import dataclasses

    split, single = lowerings.lower(split_sum_case("sm_80")), lowerings.lower(num_stages_case(0, "sm_80"))
    mixed = dataclasses.replace(split, device_ir=single.device_ir, host_ir=single.host_ir)
    with pytest.raises(ValueError, match=r"split/only/sm_80: cannot pair each device kernel \['gemm_kernel'\]"):
        extract_facts(mixed)
