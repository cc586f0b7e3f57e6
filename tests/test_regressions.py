"""Regression classes: each is found in the change that makes a kernel worse and not in its reverse; the static check
names it first, the regen refuses it until acknowledged (by the variant or by its option, the reason kept in the
family's ledger), and the reverse change regenerates freely. The mutants at the end are real compiles of the seed
GEMM, each a regression of its class."""

from __future__ import annotations

import dataclasses
import glob
from pathlib import Path

import pytest
import yaml
from conftest import NUM_STAGES_FAMILY, REPO, num_stages_variant

import tilelang_golden.catalog.loading
import tilelang_golden.family
from tilelang_golden.family import MACHINE, FamilyError, Measure, Reading, RegressionClass, Variant
from tilelang_golden.regressions import FACTS, REGRESSION_CLASSES, Regression, RegressionPolicy, find_regressions
from tilelang_golden.static.engine import check_files
from tilelang_golden.static.options import accepted_regressions
from tilelang_golden.static.report.markdown import overview_lines
from tilelang_golden.static.report.verdict import build_verdict, footer_lines
from tilelang_golden.static.snapshots.acknowledged import LEDGER, parse_ledger, record_acknowledged
from tilelang_golden.static.snapshots.changes import FactChange, FileChange, Mismatch
from tilelang_golden.static.snapshots.results import CheckResult, Status
from tilelang_golden.static.snapshots.snapshot import CorruptSnapshot, SnapshotStore


def kernel(**fields) -> dict:
    return {"name": "k", **fields}


def document(*kernels: dict, **top) -> dict:
    return {"kernels": list(kernels), **top}


def staged(**copies: int) -> dict:
    """Shared buffers by name, each keeping that many copies (a leading dimension where it keeps more than one)."""
    return {name: {"shape": [n, 128, 32] if n > 1 else [128, 32], "scope": "shared.dyn"} for name, n in copies.items()}


def buffers(*ops: str) -> dict:
    return {f"B{i}": {op: "0"} for i, op in enumerate(ops)}


# class -> (reads, the worse document, the better one): each worse one differs from the better in that class only.
PAIRS = {
    "tensor-core-mma": [
        (MACHINE, document(kernel(sass={"mma": {"HGMMA": 8}})), document(kernel(sass={"mma": {"HMMA": 16}}))),
        (MACHINE, document(kernel(sass={"mma": {"UTCHMMA": 2}})), document(kernel(sass={"mma": {"HGMMA": 8}}))),
        (MACHINE, document(kernel(sass={"mma": {"HMMA": 8}})), document(kernel(sass={"mma": {}}))),
        (FACTS, document(kernel(mma={"families": ["wgmma"]})), document(kernel(mma={"families": ["mma.sync"]}))),
    ],
    "async-copies": [
        (MACHINE, document(kernel(sass={"async_copies": {"LDGSTS": 24}})), document(kernel(sass={}))),
        (
            MACHINE,
            document(kernel(sass={"tma": {"UTMALDG": 4}})),
            document(kernel(sass={"async_copies": {"LDGSTS": 8}})),
        ),
        (
            FACTS,
            document(kernel(shared_addressing=buffers("tl.ptx_cp_async", "tl.ptx_cp_async"))),
            document(kernel(shared_addressing=buffers("tl.ptx_cp_async", "load"))),
        ),
        (
            FACTS,
            document(kernel(shared_addressing=buffers("tl.tma_load"))),
            document(kernel(shared_addressing=buffers("tl.ptx_cp_async"))),
        ),
    ],  # fmt: skip
    "spills": [(MACHINE, document(kernel(spill_store_bytes=0)), document(kernel(spill_store_bytes=96)))],
    "occupancy": [
        (
            MACHINE,
            document(kernel(occupancy={"warps_per_sm": 32, "blocks_per_sm": 8, "threads": 128})),
            document(kernel(occupancy={"warps_per_sm": 16, "blocks_per_sm": 4, "threads": 128})),
        )
    ],
    "pipeline-stages": [
        (FACTS, document(kernel(shared_buffers=staged(A=3, B=3))), document(kernel(shared_buffers=staged(A=3, B=1)))),
    ],
    "shared-memory-limit": [
        (
            FACTS,
            document(kernel(shared_memory={"bytes": 1, "limit": 2, "fits": True})),
            document(kernel(shared_memory={"bytes": 3, "limit": 2, "fits": False})),
        ),
    ],  # fmt: skip
    "main-loop-barrier": [
        (
            FACTS,
            document(kernel(sync={"syncthreads_main_loop": 0})),
            document(kernel(sync={"syncthreads_main_loop": 2})),
        )
    ],  # fmt: skip
}


