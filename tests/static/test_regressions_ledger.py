"""The ledger of acknowledged regressions through the static and regen sessions, in-process, on a temporary golden/
folder: a regen keeps it to what the snapshots hold, and the static check fails on a record that explains nothing.

The family is the seed GEMM on sm_80 with two small variants: `mutant`, whose stages a test sets (3 stages pipeline
through cp.async; 0 stages lose that, a regression of two or three classes, and 3 again is an improvement), and
`ns0_64x64x32`, a case the filtered regens leave alone."""

from __future__ import annotations

import dataclasses

from conftest import NUM_STAGES_FAMILY, REPO, num_stages_variant

import tilelang_golden.catalog.loading
from tilelang_golden.regressions import Regression
from tilelang_golden.static.snapshots.acknowledged import LEDGER, parse_ledger, record_acknowledged
from tilelang_golden.static.snapshots.snapshot import SnapshotStore

MUTANT = "gemm_num_stages/mutant/sm_80"
OTHER = "gemm_num_stages/ns0_64x64x32/sm_80"
GONE = "gemm_num_stages/renamed/sm_80"
# The classes the mutant's change to no stages brings, acknowledged by its declaration.
ACKNOWLEDGED = {
    "acknowledged_regressions": {c: "no stages on purpose" for c in ("async-copies", "occupancy", "pipeline-stages")}
}


def use_family(monkeypatch, stages: int, **declared) -> None:
    """The run's one family: the seed GEMM on sm_80 with `mutant` (these stages, a 64x64x32 tile) and `ns0_64x64x32`."""
    mutant = dataclasses.replace(num_stages_variant(stages, 64, 64, 32), name="mutant", **declared)
    family = dataclasses.replace(
        NUM_STAGES_FAMILY,
        variants=[mutant, num_stages_variant(0, 64, 64, 32)],
        targets=["sm_80"],
        checks=None,
        sweep=None,
        timing_twin=None,
    )
    registry = tilelang_golden.catalog.loading.Registry((family,), ())
    monkeypatch.setattr(tilelang_golden.catalog.loading, "load_families", lambda *packages, **options: registry)


def records(golden) -> list[tuple[str, str]]:
    path = golden / "gemm_num_stages" / LEDGER
    return [(r["case"], r["class"]) for r in parse_ledger(path.read_text(), "ledger")] if path.exists() else []


def test_a_regen_drops_what_the_snapshots_no_longer_hold_and_static_reports_it(golden_session, monkeypatch):
    golden = golden_session.golden
    use_family(monkeypatch, 3)
    golden_session("--regen", "-k", MUTANT).assert_outcomes(passed=1)
    use_family(monkeypatch, 0, **ACKNOWLEDGED)
    regressed = golden_session("--regen", "-k", MUTANT)
    regressed.assert_outcomes(passed=1)
    regressed.stdout.fnmatch_lines([f"{LEDGER} records: 0 dropped"])
    written = [name for case, name in records(golden) if case == MUTANT]  # occupancy too, where ptxas says so
    assert {"async-copies", "pipeline-stages"} <= set(written), written
    golden_session("-k", "regressions_ledger").assert_outcomes(passed=1)  # each record explains the snapshot

    # Another case's record that explains nothing (its snapshot never held `none`), and one of a renamed variant.
    store = SnapshotStore(golden)
    for suffix in (".cu", ".yaml", ".machine.yaml"):
        store.write(f"{OTHER}{suffix}", (REPO / "golden" / f"{OTHER}{suffix}").read_text())
    lost = Regression(
        "async-copies", "async copies lost", "gemm_kernel", "LDGSTS 12 -> LDGSTS 4", "why", "regen option"
    )
    record_acknowledged(store, OTHER, [lost], "0.1.15")
    record_acknowledged(store, GONE, [dataclasses.replace(lost, change="LDGSTS 12 -> none")], "0.1.15")
    rotten = (golden / "gemm_num_stages" / LEDGER).read_text()

    use_family(monkeypatch, 3, **ACKNOWLEDGED)  # the regression undone
    undone = golden_session("--regen", "-k", MUTANT)
    undone.assert_outcomes(passed=1)
    undone.stdout.fnmatch_lines(
        [
            f"golden/gemm_num_stages/{LEDGER}: dropped {MUTANT} async-copies gemm_kernel (LDGSTS * -> none; *): "
            "the regression is undone: gemm_kernel reads `LDGSTS *` again in*",
            f"golden/gemm_num_stages/{LEDGER}: dropped {GONE} async-copies *: family gemm_num_stages has no variant*",
            "*golden files: 0 created, * updated, 0 deleted*",
            f"{LEDGER} records: {len(written) + 1} dropped ({len(written)} regression undone, 1 no such case)",
        ]
    )
    assert records(golden) == [(OTHER, "async-copies")], "a filtered regen keeps the records of cases it did not write"

    (golden / "gemm_num_stages" / LEDGER).write_text(rotten)  # as a regen without the pruning left it
    static = golden_session("-k", "regressions_ledger")
    static.assert_outcomes(failed=1)
    static.stdout.fnmatch_lines(
        [
            f"*golden/gemm_num_stages/{LEDGER}: {len(written) + 2} record(s) of acknowledged regressions explain*",
            *(
                f"*{MUTANT} {name} gemm_kernel *: the regression is undone: gemm_kernel reads * again in *"
                for name in written
            ),
            f"*{OTHER} async-copies gemm_kernel (LDGSTS 12 -> LDGSTS 4): the regressed state is gone: *`none` in*",
            f"*{GONE} async-copies gemm_kernel *: family gemm_num_stages has no variant 'renamed'",
            f'*to drop them (never edit the ledger by hand): nox -s regen-golden -- -k "{MUTANT} or {OTHER}"',
        ]
    )
    assert (golden / "gemm_num_stages" / LEDGER).read_text() == rotten, "static never writes golden/"

    unfiltered = golden_session("--regen")  # every case written: every record that explains nothing goes
    assert unfiltered.ret == 0
    counts = f"{len(written) + 2} dropped ({len(written) + 1} regression undone, 1 no such case)"
    unfiltered.stdout.fnmatch_lines([f"{LEDGER} records: {counts}"])
    assert not (golden / "gemm_num_stages" / LEDGER).exists()
    assert golden_session().ret == 0
