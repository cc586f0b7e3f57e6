"""The regressions a regen wrote because they were acknowledged, kept beside the family's snapshots with the reason
given: `golden/<family>/REGRESSIONS.yaml`, in the same diff as the snapshots it explains.

One record per case, class and kernel (a later acknowledgement of the same replaces it), sorted, so a regen writes the
same file whatever order its workers finish in; git keeps the older ones. The ledger holds only records that still
explain the snapshots (`stale`): a regen drops those of the cases it rewrote that no longer do, and any naming a case or
class that does not exist (`prune_ledger`); the static check fails on one it finds. Every change to the file is made
under one lock, on the family's folder, and written through an atomic rename: the workers of one regen add to it
concurrently, and a reader sees the old file or the new one.
"""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import os
from collections import Counter
from collections.abc import Callable, Container, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from tilelang_golden.catalog.cases import family_cases
from tilelang_golden.regressions import FACTS, MACHINE, Regression, RegressionClass, class_names
from tilelang_golden.static.snapshots.case_files import facts_file, machine_file
from tilelang_golden.static.snapshots.regen import regen_command
from tilelang_golden.static.snapshots.results import CheckResult, ResultsError, Status, append_result, read_results
from tilelang_golden.static.snapshots.snapshot import CorruptSnapshot, SnapshotStore, parse_facts, parse_machine_facts

if TYPE_CHECKING:
    from tilelang_golden.catalog.cases import Case
    from tilelang_golden.family import Family

LEDGER = "REGRESSIONS.yaml"
HEADER = (
    "# Regressions written by `nox -s regen-golden` because they were acknowledged, with the reason given;\n"
    "# never edit by hand. One record per case, class and kernel: the latest acknowledgement that still explains\n"
    "# the snapshots.\n"
)
RECORD_KEYS = ("case", "class", "kernel", "change", "reason", "acknowledged_by", "tilelang")
Record = Mapping[str, Any]

# Why a record explains nothing, in the words the regen's counts use.
NO_CASE = "no such case"
NO_CLASS = "no such class"
NO_KERNEL = "no such kernel"
UNDONE = "regression undone"
CAUSES = (UNDONE, NO_KERNEL, NO_CASE, NO_CLASS)
# The snapshot file each kind of measure reads (tilelang_golden.regressions), and how it is parsed.
READERS: dict[str, tuple[Callable[[Case], str | None], Callable[[str, str], dict[str, Any]]]] = {
    MACHINE: (machine_file, parse_machine_facts),
    FACTS: (facts_file, parse_facts),
}


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
            "restore it from git (`git checkout -- <file>`): only regens write it"
        )
    return records


def read_ledger(store: SnapshotStore, case: str) -> list[dict[str, Any]]:
    """The records of the ledger of `case`'s family (none where it has none); CorruptSnapshot as parse_ledger."""
    relative = ledger_path(case.split("/")[0])
    return parse_ledger(store.read(relative) or "", f"{store.prefix}{relative}")


def _key(record: Record) -> tuple[str, str, str]:
    return (str(record["case"]), str(record["class"]), str(record["kernel"]))


def render_ledger(records: Iterable[Record]) -> str:
    """A ledger's text: its header, then one record per case, class and kernel, sorted."""
    unique = {_key(r): dict(r) for r in records}
    return HEADER + yaml.safe_dump([unique[k] for k in sorted(unique)], sort_keys=False, allow_unicode=True, width=120)


@contextlib.contextmanager
def _locked(folder: Path) -> Iterator[None]:
    """The family's ledger to this process alone: a lock on its folder, which outlives the file's atomic renames."""
    folder.mkdir(parents=True, exist_ok=True)
    descriptor = os.open(folder, os.O_RDONLY)
    try:
        fcntl.flock(descriptor, fcntl.LOCK_EX)
        yield
    finally:
        os.close(descriptor)  # releases the lock


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
    family = case.split("/")[0]
    relative = ledger_path(family)
    with _locked(store.root / family):
        old = parse_ledger(store.read(relative) or "", f"{store.prefix}{relative}")
        return {relative: store.write(relative, render_ledger([*old, *new]))}


# -- whether a record still explains the snapshots -----------------------------------------------------------------


@dataclass(frozen=True)
class Stale:
    """Why a record explains nothing: `cause` (one of CAUSES, what the regen counts) and the words a reviewer reads."""

    cause: str
    why: str


def record_line(record: Record) -> str:
    """`fam/v/sm_80 spills gemm_kernel (0 B stored, 0 B loaded -> 96 B stored, 0 B loaded)`: a record in reports."""
    return f"{record['case']} {record['class']} {record['kernel']} ({record['change']})"