def test_every_built_in_class_has_its_examples():
    assert sorted(PAIRS) == sorted(c.name for c in REGRESSION_CLASSES)


@pytest.mark.parametrize(
    "name, reads, better, worse",
    [(name, *pair) for name, pairs in PAIRS.items() for pair in pairs],
    ids=[f"{name}-{i}" for name, pairs in PAIRS.items() for i in range(len(pairs))],
)
def test_a_class_finds_the_worse_change_and_not_its_reverse(name, reads, better, worse):
    found = find_regressions(reads, better, worse)
    assert [r.name for r in found] == [name], found
    assert " -> " in found[0].change and found[0].kernel == "k"
    assert find_regressions(reads, worse, better) == []
    assert find_regressions(reads, better, better) == []


def test_lost_stages_are_counted_per_buffer_whatever_num_stages_says():
    """`num_stages` left at the kernel's default is in no variant's params, and an operand loaded through registers
    drops its buffer's stages while the other keeps 3: the copies each buffer keeps decide, not the params or the
    most of any buffer."""
    three = document(kernel(shared_buffers=staged(A_shared=3, B_shared=3)))
    (found,) = find_regressions(FACTS, three, document(kernel(shared_buffers=staged(A_shared=1, B_shared=1))))
    assert found.change == "A_shared 3, B_shared 3 -> A_shared 1, B_shared 1"
    (one,) = find_regressions(FACTS, three, document(kernel(shared_buffers=staged(A_shared=3, B_shared=1))))
    assert one.name == "pipeline-stages" and one.change.endswith("-> A_shared 3, B_shared 1")
    asked = document(kernel(shared_buffers=staged(A_shared=1, B_shared=1)), params={"num_stages": 1})
    assert [r.name for r in find_regressions(FACTS, three, asked)] == ["pipeline-stages"], "asked for, still lost"
    renamed = document(kernel(shared_buffers=staged(A_s=1)))
    assert find_regressions(FACTS, three, renamed) == [], "no buffer of both sides: nothing to compare"


def test_occupancy_is_resident_warps_not_blocks():
    """128 -> 256 threads: 7 -> 6 blocks per SM, but 28 -> 48 resident warps, which is what occupancy is."""
    narrow = document(kernel(occupancy={"warps_per_sm": 28, "blocks_per_sm": 7, "threads": 128}))
    wide = document(kernel(occupancy={"warps_per_sm": 48, "blocks_per_sm": 6, "threads": 256}))
    assert find_regressions(MACHINE, narrow, wide) == []
    (found,) = find_regressions(MACHINE, wide, narrow)
    assert found.change == "48 warps/SM (6 blocks of 256) -> 28 warps/SM (7 blocks of 128)"


def test_a_larger_copy_per_instruction_is_not_fewer_async_copies():
    """The source counts the buffers async copies fill, and the machine code only whether it copies asynchronously:
    a larger tile issues fewer TMA instructions without losing any."""
    more = document(kernel(sass={"tma": {"UTMALDG": 12}}, shared_addressing=buffers("tl.tma_load", "tl.tma_load")))
    fewer = document(kernel(sass={"tma": {"UTMALDG": 10}}, shared_addressing=buffers("tl.tma_load", "tl.tma_load")))
    assert find_regressions(MACHINE, more, fewer) == find_regressions(FACTS, more, fewer) == []


def committed(suffix: str) -> list[dict]:
    paths = sorted(glob.glob(str(REPO / "golden" / "*" / "*" / f"*{suffix}")))
    return [yaml.safe_load(Path(p).read_text()) for p in paths if suffix != ".yaml" or not p.endswith(".machine.yaml")]


