"""A snapshot's facts agree with its machine facts: an MMA, a cp.async, a TMA load or pipeline stages that TileLang
asked for and the machine code does not hold fail the case, in the static check and in a regen (which writes nothing
for it), until the variant declares why it is intended; a first snapshot that spills is said, not written silently.

The facts are the committed snapshots', with the machine code changed the way a contradiction changes it, and one
real lowering: upstream's fp8 GEMM (e4m3) on sm_80, whose MMA compiles to nothing."""

from __future__ import annotations

import copy
import dataclasses
import re
from pathlib import Path

import kernel_styles as styles
import pytest
import tilelang.language as T
from conftest import REPO, num_stages_case

import tilelang_golden.catalog.loading
from tilelang_golden.catalog.cases import Case
from tilelang_golden.catalog.loading import Registry
from tilelang_golden.contradictions import NAMES, find_contradictions, unacknowledged
from tilelang_golden.family import FamilyError
from tilelang_golden.static.engine import check_case
from tilelang_golden.static.session import read_produced
from tilelang_golden.static.snapshots.case_files import case_files
from tilelang_golden.static.snapshots.snapshot import SnapshotStore, load_yaml

GOLDEN = REPO / "golden"
PIPELINED = "gemm_num_stages/ns3_128x128x32/sm_80"  # 3 stages filled by cp.async, mma.sync
WARP_SPECIALIZED = "gemm_num_stages/ns3_128x128x32/sm_90"  # 3 stages filled by TMA, wgmma
CHAIN = "attention_backward_chain/noncausal/sm_80"  # four kernels, two of them with MMA
SPILLING = "gemm_num_stages/ns0_128x256x64/sm_80"  # a 128x256 fp32 accumulator in 128 threads: it spills


def snapshot(case: str) -> tuple[dict, dict]:
    """A committed case's facts and machine facts, as the check reads them."""
    return load_yaml((GOLDEN / f"{case}.yaml").read_text()), load_yaml((GOLDEN / f"{case}.machine.yaml").read_text())


def kernel(document: dict, name: str | None = None) -> dict:
    return next(k for k in document["kernels"] if name is None or k["name"] == name)


def as_fp8_on_sm80(facts: dict, machine: dict) -> tuple[dict, dict]:
    """What upstream's fp8 GEMM is on sm_80: an e4m3 m16n8k32 mma.sync in the IR, and no MMA in the machine code
    (CuTe's SM89 fp8 MMA compiles to nothing below sm_89; the lowering test below shows it for real)."""
    facts, machine = copy.deepcopy(facts), copy.deepcopy(machine)
    instructions = kernel(facts)["instructions"]
    (site,) = [key for key in instructions if key.startswith("tirx.ptx_mma ")]
    instructions["tirx.ptx_mma m16n8k32 row col e4m3 e4m3 fp32"] = instructions.pop(site)
    kernel(facts)["mma"]["shapes"] = ["m16n8k32"]
    kernel(machine)["sass"]["mma"] = {}
    return facts, machine


def test_the_committed_snapshots_used_here_agree():
    """The starting points hold what the tests take away (so each finding below is the change's)."""
    for case in (PIPELINED, WARP_SPECIALIZED, CHAIN, SPILLING):
        assert find_contradictions(*snapshot(case)) == [], case
    assert kernel(snapshot(PIPELINED)[1])["sass"]["async_copies"].get("LDGSTS")
    assert kernel(snapshot(WARP_SPECIALIZED)[1])["sass"]["tma"].get("UTMALDG")


def test_an_mma_in_the_ir_without_a_tensor_core_instruction_is_a_contradiction_saying_what_it_means():
    (found,) = find_contradictions(*as_fp8_on_sm80(*snapshot(PIPELINED)))
    assert (found.name, found.kernel) == ("mma", "gemm_kernel")
    assert "tirx.ptx_mma m16n8k32 row col e4m3 e4m3 fp32" in found.asked
    assert "sass.mma: {}" in found.holds
    assert "compiled to nothing" in found.means and "garbage" in found.means


