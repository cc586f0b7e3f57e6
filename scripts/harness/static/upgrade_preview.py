"""What another TileLang would change: every case lowered with it, compared with golden/, never written there.

Run inside an environment where only TileLang differs from the pins (`nox -s upgrade-preview --
<version>`). Each case is classified as the static check classifies a snapshot (identical,
identifiers renamed only, declarations moved only, kernel source changed -- the status `CUDA
changed`, which a HIP target's `.hip` source gets too, and which the report names HIP there --, facts
changed and which fields, failed to lower), the changes are grouped into entries as the static
check's verdict groups them (harness.static.verdict), the family checks run on the new facts, and the produced snapshots
go to `<output>/golden/`, so `diff -ru golden <output>/golden` shows them all. A real source change
(not renaming only) that changes no fact is one the facts fail to explain: the report gives their
share per target of the project (harness.targets.TARGETS, every one previewed, changed or not),
per family and target, and over all cases, and lists them.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import yaml

from harness.static.cases import Case, check_groups
from harness.static.changes import ChangeKind, Mismatch, source_label
from harness.static.diff import changed_fields, describe_mismatch
from harness.static.lowering import LoweringError
from harness.static.produce import NowLowers
from harness.static.session import LoweringSession
from harness.static.snapshot import CorruptSnapshot, SnapshotStore, parse_facts
from harness.static.verdict import Failure, build_verdict, entries_markdown
from harness.targets import TARGETS

# A case's status, in the report's column order; report.json holds their values.
STATUSES = (
    ChangeKind.IDENTICAL,
    ChangeKind.RENAMED,
    ChangeKind.MOVED,
    ChangeKind.CUDA,
    ChangeKind.FACTS,
    ChangeKind.FAILED,
    ChangeKind.MISSING,
    ChangeKind.STILL_FAILS,
    ChangeKind.NOW_LOWERS,
)
HEADER = "<!-- Written by `nox -s upgrade-preview -- {version}` from the pinned snapshots; never edit by hand. -->"


@dataclass
class CaseRow:
    case: str
    family: str
    target: str
    status: ChangeKind  # one of STATUSES; facts changed wins over the CUDA's class
    # The kernel source's own class (`.cu` or `.hip`, Case.source_file): identical, renamed only, declarations
    # moved only or CUDA changed; None when it was not compared (the case did not lower, or has no snapshot yet).
    cuda: ChangeKind | None = None
    fields: list[str] = field(default_factory=list)  # changed fact fields
    renamed: int = 0  # identifiers renamed
    error: str = ""
    # For the grouped report only (not in report.json): the case's family, variant and target, its mismatches.
    key: tuple[str, str, str] = field(default=("", "", ""), repr=False)
    mismatches: tuple[Mismatch, ...] = field(default=(), repr=False)


@dataclass
class Preview:
    version: str
    pinned: str
    rows: list[CaseRow]
    checks: list[str]  # family checks whose outcome differs from what the family records

    def counts(self) -> dict[str, dict[ChangeKind, int]]:
        """family/target -> status -> cases."""
        table: dict[str, Counter[ChangeKind]] = {}
        for row in self.rows:
            table.setdefault(f"{row.family}/{row.target}", Counter())[row.status] += 1
        return {key: dict(value) for key, value in table.items()}

    def field_frequency(self) -> dict[str, int]:
        return dict(Counter(f for row in self.rows for f in row.fields).most_common())

    def unexplained(self) -> dict[str, dict[str, Any]]:
        """family/target (then `all`) -> real CUDA changes, how many of them changed no fact, that
        share, and those cases."""
        changed = [row for row in self.rows if row.cuda is ChangeKind.CUDA]
        groups: dict[str, list[CaseRow]] = {}
        for row in changed:
            groups.setdefault(f"{row.family}/{row.target}", []).append(row)
        if changed:
            groups["all"] = changed
        table = {}
        for key, rows in groups.items():
            cases = [row.case for row in rows if not row.fields]
            table[key] = {
                "cuda_changed": len(rows),
                "unexplained": len(cases),
                "share": round(len(cases) / len(rows), 3),
                "cases": cases,
            }
        return table

    def unexplained_by_target(self) -> dict[str, dict[str, Any]]:
        """target -> its kernel source language, cases whose source was compared with a snapshot, real source
        changes, how many of them changed no fact, that share (None without a real change) and those cases.
        Every target the preview's cases cover, in the project's order, so that a target where nothing changed,
        or where nothing could be compared (no snapshots yet), is shown as such rather than left out."""
        seen = {row.target for row in self.rows}
        table = {}
        for target in [t for t in TARGETS if t in seen] + sorted(seen - set(TARGETS)):
            rows = [row for row in self.rows if row.target == target]
            changed = [row for row in rows if row.cuda is ChangeKind.CUDA]
            cases = [row.case for row in changed if not row.fields]
            table[target] = {
                "source": TARGETS[target].language if target in TARGETS else "?",
                "compared": sum(1 for row in rows if row.cuda is not None),
                "cuda_changed": len(changed),
                "unexplained": len(cases),
                "share": round(len(cases) / len(changed), 3) if changed else None,
                "cases": cases,
            }
        return table

    def as_dict(self) -> dict[str, Any]:
        return {
            "written_by": f"nox -s upgrade-preview -- {self.version}",
            "tilelang": self.version,
            "pinned_tilelang": self.pinned,
            "totals": {status.value: n for status, n in Counter(row.status for row in self.rows).items()},
            "counts": {key: {s.value: n for s, n in counts.items()} for key, counts in self.counts().items()},
            "fields": self.field_frequency(),
            "unexplained_cuda_changes": self.unexplained(),
            "unexplained_by_target": self.unexplained_by_target(),
            "family_checks_changed": self.checks,
            "cases": [{**_public(row), "status": row.status.value, "cuda": _label(row.cuda)} for row in self.rows],
        }

    def verdict_markdown(self) -> str:
        """The changed cases as the static check's verdict groups and orders them (entries, facts first)."""
        failures = [Failure(r.case, r.key, r.mismatches) for r in self.rows if r.mismatches]
        unchanged = [r.key for r in self.rows if r.status is ChangeKind.IDENTICAL]
        return entries_markdown(build_verdict(failures, unchanged)) if failures else "- none\n"