def test_every_measure_reads_every_committed_snapshot():
    """Against itself no snapshot regresses, and each measure reads something from the snapshots it applies to."""
    for reads, suffix in ((FACTS, ".yaml"), (MACHINE, ".machine.yaml")):
        documents = committed(suffix)
        assert len(documents) > 100
        for snapshot in documents:
            assert find_regressions(reads, snapshot, snapshot) == []
        for regression_class in REGRESSION_CLASSES:
            for measure in (m for m in regression_class.measures if m.reads == reads):
                read = [measure.read(d, k) for d in documents for k in d["kernels"]]
                assert any(reading is not None for reading in read), (regression_class.name, measure.fields)


def one_variant_family(variant: Variant, **changes) -> tilelang_golden.family.Family:
    """The seed GEMM family with `variant` alone (nothing that names its other variants)."""
    variant = dataclasses.replace(variant, compare_with=None)
    return dataclasses.replace(
        NUM_STAGES_FAMILY, variants=[variant], checks=None, sweep=None, timing_twin=None, **changes
    )


def test_a_family_adds_its_own_class_and_its_variants_acknowledge_it():
    def warps(document, kernel):
        return Reading(kernel["launch"]["threads"][0], f"{kernel['launch']['threads'][0]} threads")

    fewer_threads = RegressionClass(
        "fewer-threads", "fewer threads per block", (Measure(FACTS, "launch", "lower", warps),)
    )
    family = one_variant_family(NUM_STAGES_FAMILY.variants[0], regressions=(fewer_threads,))
    old = document(kernel(launch={"threads": [256, 1, 1]}))
    new = document(kernel(launch={"threads": [128, 1, 1]}))
    (found,) = find_regressions(FACTS, old, new, (*REGRESSION_CLASSES, *family.regressions))
    assert found.name == "fewer-threads" and found.change == "256 threads -> 128 threads"
    acknowledged = dataclasses.replace(family.variants[0], acknowledged_regressions={"fewer-threads": "a test"})
    one_variant_family(acknowledged, regressions=(fewer_threads,))  # declares without error
    with pytest.raises(FamilyError, match=r"regression class names \['spills'\] are taken"):
        dataclasses.replace(family, regressions=(dataclasses.replace(fewer_threads, name="spills"),))


@pytest.mark.parametrize(
    "acknowledged, problem",
    [
        ({"no-such-class": "why"}, "do not exist; the classes are"),
        ({"spills": " "}, "without saying why"),
        ({"spills": "<why it is right>"}, "without saying why"),  # the refusal's own text, pasted
        ({"spills": "TODO: measure it"}, "without saying why"),
    ],
)
def test_a_variant_acknowledges_known_classes_with_a_reason(acknowledged, problem):
    variant = dataclasses.replace(NUM_STAGES_FAMILY.variants[0], acknowledged_regressions=acknowledged)
    with pytest.raises(FamilyError, match=problem) as raised:
        one_variant_family(variant)
    assert variant.name in str(raised.value) and "gemm_num_stages" in str(raised.value)


@pytest.mark.parametrize(
    "values, regen, problem",
    [
        (["spills=a reason"], False, "use it with --regen"),
        (["spill=a reason"], True, "no regression class 'spill'"),
        (["spills"], True, "say why"),
        (["spills=<why it is right>"], True, "say why"),
        (["spills=TODO: <why it is right>"], True, "say why"),
        (["spills=todo"], True, "say why"),
        (["spills=a", "spills=b"], True, "twice"),
    ],
)
def test_the_regen_option_names_a_class_and_a_reason(values, regen, problem):
    with pytest.raises(ValueError, match=problem):
        accepted_regressions(values, regen, REGRESSION_CLASSES)
    assert accepted_regressions(["spills = it fits in L1"], True, REGRESSION_CLASSES) == {"spills": "it fits in L1"}
    both = accepted_regressions(["spills,occupancy=a larger tile"], True, REGRESSION_CLASSES)
    assert both == {"spills": "a larger tile", "occupancy": "a larger tile"}


def test_the_variant_acknowledges_and_the_regen_option_wins():
    spills = Regression("spills", "register spills appearing or growing", "k", "0 B -> 96 B")
    occupancy = Regression("occupancy", "occupancy falling (resident warps per SM)", "k", "2 -> 1")
    policy = RegressionPolicy(declared={"spills": "declared", "occupancy": "declared"}, given={"occupancy": "given"})
    judged = policy.acknowledged([spills, occupancy])
    assert [(r.reason, r.by) for r in judged] == [("declared", "variant declaration"), ("given", "regen option")]