def test_an_mma_of_another_kind_than_the_irs_is_one_too():
    facts, machine = snapshot(WARP_SPECIALIZED)
    kernel(machine)["sass"]["mma"] = {"HMMA": 8}  # mma.sync where the IR issues wgmma
    (found,) = find_contradictions(facts, machine)
    assert found.name == "mma" and found.asked.startswith("wgmma") and "HMMA 8" in found.holds


def test_cp_async_in_the_ir_without_ldgsts_is_a_contradiction():
    facts, machine = snapshot(PIPELINED)
    async_copies = kernel(machine)["sass"]["async_copies"]
    del async_copies["LDGSTS"]
    (found,) = find_contradictions(facts, machine)  # the stages it fills are this one's to say
    assert found.name == "cp-async"
    copies = kernel(facts)["sync"]["cp_async_copies"]
    assert found.asked == f"cp.async ({copies} copies into A_s, B_s)"
    assert "no LDGSTS" in found.holds and f"DEPBAR {async_copies['DEPBAR']}" in found.holds


def test_tma_loads_in_the_ir_without_utmaldg_are_a_contradiction():
    facts, machine = snapshot(WARP_SPECIALIZED)
    tma = kernel(machine)["sass"]["tma"]
    del tma["UTMALDG"]
    (found,) = find_contradictions(facts, machine)
    assert found.name == "tma" and "no UTMALDG or UBLKCP" in found.holds
    assert "hangs" in found.means


def test_stages_without_any_async_copy_are_a_contradiction():
    """The pipeline keeps 3 copies of its tiles, and nothing fills them asynchronously: not in the IR, not in SASS."""
    facts, machine = snapshot(PIPELINED)
    planned = kernel(facts)
    planned["sync"]["cp_async_copies"] = 0
    for by_op in planned["shared_addressing"].values():
        by_op.pop("tl.ptx_cp_async", None)
    assert find_contradictions(facts, machine) == []  # the machine code still copies asynchronously
    del kernel(machine)["sass"]["async_copies"]["LDGSTS"]
    (found,) = find_contradictions(facts, machine)
    stages = planned["pipelines"][0]["tl_pipelined_num_stages"]
    assert found.name == "stages"
    assert found.asked == f"{stages} pipeline stages (num_stages {stages}; shared buffers A_s {stages}, B_s {stages})"


def test_one_stage_is_no_pipeline_to_fill():
    facts, machine = snapshot("gemm_num_stages/ns0_128x128x32/sm_80")
    kernel(machine)["sass"]["async_copies"] = {}
    assert find_contradictions(facts, machine) == []


def test_each_kernel_of_a_chain_is_judged_by_its_own_machine_code():
    facts, machine = snapshot(CHAIN)
    kernel(machine, "flash_bwd_kernel")["sass"]["mma"] = {}
    (found,) = find_contradictions(facts, machine)
    assert (found.name, found.kernel) == ("mma", "flash_bwd_kernel")  # flash_fwd_kernel keeps its HMMA


def test_a_declared_contradiction_is_acknowledged_and_a_placeholder_is_not():
    found = find_contradictions(*as_fp8_on_sm80(*snapshot(PIPELINED)))
    assert unacknowledged(found, {"mma": "the kernel is timed only, its output is never read"}) == []
    assert unacknowledged(found, {"cp-async": "another contradiction"}) == found
    assert unacknowledged(found, {"mma": "<why it is right>"}) == found


@pytest.mark.parametrize("declared", [{"mma": "<why it is right>"}, {"mma": "TODO"}, {"mma": " "}])
def test_a_variant_declaring_a_contradiction_without_a_reason_is_refused(declared):
    family = num_stages_case(3, "sm_80").family
    variant = dataclasses.replace(family.variants[0], acknowledged_contradictions=declared)
    with pytest.raises(FamilyError, match=r"acknowledges contradictions \['mma'\] without saying why"):
        dataclasses.replace(family, variants=[variant, *family.variants[1:]])


