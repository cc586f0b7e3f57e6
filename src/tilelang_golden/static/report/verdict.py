"""A failing static run as a reviewer reads it: one entry per change, facts first and in words.

Cases whose snapshots changed the same way (the same facts diff and the same source hunks, paths and
line numbers aside) form a class, e.g. sm_80 = sm_89 of two variants; the classes of one family
whose facts change in the same words form an entry: where it applies, a headline in words, the
facts diff, the CUDA/HIP hunks, and the command that accepts it. Failures without mismatch
records (a harness error, a family declaration error) are shown once per family and error.

The terminal (tilelang_golden.static.plugin) and the CI job summary (tilelang_golden.static.report.job_summary) render
the same entries. Standard library only: the CI summary imports it without TileLang.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from tilelang_golden.regressions import Regression
from tilelang_golden.static.report.topics import facts_headline, leading_topic
from tilelang_golden.static.snapshots.changes import FactChange, FileChange, Mismatch
from tilelang_golden.static.snapshots.regen import regen_command
from tilelang_golden.static.snapshots.results import HIDING, PENDING_DIR, CaseKey, CheckResult
from tilelang_golden.targets import TARGETS

# The terminal shows at most this many lines of one facts diff and of one source diff.
TERMINAL_FACT_LINES = 16
TERMINAL_SOURCE_LINES = 16
# The terminal's entries take at most this many lines: past them, a section is named, not shown.
TERMINAL_BODY_LINES = 140
# The terminal's closing lines name at most this many entries; a failure's text at most this many lines.
FOOTER_ENTRIES = 4
FAILURE_TEXT_LINES = 20
# A -k expression longer than this is replaced by the unfiltered regen in the closing command.
MAX_SELECTOR = 300


@dataclass(frozen=True)
class Section:
    """A block under an entry's headline: a facts diff (shown), a source diff (folded), or text."""

    label: str
    lines: tuple[str, ...]
    folded: bool = False
    full: str = ""  # where the whole of it is: a command that shows the full diff


def regression_label(regressions: Sequence[Regression]) -> str:
    """`REGRESSION (register spills appearing or growing; occupancy falling (resident warps per SM))`, with
    `, acknowledged` where every one is: what leads a regression's headline."""
    words = "; ".join(dict.fromkeys(r.words for r in regressions))
    acknowledged = ", acknowledged" if all(r.acknowledged for r in regressions) else ""
    return f"REGRESSION ({words}{acknowledged})"


@dataclass(frozen=True)
class Entry:
    title: str  # where it applies
    headline: str  # what changed, in words
    sections: tuple[Section, ...]
    checks: tuple[str, ...]  # the check ids it covers
    accept: str  # the command that accepts it; empty where no regen does (a harness error)
    path: str = ""  # a snapshot file of it, for an annotation
    selector: str = ""  # the -k expression of `accept`, where it has one
    error: bool = False  # a failure without records: its text is the one pytest printed
    regressions: tuple[Regression, ...] = ()  # its changes that make the kernel worse: the entry is a regression

    @property
    def terminal_headline(self) -> str:
        """An error's text is already in the terminal, above; the verdict does not repeat it."""
        return "failed; its text is above, under FAILURES" if self.error else self.headline


@dataclass(frozen=True)
class Verdict:
    entries: tuple[Entry, ...]
    accept_all: str  # the one command that accepts every snapshot change; empty when none can

    @property
    def failures(self) -> int:
        return sum(len(entry.checks) for entry in self.entries)

    @property
    def regressions(self) -> int:
        return sum(bool(entry.regressions) for entry in self.entries)

    @property
    def heading(self) -> str:
        """`3 changes in 12 failing checks, 1 of them a regression`."""
        changes = f"{len(self.entries)} change{'s' if len(self.entries) != 1 else ''}"
        failing = f"{changes} in {self.failures} failing check{'s' if self.failures != 1 else ''}"
        if not self.regressions:
            return failing
        return f"{failing}, {self.regressions} of them {'a regression' if self.regressions == 1 else 'regressions'}"


