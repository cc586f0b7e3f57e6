"""pytest plugin for the golden sessions: options, sharding, write policy, each check's result, the verdict.

`nox -s static` and `nox -s regen-golden` run `pytest -p tilelang_golden.static.plugin --pyargs
tilelang_golden.static.session_items`; pytest provides parametrization, `-k` and xdist, this plugin the rest: every
item's result is one line of the pending folder's results (tilelang_golden.static.snapshots.results), written by the
process that ran it, and the terminal's verdict and counts are read from those lines.
"""

from __future__ import annotations

import functools
import os
import shutil
import sys
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

import tilelang_golden.catalog.loading
import tilelang_golden.static.selection  # by its full name: pytester's in-process runs import it afresh
from tilelang_golden.catalog.cases import all_cases, check_groups
from tilelang_golden.catalog.shards import parse_shard
from tilelang_golden.config import ConfigError, read_config
from tilelang_golden.regressions import REGRESSION_CLASSES
from tilelang_golden.static.brought_back import items_of, named_load_failures, named_orphans, remember_deselected
from tilelang_golden.static.item_names import (
    GROUP_SUFFIX,
    checks_nothing,
    item_name,
    keeps_ids_apart,
    locate,
    set_node_id,
)
from tilelang_golden.static.options import accepted_regressions, add_options, lowering_cache
from tilelang_golden.static.produce.lowering_cache import LoweringCache
from tilelang_golden.static.report.verdict import (
    Verdict,
    build_verdict,
    capped_text,
    error_key,
    footer_lines,
    terminal_lines,
)
from tilelang_golden.static.sharding import UNSHARDED, group_of, shard_items
from tilelang_golden.static.snapshots.case_files import case_files
from tilelang_golden.static.snapshots.changes import lowering_line, no_machine_facts_line
from tilelang_golden.static.snapshots.costs import load_costs
from tilelang_golden.static.snapshots.golden import RegenRefused, check_may_write
from tilelang_golden.static.snapshots.results import (
    CheckResult,
    ResultsError,
    Status,
    append_result,
    read_results,
    unchanged_cases,
)
from tilelang_golden.static.snapshots.snapshot import SnapshotStore
from tilelang_golden.static.snapshots.target_identity import identity_lines
from tilelang_golden.targets import TARGETS

if TYPE_CHECKING:
    from tilelang_golden.static.session import LoweringSession

OUTCOMES = ("created", "updated", "deleted", "unchanged")
# The regen's last steps, once every case is written: the ledgers of acknowledged regressions pruned, the new cases'
# costs recorded; and what a shard's costs predicted (tilelang_golden.static.cost_records).
pytest_plugins = ["tilelang_golden.static.ledger_pruning", "tilelang_golden.static.cost_records"]
# Cases missing the lowering cache that one process lowers faster than workers would start (`-n auto`).
FEW_MISSES = 8


def pytest_addoption(parser: pytest.Parser) -> None:
    add_options(parser.getgroup("golden", "golden snapshots"))


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", f"{UNSHARDED}: a check over every case, left out of sharded runs (--shard)")
    if os.environ.get("TL_LOWER_TRACE"):
        # In html mode TileLang compiles a kept codegen.cpp instead of what it generated, so a
        # traced lowering can differ from the real one: never compare or write snapshots with it.
        raise pytest.UsageError(
            f"TL_LOWER_TRACE={os.environ['TL_LOWER_TRACE']!r} is set: traced lowerings are not trusted for "
            "snapshots. Unset it, and trace one variant with `python -m seeds.lower_num_stages` instead."
        )
    if config.getoption("--regen"):
        try:
            check_may_write(config.getoption("--force-regen-under-ci"), golden_run(config).golden)
        except RegenRefused as error:
            raise pytest.UsageError(str(error)) from None
    try:
        accepted(config)
    except ValueError as error:
        raise pytest.UsageError(str(error)) from None
    shard = config.getoption("--shard")
    if shard is not None:
        try:
            parse_shard(shard)
        except ValueError as error:
            raise pytest.UsageError(str(error)) from None
    # Registered first: of two tryfirst hooks pluggy calls the last registered first, so the items are named before.
    config.pluginmanager.register(tilelang_golden.static.selection, "golden-selection")
    config.pluginmanager.register(golden_run(config), GoldenRun.PLUGIN)
    config.pluginmanager.import_plugin("tilelang_golden.static.fixtures")


