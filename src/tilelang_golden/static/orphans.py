"""Orphans: files under golden/ that no registered variant produces. Finding them lowers nothing: a case's files are
named by its family, variant and target alone (`case_files`), so the check and the regen that deletes them
(`nox -s regen-golden -- -k no_orphans`) take seconds whatever the library's size."""

from __future__ import annotations

from collections.abc import Collection

from tilelang_golden.catalog.cases import all_cases
from tilelang_golden.catalog.loading import Registry
from tilelang_golden.static.snapshots.acknowledged import ledger_path
from tilelang_golden.static.snapshots.case_files import case_files
from tilelang_golden.static.snapshots.snapshot import SnapshotStore
from tilelang_golden.static.variant_effects import has_pairs, summary_path

# The -k expression that selects the orphan check alone: what a run that names orphans tells its reader to run.
SELECTOR = "no_orphans"


def expected_files(registry: Registry) -> set[str]:
    """Every file the registered families produce or keep: their cases', summaries and ledgers."""
    produced = {path for case in all_cases(registry) for path in case_files(case)}
    summaries = {summary_path(f) for f in registry.families if has_pairs(f)}
    return produced | summaries | {ledger_path(f.name) for f in registry.families}


def orphans(registry: Registry, golden: SnapshotStore, families: Collection[str] | None = None) -> list[str]:
    """The orphans under `golden`, sorted; only those under the folders of `families` when given. A family that
    failed to load keeps its snapshots: they are not orphans, just not checked."""
    kept = tuple(f"{broken.name}/" for broken in registry.broken)
    found = golden.files() - expected_files(registry)
    return sorted(
        path for path in found if not path.startswith(kept) and (families is None or path.split("/", 1)[0] in families)
    )