def _hunk_body(diff: Iterable[str]) -> tuple[str, ...]:
    """A diff without its file names and line numbers: what two cases' changes share."""
    return tuple("@@" if line.startswith("@@") else line for line in diff if not line.startswith(("--- ", "+++ ")))


def _signature(mismatch: Mismatch) -> tuple:
    suffix = mismatch.path.rsplit("/", 1)[-1].split(".", 1)[-1]  # `machine.yaml` apart from `yaml`
    if mismatch.kind is FileChange.FACTS:
        content: tuple = tuple(c.line() for c in mismatch.facts)
    elif mismatch.kind is FileChange.RENAMED:
        content = mismatch.renaming
    else:
        content = (mismatch.reason, mismatch.moved, _hunk_body(mismatch.diff))
    return (suffix, mismatch.kind.value, content)


def _facts(mismatches: Iterable[Mismatch]) -> list[FactChange]:
    return [change for m in mismatches if m.kind is FileChange.FACTS for change in m.facts]


def case_headline(mismatches: Sequence[Mismatch]) -> str:
    """What changed in one case, in words: from its facts when they changed, else from its files' kinds."""
    facts = _facts(mismatches)
    if facts:
        return facts_headline(facts)
    words = []
    for mismatch in mismatches:
        if mismatch.kind is FileChange.SOURCE:
            words.append(f"{mismatch.label}, no fact changed")
        elif mismatch.kind is FileChange.MOVED:
            words.append(f"declarations moved only ({', '.join(mismatch.moved)})")
        else:
            words.append(mismatch.label if mismatch.kind is not FileChange.CORRUPT else mismatch.headline)
    return "; ".join(dict.fromkeys(words))


def _target_order(target: str) -> tuple[int, str]:
    names = list(TARGETS)
    return (names.index(target) if target in names else len(names), target)


def _braced(names: Sequence[str]) -> str:
    return names[0] if len(names) == 1 else "{" + ",".join(names) + "}"


@dataclass
class _Class:
    cases: list[CaseKey] = field(default_factory=list)
    failures: list[CheckResult] = field(default_factory=list)

    @property
    def variants(self) -> tuple[str, ...]:
        return tuple(sorted({variant for _, variant, _ in self.cases}))

    @property
    def targets(self) -> tuple[str, ...]:
        return tuple(sorted({target for _, _, target in self.cases}, key=_target_order))

    def label(self, with_variants: bool) -> str:
        targets = " = ".join(self.targets)
        return f"{_braced(self.variants)}/{targets}" if with_variants else targets


def _matches(expression: Sequence[Sequence[str]], check: str) -> bool:
    """A -k expression in disjunctive form (or of ands of substrings), as pytest matches it: case aside."""
    name = check.lower()
    return any(all(atom.lower() in name for atom in clause) for clause in expression)


def _render_selector(expression: Sequence[Sequence[str]]) -> str:
    clauses = [" and ".join(clause) for clause in expression]
    if len(clauses) > 1 and any(" and " in clause for clause in clauses):
        clauses = [f"({clause})" if " and " in clause else clause for clause in clauses]
    return " or ".join(clauses)


def selector(covered: Sequence[str], failing: Sequence[str], family: str = "", known: Sequence[str] = ()) -> str:
    """A -k expression that selects every check of `covered` and no other of `failing`: the shortest of those
    that select at most twice as many of the `known` checks (passing ones are rewritten unchanged, but lowered
    twice), else the one that selects the fewest."""
    wanted = set(covered)
    others = [check for check in failing if check not in wanted]
    candidates = []
    if family:
        candidates.append([[family]])
        variants = sorted({check.split("/")[1] for check in covered if check.count("/") == 2})
        targets = sorted({check.split("/")[2] for check in covered if check.count("/") == 2}, key=_target_order)
        candidates.append([[f"{family}/{variant}"] for variant in variants])
        candidates.append([[family, target] for target in targets])
        candidates.append([[f"{family}/{variant}", target] for variant in variants for target in targets])
    candidates.append([[check] for check in sorted(wanted)])
    everything = set(known) | set(failing)
    if family:  # every candidate's clauses name the family, so only checks that name it can match: linear, not N^2
        named = family.lower()
        everything = {check for check in everything if named in check.lower()}
        others = [check for check in others if named in check.lower()]
    valid = [
        (sum(_matches(e, check) for check in everything), len(_render_selector(e)), _render_selector(e))
        for e in candidates
        if all(_matches(e, check) for check in wanted) and not any(_matches(e, c) for c in others)
    ]
    near = [item for item in valid if item[0] <= 2 * len(wanted)]
    return min(near, key=lambda item: item[1])[2] if near else min(valid)[2]


