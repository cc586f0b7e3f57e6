"""Facts per backend: each target has the facts of its hardware, checked against the source the same
lowering emitted; a fact the target cannot have is absent, never a 0 that reads as "not used"."""

from __future__ import annotations

import dataclasses
import re
from collections import Counter

import pytest
import tilelang.language as T

from kernels.gemm_num_stages import FAMILY, variant
from tilelang_golden.catalog.cases import Case
from tilelang_golden.family import Variant
from tilelang_golden.static.produce.facts import extract_facts
from tilelang_golden.static.snapshots.snapshot import CorruptSnapshot, parse_facts, render_facts

CP_ASYNC_KEYS = {"cp_async_wait", "cp_async_commit_groups", "cp_async_copies"}
TMA_KEYS = {"tma_loads", "mbarriers"}
HIP_COPY_KEYS = {"lds_copies", "vmcnt_waits"}
BARRIER_KEYS = {"syncthreads_main_loop", "syncthreads_elsewhere"}


# A tiny Blackwell GEMM that asks for tcgen05 explicitly (a plain T.gemm on sm_100a issues mma.sync):
# operands through TMA, the accumulator in tensor memory, completion on an mbarrier.
def tcgen05_gemm(M, N, K, block_M=128, block_N=128, block_K=64, num_stages=2, threads=128):
    @T.prim_func
    def gemm(A: T.Tensor((M, K), "bfloat16"), B: T.Tensor((N, K), "bfloat16"), C: T.Tensor((M, N), "bfloat16")):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=threads) as (bx, by):
            A_s = T.alloc_shared((block_M, block_K), "bfloat16")
            B_s = T.alloc_shared((block_N, block_K), "bfloat16")
            C_tmem = T.alloc_tmem([block_M, block_N], "float32")
            mbar = T.alloc_barrier(1)
            C_l = T.alloc_fragment((block_M, block_N), "float32")
            C_s = T.alloc_shared((block_M, block_N), "bfloat16")
            for k in T.Pipelined(T.ceildiv(K, block_K), num_stages=num_stages):
                T.copy(A[by * block_M, k * block_K], A_s)
                T.copy(B[bx * block_N, k * block_K], B_s)
                T.tcgen05_gemm(A_s, B_s, C_tmem, False, True, mbar=mbar, clear_accum=k == 0)
                T.mbarrier_wait_parity(mbar, k % 2)
            T.copy(C_tmem, C_l)
            T.copy(C_l, C_s)
            T.copy(C_s, C[by * block_M, bx * block_N])

    return gemm


TCGEN05_PROBE = dataclasses.replace(
    FAMILY,
    name="tcgen05_probe",
    shape={"M": 256, "N": 256, "K": 256},
    variants=[Variant("bf16_128x128x64", tcgen05_gemm, {})],
    checks=None,
    group=None,
    sweep=None,
)

# name -> case; each lowered once for the module (a small GEMM lowers in well under a second).
CASES = {
    "gfx942": Case(FAMILY, variant(2, 64, 64, 32), "gfx942"),  # TileLang does not pipeline on gfx942
    "gfx950": Case(FAMILY, variant(3, 64, 64, 32), "gfx950"),  # pipelined: copies into LDS, vmcnt waits
    "sm_80": Case(FAMILY, variant(2, 64, 64, 32), "sm_80"),
    "sm_90": Case(FAMILY, variant(2, 64, 64, 32), "sm_90"),
    "sm_100a": Case(FAMILY, variant(2, 64, 64, 32), "sm_100a"),  # a plain T.gemm: mma.sync, no tensor memory
    "tcgen05": Case(TCGEN05_PROBE, TCGEN05_PROBE.variants[0], "sm_100a"),
}


@pytest.fixture(scope="module")
def extracted(lowerings) -> dict[str, tuple[dict, str]]:
    """name -> (the module's facts, emitted source)."""
    return {name: (extract_facts(low), low.cuda) for name, low in ((n, lowerings.lower(c)) for n, c in CASES.items())}


@pytest.fixture(scope="module")
def lowered(extracted) -> dict[str, tuple[dict, str]]:
    """name -> (the facts of its one kernel, emitted source)."""
    return {name: (facts["kernels"][0], source) for name, (facts, source) in extracted.items()}


@pytest.mark.parametrize("name", ["gfx942", "gfx950"])
def test_hip_speaks_mfma_and_lds_and_has_no_cuda_machinery(lowered, name):
    facts, hip = lowered[name]
    assert facts["mma"] == {"families": ["mfma"], "ops": ["tl.tvm_mfma"], "shapes": ["m16n16k16"]}
    assert hip.count("__builtin_amdgcn_mfma_f32_16x16x16f16(") == sum(
        sites for name, sites in facts["instructions"].items() if name.startswith("tl.tvm_mfma f32_16x16x16f16 ")
    )
    assert set(facts["sync"]) == BARRIER_KEYS | HIP_COPY_KEYS  # no cp_async_*, tma_loads, mbarriers
    assert "tensor_memory" not in facts
    assert sum(facts["sync"][key] for key in BARRIER_KEYS) == hip.count("__syncthreads();")
    assert {b["scope"] for b in facts["shared_buffers"].values()} == {"shared.dyn"}  # LDS, with layouts named
    assert {facts["layouts"][name] for name in facts["shared_buffers"]} <= {"swizzle 64B", "swizzle 128B"}