def test_a_variant_declaring_an_unknown_contradiction_is_refused_naming_them():
    family = num_stages_case(3, "sm_80").family
    variant = dataclasses.replace(family.variants[0], acknowledged_contradictions={"tensor-cores": "why"})
    with pytest.raises(FamilyError, match=re.escape(f"do not exist; the contradictions are {list(NAMES)}")):
        dataclasses.replace(family, variants=[variant, *family.variants[1:]])


# -- through check_case: what the static check and the regen do with a case ---------------------------------------


class GivenFiles:
    """What check_case asks of a run's lowerings, answered with given files (every lowering, fresh or not, alike)."""

    def __init__(self, files: dict[str, str]) -> None:
        self.given, self.sources = files, {}

    def build(self, family, variant) -> None:
        return None

    def files(self, case: Case, *, fresh: bool = False) -> dict[str, str]:
        return dict(self.given)

    def produce(self, case: Case, *, fresh: bool = False):
        return read_produced(case, self.given)


def case_of(snapshot_id: str, **variant_fields) -> Case:
    """The case of a committed gemm_num_stages snapshot, its variant with `variant_fields`."""
    case = num_stages_case(3, "sm_80")
    name, target = snapshot_id.split("/")[1:]
    variant = dataclasses.replace(case.family.variant(name), **variant_fields)
    return Case(case.family, variant, target)


def committed(case: Case, source: str | None = None, change=None) -> dict[str, str]:
    """The committed files of `source` (default: the case's own) under the case's paths, `change` made to the machine
    facts' text."""
    files = {path: (GOLDEN / path.replace(case.id, source or case.id)).read_text() for path in case_files(case)}
    if change is not None:
        machine = f"{case.id}.machine.yaml"
        files[machine] = change(files[machine])
    return files


def no_mma(text: str) -> str:
    """The machine facts' text without its MMA instructions, as ptxas writes a kernel whose MMA compiled to nothing."""
    changed, count = re.subn(r"    mma:\n(?:      \w+: \d+\n)+", "    mma: {}\n", text)
    assert count == 1
    return changed


def stores(tmp_path: Path) -> tuple[SnapshotStore, SnapshotStore]:
    return SnapshotStore(tmp_path / "golden"), SnapshotStore(tmp_path / "pending")


def test_a_regen_writes_nothing_for_a_first_snapshot_with_a_contradiction_and_says_how_to_declare_it(tmp_path):
    case = case_of(PIPELINED)
    golden, pending = stores(tmp_path)
    result = check_case(case, GivenFiles(committed(case, change=no_mma)), golden, pending, regen=True)
    assert result.failed and not result.written and not golden.files()
    first, contradiction, fix = result.text.splitlines()
    assert first == (
        f"{case.id}: its facts and its machine facts contradict each other, so nothing under golden/ was written for "
        f"it (pending/{case.id}.yaml, .machine.yaml):"
    )
    assert contradiction.startswith("  mma: gemm_kernel: TileLang asked for mma.sync tensor-core MMA (tirx.ptx_mma")
    assert fix == (
        "Fix the kernel in kernels/gemm_num_stages.py; if it is intended, say why on variant 'ns3_128x128x32': "
        'Variant(acknowledged_contradictions={"mma": "<why it is right>"})'
    )
    assert pending.read(f"{case.id}.machine.yaml") is not None  # kept for review


def test_the_static_check_fails_a_committed_snapshot_that_contradicts_itself(tmp_path):
    case = case_of(PIPELINED)
    golden, pending = stores(tmp_path)
    files = committed(case, change=no_mma)
    for path, text in files.items():
        golden.write(path, text)
    result = check_case(case, GivenFiles(files), golden, pending)
    assert result.failed and not result.mismatches and result.accept is None
    assert result.text.startswith(f"{case.id}: its facts and its machine facts contradict each other (pending/")
    assert "\n  mma: gemm_kernel: " in result.text