def _source_sections(classes: Sequence[_Class], with_variants: bool, pending: str) -> list[Section]:
    """One facts section per distinct facts diff, then one source section per distinct hunk set."""
    facts: dict[tuple[str, ...], list[str]] = {}
    sources: dict[tuple, tuple[list[str], Mismatch]] = {}
    others: dict[tuple, tuple[list[str], Mismatch]] = {}
    for found in classes:
        label = found.label(with_variants)
        for mismatch in found.failures[0].mismatches:
            if mismatch.kind is FileChange.FACTS:
                facts.setdefault(mismatch.fields, []).append(label)
            elif mismatch.kind in (FileChange.SOURCE, FileChange.MOVED):
                sources.setdefault(_signature(mismatch), ([], mismatch))[0].append(label)
            elif mismatch.details:
                others.setdefault(_signature(mismatch), ([], mismatch))[0].append(label)
    several = len(classes) > 1
    sections = [
        Section(f"facts, {', '.join(labels)}" if several else "facts", lines) for lines, labels in facts.items()
    ]
    for labels, mismatch in sources.values():
        changed = sum(1 for line in _hunk_body(mismatch.diff) if line[:1] in "+-")
        language = mismatch.subject or "source"
        where = f", {', '.join(labels)}" if several else ""
        # A case's file is family/variant/target.suffix inside either folder, whatever the snapshot folder's path.
        inside = "/".join(mismatch.path.split("/")[-3:])
        full = f"diff -u {mismatch.path} {pending.rstrip('/')}/{inside}"
        sections.append(Section(f"{language}{where}: {changed} changed lines", mismatch.diff, True, full))
    for labels, mismatch in others.values():
        where = f", {', '.join(labels)}" if several else ""
        sections.append(Section(f"{mismatch.headline}{where}", mismatch.details, True))
    return sections


def _case_entries(
    failures: Sequence[CheckResult], unchanged: set[CaseKey], failing: Sequence[str], pending: str, known: Sequence[str]
):
    classes: dict[tuple, _Class] = {}
    for failure in failures:
        regressed = tuple((r.name, r.acknowledged) for r in failure.regressions)  # a variant may acknowledge it
        key = (failure.family, tuple(sorted(_signature(m) for m in failure.mismatches)), regressed)
        found = classes.setdefault(key, _Class())
        found.cases.append(failure.case)
        found.failures.append(failure)
    unchanged_of: dict[str, list[tuple[str, str]]] = {}  # family -> (variant, target) of its cases that passed
    for family, variant, target in unchanged:
        unchanged_of.setdefault(family, []).append((variant, target))
    naming: dict[str, tuple[list[str], list[str]]] = {}
    # Classes of a family whose facts lead with the same topic (or, without facts, read the same) and that regress
    # alike are one entry.
    entries: dict[tuple[str, tuple[str, ...], str], list[_Class]] = {}
    for (family, _, _), found in classes.items():
        mismatches = found.failures[0].mismatches
        about = leading_topic(_facts(mismatches)) or case_headline(mismatches)
        regressed = tuple(dict.fromkeys(r.name for r in found.failures[0].regressions))
        entries.setdefault((family, regressed, about), []).append(found)
    for (family, _, _), grouped in entries.items():
        facts = [change for c in grouped for change in _facts(c.failures[0].mismatches)]
        headline = facts_headline(facts) if facts else case_headline(grouped[0].failures[0].mismatches)
        regressions = tuple(r for c in grouped for f in c.failures for r in f.regressions)
        grouped.sort(key=lambda c: (_target_order(c.targets[0]), c.variants))
        variant_sets = {c.variants for c in grouped}
        shared = len(variant_sets) == 1
        variants = sorted({v for c in grouped for v in c.variants})
        where = f"{family}/{_braced(variants)}" if shared else family
        labels = ", ".join(c.label(not shared) for c in grouped)
        targets = {t for c in grouped for t in c.targets}
        still = sorted(
            {t for (v, t) in unchanged_of.get(family, ()) if t not in targets and v in variants}, key=_target_order
        )
        still = [t for t in still if all((family, v, t) in unchanged for v in variants)]
        title = f"{where}: {labels}" + (f"; {', '.join(still)} unchanged" if still else "")
        checks = tuple(f.check for c in grouped for f in c.failures)
        first = grouped[0].failures[0].mismatches[0].path
        if family not in naming:  # the checks a -k naming the family can select: found once per family
            named = family.lower()
            naming[family] = tuple([c for c in checks_of if named in c.lower()] for checks_of in (failing, known))
        expression = selector(checks, naming[family][0], family, naming[family][1])
        sections = tuple(_source_sections(grouped, not shared, pending))
        if regressions:
            sections = (_regression_section(grouped, not shared), *sections)
            headline = f"{regression_label(regressions)}: {headline}"
        accept = regen_command(expression, [r.name for r in regressions if not r.acknowledged])
        yield Entry(title, headline, sections, checks, accept, first, expression, regressions=regressions)


