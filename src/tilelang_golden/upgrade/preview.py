"""What another TileLang would change: every case lowered with it, compared with golden/, never written there.

Run inside an environment where only TileLang differs from the pins (`nox -s upgrade-preview -- <version>`). It runs
the static session itself (`tilelang-golden static`, on its xdist workers and shards, with no lowering cache), so a
preview costs what a cold static run does, and classifies each case by that session's comparison
(tilelang_golden.static.snapshots.diff: identical, whitespace or comments changed only, identifiers renamed only,
declarations moved only, CUDA or HIP changed, facts changed and which fields, a corrupt snapshot; or failed to lower),
read from its results. The changes are grouped into entries as the static check's verdict groups them
(tilelang_golden.static.report.verdict), the family checks ran on the new facts, and the produced snapshots go to
`<output>/golden/`, so `diff -ru golden <output>/golden` shows them all. A real source change (not renaming only) that
changes no fact is one the facts fail to explain: the report gives their share per target of the project
(tilelang_golden.targets.TARGETS, every one previewed, changed or not), per family and target, and over all cases,
and lists them.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tilelang_golden.catalog.cases import all_cases, check_groups
from tilelang_golden.catalog.loading import Registry
from tilelang_golden.static.report.markdown import entries_markdown
from tilelang_golden.static.report.verdict import build_verdict
from tilelang_golden.static.snapshots.case_files import MACHINE_SUFFIX
from tilelang_golden.static.snapshots.changes import CaseOutcome, FileChange, case_change
from tilelang_golden.static.snapshots.results import RESULTS, CheckResult, Status, read_results, unchanged_cases
from tilelang_golden.static.snapshots.snapshot import SnapshotStore, parse_machine_facts
from tilelang_golden.targets import SOURCE_SUFFIXES, TARGETS

SOURCES = tuple(SOURCE_SUFFIXES.values())  # a kernel source snapshot's suffixes
# The static session as the preview runs it: quiet, and every case lowered (a candidate's lowerings are not kept).
SESSION_OPTIONS = ["-q", "--no-cache", "-p", "no:cacheprovider"]


class PreviewError(RuntimeError):
    """The static session the preview runs gave no result to report (a usage error, an empty selection)."""


# A case's status, in the report's column order: its outcome, or, for a changed case, how it changed.
STATUSES: tuple[CaseOutcome | FileChange, ...] = (
    CaseOutcome.PASSED,
    FileChange.WHITESPACE,
    FileChange.COMMENTS,
    FileChange.RENAMED,
    FileChange.MOVED,
    FileChange.SOURCE,
    FileChange.FACTS,
    FileChange.TEXT,
    CaseOutcome.CORRUPT,
    CaseOutcome.FAILED,
    CaseOutcome.NEW,
    CaseOutcome.STILL_FAILS,
    CaseOutcome.NOW_LOWERS,
)
HEADER = "<!-- Written by `nox -s upgrade-preview -- {arguments}` from the pinned snapshots; never edit by hand. -->"
# What a preview is of: another TileLang, or another release of NVIDIA's compilers (`--cuda`), with the same TileLang.
TILELANG, CUDA = "TileLang", "CUDA"


@dataclass
class CaseRow:
    case: str
    family: str
    target: str
    outcome: CaseOutcome
    change: FileChange | None = None  # the case's change (tilelang_golden.static.kinds.CaseComparison), where compared
    # The kernel source's own change (`.cu` or `.hip`, Case.source_file): unchanged, whitespace or comments changed
    # only, renamed only, declarations moved only or changed; None when it was not compared (the case did not
    # lower, or has no snapshot yet).
    cuda: FileChange | None = None
    fields: list[str] = field(default_factory=list)  # changed fact fields
    renamed: int = 0  # identifiers renamed
    error: str = ""
    # For the grouped report only (not in report.json): the result the row was read from.
    result: CheckResult | None = field(default=None, repr=False)

    @property
    def status(self) -> CaseOutcome | FileChange:
        """The report's column (one of STATUSES): a changed case's change, else its outcome."""
        return self.change if self.outcome is CaseOutcome.CHANGED and self.change else self.outcome

    def as_dict(self) -> dict[str, Any]:
        """The case in report.json: its status and its source's change in the words of its target's language."""
        return {
            "case": self.case,
            "family": self.family,
            "target": self.target,
            "status": _label(self.status, self.target),
            "cuda": _label(self.cuda, self.target),
            "fields": self.fields,
            "renamed": self.renamed,
            "error": self.error,
        }


@dataclass
class Preview:
    version: str
    pinned: str
    rows: list[CaseRow]
    checks: list[str]  # family checks whose outcome differs from what the family records
    previewed: str = TILELANG  # TILELANG or CUDA

    @property
    def arguments(self) -> str:
        """The upgrade-preview session's arguments that make this preview."""
        return f"--cuda {self.version}" if self.previewed == CUDA else self.version

    def counts(self) -> dict[str, dict[CaseOutcome | FileChange, int]]:
        """family/target -> status -> cases."""
        table: dict[str, Counter[CaseOutcome | FileChange]] = {}
        for row in self.rows:
            table.setdefault(f"{row.family}/{row.target}", Counter())[row.status] += 1
        return {key: dict(value) for key, value in table.items()}

    def totals(self, key: str = "") -> Counter[str]:
        """Cases per status as the report writes it (`HIP changed` on a HIP target), of one family/target or all."""
        rows = [row for row in self.rows if not key or f"{row.family}/{row.target}" == key]
        return Counter(_label(row.status, row.target) for row in rows)

    def regressions(self) -> dict[str, dict[str, Any]]:
        """class -> its words, how many cases regress by it, and per target the cases with what changed in each; in
        the regression table's order (tilelang_golden.regressions)."""
        table: dict[str, dict[str, Any]] = {}
        for row in self.rows:
            for regression in row.result.regressions if row.result else ():
                entry = table.setdefault(regression.name, {"words": regression.words, "cases": 0, "targets": {}})
                changes = entry["targets"].setdefault(row.target, {})
                if row.case not in changes:
                    entry["cases"] += 1
                changes.setdefault(row.case, []).append(f"{regression.kernel}: {regression.change}")
        for entry in table.values():
            entry["targets"] = {t: entry["targets"][t] for t in sorted(entry["targets"], key=_target_index)}
        return table

    def field_frequency(self) -> dict[str, int]:
        return dict(Counter(f for row in self.rows for f in row.fields).most_common())

    def unexplained(self) -> dict[str, dict[str, Any]]:
        """family/target (then `all`) -> real source changes, how many of them changed no fact, that
        share, and those cases."""
        changed = [row for row in self.rows if row.cuda is FileChange.SOURCE]
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
            changed = [row for row in rows if row.cuda is FileChange.SOURCE]
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
            "totals": dict(self.totals()),
            "regressions": self.regressions(),
            "counts": {key: dict(self.totals(key)) for key in self.counts()},
            "fields": self.field_frequency(),
            "unexplained_cuda_changes": self.unexplained(),
            "unexplained_by_target": self.unexplained_by_target(),
            "family_checks_changed": self.checks,
            "cases": [row.as_dict() for row in self.rows],
        }

    def verdict_markdown(self) -> str:
        """The changed cases as the static check's verdict groups and orders them (entries, facts first)."""
        results = [r.result for r in self.rows if r.result]
        failures = [r for r in results if r.failed]
        return entries_markdown(build_verdict(failures, unchanged_cases(results))) if failures else "- none\n"