def test_a_declared_contradiction_passes_and_is_written(tmp_path):
    case = case_of(PIPELINED, acknowledged_contradictions={"mma": "timed only: its output is never read"})
    golden, pending = stores(tmp_path)
    files = committed(case, change=no_mma)
    result = check_case(case, GivenFiles(files), golden, pending, regen=True)
    assert not result.failed, result.text
    assert golden.read(f"{case.id}.machine.yaml") == files[f"{case.id}.machine.yaml"]
    assert not check_case(case, GivenFiles(files), golden, pending).failed


def test_a_first_snapshot_that_spills_is_said_in_the_findings(tmp_path):
    case = case_of(PIPELINED)  # written with the machine facts of a kernel that spills
    golden, pending = stores(tmp_path)
    files = committed(case, source=SPILLING)
    spilled = kernel(load_yaml(files[f"{case.id}.machine.yaml"]))
    assert spilled["spill_store_bytes"] > 0
    result = check_case(case, GivenFiles(files), golden, pending, regen=True)
    assert not result.failed and result.written
    bytes_ = f"{spilled['spill_store_bytes']} B spill stores, {spilled['spill_load_bytes']} B spill loads"
    assert result.findings == (
        f"golden/{case.id}.machine.yaml: first snapshot of a kernel that spills, {spilled['name']}: {bytes_} "
        "(the spills class guards it from now on)",
    )
    assert check_case(case, GivenFiles(files), golden, pending, regen=True).findings == ()  # no longer the first


def test_a_first_snapshot_that_does_not_spill_is_not_noted(tmp_path):
    case = case_of(PIPELINED)
    golden, pending = stores(tmp_path)
    assert check_case(case, GivenFiles(committed(case)), golden, pending, regen=True).findings == ()


# -- a real lowering ----------------------------------------------------------------------------------------------


def fp8_gemm(M, N, K, block=64, threads=128):
    """Upstream's fp8 GEMM in short: e4m3 tiles, a float32 accumulator, two stages."""

    @T.prim_func
    def gemm(
        A: T.Tensor((M, K), "float8_e4m3fn"), B: T.Tensor((N, K), "float8_e4m3fn"), C: T.Tensor((M, N), "float32")
    ):
        with T.Kernel(T.ceildiv(N, block), T.ceildiv(M, block), threads=threads) as (bx, by):
            A_s = T.alloc_shared((block, block), "float8_e4m3fn")
            B_s = T.alloc_shared((block, block), "float8_e4m3fn")
            C_l = T.alloc_fragment((block, block), "float32")
            T.clear(C_l)
            for k in T.Pipelined(T.ceildiv(K, block), num_stages=2):
                T.copy(A[by * block, k * block], A_s)
                T.copy(B[bx * block, k * block], B_s)
                T.gemm(A_s, B_s, C_l, transpose_B=True)
            T.copy(C_l, C[by * block, bx * block])

    return gemm


def test_an_fp8_gemm_on_sm80_is_refused_by_the_regen_with_its_mma_lost(golden_session, monkeypatch):
    shape = {"M": 256, "N": 256, "K": 256}
    family = styles.family(fp8_gemm, {}, name="fp8_gemm", outputs=[2], shape=shape, targets=["sm_80"])
    case = Case(family, family.variants[0], "sm_80")
    monkeypatch.setattr(
        tilelang_golden.catalog.loading, "load_families", lambda *packages, **options: Registry((family,), ())
    )
    result = golden_session("--regen", "-k", case.id)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            f"*{case.id}: its facts and its machine facts contradict each other, so nothing under golden/ was written*",
            "*mma: gemm_kernel: TileLang asked for mma.sync tensor-core MMA (tirx.ptx_mma m16n8k32 row col e4m3*",
        ]
    )
    assert not (golden_session.golden / "fp8_gemm").exists()
    machine = load_yaml((golden_session.pending / f"{case.id}.machine.yaml").read_text())
    assert kernel(machine)["sass"]["mma"] == {}