def _column(status: ChangeKind) -> str:
    """A status as a column of several targets names it: a source change there is CUDA's or HIP's."""
    return "CUDA/HIP changed" if status is ChangeKind.CUDA else status.value


def _public(row: CaseRow) -> dict[str, Any]:
    return {name: value for name, value in asdict(row).items() if name not in ("key", "mismatches")}


def _label(kind: ChangeKind | None, target: str = "") -> str:
    """A class as the report writes it (`HIP changed` for a HIP target's source); no class (a case that did not
    lower or has no snapshot) is empty."""
    if not kind:
        return ""
    return source_label(kind, TARGETS[target].source_suffix) if target in TARGETS else kind.value


def classify_case(case: Case, golden: SnapshotStore, pending: SnapshotStore, lowerings: LoweringSession) -> CaseRow:
    family, target = case.family.name, case.target
    try:
        files = lowerings.files(case)
    except LoweringError as error:
        return CaseRow(case.id, family, target, ChangeKind.FAILED, error=str(error).splitlines()[0])
    except NowLowers as error:
        return CaseRow(case.id, family, target, ChangeKind.NOW_LOWERS, error=error.remedy)
    for path, text in files.items():
        pending.write(path, text)
    if case.does_not_lower is not None:
        return classify_declared_failure(case, files, golden)
    key = (family, case.variant.name, target)
    facts_file = f"{case.id}.yaml"
    old_cuda, old_facts = golden.read(case.source_file), golden.read(facts_file)
    if old_cuda is None or old_facts is None:
        return CaseRow(case.id, family, target, ChangeKind.MISSING, key=key)
    # The static check's own comparison, so that both name a change alike.
    source = describe_mismatch(case.source_file, old_cuda, files[case.source_file], golden.prefix)
    cuda = ChangeKind.IDENTICAL if source is None else source.kind
    if cuda in (ChangeKind.COMMENTS, ChangeKind.WHITESPACE):
        cuda = ChangeKind.RENAMED  # comments or whitespace only count as renamed only here (0 renamed)
    renamed = len(source.renaming) if source and cuda is ChangeKind.RENAMED else 0
    try:
        fields = changed_fields(parse_facts(old_facts, case.id), yaml.safe_load(files[facts_file]))
    except CorruptSnapshot as error:
        return CaseRow(case.id, family, target, ChangeKind.FAILED, cuda, error=str(error), key=key)
    facts = describe_mismatch(facts_file, old_facts, files[facts_file], golden.prefix)
    mismatches = tuple(m for m in (facts, source) if m is not None)
    status = ChangeKind.FACTS if fields else cuda
    return CaseRow(case.id, family, target, status, cuda, fields, renamed, key=key, mismatches=mismatches)


def classify_declared_failure(case: Case, files: dict[str, str], golden: SnapshotStore) -> CaseRow:
    """A case declared not to lower that still fails: with the snapshotted error, or with another one."""
    ((path, text),) = files.items()
    old = golden.read(path)
    row = CaseRow(case.id, case.family.name, case.target, ChangeKind.STILL_FAILS)
    if old is None:
        row.status = ChangeKind.MISSING
    elif old != text:
        row.status, row.error = ChangeKind.FAILED, f"fails with another error than {golden.prefix}{path} holds"
    return row