def _target_index(target: str) -> int:
    return list(TARGETS).index(target) if target in TARGETS else len(TARGETS)


def _column(status: CaseOutcome | FileChange) -> str:
    """A status as a column of several targets names it: a source change there is CUDA's or HIP's."""
    return "CUDA/HIP changed" if status is FileChange.SOURCE else status.value


def _label(status: CaseOutcome | FileChange | None, target: str) -> str:
    """A status as the report writes it (`HIP changed` for a HIP target's source); none (a source that was not
    compared) is empty."""
    if status is None:
        return ""
    if isinstance(status, CaseOutcome):
        return status.value
    return status.label(TARGETS[target].language if target in TARGETS else "")


def case_row(result: CheckResult) -> CaseRow:
    """A case's result as the preview's row: its outcome, or how it changed, and its source's own change."""
    outcome = result.outcome or CaseOutcome.FAILED  # a variant that does not build: its text says why
    compared = result.source_change is not None  # a case that lowered, compared with its snapshots
    source = next((m for m in result.mismatches if m.kind is FileChange.RENAMED and m.path.endswith(SOURCES)), None)
    return CaseRow(
        result.check,
        result.family,
        result.case[2] if result.case else "",
        outcome,
        case_change(result.mismatches) if compared else None,
        result.source_change,
        list(result.fields),
        len(source.renaming) if source else 0,
        _note(result, outcome),
        result,
    )


def _note(result: CheckResult, outcome: CaseOutcome) -> str:
    """What the report says beside a case that failed, lowers against its declaration, or has a corrupt snapshot."""
    lines = result.text.splitlines()
    if outcome is CaseOutcome.CORRUPT:
        return "; ".join(m.reason for m in result.mismatches if m.kind is FileChange.CORRUPT)
    if outcome is CaseOutcome.NOW_LOWERS:
        return lines[-1]  # the remedy: remove the declaration, then regen
    if outcome is CaseOutcome.FAILED and result.mismatches:  # declared not to lower, it fails otherwise
        return f"fails with another error than {result.mismatches[0].path} holds"
    return lines[0] if outcome is CaseOutcome.FAILED and lines else ""


def snapshot_cuda_release(golden: SnapshotStore) -> str:
    """The CUDA release the snapshots' machine facts were compiled with (`toolchain.cuda`; a regen writes them all
    with one), `?` where none has machine facts."""
    for path in sorted(golden.files()):
        if path.endswith(MACHINE_SUFFIX):
            return str(parse_machine_facts(golden.read(path) or "", f"{golden.prefix}{path}")["toolchain"]["cuda"])
    return "?"


