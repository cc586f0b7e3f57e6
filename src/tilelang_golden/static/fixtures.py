"""The static session's fixtures, over the run's `GoldenRun` (the plugin registers this module)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

import tilelang_golden.catalog.loading
from tilelang_golden.static.plugin import accepted, golden_run
from tilelang_golden.static.snapshots.snapshot import SnapshotStore

if TYPE_CHECKING:  # it imports TileLang, which an xdist controller need not
    from tilelang_golden.static.session import LoweringSession


@pytest.fixture(scope="session")
def families(pytestconfig: pytest.Config) -> tilelang_golden.catalog.loading.Registry:
    """The run's families (`--families`)."""
    return golden_run(pytestconfig).registry


@pytest.fixture(scope="session")
def golden_store(pytestconfig: pytest.Config) -> SnapshotStore:
    return SnapshotStore(golden_run(pytestconfig).golden)


@pytest.fixture(scope="session")
def pending_store(pytestconfig: pytest.Config) -> SnapshotStore:
    return SnapshotStore(golden_run(pytestconfig).pending)


@pytest.fixture(scope="session")
def regen(pytestconfig: pytest.Config) -> bool:
    return bool(pytestconfig.getoption("--regen"))


@pytest.fixture(scope="session")
def accepted_regressions_option(pytestconfig: pytest.Config) -> dict[str, str]:
    return accepted(pytestconfig)


@pytest.fixture(scope="session")
def lowerings(pytestconfig: pytest.Config) -> LoweringSession:
    """What this process built, traced and lowered in this run, and the lowering cache it uses."""
    return golden_run(pytestconfig).lowerings
