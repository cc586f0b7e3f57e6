"""pytest plugin for the golden sessions: options, sharding, write policy, regen counts.

`nox -s static` and `nox -s regen-golden` run `pytest -p harness.static.plugin --pyargs harness.static.session_items`;
pytest provides parametrization, `-k`, xdist and JUnit XML, this plugin the rest.
"""

from __future__ import annotations

import functools
import json
import os
import shutil
import sys
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn

import pytest

import harness.family
from harness.static.cases import all_cases, parse_shard, select_shard
from harness.static.changes import CASE, CASE_ID, LOWERING_SOURCE, MISMATCH, REMEDY, Mismatch, lowering_line
from harness.static.golden import RegenRefused, check_may_write
from harness.static.lowering_cache import LoweringCache
from harness.static.snapshot import SnapshotStore
from harness.static.target_identity import identity_lines
from harness.static.verdict import (
    CaseKey,
    Failure,
    Verdict,
    build_verdict,
    capped_text,
    error_key,
    footer_lines,
    terminal_lines,
)

if TYPE_CHECKING:
    from harness.static.session import LoweringSession

OUTCOMES = ("created", "updated", "deleted", "unchanged")
# The marker of a check that needs every case (the orphan check): sharded runs leave it out.
UNSHARDED = "unsharded"
# Cases missing the lowering cache that one process lowers faster than workers would start (`-n auto`).
FEW_MISSES = 8


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("golden", "golden snapshots")
    group.addoption("--regen", action="store_true", help="rewrite the selected snapshots instead of comparing")
    group.addoption(
        "--force-regen-under-ci", action="store_true", help="allow --regen although CI is set (for a regen job)"
    )
    group.addoption("--shard", default=None, metavar="I/N", help="run only shard I of N (numbered from 1)")
    group.addoption("--golden-dir", default="golden", help="snapshot folder (default: golden)")
    group.addoption(
        "--families",
        nargs="+",
        default=[harness.family.DEFAULT_FAMILIES],
        metavar="PACKAGE",
        help=f"importable packages of family files, in order (default: {harness.family.DEFAULT_FAMILIES})",
    )
    group.addoption(
        "--lowering-cache",
        default="build/lowering-cache",
        metavar="DIR",
        help="the content-addressed lowering cache (default: build/lowering-cache)",
    )
    group.addoption("--no-cache", action="store_true", help="lower every case; neither read nor write the cache")
    group.addoption(
        "--refresh-cache",
        action="store_true",
        help="lower every case and store it, checking that an entry under the same key holds the same files "
        "(what --regen always does)",
    )
    group.addoption(
        "--pending-dir",
        default="build/golden-pending",
        help="where every run writes what it produced, for review or upload (default: build/golden-pending)",
    )


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", f"{UNSHARDED}: a check over every case, left out of sharded runs (--shard)")
    if os.environ.get("TL_LOWER_TRACE"):
        # In html mode TileLang compiles a kept codegen.cpp instead of what it generated, so a
        # traced lowering can differ from the real one: never compare or write snapshots with it.
        raise pytest.UsageError(
            f"TL_LOWER_TRACE={os.environ['TL_LOWER_TRACE']!r} is set: traced lowerings are not trusted for "
            "snapshots. Unset it, and trace one variant with scripts/lower_num_stages.py instead."
        )
    if config.getoption("--regen"):
        try:
            check_may_write(config.getoption("--force-regen-under-ci"))
        except RegenRefused as error:
            raise pytest.UsageError(str(error)) from None
    shard = config.getoption("--shard")
    if shard is not None:
        try:
            parse_shard(shard)
        except ValueError as error:
            raise pytest.UsageError(str(error)) from None
    config.pluginmanager.register(golden_run(config), GoldenRun.PLUGIN)


def _lowering_cache(config: pytest.Config) -> LoweringCache | None:
    """The cache the options ask for; a regen never reads it: it lowers every case (twice) and refreshes it."""
    if config.getoption("--no-cache"):
        return None
    refresh = config.getoption("--regen") or config.getoption("--refresh-cache")
    return LoweringCache(Path(config.getoption("--lowering-cache")), read=not refresh)