# -- the verdict ---------------------------------------------------------------------------------------------------


def failure(variant: str, field: str, regressions: tuple[Regression, ...] = ()) -> CheckResult:
    case = ("gemm_num_stages", variant, "sm_80")
    change = FactChange(("kernels", 0, field), "1", "2", "")
    mismatch = Mismatch(f"golden/{'/'.join(case)}.yaml", FileChange.FACTS, subject="facts", facts=(change,))
    return CheckResult(
        "/".join(case), Status.FAILED, case, mismatches=(mismatch,), accept="/".join(case), regressions=regressions
    )


def test_a_regression_is_its_own_entry_first_with_the_command_that_acknowledges_it():
    lost = Regression("async-copies", "async copies lost or fewer (cp.async, TMA)", "gemm_kernel", "LDGSTS 24 -> none")
    verdict = build_verdict([failure("neutral", "registers"), failure("worse", "registers", (lost,))])
    first, second = verdict.entries
    assert first.headline.startswith("REGRESSION (async copies lost or fewer (cp.async, TMA)): ")
    assert first.sections[0].label == "regressions"
    assert first.sections[0].lines == (
        "sm_80: async copies lost or fewer (cp.async, TMA): gemm_kernel: LDGSTS 24 -> none",
    )
    assert first.accept.endswith('--accept-regression "async-copies=<why it is right>"')
    assert not second.regressions and "--accept-regression" not in second.accept
    assert verdict.heading == "2 changes in 2 failing checks, 1 of them a regression"
    assert '--accept-regression "async-copies=<why it is right>"' in verdict.accept_all
    assert footer_lines(verdict)[0].startswith("[1] gemm_num_stages/worse: sm_80: REGRESSION (")
    assert overview_lines(verdict)[2].startswith("1. **gemm_num_stages/worse: sm_80**: REGRESSION (")


def test_an_acknowledged_regression_is_still_named_and_needs_no_option():
    lost = Regression("spills", "register spills appearing or growing", "k", "0 B -> 96 B", "fits L1", "regen option")
    (entry,) = build_verdict([failure("worse", "spill_store_bytes", (lost,))]).entries
    assert entry.headline.startswith("REGRESSION (register spills appearing or growing, acknowledged): ")
    assert "(acknowledged: fits L1)" in entry.sections[0].lines[0]
    assert "--accept-regression" not in entry.accept


def test_results_keep_their_regressions():
    lost = Regression("spills", "register spills appearing or growing", "k", "0 B -> 96 B", "fits L1", "regen option")
    result = failure("worse", "registers", (lost,))
    assert CheckResult.from_json(result.to_json()) == result
    assert result.unacknowledged == () and failure("x", "y", (dataclasses.replace(lost, reason=""),)).unacknowledged


# -- the ledger ----------------------------------------------------------------------------------------------------


def test_the_ledger_keeps_one_sorted_record_per_case_class_and_kernel(tmp_path):
    store = SnapshotStore(tmp_path / "golden")
    spills = Regression("spills", "spills", "k", "0 B -> 96 B", "first reason", "regen option")
    unacknowledged = Regression("occupancy", "occupancy", "k", "2 -> 1")
    assert record_acknowledged(store, "fam/b/sm_80", [unacknowledged], "0.1.15") == {}
    assert record_acknowledged(store, "fam/b/sm_80", [spills], "0.1.15") == {f"fam/{LEDGER}": "created"}
    assert record_acknowledged(store, "fam/a/sm_80", [spills], "0.1.15") == {f"fam/{LEDGER}": "updated"}
    again = dataclasses.replace(spills, reason="second reason")
    assert record_acknowledged(store, "fam/b/sm_80", [again], "0.1.15") == {f"fam/{LEDGER}": "updated"}
    assert record_acknowledged(store, "fam/b/sm_80", [again], "0.1.15") == {f"fam/{LEDGER}": "unchanged"}
    records = parse_ledger((store.root / "fam" / LEDGER).read_text(), "ledger")
    assert [(r["case"], r["reason"]) for r in records] == [
        ("fam/a/sm_80", "first reason"),
        ("fam/b/sm_80", "second reason"),
    ]


