"""The regen's last step, as pytest hooks beside the plugin's (tilelang_golden.static.plugin loads them): once every
case is written, keep each family's REGRESSIONS.yaml to what its snapshots hold, and say in the closing counts how many
records it dropped and why (tilelang_golden.static.snapshots.acknowledged decides which)."""

from __future__ import annotations

import pytest

from tilelang_golden.static.plugin import golden_run
from tilelang_golden.static.snapshots.acknowledged import Pruned, prune_after_regen
from tilelang_golden.static.snapshots.snapshot import SnapshotStore

PRUNED = pytest.StashKey[Pruned]()
# The exit statuses of a regen whose cases ran: it wrote every case that passed.
RAN = (pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED)


def regen_ran(session: pytest.Session) -> bool:
    """Whether this is a regen whose cases ran, in the process that reads every worker's results (never a worker)."""
    config = session.config
    return bool(config.getoption("--regen")) and not hasattr(config, "workerinput") and session.exitstatus in RAN


@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session: pytest.Session) -> None:
    """In the process that reads every worker's results (never an xdist worker), after the items: the pruning."""
    config = session.config
    if not regen_ran(session):
        return
    run = golden_run(config)
    pruned = prune_after_regen(run.registry.families, SnapshotStore(run.golden), run.pending)
    if pruned is not None:
        config.stash[PRUNED] = pruned


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter, config: pytest.Config) -> None:
    """`REGRESSIONS.yaml records: 1 dropped (1 regression undone)`, where the run has a ledger; each record dropped
    is a line of the findings above it."""
    pruned = config.stash.get(PRUNED, None)
    if pruned is not None and pruned.ledgers:
        terminalreporter.write_line(pruned.line())