@pytest.hookimpl(tryfirst=True)
def pytest_xdist_auto_num_workers(config: pytest.Config) -> int | None:
    """`-n auto` with a lowering cache to read: no workers when what misses the cache is one group of cases or
    a few, since every worker pays TileLang's import and the tracing of every kernel again (about 3 s) and a
    group runs on one worker anyway; otherwise xdist's own count (None)."""
    run = golden_run(config)  # the controller's: when no workers start, it runs every item with these traces
    cache = run.cache
    if cache is None or not cache.read:
        return None
    from harness.build import BuildError

    missing_groups: set[str] = set()
    misses = 0
    for case in all_cases(run.registry):
        try:
            held = cache.holds(case, run.lowerings.key(case))
        except BuildError:  # its key needs the kernel; test_family_declaration says why it does not build
            held = False
        if not held:
            misses += 1
            missing_groups.add(case.group)
            if misses > FEW_MISSES and len(missing_groups) > 1:
                return None
    return 0


def pytest_sessionstart(session: pytest.Session) -> None:
    if hasattr(session.config, "workerinput"):
        return  # xdist worker: the controller prepares the pending folder once
    pending = Path(session.config.getoption("--pending-dir"))
    if pending.is_dir():
        shutil.rmtree(pending)
    pending.mkdir(parents=True)


def is_filtered(config: pytest.Config) -> bool:
    """Whether this run selects a subset: -k, -m or --shard (orphans are only deleted otherwise)."""
    return bool(config.getoption("keyword") or config.getoption("markexpr") or config.getoption("--shard"))


def _group(item: pytest.Item) -> str:
    marker = item.get_closest_marker("xdist_group")  # also what `--dist loadgroup` keeps on one worker
    return marker.args[0] if marker else "session"


def pytest_itemcollected(item: pytest.Item) -> None:
    """Name the check in the JUnit report by its case id: the node id ends in xdist's `@<group>` (below),
    which pytest's JUnit writer mangles into the name (`test_case[<id>]@<group>]`)."""
    callspec = getattr(item, "callspec", None)
    item.user_properties.append((CASE_ID, callspec.id if callspec else getattr(item, "originalname", item.name)))
    case = callspec.params.get("case") if callspec else None
    if case is not None:  # a case's item: the verdict groups failures by family, variant and target
        item.user_properties.append((CASE, json.dumps([case.family.name, case.variant.name, case.target])))


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """After -k/-m: keep this shard's groups, refuse an empty selection."""
    shard = config.getoption("--shard")
    if shard is not None:
        groups = list(dict.fromkeys(_group(item) for item in items))
        mine = set(select_shard(groups, parse_shard(shard)))
        kept = [item for item in items if _group(item) in mine and not item.get_closest_marker(UNSHARDED)]
        dropped = [item for item in items if item not in kept]
        if dropped:
            config.hook.pytest_deselected(items=dropped)
        items[:] = kept
    if getattr(config.option, "loadgroup", False):
        # pytest-xdist's loadgroup keeps items whose node id ends in `@<group>` on one worker. Its
        # worker hook writes that suffix to `item._nodeid`, which pytest 9 no longer reads (node ids
        # live in `item._id`), so the items of one group ran on both workers, each lowering the same
        # cases. Set the suffix where pytest reads it (tests/test_refusals.py checks the grouping).
        from _pytest.nodeid import coerce_node_id

        for item in items:
            if "@" not in item.nodeid.rsplit("]", 1)[-1]:
                item._id = coerce_node_id(f"{item.nodeid}@{_group(item)}")
    if not items and not hasattr(config, "workerinput"):
        raise pytest.UsageError(empty_selection(config))
    # An xdist worker must not raise here: the controller would only say "no tests ran". It
    # reports what it collected, and the controller refuses an empty selection (below).


def empty_selection(config: pytest.Config) -> str:
    return (
        "no golden case matches this selection "
        f"(-k {config.getoption('keyword')!r}, --shard {config.getoption('--shard')!r}); "
        "list the cases with `nox -s static -- --collect-only -q`"
    )


# Items report through user_properties because those travel from xdist workers to the controller.


def record_outcomes(request: pytest.FixtureRequest, outcomes: dict[str, str]) -> None:
    """Attach path -> outcome (created, updated, deleted, unchanged) to the item's report."""
    for path, outcome in outcomes.items():
        request.node.user_properties.append(("golden_outcome", f"{outcome} {path}"))


