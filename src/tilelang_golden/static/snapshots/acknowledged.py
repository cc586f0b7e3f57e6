"""The regressions a regen wrote because they were acknowledged, kept beside the family's snapshots with the reason
given: `golden/<family>/REGRESSIONS.yaml`, in the same diff as the snapshots it explains.

One record per case, class and kernel (a later acknowledgement of the same replaces it), sorted, so a regen writes the
same file whatever order its workers finish in; git keeps the older ones. The file is locked while it is rewritten:
the workers of one regen add to it concurrently.
"""

from __future__ import annotations

import fcntl
from collections.abc import Iterable
from typing import Any

import yaml

from tilelang_golden.regressions import Regression
from tilelang_golden.static.snapshots.snapshot import CorruptSnapshot, SnapshotStore

LEDGER = "REGRESSIONS.yaml"
HEADER = (
    "# Regressions written by `nox -s regen-golden` because they were acknowledged, with the reason given;\n"
    "# never edit by hand. One record per case, class and kernel: the latest acknowledgement.\n"
)
RECORD_KEYS = ("case", "class", "kernel", "change", "reason", "acknowledged_by", "tilelang")


def ledger_path(family: str) -> str:
    """The family's ledger inside the snapshot folder."""
    return f"{family}/{LEDGER}"


def parse_ledger(text: str, where: str) -> list[dict[str, Any]]:
    """The records of a ledger; CorruptSnapshot naming `where` and the fix where it is not one."""
    try:
        records = yaml.safe_load(text) if text.strip() else []
    except yaml.YAMLError as error:
        records = str(error).replace("\n", " ")
    if not isinstance(records, list) or not all(isinstance(r, dict) and set(r) == set(RECORD_KEYS) for r in records):
        raise CorruptSnapshot(
            f"{where}: not a ledger of acknowledged regressions (a list of records with keys {list(RECORD_KEYS)}); "
            "restore it from git (`git checkout -- <file>`): regens only add to it"
        )
    return records


def read_ledger(store: SnapshotStore, case: str) -> list[dict[str, Any]]:
    """The records of the ledger of `case`'s family (none where it has none); CorruptSnapshot as parse_ledger."""
    relative = ledger_path(case.split("/")[0])
    return parse_ledger(store.read(relative) or "", f"{store.prefix}{relative}")


def record_acknowledged(
    store: SnapshotStore, case: str, regressions: Iterable[Regression], tilelang: str
) -> dict[str, str]:
    """Add the acknowledged `regressions` of `case` (`family/variant/target`) to its family's ledger; path ->
    created, updated or unchanged (nothing when none is acknowledged)."""
    new = [
        dict(zip(RECORD_KEYS, (case, r.name, r.kernel, r.change, r.reason, r.by, tilelang), strict=True))
        for r in regressions
        if r.acknowledged
    ]
    if not new:
        return {}
    relative = ledger_path(case.split("/")[0])
    path = store.root / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a+", encoding="utf-8") as stream:
        fcntl.flock(stream, fcntl.LOCK_EX)  # released when the file is closed
        stream.seek(0)
        old = stream.read()
        records = {(r["case"], r["class"], r["kernel"]): r for r in parse_ledger(old, f"{store.prefix}{relative}")}
        records.update({(r["case"], r["class"], r["kernel"]): r for r in new})
        text = HEADER + yaml.safe_dump(
            [records[key] for key in sorted(records)], sort_keys=False, allow_unicode=True, width=120
        )
        if text == old:
            return {relative: "unchanged"}
        stream.seek(0)
        stream.truncate()
        stream.write(text)
    return {relative: "updated" if old else "created"}