@pytest.hookimpl(tryfirst=True)
def pytest_xdist_auto_num_workers(config: pytest.Config) -> int | None:
    """`-n auto` with a lowering cache to read: no workers when what misses the cache is one group of cases or
    a few, since every worker pays TileLang's import and the tracing of every kernel again (about 3 s) and a
    group runs on one worker anyway; otherwise xdist's own count (None)."""
    run = golden_run(config)  # the controller's: when no workers start, it runs every item with these traces
    cache = run.cache
    if cache is None or not cache.read:
        return None
    from tilelang_golden.catalog.build import BuildError

    missing_groups: set[str] = set()
    misses = 0
    for case in all_cases(run.registry):
        try:
            held = cache.holds(case, run.lowerings.key(case), case_files(case))
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
    pending = golden_run(session.config).pending
    if pending.is_dir():
        shutil.rmtree(pending)
    pending.mkdir(parents=True)


def pytest_deselected(items: Sequence[pytest.Item]) -> None:
    remember_deselected(items)


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """After -k/-m: leave out the items that check nothing, bring back the load failures of families the selection
    names, keep this shard's groups, add the check of what else was deselected, refuse an empty selection."""
    items[:] = [item for item in items if not checks_nothing(item)]
    run = golden_run(config)
    items += [item for item in named_load_failures(config) if item not in items]
    orphan_check, run.orphan_scope = named_orphans(config, items, run.registry, SnapshotStore(run.golden))
    items += [item for item in orphan_check if item not in items]
    shard, dropped = config.getoption("--shard"), []
    if shard is not None:
        kept = shard_items(items, parse_shard(shard), load_costs(run.golden))  # whole groups, balanced by their costs
        dropped = [item for item in items if item not in kept]
        if dropped:
            config.hook.pytest_deselected(items=dropped)
        items[:] = kept
    items += tilelang_golden.static.selection.hidden_check(config, items, dropped)
    if getattr(config.option, "loadgroup", False) and keeps_ids_apart():
        # pytest-xdist's loadgroup keeps items whose node id ends in `@<group>` on one worker. Its
        # worker hook writes that suffix to `item._nodeid`, which pytest 9.2 no longer reads (node ids
        # live in `item._id`), so the items of one group ran on both workers, each lowering the same
        # cases. Set the suffix where pytest reads it (tests/static/test_refusals.py checks the grouping); the reports
        # leave it out again (pytest_runtest_makereport).
        for item in items:
            if not item.nodeid.endswith(f"@{group_of(item)}"):
                set_node_id(item, f"{item.nodeid}@{group_of(item)}")
    run.planned.update(item.callspec.params["case"].id for item in items_of(items, "test_case"))
    run.declared.update(item.callspec.params["family"].name for item in items_of(items, "test_family_declaration"))
    if not items and not hasattr(config, "workerinput"):
        raise pytest.UsageError(tilelang_golden.static.selection.empty_selection(config))
    # An xdist worker must not raise here: the controller would only say "no tests ran". It
    # reports what it collected, and the controller refuses an empty selection (below).


# -- what an item reports: one CheckResult, written by the process that ran it ------------------------------

RESULT = pytest.StashKey[CheckResult]()
# The item's phases that did not pass, as (outcome, text) in order; the text whole, before the terminal shortens it.
NOT_PASSED = pytest.StashKey[list[tuple[str, str]]]()


def _check_id(item: pytest.Item) -> str:
    """A case's id (`family/variant/target`), another check's parametrization id, or its function's name."""
    callspec = getattr(item, "callspec", None)
    return callspec.id if callspec else getattr(item, "originalname", item.name)


def record(request: pytest.FixtureRequest, **fields: Any) -> None:
    """Add fields (tilelang_golden.static.snapshots.results.CheckResult's) to the item's result."""
    item = request.node
    item.stash[RESULT] = replace(item.stash.get(RESULT, CheckResult(_check_id(item))), **fields)


def report(request: pytest.FixtureRequest, result: CheckResult | None = None, **fields: Any) -> None:
    """End the item with `result`, or with what it recorded and `fields`: it fails or is skipped with the result's
    text, or passes. Every skip of the session is raised here, so pytest folds those of one cause into one line."""
    if result is None:
        record(request, **fields)
        result = request.node.stash[RESULT]
    request.node.stash[RESULT] = result
    if result.status is Status.FAILED:
        pytest.fail(result.text, pytrace=False)
    if result.status is Status.SKIPPED:
        pytest.skip(result.text)


def _text(report: pytest.TestReport) -> str:
    """A failure's whole text, or a skip's reason."""
    if report.skipped and isinstance(report.longrepr, tuple):
        return report.longrepr[2].removeprefix("Skipped: ")
    return report.longreprtext