def record_findings(request: pytest.FixtureRequest, lines: list[str]) -> None:
    """Attach lines a reviewer must see in the session's output even when the item passes."""
    request.node.user_properties.extend(("golden_finding", line) for line in lines)


def fail_with_mismatches(
    request: pytest.FixtureRequest, mismatches: list[Mismatch], remedy: str, note: str | None = None
) -> NoReturn:
    """Fail the item with what changed in a line, and attach the records themselves (and the remedy) as
    JUnit properties, which the session's closing verdict and the CI job summary read instead of the text.
    The diffs are shown once per change in the verdict the session closes with, not once per case."""
    request.node.user_properties.extend((MISMATCH, mismatch.to_json()) for mismatch in mismatches)
    request.node.user_properties.append((REMEDY, remedy))
    lines = [*(f"{m.path}: {m.headline}" for m in mismatches), note, remedy]
    pytest.fail("\n".join(line for line in lines if line), pytrace=False)


def record_lowering_source(request: pytest.FixtureRequest, case_id: str) -> None:
    """Attach where the case's files came from (LOWERING_SOURCE: `lowered` or `cache`) to the item's report."""
    source = golden_run(request.config).lowerings.sources.get(case_id)
    if source is not None:  # None: the case failed before its files existed
        request.node.user_properties.append((LOWERING_SOURCE, source))


# -- the run's state ---------------------------------------------------------------------------------------


@dataclass(eq=False)
class GoldenRun:
    """One static session in one process, kept in pytest's config stash (`golden_run`): this process's lowerings,
    and what the items reported (read on the controller, where xdist brings the workers' reports), for the
    summary the session closes with. It is a plugin too: the hooks that only get a report reach it so."""

    PLUGIN = "golden-run"

    cache: LoweringCache | None  # the disk cache the options ask for; None: lower every case
    packages: tuple[str, ...]  # where its families come from (`--families`)
    collected_by_worker: dict[str, int] = field(default_factory=dict)  # xdist worker -> items it collected
    outcomes: Counter[str] = field(default_factory=Counter)  # regen outcome -> how many files
    findings: list[str] = field(default_factory=list)
    lowering_sources: Counter[str] = field(default_factory=Counter)  # `lowered` or `cache` -> how many cases
    failures: list[Failure] = field(default_factory=list)  # the failing checks as the verdict reads them
    unchanged: list[CaseKey] = field(default_factory=list)  # the cases that passed
    _lowerings: LoweringSession | None = field(default=None, repr=False)

    @functools.cached_property
    def registry(self) -> harness.family.Registry:
        """The run's families, from its packages, loaded on first use (the items are parametrized from them)."""
        return harness.family.load_families(*self.packages)

    @property
    def lowerings(self) -> LoweringSession:
        """What this process built, traced and lowered, made on first use (an xdist controller that starts
        workers lowers nothing, and need not import TileLang)."""
        if self._lowerings is None:
            from harness.static.session import LoweringSession  # it imports TileLang: lowering is what it is for

            self._lowerings = LoweringSession(self.cache)
        return self._lowerings

    @pytest.hookimpl(optionalhook=True)
    def pytest_xdist_node_collection_finished(self, node: object, ids: list[str]) -> None:
        self.collected_by_worker[str(getattr(node, "gateway", node))] = len(ids)

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        """Under xdist, the same refusal and exit status as without it: ERROR on stderr, usage error."""
        if self.collected_by_worker and not any(self.collected_by_worker.values()):
            sys.stderr.write(f"ERROR: {empty_selection(session.config)}\n")
            session.exitstatus = pytest.ExitCode.USAGE_ERROR

    @pytest.hookimpl(trylast=True)  # after the JUnit writer has taken the full text
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        properties = dict(report.user_properties)
        if report.failed:
            self._record_failure(report, properties)
        if report.when != "call":
            return
        if report.passed and CASE in properties:
            self.unchanged.append(tuple(json.loads(properties[CASE])))
        for name, value in report.user_properties:
            if name == "golden_outcome":
                self.outcomes[value.split(" ", 1)[0]] += 1
            elif name == "golden_finding":
                self.findings.append(value)
            elif name == LOWERING_SOURCE:
                self.lowering_sources[value] += 1

    def _record_failure(self, report: pytest.TestReport, properties: dict[str, str]) -> None:
        """Keep the failure for the verdict. A failure without records (an error) that repeats one shown
        already, its case's names aside, is shown by a line naming the first; a long one in its first and last
        lines."""
        case = tuple(json.loads(properties[CASE])) if CASE in properties else None
        mismatches = tuple(Mismatch.from_json(value) for name, value in report.user_properties if name == MISMATCH)
        failure = Failure(properties.get(CASE_ID, report.nodeid), case, mismatches, properties.get(REMEDY, ""))
        if not mismatches:
            failure = Failure(failure.check, case, text=report.longreprtext)
            first = next((f for f in self.failures if not f.mismatches and error_key(f) == error_key(failure)), None)
            shown = f"the same error as {first.check} (above)" if first else "\n".join(capped_text(failure.text))
            if shown != failure.text:
                report.longrepr = shown
        self.failures.append(failure)

    def _verdict(self, config: pytest.Config) -> Verdict:
        pending = f"{config.getoption('--pending-dir')}/"
        return build_verdict(self.failures, self.unchanged, pending, [c.id for c in all_cases(self.registry)])

    def pytest_terminal_summary(self, terminalreporter: pytest.TerminalReporter, config: pytest.Config) -> None:
        if self.failures:
            verdict = self._verdict(config)
            terminalreporter.write_sep("=", f"what changed: {verdict.heading}")
            for line in terminal_lines(verdict):
                terminalreporter.write_line(line)
        if self.findings:
            terminalreporter.write_sep("=", "findings")
            for line in self.findings:
                terminalreporter.write_line(line)
        if config.getoption("--regen"):
            counts = ", ".join(f"{self.outcomes[o]} {o}" for o in OUTCOMES)
            terminalreporter.write_sep("=", f"golden files: {counts}")
        if self.lowering_sources:
            terminalreporter.write_line(lowering_line(self.lowering_sources, config.getoption("--lowering-cache")))
        pending = Path(config.getoption("--pending-dir"))
        identity = identity_lines(SnapshotStore(pending)) if pending.is_dir() else []
        if identity:
            terminalreporter.write_sep("=", "targets with byte-identical kernel source")
            for line in identity:
                terminalreporter.write_line(line)

    @pytest.hookimpl(specname="pytest_terminal_summary", wrapper=True, tryfirst=True)
    def pytest_terminal_summary_closing(self, terminalreporter: pytest.TerminalReporter, config: pytest.Config):
        """After pytest's own list of failed items: the last lines say what changed and how to accept it."""
        yield
        if self.failures:
            verdict = self._verdict(config)
            terminalreporter.write_sep("=", f"what changed ({verdict.heading}), and how to accept it")
            for line in footer_lines(verdict):
                terminalreporter.write_line(line)
        terminalreporter.write_line(f"produced files are in {config.getoption('--pending-dir')}/")