def test_hip_lds_copies_and_vmcnt_waits_are_the_calls_in_the_hip_source(lowered):
    facts, hip = lowered["gfx950"]
    assert facts["sync"]["vmcnt_waits"] == [int(n) for n in re.findall(r"tl::cp_async_wait<(\d+)>\(\);", hip)]
    assert facts["sync"]["vmcnt_waits"] == [2, 1, 0]
    widths = Counter(int(n) for n in re.findall(r"tl::cp_async_gs(?:_conditional)?<(\d+)>\(", hip))
    assert facts["sync"]["lds_copies"] == dict(widths) and widths
    unpipelined, _ = lowered["gfx942"]  # the same facts exist where the kernel happens not to use them
    assert unpipelined["sync"]["lds_copies"] == {} and unpipelined["sync"]["vmcnt_waits"] == []


def test_tcgen05_probe_has_tcgen05_shapes_tensor_memory_tma_and_mbarriers(lowered):
    facts, cuda = lowered["tcgen05"]
    assert facts["mma"]["families"] == ["tcgen05"]
    assert facts["mma"]["shapes"] == ["m128n128k16"]  # the 128x128 tile in one instruction; bf16: K = 16
    assert "tl.ptx_tcgen05_mma_ss" in facts["mma"]["ops"]
    assert facts["tensor_memory"] == {"C_tmem": {"columns": 128}}
    assert re.findall(r"tl::tmem_allocate\(\(&\(C_tmem\[0\]\)\), (\d+)\);", cuda) == ["128"]
    sync = facts["sync"]
    assert set(sync) == BARRIER_KEYS | CP_ASYNC_KEYS | TMA_KEYS
    assert sync["tma_loads"] == cuda.count("tl::tma_load(") == 2
    assert sync["mbarriers"] == sum(int(n) for n in re.findall(r"uint64_t \w+_mem\[(\d+)\]", cuda)) > 0


def test_sm100a_keeps_tensor_memory_empty_when_a_plain_gemm_uses_none(lowered):
    facts, _ = lowered["sm_100a"]
    assert facts["tensor_memory"] == {}  # the target has it, this kernel does not use it: empty, not absent
    assert facts["mma"]["families"] == ["mma.sync"]


def test_sm80_has_no_tma_keys_and_sm90_keeps_them(lowered):
    sm80, sm80_cuda = lowered["sm_80"]
    assert set(sm80["sync"]) == BARRIER_KEYS | CP_ASYNC_KEYS
    assert "tma_load" not in sm80_cuda and "mbarrier" not in sm80_cuda
    assert "tensor_memory" not in sm80
    sm90, _ = lowered["sm_90"]
    assert set(sm90["sync"]) == BARRIER_KEYS | CP_ASYNC_KEYS | TMA_KEYS
    assert sm90["sync"]["tma_loads"] > 0 and sm90["sync"]["mbarriers"] == 4
    assert sm90["sync"]["cp_async_copies"] == 0  # sm_90 has cp.async; this kernel uses TMA instead
    assert "tensor_memory" not in sm90


@pytest.mark.parametrize(
    "name, shape, instruction",
    [
        ("sm_80", "m16n8k16", "tirx.ptx_mma m16n8k16 "),
        ("sm_90", "m64n64k16", "tl.ptx_wgmma_ss m64n64k16 "),
        ("gfx942", "m16n16k16", "tl.tvm_mfma f32_16x16x16f16 "),
    ],
)
def test_mma_shapes_are_the_shapes_the_instructions_name(lowered, name, shape, instruction):
    facts, _ = lowered[name]
    assert facts["mma"]["shapes"] == [shape]
    assert any(key.startswith(instruction) for key in facts["instructions"])


def test_tensor_memory_is_an_optional_fact_of_the_snapshot(extracted):
    facts, _ = extracted["tcgen05"]
    (kernel,) = facts["kernels"]

    def with_kernel(kernel: dict) -> dict:
        return {**facts, "kernels": [kernel]}

    assert parse_facts(render_facts(facts), "x.yaml") == facts
    without = with_kernel({key: value for key, value in kernel.items() if key != "tensor_memory"})
    assert parse_facts(render_facts(without), "x.yaml") == without  # other targets have none
    with pytest.raises(CorruptSnapshot, match=f"kernel {kernel['name']}: tensor_memory is list, expected dict"):
        parse_facts(render_facts(with_kernel({**kernel, "tensor_memory": [128]})), "x.yaml")


def test_the_num_stages_report_names_only_the_machinery_the_target_has(extracted):
    from seeds.lower_num_stages import describe

    sm80, sm90, hip = (describe(3, extracted[name][0])[-1] for name in ("sm_80", "sm_90", "gfx950"))
    assert sm80 == "warp specialized = no, threads = 128, MMA = mma.sync"
    assert sm90 == "warp specialized = yes, threads = 256, TMA loads = 2, mbarriers = 4, MMA = wgmma"
    assert hip == "warp specialized = no, threads = 128, MMA = mfma"
    assert "s_waitcnt vmcnt arguments = [2, 1, 0]" in describe(3, extracted["gfx950"][0])