def _regression_section(classes: Sequence[_Class], with_variants: bool) -> Section:
    """One line per regression and where it applies, with its acknowledgement where it has one."""
    lines: dict[str, list[str]] = {}
    for found in classes:
        for regression in found.failures[0].regressions:
            lines.setdefault(regression.line(), []).append(found.label(with_variants))
    return Section("regressions", tuple(f"{', '.join(labels)}: {said}" for said, labels in lines.items()))


def capped_text(text: str, limit: int = FAILURE_TEXT_LINES) -> tuple[str, ...]:
    """A failure's text in at most `limit` lines: its start and its end (where a traceback says what failed)."""
    lines = text.splitlines()
    if len(lines) <= limit:
        return tuple(lines)
    head, tail = 3, limit - 4
    return (*lines[:head], f"... {len(lines) - head - tail} lines left out ...", *lines[-tail:])


def error_key(failure: CheckResult) -> tuple[str, str]:
    """Failures of one family with the same error, the case's own names aside, are shown once."""
    text = failure.text.strip().splitlines()
    last = text[-1] if text else ""
    if failure.case:
        for name in (failure.check, *failure.case):
            last = last.replace(name, "{}")
    return (failure.family, re.sub(r"\s+", " ", last))


def build_verdict(
    failures: Sequence[CheckResult],
    unchanged: Iterable[CaseKey] = (),
    pending: str = f"{PENDING_DIR.as_posix()}/",
    known: Iterable[str] = (),
) -> Verdict:
    """The entries of a run's failures. `unchanged`: the cases that passed (an entry names its family's);
    `known`: every case id a regen could select, so that a command does not lower far more than it accepts."""
    failing = [f.check for f in failures]
    unchanged = set(unchanged)
    every = sorted(set(known) | {"/".join(key) for key in unchanged})
    cases = [f for f in failures if f.case and f.mismatches]
    entries = list(_case_entries(cases, unchanged, failing, pending, every))
    for failure in failures:
        if failure.mismatches and not failure.case:
            sections = [Section(m.headline, m.details, True) for m in failure.mismatches if m.details]
            paths = ", ".join(m.path for m in failure.mismatches)
            first = failure.mismatches[0]
            headline = (
                f"{first.headline}: {paths}" if len(failure.mismatches) == 1 else case_headline(failure.mismatches)
            )
            accept = "" if failure.accept is None else regen_command(failure.accept)
            entries.append(
                Entry(
                    failure.check, headline, tuple(sections), (failure.check,), accept, first.path, failure.accept or ""
                )
            )
    texts: dict[tuple[str, str], list[CheckResult]] = {}
    for failure in failures:
        if not failure.mismatches:
            texts.setdefault(error_key(failure), []).append(failure)
    for same in texts.values():
        first = same[0]
        title = first.check if len(same) == 1 else f"{first.check} and {len(same) - 1} more with the same error"
        lines = first.text.strip().splitlines()
        entries.append(
            Entry(
                title,
                lines[0] if lines else "failed",
                (Section("error", capped_text(first.text)),),
                tuple(f.check for f in same),
                "",
                error=True,
            )
        )
    entries.sort(key=lambda entry: (HIDING not in entry.checks, not entry.regressions))  # hidden checks, regressions
    return Verdict(tuple(entries), _accept_all(entries, failing, every))