def unknown(record: Record, cases: Mapping[str, Case], classes: Sequence[RegressionClass]) -> Stale | None:
    """Why a record names nothing that exists: no case of the family's (`cases`: id -> Case) or no class of its
    (`classes`); None where both exist."""
    case, name = str(record["case"]), str(record["class"])
    if case not in cases:
        family, variant, target = (case.split("/") + ["", "", ""])[:3]
        targets = sorted({c.target for c in cases.values() if c.variant.name == variant})
        ours = next(iter(cases.values()), None)
        if ours is not None and family != ours.family.name:
            why = f"{case} is not a case of family {ours.family.name}"
        elif targets:
            why = f"variant {variant!r} is not snapshotted on {target!r} (its targets: {', '.join(targets)})"
        else:
            why = f"family {family} has no variant {variant!r}"
        return Stale(NO_CASE, why)
    if name not in class_names(classes):
        return Stale(
            NO_CLASS, f"no regression class {name!r} (the family's classes: {', '.join(class_names(classes))})"
        )
    return None


def _ends_in(change: str, text: str) -> bool:
    """Whether one of a change's parts (`before -> after`, joined by `; ` where both files moved) ends in `text`."""
    return change.endswith(f" -> {text}") or f" -> {text}; " in change


def _starts_in(change: str, text: str) -> bool:
    """Whether one of a change's parts starts in `text`: the reading it moved from."""
    return change.startswith(f"{text} -> ") or f"; {text} -> " in change


def stale(
    record: Record, cases: Mapping[str, Case], classes: Sequence[RegressionClass], golden: SnapshotStore
) -> Stale | None:
    """Why a record no longer explains the snapshots in `golden`, or None where it does or cannot be told.

    It explains them where its case and class exist (`unknown`), its kernel is in the case's snapshot, and the class's
    own measure of that kernel, read from the snapshot now, is what the record's change ends in (`... -> 12 warps/SM
    (3 blocks of 128)`): the regressed state is still there. Any other reading means the regression was undone or
    moved on (a further regression is acknowledged anew and replaces the record). A snapshot file missing or corrupt
    tells nothing: the case's own check fails on it, and its regen rewrites it before the record is judged."""
    found = unknown(record, cases, classes)
    if found is not None:
        return found
    case = cases[str(record["case"])]
    kernel, change = str(record["kernel"]), str(record["change"])
    if case.does_not_lower is not None:
        return Stale(NO_KERNEL, f"{case.id} is declared not to lower ({case.not_lowering_note}): it has no kernel")
    regression_class = next(c for c in classes if c.name == record["class"])
    files, readings, measured = [], [], False
    for subject, (path_of, parse) in READERS.items():
        measures = [m for m in regression_class.measures if m.reads == subject]
        path = path_of(case) if measures else None
        if path is None:
            continue
        text = golden.read(path)
        try:
            document = parse(text, golden.prefix + path) if text is not None else None
        except CorruptSnapshot:
            document = None
        if document is None:
            return None
        files.append(golden.prefix + path)
        named = next((k for k in document["kernels"] if k.get("name") == kernel), None)
        measured |= named is not None
        for measure in measures if named is not None else ():
            reading = measure.read(document, named)
            readings += [reading.text] if reading is not None else []
    if not files:
        subjects = " or ".join(dict.fromkeys(m.reads for m in regression_class.measures))
        return Stale(NO_KERNEL, f"{case.id} has no file that class {record['class']} measures (it reads {subjects})")
    if not measured:
        return Stale(NO_KERNEL, f"no kernel {kernel!r} in {' or '.join(files)}")
    if any(_ends_in(change, text) for text in readings):
        return None
    now, where = "; ".join(f"`{text}`" for text in dict.fromkeys(readings)), " and ".join(files)
    if any(_starts_in(change, text) for text in readings):
        return Stale(UNDONE, f"the regression is undone: {kernel} reads {now} again in {where}")
    now = now or "nothing the class measures"
    return Stale(
        UNDONE, f"the regressed state is gone: {kernel} now reads {now} in {where}, not what the change ends in"
    )


def prune_ledger(
    store: SnapshotStore, family: str, judge: Callable[[Record], Stale | None]
) -> tuple[dict[str, str], list[tuple[Record, Stale]]]:
    """Drop the records of the family's ledger that `judge` finds stale, under the ledger's lock: path -> updated (or
    deleted, where none is left; nothing where none was dropped), and each record dropped with why; CorruptSnapshot
    as parse_ledger."""
    relative = ledger_path(family)
    if store.read(relative) is None:
        return {}, []
    with _locked(store.root / family):
        text = store.read(relative)
        records = parse_ledger(text or "", f"{store.prefix}{relative}")
        judged = [(record, judge(record)) for record in records]
        dropped = [(record, found) for record, found in judged if found is not None]
        if not dropped:
            return {}, []
        kept = [record for record, found in judged if found is None]
        if kept:
            return {relative: store.write(relative, render_ledger(kept))}, dropped
        (store.root / relative).unlink()
        return {relative: "deleted"}, dropped


