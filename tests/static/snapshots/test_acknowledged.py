"""The ledger of acknowledged regressions keeps only records that explain the snapshots: which records are stale and
why, and the pruning a regen does under the ledger's lock. The snapshots are the committed ones of the seed GEMM on
sm_90: `ns2_64x64x32` pipelines its copies through TMA, `ns0_64x64x32` does not, so moving from the first to the
second is a regression of three classes (async copies, pipeline stages, a barrier in the main loop)."""

from __future__ import annotations

import dataclasses
import threading

import pytest
from conftest import NUM_STAGES_FAMILY, REPO

from tilelang_golden.catalog.cases import family_cases
from tilelang_golden.regressions import FACTS, MACHINE, find_regressions
from tilelang_golden.static.kinds import merged_regressions
from tilelang_golden.static.snapshots.acknowledged import (
    LEDGER,
    NO_CASE,
    NO_CLASS,
    NO_KERNEL,
    UNDONE,
    Stale,
    _locked,
    parse_ledger,
    prune_ledger,
    prune_ledgers,
    record_acknowledged,
    stale,
    stale_records,
    stale_text,
)
from tilelang_golden.static.snapshots.snapshot import SnapshotStore, parse_facts, parse_machine_facts

FAMILY = NUM_STAGES_FAMILY
CASE = "gemm_num_stages/ns0_64x64x32/sm_90"
OTHER = "gemm_num_stages/ns3_64x64x32/sm_90"
BEFORE, AFTER = "ns2_64x64x32", "ns0_64x64x32"
SUFFIXES = ((".machine.yaml", MACHINE, parse_machine_facts), (".yaml", FACTS, parse_facts))


def committed(variant: str, suffix: str) -> str:
    return (REPO / "golden" / "gemm_num_stages" / variant / f"sm_90{suffix}").read_text()


def tma_loads(variant: str) -> str:
    """How the async-copies class reads the committed variant's TMA loads: `TMA 16`."""
    machine = parse_machine_facts(committed(variant, ".machine.yaml"), variant)
    return f"TMA {machine['kernels'][0]['sass']['tma']['UTMALDG']}"


def snapshot(store: SnapshotStore, case: str, variant: str) -> None:
    """`case`'s snapshot files, holding what the committed `variant` holds on sm_90."""
    for suffix, _, _ in SUFFIXES:
        store.write(f"{case}{suffix}", committed(variant, suffix))


def regressions(before: str, after: str, reason: str = "meant"):
    """The regressions from one committed variant's snapshot to another's, acknowledged, as a regen finds them."""
    found = []
    for suffix, reads, parse in SUFFIXES:
        found += find_regressions(reads, parse(committed(before, suffix), "a"), parse(committed(after, suffix), "b"))
    judged = merged_regressions(found, FAMILY.regression_classes)
    return [dataclasses.replace(r, reason=reason, by="regen option") for r in judged]


def ledger(store: SnapshotStore) -> list[dict]:
    return parse_ledger((store.root / "gemm_num_stages" / LEDGER).read_text(), "ledger")


def record(case: str, name: str, kernel: str = "gemm_kernel", change: str = "1 -> 2") -> dict:
    return {"case": case, "class": name, "kernel": kernel, "change": change}


@pytest.fixture
def golden(tmp_path) -> SnapshotStore:
    """The case holding the regressed snapshot, and the records of its regression in the ledger."""
    store = SnapshotStore(tmp_path / "golden")
    snapshot(store, CASE, AFTER)
    record_acknowledged(store, CASE, regressions(BEFORE, AFTER), "0.1.15")
    return store


def judge(store: SnapshotStore, entry: dict) -> Stale | None:
    return stale(entry, {c.id: c for c in family_cases(FAMILY)}, FAMILY.regression_classes, store)


def judge_all(entry: dict) -> Stale:
    return Stale(UNDONE, "every record")


def test_the_regression_is_three_classes_one_with_both_files(golden):
    records = ledger(golden)
    assert [r["class"] for r in records] == ["async-copies", "main-loop-barrier", "pipeline-stages"]
    assert "; " in records[0]["change"], "async copies moved in the machine code and the facts: one record for both"


def test_a_record_whose_regressed_state_the_snapshot_holds_is_live(golden):
    assert [judge(golden, r) for r in ledger(golden)] == [None, None, None]
    assert stale_records(FAMILY, golden) == []


def test_a_record_whose_regression_was_undone_is_stale(golden):
    snapshot(golden, CASE, BEFORE)  # the kernel pipelines again: each class's reading is what it was before
    found = [judge(golden, r) for r in ledger(golden)]
    assert [f.cause for f in found] == [UNDONE] * 3
    undone = f"the regression is undone: gemm_kernel reads `{tma_loads(BEFORE)}`; `TMA buffers 2` again in"
    assert undone in found[0].why
    assert f"golden/{CASE}.machine.yaml" in found[0].why
    assert [r["class"] for r, _ in stale_records(FAMILY, golden)] == [
        "async-copies",
        "main-loop-barrier",
        "pipeline-stages",
    ]


def test_one_file_still_regressed_keeps_the_record(golden):
    """A change of two files (`TMA 16 -> none; TMA buffers 2 -> none`) is still explained while either file holds
    its side."""
    golden.write(f"{CASE}.machine.yaml", committed(BEFORE, ".machine.yaml"))
    (async_copies,) = [r for r in ledger(golden) if r["class"] == "async-copies"]
    assert judge(golden, async_copies) is None