def _accept_all(entries: Sequence[Entry], failing: Sequence[str], known: Sequence[str]) -> str:
    """One command for every entry: one family's shortest -k, else every entry's -k joined if short, else all."""
    accepting = [entry for entry in entries if entry.accept]
    if not accepting:
        return ""
    regressions = [r.name for entry in accepting for r in entry.regressions if not r.acknowledged]
    expressions = [entry.selector for entry in accepting]
    if not all(expressions):
        return regen_command("", regressions)  # the manifest: only an unfiltered regen settles it
    if len(expressions) == 1:
        return accepting[0].accept
    checks = [check for entry in accepting for check in entry.checks]
    families = {check.split("/")[0] for check in checks}
    if len(families) == 1 and all(check.count("/") == 2 for check in checks):
        return regen_command(selector(checks, failing, families.pop(), known), regressions)
    joined = " or ".join(f"({e})" if " or " in e or " and " in e else e for e in expressions)
    return regen_command(joined if len(joined) <= MAX_SELECTOR else "", regressions)


def _capped(lines: Sequence[str], limit: int, full: str) -> list[str]:
    if len(lines) <= limit:
        return list(lines)
    where = f"; the full diff: {full}" if full else ""
    return [*lines[:limit], f"... {len(lines) - limit} more lines{where}"]


def entry_header(index: int, entry: Entry) -> list[str]:
    return [f"[{index}] {entry.title}", f"    {entry.terminal_headline}"]


def terminal_lines(verdict: Verdict) -> list[str]:
    """The entries for the terminal: headline, facts diff, source hunks, each capped, and the command; past
    TERMINAL_BODY_LINES a section is only named (the job summary and the produced files hold it)."""
    lines: list[str] = []
    for index, entry in enumerate(verdict.entries, 1):
        if len(lines) >= TERMINAL_BODY_LINES:  # past the budget: a line per entry
            lines.append(
                f"[{index}] {entry.title}: {entry.terminal_headline} ({entry.accept or 'no regen accepts it'})"
            )
            continue
        lines += entry_header(index, entry)
        for section in () if entry.error else entry.sections:
            limit = TERMINAL_SOURCE_LINES if section.folded else TERMINAL_FACT_LINES
            shown = _capped(section.lines, limit, section.full)
            if len(lines) + len(shown) + 1 > TERMINAL_BODY_LINES:
                where = f": {section.full}" if section.full else ""
                lines.append(f"  {section.label}: not shown, past the terminal's {TERMINAL_BODY_LINES} lines{where}")
                continue
            lines += [f"  {section.label}:", *(f"    {line}" for line in shown)]
        if entry.accept:
            lines.append(f"  to accept: {entry.accept}")
        lines.append("")
    return lines


def footer_lines(verdict: Verdict) -> list[str]:
    """The closing lines, where a terminal user looks: what changed, in one line per entry, and how to accept."""
    lines = []
    for index, entry in enumerate(verdict.entries[:FOOTER_ENTRIES], 1):
        lines.append(f"[{index}] {entry.title}: {entry.terminal_headline}")
        if entry.accept and len(verdict.entries) > 1:
            lines.append(f"    to accept: {entry.accept}")
    hidden = len(verdict.entries) - FOOTER_ENTRIES
    if hidden > 0:
        lines.append(f"... and {hidden} more entries above")
    if verdict.accept_all:
        lines.append(f"to accept every snapshot change above, after reading it: {verdict.accept_all}")
    return lines