def _final_result(item: pytest.Item) -> CheckResult:
    """What the item recorded, with pytest's outcome over its phases: a failure or skip the item did not record
    (an exception, a fixture's error) takes its text from pytest's report."""
    result = item.stash.get(RESULT, CheckResult(_check_id(item)))
    not_passed = dict(reversed(item.stash.get(NOT_PASSED, [])))  # outcome -> its first phase's text
    if "failed" in not_passed:
        return replace(result, status=Status.FAILED, text=not_passed["failed"])
    if "skipped" in not_passed:
        return replace(result, status=Status.SKIPPED, text=not_passed["skipped"])
    return replace(result, status=Status.PASSED)


def _shorten(item: pytest.Item, report: pytest.TestReport) -> None:
    """A failure without mismatch records (an error) that repeats one this process has shown, its case's names
    aside, is shown by a line naming the first; a long one by its first and last lines (its result keeps it whole).
    """
    result = item.stash.get(RESULT, CheckResult(_check_id(item)))
    if result.mismatches:
        return
    key = error_key(replace(result, text=report.longreprtext))
    first = golden_run(item.config).shown_errors.setdefault(key, result.check)
    shown = (
        f"the same error as {first} (above)" if first != result.check else "\n".join(capped_text(report.longreprtext))
    )
    if shown != report.longreprtext:
        report.longrepr = shown


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo) -> Any:
    """After the item's last phase, its result as one line of the results file, written by the process that ran it
    (an xdist worker writes its own items')."""
    test_report = yield
    locate(test_report, SnapshotStore(golden_run(item.config).golden).prefix)
    if not test_report.passed:
        item.stash.setdefault(NOT_PASSED, []).append((test_report.outcome, _text(test_report)))
    if test_report.failed:
        _shorten(item, test_report)
    if test_report.when == "teardown":
        append_result(golden_run(item.config).pending, _final_result(item))
    return test_report


# -- the run's state ---------------------------------------------------------------------------------------