@pytest.mark.parametrize(
    "entry, cause, why",
    [
        (record("gemm_num_stages/renamed/sm_90", "spills"), NO_CASE, "family gemm_num_stages has no variant 'renamed'"),
        (record("gemm_num_stages/ns0_64x64x32/sm_1", "spills"), NO_CASE, "is not snapshotted on 'sm_1' (its targets:"),
        (record("other_family/v/sm_90", "spills"), NO_CASE, "other_family/v/sm_90 is not a case of family gemm_num"),
        (record(CASE, "no-such-class"), NO_CLASS, "no regression class 'no-such-class' (the family's classes: tensor"),
        (record(CASE, "spills", kernel="renamed_kernel"), NO_KERNEL, "no kernel 'renamed_kernel' in golden/gemm_num"),
    ],
)
def test_a_record_naming_what_does_not_exist_is_stale(golden, entry, cause, why):
    found = judge(golden, entry)
    assert found is not None and found.cause == cause and why in found.why, found


def test_a_case_without_its_snapshot_is_not_judged(golden):
    """Its own check fails on the missing file, and its regen writes the file before the record is judged."""
    (golden.root / f"{CASE}.yaml").unlink()
    assert [judge(golden, r) for r in ledger(golden)] == [None, None, None]
    golden.write(f"{CASE}.yaml", "not: facts\n")  # corrupt: the same
    assert [judge(golden, r) for r in ledger(golden)] == [None, None, None]


def test_the_static_text_names_the_file_each_record_why_and_the_regen(golden):
    record_acknowledged(golden, "gemm_num_stages/renamed/sm_90", regressions(BEFORE, AFTER)[:1], "0.1.15")
    snapshot(golden, CASE, BEFORE)
    text = stale_text(FAMILY, golden, stale_records(FAMILY, golden))
    lines = text.splitlines()
    assert lines[0] == (
        "golden/gemm_num_stages/REGRESSIONS.yaml: 4 record(s) of acknowledged regressions explain nothing in the "
        "committed snapshots"
    )
    change = f"{tma_loads(BEFORE)} -> none; TMA buffers 2 -> none"
    assert lines[1].startswith(f"  {CASE} async-copies gemm_kernel ({change}): the regression is undone")
    assert "gemm_num_stages/renamed/sm_90 async-copies gemm_kernel" in text and "has no variant 'renamed'" in text
    assert lines[-1] == f'to drop them (never edit the ledger by hand): nox -s regen-golden -- -k "{CASE}"'


def test_a_regen_prunes_the_cases_it_wrote_and_any_record_naming_nothing(golden):
    snapshot(golden, OTHER, BEFORE)  # another case whose record explains nothing either, but which was not written
    record_acknowledged(golden, OTHER, regressions(BEFORE, AFTER)[:1], "0.1.15")
    record_acknowledged(golden, "gemm_num_stages/renamed/sm_90", regressions(BEFORE, AFTER)[:1], "0.1.15")
    snapshot(golden, CASE, BEFORE)

    pruned = prune_ledgers([FAMILY], golden, regenerated={CASE})
    assert pruned.line() == f"{LEDGER} records: 4 dropped (3 regression undone, 1 no such case)"
    assert pruned.written == {f"gemm_num_stages/{LEDGER}": "updated"} and pruned.ledgers == 1
    assert [(r["case"], r["class"]) for r in ledger(golden)] == [(OTHER, "async-copies")], "a case not written keeps"
    assert pruned.findings()[0].startswith(f"golden/gemm_num_stages/{LEDGER}: dropped {CASE} async-copies gemm_kernel")
    assert not [p for p in (golden.root / "gemm_num_stages").iterdir() if p.name.startswith(".")], "no temporary"

    unfiltered = prune_ledgers([FAMILY], golden, regenerated={CASE, OTHER})  # every case written: the last one goes
    assert unfiltered.line() == f"{LEDGER} records: 1 dropped (1 regression undone)"
    assert unfiltered.written == {f"gemm_num_stages/{LEDGER}": "deleted"}
    assert not (golden.root / "gemm_num_stages" / LEDGER).exists()
    assert prune_ledgers([FAMILY], golden, {CASE, OTHER}).line() == f"{LEDGER} records: 0 dropped"


def test_a_regen_keeps_a_live_record(golden):
    pruned = prune_ledgers([FAMILY], golden, regenerated={CASE})
    assert pruned.dropped == () and pruned.written == {} and len(ledger(golden)) == 3


def test_the_pruning_waits_for_the_ledgers_lock(golden):
    """The lock record_acknowledged takes: a pruning started while another process holds it writes nothing until
    it is released, so the two never mix."""
    snapshot(golden, CASE, BEFORE)
    before = (golden.root / "gemm_num_stages" / LEDGER).read_text()
    done = []
    with _locked(golden.root / "gemm_num_stages"):
        pruning = threading.Thread(target=lambda: done.append(prune_ledger(golden, "gemm_num_stages", judge_all)))
        pruning.start()
        pruning.join(timeout=1)
        assert pruning.is_alive() and not done, "the pruning went ahead while the lock was held"
        assert (golden.root / "gemm_num_stages" / LEDGER).read_text() == before
    pruning.join(timeout=30)
    assert done and done[0][0] == {f"gemm_num_stages/{LEDGER}": "deleted"}