def test_a_corrupt_ledger_is_named_with_its_fix(tmp_path):
    store = SnapshotStore(tmp_path / "golden")
    (tmp_path / "golden" / "fam").mkdir(parents=True)
    (tmp_path / "golden" / "fam" / LEDGER).write_text("- just: words\n")
    spills = Regression("spills", "spills", "k", "0 B -> 96 B", "why", "regen option")
    with pytest.raises(CorruptSnapshot, match=r"golden/fam/REGRESSIONS.yaml: not a ledger.*git checkout"):
        record_acknowledged(store, "fam/b/sm_80", [spills], "0.1.15")


# -- mutants: real compiles of the seed GEMM through the static and regen sessions ---------------------------------

# class -> (target, the tile and stages before, after): each after is a regression of its class on that target.
MUTANTS = {
    "async-copies": ("sm_80", (3, (128, 128, 32)), (0, (128, 128, 32))),  # a schedule without stages
    "tensor-core-mma": ("sm_90", (2, (64, 64, 32)), (2, (32, 64, 32))),  # a tile too small for wgmma
    "spills": ("sm_90", (3, (128, 128, 32)), (3, (128, 256, 64))),  # an oversized accumulator fragment
    "occupancy": ("sm_80", (3, (64, 64, 32)), (3, (128, 128, 32))),  # a larger tile
    "pipeline-stages": ("sm_90", (3, (128, 128, 32)), (1, (128, 128, 32))),  # one copy of each buffer
}
MUTANT = "gemm_num_stages/mutant"


def use_variant(monkeypatch, stages: int, tile: tuple[int, int, int], target: str, **declared) -> None:
    """The run's one family: the seed GEMM with one variant, `mutant`, of these stages and tile, on `target`."""
    variant = dataclasses.replace(num_stages_variant(stages, *tile), name="mutant", **declared)
    family = one_variant_family(variant, targets=[target])
    registry = tilelang_golden.catalog.loading.Registry((family,), ())
    monkeypatch.setattr(tilelang_golden.catalog.loading, "load_families", lambda *packages, **options: registry)


def regressed(golden_session, monkeypatch, name: str) -> tuple[str, dict, list[str]]:
    """The mutant of class `name` snapshotted before, then checked after its change: its case, its snapshots before,
    and the regression classes the static check found."""
    target, before, after = MUTANTS[name]
    case = f"{MUTANT}/{target}"
    use_variant(monkeypatch, *before, target)
    golden_session("--regen", "-k", case).assert_outcomes(passed=1)
    snapshots = {p: p.read_text() for p in golden_session.golden.rglob(f"{target}.*")}
    use_variant(monkeypatch, *after, target)
    static = golden_session("-k", case)
    static.assert_outcomes(failed=1)
    verdict = static.stdout.str()
    assert f"[1] {MUTANT}: {target}" in verdict and "    REGRESSION (" in verdict, verdict
    (result,) = [r for r in (golden_session.pending / "RESULTS.jsonl").read_text().splitlines() if case in r]
    return case, snapshots, sorted({r.name for r in CheckResult.from_json(result).regressions})


@pytest.mark.parametrize("name", sorted(MUTANTS))
def test_a_mutant_is_a_regression_of_its_class(golden_session, monkeypatch, name):
    _, _, found = regressed(golden_session, monkeypatch, name)
    assert name in found, found  # with the classes the same change brings too (no stages: no async copies either)


def test_a_regression_is_refused_until_acknowledged_and_its_reverse_is_free(golden_session, monkeypatch):
    """What a regen does with a regression, whatever its class (the classes: the test above)."""
    name = "tensor-core-mma"
    case, snapshots, found = regressed(golden_session, monkeypatch, name)
    refused = golden_session("--regen", "-k", case)
    refused.assert_outcomes(failed=1)
    refused.stdout.fnmatch_lines(["*its change is a regression*", f'*--accept-regression "{name}=<why it is right>"*'])
    assert {p: p.read_text() for p in snapshots} == snapshots, "a refused regen writes nothing"

    reason = f"the {name} mutant is meant"
    accepted = golden_session("--regen", "-k", case, "--accept-regression", f"{','.join(found)}={reason}")
    accepted.assert_outcomes(passed=1)
    records = parse_ledger((golden_session.golden / "gemm_num_stages" / LEDGER).read_text(), "ledger")
    assert {(r["case"], r["class"], r["reason"], r["acknowledged_by"]) for r in records} >= {
        (case, name, reason, "regen option")
    }
    golden_session("-k", case).assert_outcomes(passed=1)

    target, before, _ = MUTANTS[name]
    use_variant(monkeypatch, *before, target)
    golden_session("--regen", "-k", case).assert_outcomes(passed=1)  # the reverse: an improvement, written freely
    assert {p: p.read_text() for p in snapshots} == snapshots