@dataclass(eq=False)
class GoldenRun:
    """One static session in one process, kept in pytest's config stash (`golden_run`): its families and snapshot
    folder, this process's lowerings, and the errors it has shown. The summary the session closes with reads the
    results every process wrote (tilelang_golden.static.snapshots.results). It is a plugin too: its hooks reach it
    so."""

    PLUGIN = "golden-run"

    cache: LoweringCache | None  # the disk cache the options ask for; None: lower every case
    packages: tuple[str, ...]  # where its families come from (`--families`, else the repository's settings)
    golden: Path  # its snapshot folder (`--golden-dir`, else the repository's settings)
    pending: Path  # where it writes what it produced and its results (`--pending-dir`)
    targets: tuple[str, ...] | None  # the repository's `targets` setting; None: every target
    worker: bool = False  # an xdist worker's run (the controller's reports what the workers ran)
    collected_by_worker: dict[str, int] = field(default_factory=dict)  # xdist worker -> items it collected
    shown_errors: dict[tuple[str, str], str] = field(default_factory=dict)  # an error's key -> the check shown with it
    planned: set[str] = field(default_factory=set)  # the ids of the cases its items produce (LoweringSession.planned)
    # The families whose orphans the orphan check names (and a regen deletes): those of the selected cases where a
    # filter deselected the check and the run brought it back; None (the check selected itself): every family.
    orphan_scope: set[str] | None = None
    # The families whose declaration check this process's items hold: the one place that says why a variant does not
    # build. A case of a family not among them (`-k "family and sm_90"` deselects that check, whose id names no
    # target) fails with the reason itself, so no selection ends green having skipped it.
    declared: set[str] = field(default_factory=set)
    _lowerings: LoweringSession | None = field(default=None, repr=False)

    @functools.cached_property
    def registry(self) -> tilelang_golden.catalog.loading.Registry:
        """The run's families, from its packages, loaded on first use (the items are parametrized from them)."""
        return tilelang_golden.catalog.loading.on_targets(
            tilelang_golden.catalog.loading.load_families(
                *self.packages, snapshot_folder=SnapshotStore(self.golden).prefix
            ),
            self.targets,
        )

    @property
    def lowerings(self) -> LoweringSession:
        """What this process built, traced and lowered, made on first use (an xdist controller that starts
        workers lowers nothing, and need not import TileLang)."""
        if self._lowerings is None:
            from tilelang_golden.static.session import LoweringSession  # imports TileLang: it is for lowering

            self._lowerings = LoweringSession(self.cache, self.planned)
        return self._lowerings

    @pytest.hookimpl(tryfirst=True)
    def pytest_collection_modifyitems(self, items: list[pytest.Item]) -> None:
        """Before anything reads the items' ids (pytest-xdist's loadgroup appends to them): each named by what
        it checks, in the repository's own folders."""
        golden, groups = SnapshotStore(self.golden).prefix, check_groups(self.registry)
        for item in items:
            set_node_id(item, item_name(item, golden, groups))

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        """Where the reports are shown (never on a worker, which checks them against its items), an item's name
        without the `@<group>` suffix that keeps a group on one worker."""
        if not self.worker:
            report.nodeid = GROUP_SUFFIX.sub("", report.nodeid)

    @pytest.hookimpl(optionalhook=True)
    def pytest_xdist_node_collection_finished(self, node: object, ids: list[str]) -> None:
        self.collected_by_worker[str(getattr(node, "gateway", node))] = len(ids)

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        """Under xdist, the same refusal and exit status as without it: ERROR on stderr, usage error."""
        if self.collected_by_worker and not any(self.collected_by_worker.values()):
            sys.stderr.write(f"ERROR: {tilelang_golden.static.selection.empty_selection(session.config)}\n")
            session.exitstatus = pytest.ExitCode.USAGE_ERROR

    @functools.cached_property
    def closing(self) -> tuple[list[CheckResult], Verdict | None]:
        """What the session closes with, read once for both of its summaries: every process's results, and the
        verdict where a check failed."""
        try:
            results = read_results(self.pending)
        except ResultsError:
            return [], None  # nothing ran (a collection, an empty selection): pytest says so
        failures = [r for r in results if r.failed]
        if not failures:
            return results, None
        known = [c.id for c in all_cases(self.registry)]
        return results, build_verdict(failures, unchanged_cases(results), f"{self.pending.as_posix()}/", known)

    def pytest_terminal_summary(self, terminalreporter: pytest.TerminalReporter, config: pytest.Config) -> None:
        results, verdict = self.closing
        if verdict is not None:
            terminalreporter.write_sep("=", f"what changed: {verdict.heading}")
            for line in terminal_lines(verdict):
                terminalreporter.write_line(line)
        findings = [line for r in results for line in r.findings]
        if findings:
            terminalreporter.write_sep("=", "findings")
            for line in findings:
                terminalreporter.write_line(line)
        if config.getoption("--regen"):
            written = Counter(outcome for r in results for outcome in r.written.values())
            counts = ", ".join(f"{written[o]} {o}" for o in OUTCOMES)
            terminalreporter.write_sep("=", f"golden files: {counts}")
        lowering = Counter(r.lowering for r in results if r.lowering)
        if lowering:
            terminalreporter.write_line(lowering_line(lowering, config.getoption("--lowering-cache")))
        without = sorted({r.case[2] for r in results if r.case and TARGETS[r.case[2]].backend == "hip"})
        if without:
            terminalreporter.write_line(no_machine_facts_line(without))
        identity = identity_lines(SnapshotStore(self.pending)) if self.pending.is_dir() else []
        if identity:
            terminalreporter.write_sep("=", "targets with byte-identical kernel source")
            for line in identity:
                terminalreporter.write_line(line)

    @pytest.hookimpl(specname="pytest_terminal_summary", wrapper=True, tryfirst=True)
    def pytest_terminal_summary_closing(self, terminalreporter: pytest.TerminalReporter, config: pytest.Config):
        """After pytest's own list of failed items: the last lines say what changed and how to accept it."""
        yield
        _, verdict = self.closing
        if verdict is not None:
            terminalreporter.write_sep("=", f"what changed ({verdict.heading}), and how to accept it")
            for line in footer_lines(verdict):
                terminalreporter.write_line(line)
        terminalreporter.write_line(f"produced files are in {self.pending.as_posix()}/")


GOLDEN_RUN = pytest.StashKey[GoldenRun]()


def golden_run(config: pytest.Config) -> GoldenRun:
    """This process's run, made on first use: by `-n auto`'s count of workers, which traces every kernel before
    pytest_configure (the controller keeps those traces when it runs the items itself), or by pytest_configure."""
    if GOLDEN_RUN not in config.stash:
        try:
            settings = read_config()
        except ConfigError as error:
            raise pytest.UsageError(str(error)) from None
        packages = tuple(config.getoption("--families") or settings.families)
        golden = Path(config.getoption("--golden-dir") or settings.golden)
        pending = Path(config.getoption("--pending-dir"))
        config.stash[GOLDEN_RUN] = GoldenRun(
            lowering_cache(config), packages, golden, pending, settings.targets, worker=hasattr(config, "workerinput")
        )
    return config.stash[GOLDEN_RUN]


def accepted(config: pytest.Config) -> dict[str, str]:
    """Regression class -> reason, from `--accept-regression`: the classes are the built-in ones and the families'."""
    values = config.getoption("--accept-regression")
    if not values:
        return {}
    classes = [c for family in golden_run(config).registry.families for c in family.regressions]
    return accepted_regressions(values, config.getoption("--regen"), (*REGRESSION_CLASSES, *classes))