# -- the static check and the regen's pruning, family by family ----------------------------------------------------


def _cases(family: Family) -> dict[str, Case]:
    return {case.id: case for case in family_cases(family)}


def stale_records(family: Family, golden: SnapshotStore) -> list[tuple[Record, Stale]]:
    """The records of the family's ledger that explain nothing in the snapshots of `golden`, each with why (none
    where it has no ledger); CorruptSnapshot as parse_ledger."""
    relative = ledger_path(family.name)
    text = golden.read(relative)
    if text is None:
        return []
    cases, classes = _cases(family), family.regression_classes
    judged = [
        (record, stale(record, cases, classes, golden)) for record in parse_ledger(text, golden.prefix + relative)
    ]
    return [(record, found) for record, found in judged if found is not None]


def stale_text(family: Family, golden: SnapshotStore, found: Sequence[tuple[Record, Stale]]) -> str:
    """What the static check says of a ledger's stale records: the file, each record and why, and the regen that
    drops them (the one of their cases, which judges them against what it writes; a case that no longer exists
    is dropped by any regen, so the family's)."""
    existing = sorted({str(record["case"]) for record, why in found if why.cause != NO_CASE})
    selector = " or ".join(existing) or family.name
    return "\n".join(
        [
            f"{golden.prefix}{ledger_path(family.name)}: {len(found)} record(s) of acknowledged regressions explain "
            "nothing in the committed snapshots",
            *(f"  {record_line(record)}: {why.why}" for record, why in found),
            f"to drop them (never edit the ledger by hand): {regen_command(selector)}",
        ]
    )


@dataclass(frozen=True)
class Pruned:
    """What a regen's pruning did: the ledgers it read, the files it rewrote or deleted, each record it dropped with
    its ledger and why, and the ledgers it could not read."""

    ledgers: int = 0
    written: Mapping[str, str] = dataclasses.field(default_factory=dict)
    dropped: tuple[tuple[str, Record, Stale], ...] = ()
    problems: tuple[str, ...] = ()

    def line(self) -> str:
        """`REGRESSIONS.yaml records: 2 dropped (1 regression undone, 1 no such case)`: the regen's closing count."""
        counts = Counter(found.cause for _, _, found in self.dropped)
        why = ", ".join(f"{counts[cause]} {cause}" for cause in CAUSES if counts[cause])
        return f"{LEDGER} records: {len(self.dropped)} dropped" + (f" ({why})" if why else "")

    def findings(self) -> tuple[str, ...]:
        dropped = (f"{path}: dropped {record_line(record)}: {found.why}" for path, record, found in self.dropped)
        return (*dropped, *self.problems)


def _regen_judge(
    family: Family, golden: SnapshotStore, regenerated: Container[str]
) -> Callable[[Record], Stale | None]:
    """A regen's judge of the family's records: whole for the cases it rewrote, whether they name anything for the
    others."""
    cases, classes = _cases(family), family.regression_classes

    def judge(record: Record) -> Stale | None:
        if str(record["case"]) in regenerated:
            return stale(record, cases, classes, golden)
        return unknown(record, cases, classes)

    return judge


def prune_ledgers(families: Iterable[Family], golden: SnapshotStore, regenerated: Container[str]) -> Pruned:
    """Keep each family's ledger to what its snapshots hold after a regen: drop the stale records (`stale`) of the
    cases it rewrote (`regenerated`), and any record naming a case or class that does not exist, whatever was
    selected; every other record stays. A ledger that cannot be read is left as it is, and named."""
    ledgers, written, dropped, problems = 0, {}, [], []
    for family in families:
        ledgers += golden.read(ledger_path(family.name)) is not None
        try:
            changed, gone = prune_ledger(golden, family.name, _regen_judge(family, golden, regenerated))
        except CorruptSnapshot as error:
            problems.append(f"{error}; its stale records were not dropped")
            continue
        written |= changed
        dropped += [(f"{golden.prefix}{path}", record, found) for path in changed for record, found in gone]
    return Pruned(ledgers, written, tuple(dropped), tuple(problems))


def prune_after_regen(families: Iterable[Family], golden: SnapshotStore, pending: Path) -> Pruned | None:
    """The regen's last step, once every case is written (in the one process that reads every worker's results):
    `prune_ledgers` for the cases it wrote, what it did added to the run's results; None where nothing ran."""
    try:
        results = read_results(pending)
    except ResultsError:
        return None
    regenerated = {r.check for r in results if r.case and r.status is Status.PASSED}
    pruned = prune_ledgers(families, golden, regenerated)
    if pruned.written or pruned.problems:
        append_result(pending, CheckResult(LEDGER, written=pruned.written, findings=pruned.findings()))
    return pruned