def test_a_regression_the_variant_acknowledges_is_written_by_a_plain_regen(golden_session, monkeypatch):
    target, before, after = MUTANTS["async-copies"]
    use_variant(monkeypatch, *before, target)
    assert golden_session("--regen").ret == 0
    # No stages: no async copies, and every buffer keeps one copy.
    declared = {"acknowledged_regressions": {"async-copies": "no stages on purpose", "pipeline-stages": "the same"}}
    use_variant(monkeypatch, *after, target, **declared)
    static = golden_session()
    static.stdout.fnmatch_lines(["*REGRESSION (async copies lost or fewer (cp.async, TMA)*, acknowledged)*"])
    assert golden_session("--regen").ret == 0
    records = parse_ledger((golden_session.golden / "gemm_num_stages" / LEDGER).read_text(), "ledger")
    assert [(r["class"], r["reason"], r["acknowledged_by"]) for r in records] == [
        ("async-copies", "no stages on purpose", "variant declaration"),
        ("pipeline-stages", "the same", "variant declaration"),
    ]
    assert golden_session().ret == 0, "the written regression passes, and the ledger is no orphan"


def test_a_regen_with_a_corrupt_ledger_writes_nothing_for_the_acknowledged_regression(tmp_path):
    """The committed machine facts of two tiles: the larger one's occupancy is half. Acknowledged, the regen would
    write it, but the family's ledger cannot be read: the case fails naming it, and its snapshot stays as it was."""
    committed_file = "gemm_num_stages/{}/sm_80.machine.yaml"
    small = (REPO / "golden" / committed_file.format("ns3_64x64x32")).read_text()
    large = (REPO / "golden" / committed_file.format("ns3_128x128x32")).read_text()
    golden, pending = SnapshotStore(tmp_path / "golden"), SnapshotStore(tmp_path / "pending")
    path = committed_file.format("v")
    golden.write(path, small)
    golden.write(f"gemm_num_stages/{LEDGER}", "not: a list\n")
    policy = RegressionPolicy(declared={"occupancy": "a larger tile on purpose"})
    result = CheckResult("gemm_num_stages/v/sm_80", case=("gemm_num_stages", "v", "sm_80"), accept="x")
    checked = check_files(result, lambda fresh: {path: large}, golden, pending, True, policy=policy)
    assert checked.failed and "REGRESSIONS.yaml: not a ledger" in checked.text and "nothing under" in checked.text
    assert golden.read(path) == small
    unacknowledged = check_files(result, lambda fresh: {path: large}, golden, pending, True)
    assert unacknowledged.failed and "its change is a regression" in unacknowledged.text
    assert [r.name for r in unacknowledged.unacknowledged] == ["occupancy"] and golden.read(path) == small


def test_the_preview_script_counts_regressions_both_ways(tmp_path):
    """benchmarks.preview_regressions, on the committed machine facts of two tiles: the larger tile's occupancy is
    half, so moving to it regresses and moving back does not."""
    from benchmarks.preview_regressions import main, regressions

    committed_file = "gemm_num_stages/{}/sm_80.machine.yaml"
    pinned, preview = SnapshotStore(tmp_path / "golden"), SnapshotStore(tmp_path / "preview" / "golden")
    pinned.write(committed_file.format("v"), (REPO / "golden" / committed_file.format("ns3_64x64x32")).read_text())
    preview.write(committed_file.format("v"), (REPO / "golden" / committed_file.format("ns3_128x128x32")).read_text())
    counts, lines = regressions(pinned, preview)
    assert counts == {("occupancy", "sm_80"): 1} and lines[0].startswith("- gemm_num_stages/v/sm_80: occupancy")
    assert regressions(preview, pinned) == ({}, [])
    assert main([str(tmp_path / "preview"), "--golden", str(tmp_path / "golden")]) == 0
    assert main([str(tmp_path / "nothing")]) == 1