def run_preview(
    families: Registry,
    version: str,
    pinned: str,
    golden: Path,
    output: Path,
    previewed: str = TILELANG,
    session: Callable[[list[str]], int] | None = None,
) -> Preview:
    """Every case of `families` as the static session lowers and compares it, with this TileLang and these compilers
    and no lowering cache; its produced files in `<output>/golden/`, its results in `<output>/RESULTS.jsonl`, the
    report beside. `session(arguments)` runs the static session with those options and returns its exit status
    (default: `tilelang-golden static`, on every core; the command adds the options it was given, `-n 4`,
    `--shard 1/2`, `-k EXPR`)."""
    from tilelang_golden.static.command import static_session

    pending = output / "golden"
    status = (session or static_session)([*SESSION_OPTIONS, f"--golden-dir={golden}", f"--pending-dir={pending}"])
    results = read_results(pending) if (pending / RESULTS).is_file() else []
    if not results:
        raise PreviewError(f"the static session it runs ended with exit status {status} and no result; see above")
    (pending / RESULTS).replace(output / RESULTS)
    order = {case.id: index for index, case in enumerate(all_cases(families))}
    rows = [case_row(r) for r in sorted((r for r in results if r.check in order), key=lambda r: order[r.check])]
    groups = check_groups(families)
    checks = [r.text for r in results if r.check in groups and r.status is not Status.PASSED]
    preview = Preview(version, pinned, rows, checks, previewed)
    (output / "report.json").write_text(json.dumps(preview.as_dict(), indent=2) + "\n", encoding="utf-8")
    (output / "report.md").write_text(render_markdown(preview), encoding="utf-8")
    return preview


def render_coverage_by_target(preview: Preview) -> list[str]:
    """The facts' coverage per target: a row per target previewed, `-` for a share without any real change."""
    by_target = preview.unexplained_by_target()
    if not by_target:
        return []
    lines = [
        "Per target (a real change is a kernel source, `.cu` or `.hip`, that changed, not renamed only; compared: "
        "cases whose source had a snapshot to compare with):",
        "",
        "| target | source | compared | CUDA/HIP changed | no fact changed | share |",
        "|---|---|---|---|---|---|",
    ]
    for target, e in by_target.items():
        share = "-" if e["share"] is None else f"{e['share']:.0%}"
        lines.append(
            f"| {target} | {e['source']} | {e['compared']} | {e['cuda_changed']} | {e['unexplained']} | {share} |"
        )
    return [*lines, ""]


def render_regressions(preview: Preview) -> list[str]:
    """Cases whose change is a regression, by class and target: how many, then each case and what changed."""
    table = preview.regressions()
    if not table:
        return ["No regression: no change makes a kernel worse by a regression class.", ""]
    cases = len({case for entry in table.values() for changes in entry["targets"].values() for case in changes})
    lines = [
        f"## Regressions: {cases} case(s)",
        "",
        "| class | " + " | ".join(TARGETS) + " |",
        "|---" * (len(TARGETS) + 1) + "|",
    ]
    for name, entry in table.items():
        counts = [str(len(entry["targets"].get(target, {}))) for target in TARGETS]
        lines.append(f"| {name}: {entry['words']} | " + " | ".join(counts) + " |")
    lines.append("")
    for name, entry in table.items():
        for target, changes in entry["targets"].items():
            listed = "".join(f"\n  - {case}: {'; '.join(said)}" for case, said in changes.items())
            lines.append(f"- {name} on {target}:{listed}")
    return [*lines, ""]


def render_markdown(preview: Preview) -> str:
    lines = [
        HEADER.format(arguments=preview.arguments),
        f"# {preview.previewed} {preview.version} against the snapshots of {preview.pinned}",
        "",
        f"{len(preview.rows)} cases: " + ", ".join(f"{n} {label}" for label, n in preview.totals().most_common()) + ".",
        "",
        "| family / target | " + " | ".join(_column(status) for status in STATUSES) + " |",
        "|---" * (len(STATUSES) + 1) + "|",
    ]
    for key, counts in preview.counts().items():
        lines.append(f"| {key} | " + " | ".join(str(counts.get(status, 0)) for status in STATUSES) + " |")
    lines[5:5] = render_regressions(preview)  # first, after the totals: what the upgrade makes worse
    lines += ["", "## Fact fields that changed", ""]
    lines += [f"- `{name}` in {n} case(s)" for name, n in preview.field_frequency().items()] or ["- none"]
    lines += ["", "## Real source changes that no fact explains", ""]
    lines += render_coverage_by_target(preview)
    unexplained = preview.unexplained()
    if unexplained:
        lines += ["Per family and target, then over all cases:", ""]
        lines += ["| family / target | CUDA/HIP changed | no fact changed | share |", "|---|---|---|---|"]
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