GOLDEN_RUN = pytest.StashKey[GoldenRun]()


def golden_run(config: pytest.Config) -> GoldenRun:
    """This process's run, made on first use: by `-n auto`'s count of workers, which traces every kernel before
    pytest_configure (the controller keeps those traces when it runs the items itself), or by pytest_configure."""
    if GOLDEN_RUN not in config.stash:
        config.stash[GOLDEN_RUN] = GoldenRun(_lowering_cache(config), tuple(config.getoption("--families")))
    return config.stash[GOLDEN_RUN]


@pytest.fixture(scope="session")
def families(pytestconfig: pytest.Config) -> harness.family.Registry:
    """The run's families (`--families`)."""
    return golden_run(pytestconfig).registry


@pytest.fixture(scope="session")
def golden_store(pytestconfig: pytest.Config) -> SnapshotStore:
    return SnapshotStore(Path(pytestconfig.getoption("--golden-dir")))


@pytest.fixture(scope="session")
def pending_store(pytestconfig: pytest.Config) -> SnapshotStore:
    return SnapshotStore(Path(pytestconfig.getoption("--pending-dir")))


@pytest.fixture(scope="session")
def regen(pytestconfig: pytest.Config) -> bool:
    return bool(pytestconfig.getoption("--regen"))


@pytest.fixture(scope="session")
def lowerings(pytestconfig: pytest.Config) -> LoweringSession:
    """What this process built, traced and lowered in this run, and the lowering cache it uses."""
    return golden_run(pytestconfig).lowerings