def changed_checks(lowerings: LoweringSession) -> list[str]:
    """Every family claim whose outcome on the new facts differs from what its family records."""
    changed = []
    for group, (family, cases) in check_groups().items():
        try:
            seen = [lowerings.facts(c) for c in cases]
        except LoweringError:
            changed.append(f"{group}: not run, a case did not lower")
            continue
        for claim in family.checks(seen):
            if claim.holds != claim.expected:
                recorded = "holds" if claim.expected else f"is false ({claim.why})"
                now = "holds" if claim.holds else "fails"
                changed.append(f"{group}: {claim.name}: recorded {recorded}, now {now} ({claim.observed})")
    return changed


def run_preview(
    cases: Sequence[Case], version: str, pinned: str, golden: Path, output: Path, log: Callable[[str], None] = print
) -> Preview:
    pending = SnapshotStore(output / "golden")
    lowerings = LoweringSession()  # no disk cache: every case lowered by the TileLang previewed
    rows = []
    for case in cases:
        rows.append(classify_case(case, SnapshotStore(golden), pending, lowerings))
        log(f"{rows[-1].case}: {rows[-1].status.value}")
    preview = Preview(version, pinned, rows, changed_checks(lowerings))
    output.mkdir(parents=True, exist_ok=True)
    (output / "report.json").write_text(json.dumps(preview.as_dict(), indent=2) + "\n", encoding="utf-8")
    (output / "report.md").write_text(render_markdown(preview), encoding="utf-8")
    return preview


def render_coverage_by_target(preview: Preview) -> list[str]:
    """The facts' coverage per target: a row per target previewed, `-` for a share without any real change."""
    by_target = preview.unexplained_by_target()
    if not by_target:
        return []
    lines = [
        "Per target (a real change is a `CUDA changed` kernel source, `.cu` or `.hip`; compared: cases whose "
        "source had a snapshot to compare with):",
        "",
        "| target | source | compared | CUDA changed | no fact changed | share |",
        "|---|---|---|---|---|---|",
    ]
    for target, e in by_target.items():
        share = "-" if e["share"] is None else f"{e['share']:.0%}"
        lines.append(
            f"| {target} | {e['source']} | {e['compared']} | {e['cuda_changed']} | {e['unexplained']} | {share} |"
        )
    return [*lines, ""]


def render_markdown(preview: Preview) -> str:
    totals = Counter(row.status for row in preview.rows)
    lines = [
        HEADER.format(version=preview.version),
        f"# TileLang {preview.version} against the snapshots of {preview.pinned}",
        "",
        f"{len(preview.rows)} cases: " + ", ".join(f"{n} {status.value}" for status, n in totals.most_common()) + ".",
        "",
        "| family / target | " + " | ".join(_column(status) for status in STATUSES) + " |",
        "|---" * (len(STATUSES) + 1) + "|",
    ]
    for key, counts in preview.counts().items():
        lines.append(f"| {key} | " + " | ".join(str(counts.get(status, 0)) for status in STATUSES) + " |")
    lines += ["", "## Fact fields that changed", ""]
    lines += [f"- `{name}` in {n} case(s)" for name, n in preview.field_frequency().items()] or ["- none"]
    lines += ["", "## Real source changes that no fact explains", ""]
    lines += render_coverage_by_target(preview)
    unexplained = preview.unexplained()
    if unexplained:
        lines += ["Per family and target, then over all cases:", ""]
        lines += ["| family / target | CUDA changed | no fact changed | share |", "|---|---|---|---|"]
        for key, e in unexplained.items():
            lines.append(f"| {key} | {e['cuda_changed']} | {e['unexplained']} | {e['share']:.0%} |")
        lines.append("")
    cases = unexplained.get("all", {"cases": []})["cases"]
    lines += [f"- {case}" for case in cases] or ["- none"]
    lines += ["", "## Changes, grouped as the static check groups them", ""]
    lines += [preview.verdict_markdown().rstrip("\n")]
    lines += ["", "## Family checks whose outcome changed", ""]
    lines += [f"- {line}" for line in preview.checks] or ["- none"]
    lines += ["", "## Cases", "", "| case | status | source | fields | note |", "|---|---|---|---|---|"]
    for row in preview.rows:
        note = row.error or (f"{row.renamed} identifiers renamed" if row.renamed else "")
        status, source = _label(row.status, row.target), _label(row.cuda, row.target)
        lines.append(f"| {row.case} | {status} | {source} | {', '.join(row.fields)} | {note} |")
    return "\n".join(lines) + "\n"
