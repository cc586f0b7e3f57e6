"""The costs file in a run, as pytest hooks beside the plugin's (tilelang_golden.static.plugin loads them): a file that
cannot be read is said at the start of every run, a shard ends with what its cases were predicted to cost and what
lowering them took, and a regen records the new cases' costs once every case is written
(tilelang_golden.static.snapshots.costs says what is recorded when)."""

from __future__ import annotations

import pytest

from tilelang_golden.static.ledger_pruning import regen_ran
from tilelang_golden.static.plugin import golden_run
from tilelang_golden.static.snapshots.costs import load_costs, measured, record_regen
from tilelang_golden.static.snapshots.results import ResultsError, read_results

RECORDED = pytest.StashKey[str]()


def pytest_report_header(config: pytest.Config) -> list[str]:
    """Where the costs file cannot be read, why and what to do: the shards then ignore it (never an xdist worker's:
    the controller's header is the one shown)."""
    problem = load_costs(golden_run(config).golden).problem
    return [f"WARNING: {problem}"] if problem else []


@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session: pytest.Session) -> None:
    """In the process that reads every worker's results (never an xdist worker), after the items: a regen's records."""
    config = session.config
    if not regen_ran(session):
        return
    run = golden_run(config)
    line = record_regen(run.registry, run.golden, run.pending)
    if line:
        config.stash[RECORDED] = line


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter, config: pytest.Config) -> None:
    """`shard 1/2: 190 cases, predicted 212 s of lowering (golden/COSTS.yaml), lowered 190 in 220 s`; a regen's
    records: `golden/COSTS.yaml: 254 cases, 3 recorded, 0 measured again, 1 dropped`."""
    if RECORDED in config.stash:
        terminalreporter.write_line(config.stash[RECORDED])
    shard = config.getoption("--shard")
    if shard is None:
        return
    run = golden_run(config)
    try:
        cases = [r for r in read_results(run.pending) if r.case]
    except ResultsError:
        return  # nothing ran: pytest says so
    costs = load_costs(run.golden)
    predicted = sum(costs.of(r.check) for r in cases)
    lowered = measured(cases)
    terminalreporter.write_line(
        f"shard {shard}: {len(cases)} cases, predicted {predicted:.0f} s of lowering ({costs.path.as_posix()}), "
        f"lowered {len(lowered)} in {sum(lowered.values()):.0f} s"
    )
